/* reach_basic.c - blocks whose reachability the program knows: one per class of memcheck */
#include "reach_truth.h"

/*
 * Proves: a block only a global points to is still reachable; a block whose
 * last pointer was overwritten is definitely lost; the tail of a lost list
 * is indirectly lost; a block known only by a pointer 16 bytes inside it is
 * possibly lost, and so is the block only it points to; a reachable list is
 * reachable to its end; of a lost cycle of two blocks one is definitely and
 * one indirectly lost (memcheck; LeakSanitizer calls both indirect); a
 * lost block pointing back to an older one makes the older one indirect.
 */

struct node {
	struct node *next;
	long payload[7];	/* 64 bytes a node */
};

static void *cache;		/* the only pointer to its block */
static void *slot;		/* overwritten: its first block is lost */
static char *inside;		/* 16 bytes into its block */
static struct node *kept;	/* a list, reachable from here */

static R_NOINLINE void make_reachable(void)
{
	cache = R_ALLOC(1000, "reachable");
}

static R_NOINLINE void make_overwritten(void)
{
	slot = R_ALLOC(2000, "lost");
	slot = R_ALLOC(3000, "reachable");
}

static R_NOINLINE void make_lost_list(void)
{
	struct node *head = R_ALLOC(sizeof(struct node), "lost");
	struct node *p = head;
	int i;

	for (i = 0; i < 3; i++) {
		p->next = R_ALLOC(sizeof(struct node), "indirect");
		p = p->next;
	}
	/* 'head' dies with this frame: the list is lost, its tail indirectly */
}

static R_NOINLINE void make_kept_list(void)
{
	struct node *p;
	int i;

	kept = R_ALLOC(sizeof(struct node), "reachable");
	for (p = kept, i = 0; i < 2; i++, p = p->next)
		p->next = R_ALLOC(sizeof(struct node), "reachable");
}

static R_NOINLINE void make_interior(void)
{
	char *p = R_ALLOC(400, "possibly");

	((void **)p)[4] = R_ALLOC(100, "possibly");
	inside = p + 16;
}

static R_NOINLINE void make_lost_cycle(void)
{
	struct node *a, *b;

	/* one line: which of the two leads the clique depends on addresses */
	for (a = b = NULL; !b; a = R_ALLOC(sizeof(struct node), "cycle"))
		if (a)
			b = a;
	b->next = a;
	a->next = b;
}

static R_NOINLINE void make_lost_backwards(void)
{
	struct node *older = R_ALLOC(sizeof(struct node), "indirect");
	struct node *newer = R_ALLOC(sizeof(struct node), "lost");

	/* when 'older' lies lower it is scanned first, then taken by newer's clique */
	newer->next = older;
}

int main(void)
{
	make_reachable();
	make_overwritten();
	make_lost_list();
	make_kept_list();
	make_interior();
	make_lost_cycle();
	make_lost_backwards();
	reach_scrub();
	reach_write("reach_basic");
	return 0;
}
