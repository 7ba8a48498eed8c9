/* frag_internal.h - what frag.c and frag_occ.c share: heap ranges and the occupancy sweep */
#ifndef HT_FRAG_INTERNAL_H
#define HT_FRAG_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "frag.h"

/* ---- frag_occ.c ----------------------------------------------------- */

/*
 * The address ranges that ever held blocks, kept sorted and merged when
 * closer than FRAG_REGION_GAP: the heaps (or a pool's slabs).  Updated on
 * every allocation, so the common case (inside the range hit last) is one
 * comparison.
 */
struct fregions {
	uint64_t *lo, *hi;
	size_t n, cap;
	size_t last;		/* index hit last */
};

/* 0, or -ENOMEM. */
int fregions_add(struct fregions *g, uint64_t lo, uint64_t hi);
void fregions_release(struct fregions *g);

/* A live block as the sweep sees it. */
struct occ_block {
	uint64_t lo, hi;	/* extent: [ptr - header, ptr + usable) */
	uint64_t size;		/* requested */
	uint32_t stack;
	uint32_t edge[2];	/* sweep scratch: its first and last page entries */
};

/*
 * Sorts 'b' and fills 'o' (everything but what the caller knows: nothing
 * is read from 'o').  Blocks outside every range of 'g' are counted as live
 * but take no part in spans and pinning.  0, or -ENOMEM (o is then freed).
 */
int frag_occ_compute(struct frag_occ *o, struct occ_block *b, size_t n,
		     const struct fregions *g, uint64_t page_size);
void frag_occ_release(struct frag_occ *o);

#endif
