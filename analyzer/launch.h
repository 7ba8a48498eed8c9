/* launch.h - finds the shim, checks a command and runs it under LD_PRELOAD */
#ifndef HT_LAUNCH_H
#define HT_LAUNCH_H

#include <stddef.h>

/*
 * Shared by the verbs that run a command under the shim ('record', 'gate').
 * Every function that fails prints one "heaptrail: ..." line itself, so a
 * verb only passes the status on.
 *
 * The usual sequence:
 *
 *   rc = launch_prepare(argv[0], path, sizeof(path));   exec path, shim in LD_PRELOAD
 *   if (rc) return rc;
 *   ... launch_setenv("HEAPTRAIL_OUT", ...) and other settings ...
 *   rc = launch_run(path, argv, &status);
 */

/*
 * Resolves CMD as execvp() would, checks that the shim can enter it (not
 * static, not setuid, same architecture), finds libheaptrail.so and
 * prepends it to LD_PRELOAD.  0 with 'path' set, or the exit status a verb
 * should return: 127 (no such command), 126 (not executable), CLI_USAGE
 * (the shim cannot enter it, or cannot be found).
 */
int launch_prepare(const char *cmd, char *path, size_t len);

/* setenv() that reports its failure: 0, or -1 after printing why. */
int launch_setenv(const char *name, const char *value);

/*
 * Runs 'path' with 'argv' in a child and waits for it.  SIGINT, SIGTERM,
 * SIGHUP and SIGQUIT that heaptrail receives from another process are
 * passed on to the child (those from the terminal reach it by themselves).
 * 0 with *wstatus the child's wait status, or CLI_USAGE after printing why
 * it could not be started or waited for.  A child that cannot exec exits
 * 127 (not found) or 126, after printing why.
 */
int launch_run(const char *path, char **argv, int *wstatus);

/* A wait status as a shell would give it: the exit code, or 128 + signal. */
int launch_exit_code(int wstatus);

#endif
