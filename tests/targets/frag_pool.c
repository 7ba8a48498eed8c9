/* frag_pool.c - a slab allocator annotated with heaptrail_pool_*: its fragmentation reported like malloc's */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: blocks a program's own allocator hands out (heaptrail_pool_alloc
 * and heaptrail_pool_free) are analyzed like malloc's: 'heaptrail frag'
 * reports the pool's live bytes, span and pinned memory, and names the
 * site whose objects pin the slab.
 *
 * Pool 7 ("objects") carves 256-byte objects out of one page-aligned 1 MiB
 * slab.  Every 32nd object is made by obj_keep and stays; the others come
 * from obj_temp and are freed.  Pool 9 ("scratch") is destroyed before the
 * end with its blocks still in it.
 *
 * Truth: the program is the allocator, so it knows where each live object
 * lies; facts give the pool's live bytes, its span (pages from the slab's
 * start to the end of the highest live object), the free bytes below that
 * end (pinned) and those on pages holding live objects (pinned_page).
 */

#define noinline __attribute__((noinline))

#define SLAB (1u << 20)
#define OBJ 256
#define NOBJ (SLAB / OBJ)
#define KEEP_EVERY 32
#define POOL 7
#define SCRATCH 9

static char *slab;
static size_t next_obj;

static void *carve(void)
{
	void *p = slab + next_obj * OBJ;

	next_obj++;
	return p;
}

static noinline void *obj_keep(void)
{
	void *p = carve();

	heaptrail_pool_alloc(POOL, p, OBJ);
	memset(p, 'k', OBJ);
	return p;
}

static noinline void *obj_temp(void)
{
	void *p = carve();

	heaptrail_pool_alloc(POOL, p, OBJ);
	memset(p, 't', OBJ);
	return p;
}

static noinline void scratch_work(void)
{
	char *s = T_MALLOC(64 * 1024);
	int i;

	heaptrail_pool_create(SCRATCH, "scratch");
	for (i = 0; i < 64; i++)
		heaptrail_pool_alloc(SCRATCH, s + i * 1024, 1000);
	heaptrail_mark("scratch");
	heaptrail_pool_destroy(SCRATCH);
	T_FREE(s);
}

int main(void)
{
	static void *objs[NOBJ];
	long long ps = sysconf(_SC_PAGESIZE);
	long long live = 0, span, live_pages = 0, last_page = -1;
	unsigned long long hi = 0;
	size_t i;

	slab = T_TRACK(aligned_alloc(4096, SLAB), SLAB);
	heaptrail_pool_create(POOL, "objects");
	for (i = 0; i < NOBJ; i++)
		objs[i] = i % KEEP_EVERY == 0 ? obj_keep() : obj_temp();
	for (i = 0; i < NOBJ; i++) {
		if (i % KEEP_EVERY == 0)
			continue;
		heaptrail_pool_free(POOL, objs[i]);
		objs[i] = NULL;
	}
	scratch_work();
	heaptrail_mark("sparse");

	/* the pool's figures, from the allocator's own knowledge */
	for (i = 0; i < NOBJ; i++) {
		unsigned long long lo, end;
		long long pg;

		if (!objs[i])
			continue;
		lo = (unsigned long long)(objs[i] ? (char *)objs[i] - slab : 0);
		end = lo + OBJ;
		live += OBJ;
		if (end > hi)
			hi = end;
		/* pages lo..end-1, counted once each (objects are in address order) */
		for (pg = (long long)(lo / ps); pg <= (long long)((end - 1) / ps); pg++) {
			if (pg > last_page) {
				live_pages++;
				last_page = pg;
			}
		}
	}
	span = (long long)((hi + ps - 1) / ps) * ps;
	truth_fact("pool_id", POOL);
	truth_fact("pool_live_bytes", live);
	truth_fact("pool_live_blocks", live / OBJ);
	truth_fact("pool_span_bytes", span);
	truth_fact("pool_pinned_bytes", span - live);
	truth_fact("pool_pinned_page_bytes", live_pages * ps - live);
	truth_fact("scratch_id", SCRATCH);
	truth_fact("scratch_live_bytes", 64 * 1000);
	truth_sink = slab;	/* the slab stays: a leak of the program's own */
	truth_write();
	return 0;
}
