/* reach_many.c - enough live blocks for the scan to span several REACH records */
#include "reach_truth.h"

/*
 * Proves: with 120000 live blocks (80000 reachable from a global array, a
 * lost list of 40000 whose head is definitely and tail indirectly lost) the
 * classes still add up exactly: the scan is written as several REACH
 * records (more than the writer's queue holds at once) that together list
 * every block.  Argument N changes the count.
 */

struct node {
	struct node *next;
	long v;
};

static void **table;

static R_NOINLINE void fill(unsigned n)
{
	unsigned i;

	table = R_ALLOC(n * sizeof(void *), "reachable");
	for (i = 0; i < n; i++)
		table[i] = R_ALLOC(24, "reachable");
}

static R_NOINLINE void lose_list(unsigned n)
{
	struct node *head = R_ALLOC(sizeof(struct node), "lost"), *p = head;
	unsigned i;

	for (i = 1; i < n; i++, p = p->next)
		p->next = R_ALLOC(sizeof(struct node), "indirect");
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 120000;

	fill(n / 3 * 2);
	lose_list(n / 3);
	reach_scrub();
	reach_write("reach_many");
	return 0;
}
