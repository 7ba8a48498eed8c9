/* rawclone_churn.c - a child made by the clone system call itself, not fork(), that allocates a lot */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Proves (test_dl_fork.py, 'raw clone'): a child made by syscall(SYS_clone)
 * (Chromium's zygote, sandboxes), which runs no fork handler, has the
 * shim's memory but no writer thread.  It must run as it runs plainly:
 * the shim once made each of its events wait 5 s for a buffer once the
 * buffers it inherited were full, a hang for a busy child.  The parent's
 * own recording goes on: its leak at raw_parent_leak is in its dump.
 *
 *   rawclone_churn N    the child makes N malloc/free pairs; prints
 *                       "child sum S" (S known in advance: N * 7) and
 *                       the parent "parent leaked 3500, child status 0"
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

static noinline void raw_parent_leak(void)
{
	int i;

	for (i = 0; i < 5; i++)
		sink = malloc(700);	/* never freed */
}

static noinline long child_churn(long n)
{
	long i, sum = 0;

	for (i = 0; i < n; i++) {
		char *volatile p = malloc(48 + (size_t)(i & 63));

		p[0] = 7;
		sum += p[0];
		free(p);
	}
	return sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 3000000, pid;
	int status = 0;

	raw_parent_leak();
	fflush(stdout);
	pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid < 0) {
		perror("clone");
		return 1;
	}
	if (pid == 0) {
		printf("child sum %ld\n", child_churn(n));
		fflush(stdout);
		_exit(0);
	}
	if (waitpid((pid_t)pid, &status, 0) < 0) {
		perror("waitpid");
		return 1;
	}
	printf("parent leaked 3500, child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}
