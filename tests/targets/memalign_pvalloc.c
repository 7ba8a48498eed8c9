/* memalign_pvalloc.c - the obsolete aligned allocators memalign and pvalloc */
#include <malloc.h>
#include <stdlib.h>

#include "truth.h"

/*
 * Proves: memalign and pvalloc are interposed too and recorded with the
 * size the program asked for (pvalloc rounds the block up to a page; the
 * usable size says so, the leak counts the request).  heaptrack does not
 * intercept these two, so there is no comparison with it here.
 */

#define noinline __attribute__((noinline))

static noinline void leak_memalign(void)
{
	truth_sink = T_TRACK(memalign(128, 777), 777);
}

static noinline void leak_pvalloc(void)
{
	truth_sink = T_TRACK(pvalloc(100), 100);
}

static noinline void freed(void)
{
	void *a = T_TRACK(memalign(64, 5000), 5000);
	void *b = T_TRACK(pvalloc(5000), 5000);

	T_FREE(a);
	T_FREE(b);
}

int main(void)
{
	leak_memalign();
	leak_pvalloc();
	freed();
	truth_write();
	return 0;
}
