/* calloc_aligned.c - calloc and aligned allocation (posix_memalign, aligned_alloc, valloc) */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: calloc counts count * size bytes; each aligned allocation is
 * recorded with the size the program asked for (not its alignment padding);
 * the aligned blocks freed with free() are released; a failed
 * posix_memalign (bad alignment) records nothing.  heaptrack intercepts all
 * of these, so this target is also compared with it.
 */

#define noinline __attribute__((noinline))

static noinline void leak_calloc(void)
{
	truth_sink = T_CALLOC(7, 100);
	truth_sink = T_CALLOC(1, 4096);
}

static noinline void leak_posix_memalign(void)
{
	void *p = NULL;

	/* One line: the call and its bookkeeping share __LINE__. */
	if (posix_memalign(&p, 64, 1000) == 0) truth_sink = T_TRACK(p, 1000);
}

static noinline void leak_aligned_alloc(void)
{
	truth_sink = T_TRACK(aligned_alloc(256, 2048), 2048);
}

static noinline void leak_valloc(void)
{
	truth_sink = T_TRACK(valloc(3000), 3000);
}

static noinline void aligned_and_freed(void)
{
	void *a = T_TRACK(aligned_alloc(4096, 8192), 8192);
	void *b = T_TRACK(valloc(100), 100);
	void *c = T_CALLOC(100, 100);
	void *d = NULL;

	/* Alignment 3 is not a power of two: EINVAL, nothing allocated. */
	if (posix_memalign(&d, 3, 100) == 0)
		abort();
	memset(c, 1, 100);
	T_FREE(a);
	T_FREE(b);
	T_FREE(c);
}

int main(void)
{
	leak_calloc();
	leak_posix_memalign();
	leak_aligned_alloc();
	leak_valloc();
	aligned_and_freed();
	truth_write();
	return 0;
}
