/* realloc_edge.c - realloc(p, 0) that frees, and reallocarray */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: glibc's realloc(p, 0) frees p and returns NULL: the block is
 * released, not leaked; reallocarray counts count * size bytes and chains
 * like realloc.  (heaptrack misses both, so there is no comparison here.)
 */

#define noinline __attribute__((noinline))

static noinline void realloc_to_zero(void)
{
	char *p = T_MALLOC(5555);

	memset(p, 1, 5555);
	p = T_REALLOC(p, 0);
	if (p)
		abort();	/* not glibc's behaviour: the truth would be wrong */
}

static noinline void leak_reallocarray(void)
{
	int *v = truth_track_in(reallocarray(NULL, 10, sizeof(int)), 10 * sizeof(int), __func__, __FILE__, __LINE__);

	uintptr_t old = (uintptr_t)v;

	v = truth_realloc_in(old, reallocarray(v, 1000, sizeof(int)), 1000 * sizeof(int), __func__, __FILE__, __LINE__);
	truth_sink = v;
}

int main(void)
{
	realloc_to_zero();
	leak_reallocarray();
	truth_write();
	return 0;
}
