/* guard_samplechurn.c - millions of short-lived blocks while sampling records every one
 *
 * usage: guard_samplechurn ROUNDS
 * With HEAPTRAIL_SAMPLE=1 every block is sampled, so the shim's set of
 * sampled blocks sees ROUNDS x 64 insertions and as many removals, with
 * at most 64 blocks live: its tables must reuse their room, not run out.
 * Leaves 7 blocks of 1000 bytes at keep_here(); prints "allocations N".
 */
#include <stdio.h>
#include <stdlib.h>

static void *volatile held[64];
static void *volatile kept[7];

static __attribute__((noinline)) void *churn_here(size_t n)
{
	return malloc(n);
}

static __attribute__((noinline)) void *keep_here(void)
{
	return malloc(1000);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 1000, r;
	int i;

	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 64; i++)
			held[i] = churn_here(16 + (size_t)(i * 8));
		for (i = 0; i < 64; i++)
			free(held[i]);
	}
	for (i = 0; i < 7; i++)
		kept[i] = keep_here();
	printf("allocations %ld\n", rounds * 64 + 7);
	return 0;
}
