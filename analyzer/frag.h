/* frag.h - fragmentation: byte ladder, page occupancy, pinning, holes, growth patterns */
#ifndef HT_FRAG_H
#define HT_FRAG_H

#include <stdint.h>
#include <stddef.h>

#include "replay.h"

/*
 * Definitions (docs/fragmentation.md says the same for users):
 *
 * A live block's extent is [ptr - header, ptr + usable): its usable bytes
 * and the allocator's chunk header in front of it (16 bytes for malloc
 * blocks, glibc's prev_size and size words; 0 for pool blocks).  A page
 * holds live bytes when any byte of an extent lies on it.
 *
 * A malloc block is "mmapped" when glibc served it with its own mapping:
 * ptr + usable is page-aligned, usable + 16 is at least 128 KiB (glibc's
 * smallest mmap threshold) and ptr - 16 is page-aligned too (but for aligned
 * allocations, whose chunk starts past the lead glibc cut off).  Mmapped blocks go back to the
 * system on free and do not fragment; they count in the ladder, not in the
 * heap's occupancy.
 *
 * A heap is a range of addresses that held malloc (not mmapped) blocks at
 * some time during the run: glibc's brk heap, each arena's mmapped heap.
 * Ranges closer than FRAG_REGION_GAP are one heap.  Its start is the lowest
 * address any block ever had there; its span is the pages from its start
 * to the end of its highest live block.  Memory above the highest live block
 * is the top: free() gives it back by itself (M_TRIM_THRESHOLD).
 *
 * Within a span:
 *   occupied  = bytes of live extents
 *   pinned    = span - occupied: free memory that trimming the top of the
 *               heap can never return, because live blocks sit above it.
 *               glibc's free() only ever trims the top, so a program that
 *               never calls malloc_trim() keeps it resident.  It is
 *   pinned_page  the free bytes on pages that also hold live bytes: nothing
 *               returns them (madvise works on whole pages), plus
 *   releasable   the whole free pages under live blocks: malloc_trim(0)
 *               (glibc >= 2.8) returns them with MADV_DONTNEED, free()
 *               never does.
 * Attribution: a page's free bytes go in equal shares to the live blocks on
 * that page; a run of free pages goes to the live block right above it (the
 * lowest live block whose presence stops the top from coming down).  A
 * site's pinned bytes are the sum over its live blocks.
 *
 * Pools (heaptrail_pool_alloc) get the same analysis, each on its own, with
 * a header of 0: their "top" is the end of the pool's highest live block.
 */

#define FRAG_HEADER 16		/* glibc chunk header in front of a malloc block */
#define FRAG_REGION_GAP (1ull << 20)
#define FRAG_NCLASS 256		/* size classes, 4 per power of two */
#define FRAG_NLOG2 64		/* power-of-two buckets */

/* Size classes (jemalloc's spacing): upper bound of class i, and the class of a size. */
uint64_t frag_class_bound(unsigned i);
unsigned frag_class_of(uint64_t size);
/* Power-of-two bucket of a size: [2^i, 2^(i+1)), bucket 0 holding 0 and 1. */
unsigned frag_log2_of(uint64_t size);

/* One site's share of the pinned memory of a heap or pool. */
struct frag_pinner {
	uint32_t stack;
	uint64_t pinned_bytes;	/* = pinned_page_bytes + releasable_bytes */
	uint64_t pinned_page_bytes;
	uint64_t releasable_bytes;
	uint64_t live_bytes;	/* requested bytes of its live blocks there */
	uint64_t live_blocks;
	uint64_t min_size, max_size;
};

/* Page occupancy of the malloc heaps or of one pool, at the chosen moment. */
struct frag_occ {
	uint64_t heaps;		/* heaps with live blocks */
	uint64_t live_blocks;
	uint64_t live_bytes;	/* requested */
	uint64_t usable_bytes;
	uint64_t span_bytes;	/* heap_span_bytes */
	uint64_t occupied_bytes;
	uint64_t live_page_bytes;
	uint64_t free_page_bytes;	/* whole free pages in the spans: malloc_trim could release */
	uint64_t pinned_bytes;
	uint64_t pinned_page_bytes;
	uint64_t releasable_bytes;	/* == free_page_bytes */
	/* free space shape: holes between live extents inside the spans */
	uint64_t holes;
	uint64_t hole_count[FRAG_NLOG2];
	uint64_t hole_bytes[FRAG_NLOG2];
	struct frag_pinner *pinners;	/* ranked by pinned_bytes */
	size_t npinners;
};

