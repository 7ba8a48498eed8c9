/* libtleak.c - a library that dlopen_leak loads, leaks from and unloads again */
#include <stdlib.h>
#include <string.h>

/*
 * Not linked with truth.c: the program that loads it does the counting and
 * learns the allocating line from tleak_line.
 */

int tleak_line;

static __attribute__((noinline)) void *tleak_inner(size_t n)
{
	void *p = malloc(n); tleak_line = __LINE__;

	if (p)
		memset(p, 'L', n);
	return p;
}

void *tleak_alloc(size_t n)
{
	void *p = tleak_inner(n);

	__asm__ volatile("" ::: "memory");	/* keep this frame: no tail call */
	return p;
}
