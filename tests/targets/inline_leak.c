/* inline_leak.c - a leak inside a function the compiler inlined (built with -O2) */
/* test-cflags: -O2 */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: with optimization, a leak made in an inlined function is reported
 * at that function and its own line (inline frames expanded from DWARF),
 * not at the function it was inlined into.
 */

static inline __attribute__((always_inline)) char *make_label(size_t n)
{
	char *s = T_MALLOC(n);

	memset(s, 'x', n - 1);
	s[n - 1] = 0;
	return s;
}

static __attribute__((noinline)) void keep_labels(void)
{
	int i;

	for (i = 0; i < 4; i++)
		truth_sink = make_label(500 + 10 * (size_t)i);
	T_NO_TAILCALL();
}

int main(void)
{
	keep_labels();
	truth_write();
	return 0;
}
