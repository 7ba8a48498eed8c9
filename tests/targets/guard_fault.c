/* guard_fault.c - the program dies of a signal: from the kernel, sent, or inside the allocator
 *
 * usage: guard_fault segv|kill-segv|bad-free|usr2 LEAKS
 * Leaks LEAKS blocks of 100 bytes at leak_here() (printed as "leaked N"),
 * then: segv      dereferences a null pointer (a fault the kernel raises);
 *       kill-segv sends itself SIGSEGV (kill: nothing to retry);
 *       bad-free  frees a pointer that malloc never gave (glibc aborts
 *                 inside free: the signal finds the thread in the real
 *                 allocator);
 *       usr2      sends itself SIGUSR2, whose default ends the process.
 * Each way it must die of that signal, under the shim as without.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[1000];

static __attribute__((noinline)) void *leak_here(void)
{
	return malloc(100);
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 10, i;
	char bogus[64];

	for (i = 0; i < n && i < 1000; i++)
		keep[i] = leak_here();
	printf("leaked %d\n", n);
	fflush(stdout);
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "segv")) {
		volatile int *p = NULL;

		return *p;
	}
	if (!strcmp(argv[1], "kill-segv"))
		kill(getpid(), SIGSEGV);
	else if (!strcmp(argv[1], "bad-free")) {
		char *volatile not_ours = bogus + 16;	/* the compiler must not see it */

		free(not_ours);
	}
	else if (!strcmp(argv[1], "usr2"))
		kill(getpid(), SIGUSR2);
	sleep(1);
	return 3;
}
