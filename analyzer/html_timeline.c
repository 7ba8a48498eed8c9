/* html_timeline.c - the HTML report's timeline and each site's growth, from the timeseries passes */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "html_internal.h"

/* The temporaries rule of 'heaptrail growth' (its defaults). */
#define TEMPORARY_NS 10000000ull
#define TEMPORARY_ALLOCS 16

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

static void points(struct json *j, const struct timeseries *ts)
{
	unsigned k;

	/* columns: one array per curve, as the charts read them */
	json_key(j, "time_seconds");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		json_double(j, seconds(ts->pts[k].time));
	json_arr_end(j);
	json_key(j, "heap_live_bytes");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		json_u64(j, ts->pts[k].heap_live_bytes);
	json_arr_end(j);
	json_key(j, "heap_max_bytes");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		json_u64(j, ts->pts[k].heap_max_bytes);
	json_arr_end(j);
	json_key(j, "rss_bytes");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		ts->pts[k].sampled ? json_u64(j, ts->pts[k].rss_bytes) : json_null(j);
	json_arr_end(j);
	json_key(j, "allocator_bytes");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		ts->pts[k].sampled ? json_u64(j, ts->pts[k].allocator_bytes) : json_null(j);
	json_arr_end(j);
	json_key(j, "allocator_in_use_bytes");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		ts->pts[k].sampled ? json_u64(j, ts->pts[k].allocator_in_use_bytes) :
				     json_null(j);
	json_arr_end(j);
	json_key(j, "allocations");
	json_arr_begin(j);
	for (k = 0; k < ts->npts; k++)
		json_u64(j, ts->pts[k].allocations);
	json_arr_end(j);
}

/* Each site's growth class and rate, kept by stack id for the sites table. */
static int keep_growth(struct html *h, const struct timeseries *ts)
{
	uint32_t i;

	h->ngrowth = ts->nsites;
	h->growth = calloc(ts->nsites + 1, sizeof(*h->growth));
	if (!h->growth)
		return -ENOMEM;
	for (i = 0; i < ts->nsites; i++) {
		const struct ts_site *s = &ts->sites[i];
		struct html_growth *g = &h->growth[i];
		struct ts_growth t;

		/* as 'heaptrail growth': a site that did nothing has nothing to say */
		if (!s->present || (!s->window_allocs && !s->max_sample_bytes))
			continue;
		ts_classify(ts, s, &t);
		g->present = 1;
		g->cls = (uint8_t)t.cls;
		g->bps = t.bps;
		g->per1k = t.per1k;
		g->r2 = t.r2;
		g->last_bytes = s->last_bytes;
		h->growth_counts[t.cls]++;
	}
	return 0;
}

int html_json_timeline(struct html *h)
{
	struct ts_scan scan;
	struct timeseries ts;
	struct ts_config cfg;
	struct json *j = h->j;
	size_t i;
	int rc = -1;

	memset(&scan, 0, sizeof(scan));
	memset(&ts, 0, sizeof(ts));
	memset(&cfg, 0, sizeof(cfg));
	if (ts_scan(&scan, h->path, h->opt.series) < 0)
		goto out;
	cfg.buckets = h->opt.points;
	cfg.temporary_ns = TEMPORARY_NS;
	cfg.temporary_allocs = TEMPORARY_ALLOCS;
	if (ts_build(&ts, h->path, &scan, &cfg) < 0)
		goto out;
	if (keep_growth(h, &ts) < 0)
		goto oom;

	json_key(j, "timeline");
	json_obj_begin(j);
	json_kv_double(j, "from_seconds", seconds(ts.cfg.from));
	json_kv_double(j, "to_seconds", seconds(ts.cfg.to));
	json_kv_double(j, "peak_time_seconds", seconds(scan.peak_time));
	json_kv_u64(j, "peak_live_bytes", scan.peak_live_bytes);
	json_key(j, "live");
	json_bool(j, scan.live);
	points(j, &ts);
	json_key(j, "markers");
	json_arr_begin(j);
	for (i = 0; i < scan.nmarks; i++) {
		json_obj_begin(j);
		json_kv_str(j, "label", scan.marks[i].label);
		json_kv_double(j, "time_seconds", seconds(scan.marks[i].time));
		json_obj_end(j);
	}
	json_arr_end(j);
	json_kv_u64(j, "markers_dropped", scan.marks_dropped);
	json_key(j, "sites");
	json_arr_begin(j);
	for (i = 0; i < ts.ndrawn; i++) {
		const struct ts_site *s = ts.drawn[i];
		unsigned k;

		if (html_want_site(h, s->stack) < 0)
			goto oom;
		json_obj_begin(j);
		json_kv_u64(j, "site", s->stack);
		json_key(j, "live_bytes");
		json_arr_begin(j);
		for (k = 0; k < ts.npts; k++)
			json_u64(j, s->series[k]);
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);

	json_key(j, "growth");
	json_obj_begin(j);
	json_kv_double(j, "temporary_ms", (double)TEMPORARY_NS / 1e6);
	json_key(j, "counts");
	json_obj_begin(j);
	for (i = 0; i < TS_NCLASSES; i++)
		json_kv_u64(j, ts_class_name((enum ts_class)i), h->growth_counts[i]);
	json_obj_end(j);
	json_obj_end(j);
	rc = 0;
	goto out;
oom:
	cli_error("out of memory");
out:
	ts_release(&ts);
	ts_scan_release(&scan);
	return rc;
}
