/* reach_snapshot.c - live scans: heaptrail_reach_snapshot() and the marker signal */
#include <signal.h>
#include <stdint.h>

#include "heaptrail.h"
#include "reach_truth.h"

/*
 * Proves: heaptrail_reach_snapshot() writes a live scan (kind 1) of the
 * blocks at that moment: 'held' (a global points to it) is reachable,
 * 'hidden' (the program keeps only its address xor a mask) is lost; the
 * program then frees 'hidden' through its mask and drops 'held'.  The
 * marker signal (SIGUSR2, raised by the program itself) asks for another
 * live scan, made at the next free: 'held' is lost there and at exit, and
 * 'hidden' is gone.  The addresses go to the truth line.
 */

#define MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull)

static void *held;
static uintptr_t hidden;

static R_NOINLINE void make(void)
{
	held = R_ALLOC(1000, "lost");
	hidden = (uintptr_t)calloc(1, 2000) ^ MASK;
}

static R_NOINLINE void first_scan(void)
{
	heaptrail_reach_snapshot();
}

static R_NOINLINE void drop(void)
{
	free((void *)(hidden ^ MASK));
	held = NULL;
}

static R_NOINLINE void ask_second_scan(void)
{
	raise(SIGUSR2);
}

static R_NOINLINE void second_scan(void)
{
	free(malloc(1));	/* the free runs the requested scan */
}

int main(void)
{
	char extra[128];
	uintptr_t held_at, hidden_at;

	if (!heaptrail_active())
		return 3;	/* SIGUSR2 is ours only under the shim */
	make();
	held_at = (uintptr_t)held ^ MASK;	/* no plain copy on the stack */
	hidden_at = hidden;
	reach_scrub();
	first_scan();
	drop();
	reach_scrub();
	ask_second_scan();
	reach_scrub();	/* the signal frame's saved registers, now dead, too */
	second_scan();
	reach_scrub();
	snprintf(extra, sizeof(extra), ",\"held\":%lu,\"hidden\":%lu",
		 (unsigned long)(held_at ^ MASK), (unsigned long)(hidden_at ^ MASK));
	reach_write_extra("reach_snapshot", extra);
	return 0;
}