/* The byte ladder at one moment. */
struct frag_ladder {
	uint64_t time;
	uint64_t requested_bytes;	/* live heap bytes as asked for */
	uint64_t usable_bytes;		/* their usable sizes */
	uint64_t live_page_bytes;	/* pages holding live heap bytes (mmapped blocks included) */
	uint64_t mmapped_bytes;		/* mmapped blocks, whole mappings */
	uint64_t mmapped_blocks;
	uint64_t blocks;
	/* the sample chosen for this moment (have_sample = 0: the dump has none) */
	int have_sample;
	int sample_exact;	/* no heap event between the moment and the sample */
	uint64_t sample_time;
	struct dump_sample sample;
};

struct frag_row {		/* the ladder at each sample, for the timeline */
	uint64_t time;
	uint64_t requested_bytes, usable_bytes, live_page_bytes;
	struct dump_sample sample;
};

enum frag_pattern { FRAG_GEOMETRIC = 1, FRAG_EXACT_FIT = 2 };

/* A site whose blocks were grown repeatedly (realloc, or malloc-copy-free). */
struct frag_growth {
	uint32_t stack;
	enum frag_pattern pattern;
	uint64_t grows;		/* growth steps seen */
	uint64_t small_steps;	/* steps that added less than a tenth */
	uint64_t reallocs;	/* steps made by realloc */
	uint64_t copies;	/* steps made by a new block and freeing the old */
	uint64_t in_place;	/* reallocs that kept the address */
	uint64_t distinct_sizes;	/* capped at FRAG_DISTINCT_MAX */
	double mean_ratio;	/* geometric mean of new/old */
	uint64_t max_size;
};

#define FRAG_DISTINCT_MAX 64
#define FRAG_MIN_GROWS 8	/* fewer steps: no verdict */

struct frag_pool {
	uint64_t id;
	char *label;		/* NULL when none was given */
	int alive;		/* not destroyed at the chosen moment */
	struct frag_occ occ;
};

struct frag_result {
	uint64_t page_size;
	uint64_t at;		/* the chosen moment */
	struct frag_ladder ladder;	/* at the chosen moment */
	struct frag_occ heap;		/* at the chosen moment */
	uint64_t requests[FRAG_NLOG2];	/* heap allocations up to the moment, by size */
	/* the peak of live heap bytes, and the ladder then */
	struct frag_ladder peak;
	/* the highest RSS sampled, and the live bytes then */
	uint64_t peak_rss_bytes, peak_rss_time, peak_rss_requested, peak_rss_usable;
	struct frag_row *rows;	/* every sample, in time order */
	size_t nrows;
	struct frag_growth *growth;	/* exact-fit first, then by steps */
	size_t ngrowth;
	struct frag_pool *pools;	/* pools alive at the moment, or with live blocks */
	size_t npools;
};

struct frag;

/* Registers an observer on 'r' (before any step).  NULL with errno set. */
struct frag *frag_new(struct replay *r);
void frag_free(struct frag *f);
/*
 * Takes the figures of "the chosen moment" 'at' from the replay's state now
 * (after replay_run_until(at), or at the end).  0, or -ENOMEM.
 */
int frag_snapshot(struct frag *f, uint64_t at);
/* After the replay reached the end: picks samples, ranks growth sites.  0 or -ENOMEM. */
int frag_finish(struct frag *f);
const struct frag_result *frag_result(const struct frag *f);
/* A site's allocations by size class (FRAG_NCLASS counters), NULL when it had none. */
const uint64_t *frag_site_classes(const struct frag *f, uint32_t stack);
/*
 * The heaps so far: sorted, disjoint ranges [lo[i], hi[i]) of addresses that
 * held malloc blocks; returns their number.  Valid until the replay's next
 * step.  With frag_block_mmapped() a caller can draw the heaps' pages.
 */
size_t frag_heaps(const struct frag *f, const uint64_t **lo, const uint64_t **hi);
/* Whether glibc served a live malloc block with a mapping of its own (rule above). */
int frag_block_mmapped(const struct frag *f, const struct replay_block *b);

#endif
