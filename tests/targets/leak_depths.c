/* leak_depths.c - leaks at call depths 1, 3, 6 and 10, one leaf reached by two paths */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: each leak is attributed to the function and line that allocated
 * it, however deep; two stacks ending in the same line are two sites with
 * the same top frame; blocks freed later are not leaks; totals and the peak
 * (reached by a temporary 1 MiB buffer) are exact.
 */

#define noinline __attribute__((noinline))

static noinline void leak_one(void)
{
	truth_sink = T_MALLOC(1000);
}

static noinline void leak_three(void)
{
	int i;

	for (i = 0; i < 3; i++)
		truth_sink = T_MALLOC(3000 + i);
}

static noinline void level2_of_3(void) { leak_three(); T_NO_TAILCALL(); }
static noinline void level1_of_3(void) { level2_of_3(); T_NO_TAILCALL(); }

static noinline void leak_six(void)
{
	truth_sink = T_CALLOC(6, 1000);
}

static noinline void d5(void) { leak_six(); T_NO_TAILCALL(); }
static noinline void d4(void) { d5(); T_NO_TAILCALL(); }
static noinline void d3(void) { d4(); T_NO_TAILCALL(); }
static noinline void d2(void) { d3(); T_NO_TAILCALL(); }
static noinline void d1(void) { d2(); T_NO_TAILCALL(); }

static noinline void leak_ten(int depth)
{
	if (depth > 1) {
		leak_ten(depth - 1);
		T_NO_TAILCALL();
		return;
	}
	truth_sink = T_MALLOC(10000);
}

/* One line, two call paths: two stacks, one top frame. */
static noinline void leak_shared(size_t n)
{
	truth_sink = T_MALLOC(n);
}

static noinline void path_a(void) { leak_shared(111); T_NO_TAILCALL(); }
static noinline void path_b(void) { leak_shared(222); T_NO_TAILCALL(); }

/* Allocated and freed: contributes to the peak, never to the leaks. */
static noinline void temporary_peak(void)
{
	char *big = T_MALLOC(1 << 20);

	memset(big, 1, 1 << 20);
	truth_sink = big;
	T_FREE(big);
}

static noinline void freed_later(void **keep, int n)
{
	int i;

	for (i = 0; i < n; i++)
		keep[i] = T_MALLOC(64 * (i + 1));
}

int main(void)
{
	void *keep[8];
	int i;

	leak_one();
	level1_of_3();
	d1();
	leak_ten(10);
	path_a();
	path_b();
	freed_later(keep, 8);
	temporary_peak();
	for (i = 0; i < 8; i++)
		T_FREE(keep[i]);
	truth_write();
	return 0;
}
