/* timeseries.h - live bytes over time: heap, RSS, allocator and sites at fixed moments */
#ifndef HT_TIMESERIES_H
#define HT_TIMESERIES_H

#include <stdint.h>
#include <stddef.h>

#include "cli.h"
#include "dump.h"
#include "replay.h"

/*
 * Two streaming passes over a dump, each bounded in memory:
 *
 *   ts_scan()   replays it once to learn its length, its markers, the peak
 *               and which sites reached the most live bytes (the ones whose
 *               curves a timeline draws);
 *   ts_build()  replays it again and stops at 'buckets' evenly spaced
 *               moments of the window [from, to] to sample the heap, the
 *               last RSS / mallinfo2 sample, and every site's live bytes.
 *
 * Memory: the replay itself, 'buckets' points, 'buckets' values for each of
 * the few drawn sites, and a fixed-size record per site (growth fits and
 * temporary counts) - never anything per event.  Sampling all sites at a
 * bucket costs one walk over the site list, so a dump with tens of
 * thousands of sites and a few hundred buckets stays cheap.
 *
 * A dump still being written is read up to its last complete frame (see
 * livedump.h); the second pass stops at the first pass's end, so both see
 * the same events even though the file grew in between.
 */

struct ts_mark {
	uint64_t time;
	char *label;
};

#define TS_MAX_MARKS 65536	/* markers kept; later ones are counted only */

struct ts_scan {
	int live;		/* the writer still runs: read to its last complete frame */
	int end_how;		/* enum htr_end, 0 when the dump has no end record */
	uint64_t end;		/* time of the last event read */
	uint64_t peak_time, peak_live_bytes;
	uint64_t allocations;
	struct ts_mark *marks;	/* in time order */
	size_t nmarks, capmarks;
	size_t marks_dropped;
	uint32_t *top;		/* stack ids by their own highest live bytes, most first */
	size_t ntop;
};

/*
 * Pass one over 'path', keeping the 'top' sites with the highest live bytes
 * of their own.  0, or -1 after printing why (unreadable dump, memory).
 */
int ts_scan(struct ts_scan *s, const char *path, size_t top);
void ts_scan_release(struct ts_scan *s);

/*
 * Turns 'peak', 'end', 'start' and marker names into dump times using the
 * scan (cli_parse_time() parsed them).  A time past the end is clamped to
 * the end with a warning.  0, or -1 after printing which marker is missing.
 */
int ts_resolve(const struct ts_scan *s, const char *path, struct cli_time *t,
	       size_t n);

/*
 * A least-squares fit of y = a + b x, as means and co-moments: n, the means
 * of x and y, and the sums of (x - mx)^2, (x - mx)(y - my), (y - my)^2.
 */
struct ts_fit {
	double n, mx, my, cxx, cxy, cyy;
};

/* b; 0 with fewer than two distinct x */
double ts_fit_slope(const struct ts_fit *f);
/* R^2 of the fit in [0, 1]; 0 when y never changes or n < 3 */
double ts_fit_r2(const struct ts_fit *f);

/* Raw sums of one fit while sampling (x as bucket indices, y shifted). */
struct ts_sums {
	double n, sx, sxx, sy, sxy, syy;
};

struct ts_config {
	unsigned buckets;	/* sampling moments, >= 2 */
	uint64_t from, to;	/* window; to = 0 means the scan's end */
	uint64_t temporary_ns;	/* a block freed within this time is temporary */
	uint64_t temporary_allocs;	/* ... or with at most this many allocations in between */
};

struct ts_point {
	uint64_t time;		/* the moment sampled: the end of its bucket */
	uint64_t heap_live_bytes;	/* live heap at 'time' */
	uint64_t heap_max_bytes;	/* highest live heap during the bucket */
	uint64_t allocations;	/* allocations so far (heap and pools) */
	int sampled;		/* the three below come from a sample at or before 'time' */
	uint64_t rss_bytes;
	uint64_t allocator_bytes;	/* mallinfo2 arena + hblkhd: what malloc holds */
	uint64_t allocator_in_use_bytes;	/* mallinfo2 uordblks + hblkhd */
	const char *mark;	/* label of the first marker in the bucket, or NULL */
};

#define TS_SKETCH 32	/* points of the coarse curve kept for every site */

