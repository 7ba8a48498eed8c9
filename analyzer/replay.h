/* replay.h - replays a dump's events into a live map and per-site figures */
#ifndef HT_REPLAY_H
#define HT_REPLAY_H

#include <stdint.h>
#include <stddef.h>

#include "dump.h"

/*
 * One streaming pass: every event from dump_next() updates the live map
 * (pointer -> block) and the figures of the block's site (its stack id).
 * Memory grows with the live set and the number of distinct stacks, never
 * with the number of events.
 *
 * Analyses that need more than the totals (timeline, growth, clients, frag)
 * register an observer: it sees each event after the replay applied it, with
 * the block a free released (its size, site, client, allocation time).
 */

struct replay_block {
	uint64_t ptr;
	uint64_t size;
	uint64_t usable;
	uint64_t time;		/* allocation time */
	uint32_t stack;
	uint64_t client;	/* 64-bit like dump_event.client */
	uint32_t tid;
	uint8_t api;
	uint8_t reach;		/* enum htr_reach from the last scan, 0xff = none */
};

struct site_stats {
	uint32_t stack;
	uint64_t allocations;	/* allocation events (realloc counts as one) */
	uint64_t allocated_bytes;
	uint64_t frees;
	uint64_t live_bytes;	/* now (at the end: leaked) */
	uint64_t live_blocks;
	uint64_t peak_bytes;	/* its live bytes at the moment of the global peak */
	uint64_t max_live_bytes;	/* its own highest live bytes */
	uint64_t temporary;	/* allocations freed with no other allocation in between */
	uint64_t mismatches;	/* blocks freed through the wrong family */
	uint64_t reach_bytes[4];	/* leaked bytes by enum htr_reach (after a scan) */
	uint64_t reach_blocks[4];
	void *user;		/* free for an analysis to hang data on */
};

struct replay_totals {
	uint64_t allocations, frees, reallocs;
	uint64_t allocated_bytes;
	uint64_t live_bytes, live_blocks;	/* now (at the end: leaked) */
	uint64_t peak_live_bytes, peak_time;
	uint64_t peak_rss_bytes, peak_rss_time;
	uint64_t last_rss_bytes;
	uint64_t temporary;
	uint64_t unknown_frees;	/* frees of blocks the dump never saw allocated */
	uint64_t mismatches;
	uint64_t lost_events;
	int lost_reason;
	uint64_t duration;	/* time of the last event */
	int end_how, end_status;	/* from the end record, 0 when none */
	int have_reach;		/* a reachability scan was replayed */
	uint64_t recorded_events;	/* heap events in the dump (allocations and frees
					 * as recorded: a sampled dump's counts above are
					 * estimates, this is what it holds) */
	/*
	 * Custom-allocator blocks (heaptrail_pool_alloc): they count in their
	 * sites' figures but not in the heap totals above, whose bytes already
	 * include the pools' own malloc'd memory.
	 */
	uint64_t pool_allocations, pool_frees;
	uint64_t pool_live_bytes, pool_live_blocks;
};

struct replay;

/*
 * 'freed' is the block a DUMP_FREE or DUMP_POOL_FREE released (NULL for a
 * free of an unknown pointer); for the DUMP_ALLOC half of a realloc it is the
 * old block the realloc released just before (its size is the old size).  A POOL_DESTROY first releases each of the
 * pool's live blocks as a synthetic DUMP_POOL_FREE.  'freed' is valid during
 * the call only.
 */
typedef void (*replay_observer_fn)(void *ctx, struct replay *r,
				   const struct dump_event *ev,
				   const struct replay_block *freed);

/* NULL with errno set on allocation failure. */
struct replay *replay_new(struct dump *d);
void replay_free(struct replay *r);
/* At most 16 observers; returns 0 or -ENOSPC. */
int replay_observe(struct replay *r, replay_observer_fn fn, void *ctx);

/*
 * Process one event: 1 when one was processed (copied to *ev if non-NULL),
 * 0 at the end of the dump, -1 on a hard read error (dump_error()).  With
 * ev NULL a step may process a few (up to 16) allocations and frees at once.
 */
int replay_step(struct replay *r, struct dump_event *ev);
/* Replay to the end (0) or until the first event later than 'time' (0). */
int replay_run(struct replay *r);
int replay_run_until(struct replay *r, uint64_t time);

/* 1 once replay_step() / replay_run*() returned 0 for the end of the dump. */
int replay_at_end(const struct replay *r);
/* Why a step returned -1: the reader's error or the replay's own (memory). */
const char *replay_error(const struct replay *r);

struct dump *replay_dump(struct replay *r);
const struct replay_totals *replay_totals(const struct replay *r);

/* The site of a stack id, created on first use; never NULL for a seen id. */
struct site_stats *replay_site(struct replay *r, uint32_t stack);
/* All sites seen so far (pointer array, valid until the next step). */
struct site_stats **replay_sites(struct replay *r, size_t *n);

/* Valid until the next lookup or step; heap blocks only (not pool blocks). */
const struct replay_block *replay_lookup(const struct replay *r, uint64_t ptr);
/* Calls fn for every live block; stops early when fn returns non-zero. */
int replay_each_block(const struct replay *r,
		      int (*fn)(void *ctx, const struct replay_block *b),
		      void *ctx);

#endif
