/* spawn.c - run a command, report its wall time, peak RSS and wait status */
/*
 * usage: spawn RESULT_FILE TIMEOUT_S [NAME=VALUE...] -- CMD [ARGS...]
 *
 * Runs CMD with the NAME=VALUE pairs added to the environment, writes
 * "wall_seconds maxrss_kib wait_status cpu_seconds timed_out\n" to
 * RESULT_FILE (cpu: user + system of CMD and the children it waited for) and
 * exits 0; exits 127 when it cannot start CMD.  A CMD still running after
 * TIMEOUT_S seconds (0: no limit) is killed with SIGKILL and timed_out is 1:
 * a deadlocked profiler must not hang the benchmark.  The pairs are set in the child only,
 * so an LD_PRELOAD meant for CMD does not trace the launcher itself.
 *
 * Why not fork from the Python runner: Linux carries ru_maxrss across
 * execve() from the image that forked, so every child of a 30 MB Python
 * process reports at least 30 MB.  This launcher is small, so the peak RSS
 * it reports is the command's own (a launcher of about 1 MB sets the floor).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;

static void on_alarm(int sig)
{
	(void)sig;
	timed_out = 1;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct timespec t0, t1;
	struct rusage ru;
	FILE *out;
	pid_t pid;
	int status, cmd = 3, i;
	unsigned timeout;

	if (argc < 3) {
		fputs("usage: spawn RESULT_FILE TIMEOUT_S [NAME=VALUE...] -- CMD [ARGS...]\n", stderr);
		return 2;
	}
	timeout = (unsigned)strtoul(argv[2], NULL, 10);
	while (cmd < argc && strcmp(argv[cmd], "--") != 0)
		cmd++;
	if (cmd + 1 >= argc) {
		fputs("usage: spawn RESULT_FILE TIMEOUT_S [NAME=VALUE...] -- CMD [ARGS...]\n", stderr);
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
		for (i = 3; i < cmd - 1; i++)
			if (putenv(argv[i]) != 0)
				_exit(127);
		execvp(argv[cmd], argv + cmd);
		fprintf(stderr, "spawn: cannot run '%s': %s\n", argv[cmd], strerror(errno));
		_exit(127);
	}
	/* No SA_RESTART: the alarm interrupts wait4. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(timeout);
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno == EINTR && timed_out) {
			kill(pid, SIGKILL);
			continue;
		}
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
	alarm(0);
	fprintf(out, "%.6f %ld %d %.6f %d\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
		ru.ru_maxrss, status,
		(double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
		(int)timed_out);
	return fclose(out) == 0 ? 0 : 127;
}
