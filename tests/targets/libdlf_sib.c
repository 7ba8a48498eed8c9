/* libdlf_sib.c - a small library that dlf_main loads by path, by bare name (from libdlf_outer.so) and with dlmopen */
#include <stdlib.h>
#include <string.h>

/*
 * Not linked with truth.c: dlf_main prints what it made here and the
 * test (tests/e2e/test_dl_fork.py) compares the report's sites with it.
 */

static void *volatile keep;

__attribute__((noinline)) void *sib_leak(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 'S', n);
	keep = p;
	__asm__ volatile("" ::: "memory");	/* no tail call */
	return p;
}

int sib_value(void)
{
	return 42;
}