/* What the second pass learned about one site, over the window. */
struct ts_site {
	uint32_t stack;
	int present;		/* the site allocated before the window's end */
	uint64_t first;		/* its first allocation (dump time) */
	uint64_t start;		/* max(first, window start): where its fits begin */
	uint64_t late_start;	/* the last third of [start, to] */
	uint64_t last_bytes;	/* live bytes at the last sample */
	uint64_t max_sample_bytes;	/* highest sampled live bytes */
	uint64_t samples;
	double late_sum;	/* sum of the live bytes sampled in the last third */
	uint64_t window_allocs;	/* its allocations inside the window */
	uint64_t temp_time;	/* of those freed in the window: within temporary_ns */
	uint64_t temp_allocs;	/* ... with <= temporary_allocs allocations in between */
	uint64_t *series;	/* live bytes per bucket, for the drawn sites only */
	float sketch[TS_SKETCH];	/* live bytes at TS_SKETCH moments, for every site */
	/*
	 * Sampling state.  A site's live bytes stay the same from one sample
	 * to the next unless one of its blocks came or went, so each site
	 * keeps a run - the value 'run_y' held since bucket 'run_k' - and the
	 * sums take a whole run at once when it ends.  A bucket costs work
	 * only for the sites that changed in it.
	 */
	uint64_t run_y, y0;	/* y0: first sample, subtracted for precision */
	unsigned run_k, late_k;	/* late_k: first bucket of the last third */
	int dirty;
	struct ts_sums all, lat;	/* x = bucket index: all samples, the last third */
	double sa, saa, say;	/* x = allocations of the program since the window start */
};

struct timeseries {
	struct dump *d;		/* open until ts_release(): sites are printed from it */
	struct replay *r;	/* at the window's end */
	int live;
	struct ts_config cfg;	/* with 'to' resolved */
	struct ts_point *pts;	/* cfg.buckets */
	unsigned npts;
	struct ts_site *sites;	/* indexed by stack id; 'present' tells which are real */
	uint32_t nsites;	/* length of 'sites' */
	struct ts_site **drawn;	/* the scan's top sites, in its order */
	size_t ndrawn;
	uint64_t window_allocs;	/* allocations of the program in the window */
	uint64_t window_start_allocs;
	uint64_t *series_block;	/* the drawn sites' series, one block */
	uint32_t *dirty;	/* sites changed since the last sample */
	size_t ndirty, capdirty;
	double *acum, *acum2;	/* prefix sums of pts[].allocations (from the window start) and squares */
};

/*
 * Pass two over 'path' with the scan's results.  0, or -1 after printing
 * why.  The caller releases with ts_release() in either case.
 */
int ts_build(struct timeseries *ts, const char *path,
	     const struct ts_scan *scan, const struct ts_config *cfg);
void ts_release(struct timeseries *ts);

/*
 * A site's fits, from its samples: live bytes against seconds, against the
 * allocations of the program, and against seconds in the last third of its
 * window only.  Any pointer may be NULL.
 */
void ts_site_fits(const struct timeseries *ts, const struct ts_site *s,
		  struct ts_fit *by_time, struct ts_fit *by_allocs,
		  struct ts_fit *late);

/* The replay's figures of a site (allocations, max_live_bytes ...) at the window's end. */
const struct site_stats *ts_site_stats(struct timeseries *ts,
				       const struct ts_site *s);

/*
 * Growth classes (heaptrail growth).  Each site's live bytes are sampled at
 * the window's moments from its first allocation (or the window's start) to
 * the end, and fitted with a least-squares line: slope in bytes per second,
 * and R^2 for how well a straight rise explains the curve.
 *
 *   growing    rises steadily to the end: seen over at least a tenth of the
 *              window (a site born just before the end cannot show a
 *              trend), positive slope, R^2 >= 0.6, the fitted rise is at
 *              least half of its highest sample (a big plateau with a small
 *              wobble is not growth), and the last third of its window
 *              still rises at >= half the slope (a cache that filled up and
 *              stopped is not growth);
 *   transient  its blocks do not stay: in the last third it holds less than
 *              a tenth of its highest sample, or most of its allocations
 *              are temporaries (freed within cfg.temporary_ns);
 *   bounded    the rest: it rose, then stayed (caches, pools, tables filled
 *              at start-up).
 *
 * A churning site never shows a steady rise (its samples hover around a
 * few blocks, R^2 near 0), so it cannot be growing however many millions
 * of temporaries it makes.
 */
enum ts_class { TS_GROWING, TS_BOUNDED, TS_TRANSIENT, TS_NCLASSES };

struct ts_growth {
	enum ts_class cls;
	double bps;		/* bytes per second */
	double per1k;		/* bytes per 1000 allocations of the program */
	double r2;
	double late_bps;
	double late_mean;	/* mean live bytes in the last third */
	double score;		/* ranks growing sites: bps * r2 */
};

void ts_classify(const struct timeseries *ts, const struct ts_site *s,
		 struct ts_growth *g);
/* "growing", "bounded", "transient" */
const char *ts_class_name(enum ts_class c);

#endif
