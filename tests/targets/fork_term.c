/* fork_term.c - each forked child gets SIGTERM the moment fork() returns in the parent
 *
 * usage: fork_term ROUNDS
 * Leaks 3 blocks at leak_here(), then ROUNDS times: forks a child that
 * waits in pause() (it allocates nothing: a signal must find it outside
 * any allocation), sends it SIGTERM at once and waits for it; prints
 * "child PID signal N" for each (N = the signal that ended it, 0 for an
 * exit).  Every child must die of SIGTERM, and its dump say so.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[3];

static __attribute__((noinline)) void *leak_here(void)
{
	return malloc(100);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10, i, st;
	pid_t pid;

	for (i = 0; i < 3; i++)
		keep[i] = leak_here();
	for (i = 0; i < rounds; i++) {
		pid = fork();
		if (pid < 0)
			return 3;
		if (pid == 0) {
			for (;;)
				pause();
		}
		kill(pid, SIGTERM);
		if (waitpid(pid, &st, 0) != pid)
			return 4;
		printf("child %d signal %d\n", (int)pid, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	}
	return 0;
}
