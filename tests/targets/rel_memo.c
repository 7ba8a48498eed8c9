/* rel_memo.c - the same allocating frame reached from different callers at the same stack depth */
/* test-cflags: -O2 -fomit-frame-pointer -fno-inline -fno-optimize-sibling-calls -fno-ipa-icf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Proves: a stack the shim's walker remembered is given again only when it
 * is the same stack.  leaf() allocates; it is reached through callers with
 * frames of the same size, at the same stack address, so the walk starts
 * from the same place every time and only the words further up the stack
 * tell the callers apart: one level up (mid_a / mid_b), two levels up
 * (outer_a / outer_b through the same mid_c), through a frame that keeps a
 * frame pointer (fp_mid, whose CFA comes from rbp), and at recursion depths
 * 1 to 4.  Every call allocates and frees, interleaved in one loop, so a
 * stack given for the wrong caller would move allocations between sites.
 *
 * Output: 'calls_NAME N' for each caller NAME: the allocations made
 * through it (its function appears in their stacks).
 */

#define noinline __attribute__((noinline))
#define ROUNDS 3000

static void *volatile sink;
static long calls_mid_a, calls_mid_b, calls_outer_a, calls_outer_b, calls_fp_mid;
static long calls_depth[5];

static noinline void leaf(size_t n)
{
	char *p = malloc(n);

	p[0] = (char)n;
	sink = p;
	free(p);
}

/* the same code twice: the same frame size, different return addresses */
static noinline void mid_a(size_t n)
{
	volatile char pad[48];

	pad[0] = (char)n;
	leaf(n + (size_t)pad[0] * 0);
}

static noinline void mid_b(size_t n)
{
	volatile char pad[48];

	pad[0] = (char)n;
	leaf(n + (size_t)pad[0] * 0);
}

static noinline void mid_c(size_t n)
{
	volatile char pad[48];

	pad[0] = (char)n;
	leaf(n + (size_t)pad[0] * 0);
}

static noinline void outer_a(size_t n)
{
	volatile char pad[32];

	pad[0] = (char)n;
	mid_c(n + (size_t)pad[0] * 0);
}

static noinline void outer_b(size_t n)
{
	volatile char pad[32];

	pad[0] = (char)n;
	mid_c(n + (size_t)pad[0] * 0);
}

__attribute__((optimize("no-omit-frame-pointer"))) static noinline void fp_mid(size_t n)
{
	volatile char pad[48];

	pad[0] = (char)n;
	leaf(n + (size_t)pad[0] * 0);
}

static noinline void depth(int d, size_t n)
{
	volatile char pad[16];

	pad[0] = (char)d;
	if (d > 1)
		depth(d - 1, n + (size_t)pad[0] * 0);
	else
		leaf(n);
}

static noinline void recurse(int d, size_t n)
{
	depth(d, n);
}

int main(void)
{
	int i;

	for (i = 0; i < ROUNDS; i++) {
		size_t n = 24 + (size_t)(i % 7) * 8;

		switch (i % 6) {
		case 0: mid_a(n); calls_mid_a++; break;
		case 1: mid_b(n); calls_mid_b++; break;
		case 2: outer_a(n); calls_outer_a++; break;
		case 3: outer_b(n); calls_outer_b++; break;
		case 4: fp_mid(n); calls_fp_mid++; mid_a(n); calls_mid_a++; break;
		default: recurse(1 + (i / 6) % 4, n); calls_depth[1 + (i / 6) % 4]++; break;
		}
	}
	printf("calls_mid_a %ld\ncalls_mid_b %ld\ncalls_outer_a %ld\ncalls_outer_b %ld\n",
	       calls_mid_a, calls_mid_b, calls_outer_a, calls_outer_b);
	printf("calls_fp_mid %ld\n", calls_fp_mid);
	for (i = 1; i <= 4; i++)
		printf("calls_depth%d %ld\n", i, calls_depth[i]);
	return 0;
}
