/* deep_recursion.c - leaks at the bottom of a recursion 300 frames deep */
#include <stdlib.h>

#include "truth.h"

/*
 * Proves: a stack deeper than the depth cap (HEAPTRAIL_DEPTH, default 64,
 * at most 256) is cut to the cap, keeping the innermost frames, so the
 * leak is still attributed to the right function and line; two leaks
 * whose truncated stacks are identical share one site; the program runs
 * unchanged whatever the cap.
 */

#define noinline __attribute__((noinline))
#define DEPTH 300

static noinline void leak_at_bottom(void)
{
	truth_sink = T_MALLOC(4096);
}

static noinline int recurse(int n)
{
	int r;

	if (n == 0) {
		leak_at_bottom();
		return 0;
	}
	if (n == 150 || n == 120)
		truth_sink = T_MALLOC(1500);
	r = recurse(n - 1);
	T_NO_TAILCALL();
	return r + 1;
}

int main(void)
{
	int depth = recurse(DEPTH);

	truth_fact("depth", depth);
	truth_write();
	return depth == DEPTH ? 0 : 1;
}
