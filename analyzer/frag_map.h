/* frag_map.h - an open-addressing map from 64-bit keys to 64-bit values */
#ifndef HT_FRAG_MAP_H
#define HT_FRAG_MAP_H

#include <stdint.h>
#include <stddef.h>

/*
 * Used by the fragmentation analysis (page -> live blocks touching it) and
 * by the replay runner (address -> slot).  Key 0 is reserved (never a page
 * of the heap, never a block address).  Linear probing, backward-shift
 * deletion, so a delete leaves no tombstone and lookups stay short however
 * long the run.  Memory: 16 bytes a slot, at most twice the live entries.
 */

struct fmap {
	uint64_t *keys;
	uint64_t *vals;
	uint64_t mask;		/* capacity - 1, a power of two; 0 when empty */
	uint64_t count;
};

/* 0, or -ENOMEM. */
int fmap_init(struct fmap *m, uint64_t capacity_hint);
void fmap_release(struct fmap *m);

/* The value of 'key', or NULL when absent. */
uint64_t *fmap_get(const struct fmap *m, uint64_t key);
/*
 * The value of 'key', inserted as 0 when absent (*found says which).  NULL
 * when the map could not grow.  Valid until the next put or delete.
 */
uint64_t *fmap_put(struct fmap *m, uint64_t key, int *found);
/* 1 when 'key' was there and is gone, 0 when absent. */
int fmap_del(struct fmap *m, uint64_t key);

#endif
