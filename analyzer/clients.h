/* clients.h - per-client figures and residue after disconnect, from one replay */
#ifndef HT_CLIENTS_H
#define HT_CLIENTS_H

#include <stdint.h>
#include <stddef.h>

#include "replay.h"

/*
 * A client is a CLIENT_BEGIN .. CLIENT_END span of the dump (a connection,
 * a session, a thread); each heap block belongs to the client its thread
 * worked for when it was allocated.  A client seen only through allocations
 * (its begin was in another image, before a fork) starts at its first one.
 * An id reused after its end starts a new client; a block belongs to the
 * latest client with its id that began before the block was allocated.
 *
 * Residue of a client: the bytes of its blocks allocated no later than its
 * end plus the grace period, still live when the dump ends.  Only clients
 * that are "judged" have residue: they ended, and the grace period ran out
 * before the dump ended or the process exited normally (nothing is freed
 * after exit).  A client still connected at the end has none.
 *
 * Trend of a site: after each disconnect the analysis samples the live
 * bytes the site holds for clients (connected, or gone within their grace),
 * as a function of the number of disconnected clients k.  A leak grows
 * linearly in k; a shared cache plateaus.  'grows' when the mean of the
 * last quarter of the samples is at least 1.5 times the mean of the second
 * quarter (7/3 for a straight line, 1 for a level), 'bounded' when it is
 * not, 'unknown' with fewer than CLIENTS_TREND_MIN disconnects.
 *
 * Heap blocks only: blocks of custom pools (heaptrail_pool_alloc) are not
 * counted, their pools' own malloc'd chunks are.
 */

#define CLIENTS_TREND_MIN 4
#define CLIENTS_NO_END UINT64_MAX

enum clients_trend { TREND_UNKNOWN = 0, TREND_GROWS, TREND_BOUNDED };

struct client_info {
	uint64_t id;
	char *label;		/* NULL when none was given */
	uint64_t begin, end;	/* dump times; end CLIENTS_NO_END while connected */
	uint64_t allocations;
	uint64_t allocated_bytes;
	uint64_t live_bytes;	/* at the end of the dump */
	uint64_t peak_bytes;	/* its own highest live bytes */
	uint64_t residue_bytes, residue_blocks;
	int judged;
	uint32_t prev;		/* earlier client with the same id, or UINT32_MAX */
};

struct client_site {
	uint32_t stack;
	uint64_t residue_bytes, residue_blocks;
	uint64_t clients;	/* judged clients with residue here */
	int trend;		/* enum clients_trend */
	/* private: the samples behind the trend (see clients.c) */
	int64_t held_bytes;
	uint32_t filled;
	uint64_t *samples;
};

struct clients_process {
	int have_before;
	uint64_t before_time, before_bytes;	/* live heap at the first client */
	int have_after;
	uint64_t after_time, after_bytes;	/* at the last disconnect + grace */
	int after_is_end;		/* the dump ended before the grace ran out */
	uint64_t attributed_bytes;	/* then: live bytes of disconnected clients */
	uint64_t connected_bytes;	/* then: live bytes of clients still connected */
	int64_t growth_bytes;		/* after - before */
	int64_t unattributed_bytes;	/* growth - attributed - connected */
};

struct clients {
	uint64_t grace;			/* ns */
	struct client_info *v;		/* in order of begin */
	size_t n;
	size_t ended, judged, connected;	/* at the end of the dump */
	uint64_t residue_bytes;		/* total over judged clients */
	uint64_t residue_mean, residue_median, residue_max;	/* over judged clients */
	struct client_site **sites;	/* with residue, most first (after clients_finish) */
	size_t nsites;
	struct clients_process proc;
	uint64_t duration;
	int exited;			/* the process exited normally */
	/* private state of the pass */
	struct clients_state *st;
};

/*
 * Registers an observer on 'r' (before the replay runs).  NULL with errno
 * set when out of memory or the observer table is full.
 */
struct clients *clients_new(struct replay *r, uint64_t grace_ns);
/*
 * After the replay reached the end: judges the clients, adds up residue per
 * client and per site, fits the trends.  0, or -ENOMEM.
 */
int clients_finish(struct clients *c, struct replay *r);
void clients_free(struct clients *c);

const char *clients_trend_name(int trend);	/* "grows", "bounded", "unknown" */

#endif
