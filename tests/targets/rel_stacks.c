/* rel_stacks.c - one allocation from each of N distinct call stacks */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "truth.h"

/*
 * rel_stacks N [THREADS] (N at most 2^LEVELS): allocation i is made under a chain of
 * LEVELS calls, each through stk_a or stk_b as bit k of i says, so every
 * allocation has a stack of its own (tail calls are defeated by the work
 * after each call).  Blocks with i % 10 == 0 are leaked (LEAK_BYTES each),
 * the others freed; then a second pass makes the same N stacks again and
 * frees all it allocates.  Proves that the shim's stack table takes N stacks
 * (it grows in levels past 24K) and hands out one id per stack.  With
 * THREADS > 1 each thread makes the same N stacks at the same time, so
 * that threads race to create each one, also while a level is added.
 */

#define LEVELS 17
#define LEAK_BYTES 24

static volatile unsigned sink;
static unsigned n;
static __attribute__((noinline)) void stk_a(unsigned i, int k);
static __attribute__((noinline)) void stk_b(unsigned i, int k);

/* j: i in the first pass, i + n in the second (which leaks nothing) */
static __attribute__((noinline)) void stk_leaf(unsigned j)
{
	void *p = T_MALLOC(j % 10 || j >= n ? 16 + j % 7 : LEAK_BYTES);

	if (j % 10 || j >= n)
		T_FREE(p);
	else
		truth_sink = p;
}

static void step(unsigned i, int k)
{
	if (k == LEVELS)
		stk_leaf(i);
	else if (((i % n) >> k) & 1)
		stk_b(i, k + 1);
	else
		stk_a(i, k + 1);
	sink += (unsigned)k;	/* after the call: no tail call */
}

static __attribute__((noinline)) void stk_a(unsigned i, int k)
{
	step(i, k);
	sink ^= i;
}

static __attribute__((noinline)) void stk_b(unsigned i, int k)
{
	step(i, k);
	sink += i;
}

static unsigned n;

/* Twice over: the second pass must find every stack the first one made. */
static void *run(void *arg)
{
	unsigned i, pass;

	(void)arg;
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++)
			step(i + pass * n, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned threads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 1, t;
	pthread_t th[16];

	n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 100000;
	if (n > (1u << LEVELS) || threads < 1 || threads > 16)
		return 2;
	if (threads == 1) {
		run(NULL);
	} else {
		for (t = 0; t < threads; t++)
			if (pthread_create(&th[t], NULL, run, NULL))
				return 1;
		for (t = 0; t < threads; t++)
			pthread_join(th[t], NULL);
	}
	printf("stacks %u\nallocations %u\nleaked_blocks %u\nleaked_bytes %u\n", n, 2 * n * threads,
	       (n + 9) / 10 * threads, (n + 9) / 10 * threads * LEAK_BYTES);
	truth_write();
	return 0;
}
