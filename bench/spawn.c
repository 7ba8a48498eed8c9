/* spawn.c - run a command, report its wall time, peak RSS and wait status */
/*
 * usage: spawn RESULT_FILE CMD [ARGS...]
 *
 * Writes "wall_seconds maxrss_kib wait_status\n" to RESULT_FILE and exits 0;
 * exits 127 when it cannot start CMD.
 *
 * Why not fork from the Python runner: Linux carries ru_maxrss across
 * execve() from the image that forked, so every child of a 30 MB Python
 * process reports at least 30 MB.  This launcher is small, so the peak RSS
 * it reports is the command's own (a launcher of about 1 MB sets the floor).
 */
#include <errno.h>
#include <stdio.h>
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
	int status;

	if (argc < 3) {
		fputs("usage: spawn RESULT_FILE CMD [ARGS...]\n", stderr);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "spawn: cannot fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "spawn: cannot run '%s': %s\n", argv[2], strerror(errno));
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
	fprintf(out, "%.6f %ld %d\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
		ru.ru_maxrss, status);
	return fclose(out) == 0 ? 0 : 127;
}
