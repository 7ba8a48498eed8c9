/* spawn.c - run a command, report its wall time, peak RSS and wait status */
/*
 * usage: spawn RESULT_FILE [NAME=VALUE...] -- CMD [ARGS...]
 *
 * Runs CMD with the NAME=VALUE pairs added to the environment, writes
 * "wall_seconds maxrss_kib wait_status cpu_seconds\n" to RESULT_FILE (cpu:
 * user + system of CMD and the children it waited for) and exits 0;
 * exits 127 when it cannot start CMD.  The pairs are set in the child only,
 * so an LD_PRELOAD meant for CMD does not trace the launcher itself.
 *
 * Why not fork from the Python runner: Linux carries ru_maxrss across
 * execve() from the image that forked, so every child of a 30 MB Python
 * process reports at least 30 MB.  This launcher is small, so the peak RSS
 * it reports is the command's own (a launcher of about 1 MB sets the floor).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct rusage ru;
	FILE *out;
	pid_t pid;
	int status, cmd = 2, i;

	while (cmd < argc && strcmp(argv[cmd], "--") != 0)
		cmd++;
	if (cmd + 1 >= argc) {
		fputs("usage: spawn RESULT_FILE [NAME=VALUE...] -- CMD [ARGS...]\n", stderr);
		return 2;
	}
	cmd++;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "spawn: cannot fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		for (i = 2; i < cmd - 1; i++)
			if (putenv(argv[i]) != 0)
				_exit(127);
		execvp(argv[cmd], argv + cmd);
		fprintf(stderr, "spawn: cannot run '%s': %s\n", argv[cmd], strerror(errno));
		_exit(127);
	}
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "spawn: wait4: %s\n", strerror(errno));
			return 127;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	out = fopen(argv[1], "w");
	if (!out) {
		fprintf(stderr, "spawn: cannot write '%s': %s\n", argv[1], strerror(errno));
		return 127;
	}
	fprintf(out, "%.6f %ld %d %.6f\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
		ru.ru_maxrss, status,
		(double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	return fclose(out) == 0 ? 0 : 127;
}
