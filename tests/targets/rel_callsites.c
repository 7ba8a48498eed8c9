/* rel_callsites.c - allocations from 16,384 distinct call sites */
#include <stdio.h>
#include <stdlib.h>

#include "truth.h"

/*
 * Every call of site_alloc() below is a call site of its own, so each
 * allocation's stack starts with a return address of its own: 16,384 of
 * them, more than the first level of the shim's table of unwinding rules
 * holds (12K), in four functions whose frames differ in size.  Each block
 * is freed at once but every 16th, leaked.  Run
 * with HEAPTRAIL_UNWIND_CHECK=1 every stack is also taken by libunwind and
 * compared.
 */

static unsigned count;

static __attribute__((noinline)) void site_alloc(unsigned i)
{
	void *p = T_MALLOC(32);

	count++;
	if (i % 16)
		T_FREE(p);
	else
		truth_sink = p;
}

#define S1(x) site_alloc(x);
#define S4(x) S1(x) S1((x) + 1) S1((x) + 2) S1((x) + 3)
#define S16(x) S4(x) S4((x) + 4) S4((x) + 8) S4((x) + 12)
#define S64(x) S16(x) S16((x) + 16) S16((x) + 32) S16((x) + 48)
#define S256(x) S64(x) S64((x) + 64) S64((x) + 128) S64((x) + 192)
#define S1024(x) S256(x) S256((x) + 256) S256((x) + 512) S256((x) + 768)
#define S4096(x) S1024(x) S1024((x) + 1024) S1024((x) + 2048) S1024((x) + 3072)

/* frames of four sizes: a rule taken for another function's would show */
#define SITES(name, first, pad)					\
	static __attribute__((noinline, optimize("omit-frame-pointer"))) void name(void) \
	{							\
		volatile char frame[pad];			\
								\
		frame[0] = 0;					\
		S4096(first)					\
		frame[pad - 1] = frame[0];			\
	}
SITES(sites_0, 0, 16)
SITES(sites_1, 4096, 48)
SITES(sites_2, 8192, 112)
SITES(sites_3, 12288, 240)

int main(void)
{
	sites_0();
	sites_1();
	sites_2();
	sites_3();
	printf("call_sites %u\nleaked_blocks %u\nleaked_bytes %u\n", count, count / 16,
	       count / 16 * 32);
	truth_write();
	return 0;
}
