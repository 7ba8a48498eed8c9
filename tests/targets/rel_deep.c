/* rel_deep.c - allocations 100,000 frames deep, with the default depth cap */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves (test_stress.py): a recursion 100,000 frames deep (on a thread
 * with a 256 MiB stack) that allocates on the way down and at the bottom
 * runs unchanged under the shim; stacks are cut to HEAPTRAIL_DEPTH (default
 * 64) innermost frames, so capturing one costs the same at any depth and
 * the leaks keep their function and line: one block every 1,000 levels at
 * deep_on_the_way (all of them one site: their innermost 64 frames are the
 * same), one at deep_bottom, and a block freed at every 100th level.
 *
 *   rel_deep [LEVELS]    default 100000
 *
 * Output: "depth N".  Truth in $TRUTH_OUT; the thread's creation is the
 * runtime's (deep_spawn is a runtime caller).
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

static noinline void deep_bottom(void)
{
	truth_sink = T_MALLOC(4096);
}

static noinline void deep_on_the_way(int n)
{
	truth_sink = T_MALLOC(1000 + (size_t)(n / 1000));
}

static noinline void deep_temp(int n)
{
	void *p = T_MALLOC(32 + (size_t)(n % 64));

	T_FREE(p);
}

static noinline int recurse(int n)
{
	int r;

	if (n == 0) {
		deep_bottom();
		return 0;
	}
	if (n % 1000 == 0)
		deep_on_the_way(n);
	if (n % 100 == 50)
		deep_temp(n);
	r = recurse(n - 1);
	T_NO_TAILCALL();
	return r + 1;
}

static void *run(void *arg)
{
	return (void *)(long)recurse((int)(long)arg);
}

static noinline int deep_spawn(int levels)
{
	pthread_attr_t attr;
	pthread_t th;
	void *r;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, (size_t)256 << 20);
	if (pthread_create(&th, &attr, run, (void *)(long)levels))
		return -1;
	pthread_join(th, &r);
	return (int)(long)r;
}

int main(int argc, char **argv)
{
	int levels = argc > 1 ? atoi(argv[1]) : 100000;
	int depth;

	truth_runtime_caller("deep_spawn");
	truth_set_exact(0, 1);
	depth = deep_spawn(levels);
	{
		/* Not printf: stdout's buffer would be one more block to explain. */
		char line[32];
		int n = snprintf(line, sizeof(line), "depth %d\n", depth);

		if (write(1, line, (size_t)n) != n)
			return 1;
	}
	truth_fact("depth", depth);
	truth_write();
	return depth == levels ? 0 : 1;
}
