/* trap_leak.c - leaks, then stops on a breakpoint instruction with no debugger: SIGTRAP */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Proves (test_endrecord.py, 'trap'): a program that dies of SIGTRAP (an
 * int3 left in the code, Chromium's CHECK failures, __debugbreak) leaves
 * a dump that ends "killed by signal 5" and holds its leaks, and dies of
 * the same signal as without the shim.
 *
 *   trap_leak N     leaks N blocks of 300 bytes at trap_leak_here, then traps
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

static noinline void trap_leak_here(void)
{
	sink = malloc(300);	/* never freed */
}

int main(int argc, char **argv)
{
	int i, n = argc > 1 ? atoi(argv[1]) : 3;

	for (i = 0; i < n; i++)
		trap_leak_here();
	printf("leaked %d, trapping\n", n);
	fflush(stdout);
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("int3");
#else
	raise(SIGTRAP);
#endif
	return 0;
}
