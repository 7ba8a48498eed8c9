/* timeseries.c - live bytes over time: heap, RSS, allocator and sites at fixed moments */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "livedump.h"
#include "timeseries.h"

/* ---- least squares ---------------------------------------------------- */

double ts_fit_slope(const struct ts_fit *f)
{
	if (f->n < 2 || f->cxx <= 0)
		return 0;
	return f->cxy / f->cxx;
}

double ts_fit_r2(const struct ts_fit *f)
{
	double r2;

	if (f->n < 3 || f->cxx <= 0 || f->cyy <= 0)
		return 0;
	r2 = f->cxy * f->cxy / (f->cxx * f->cyy);
	return r2 > 1 ? 1 : r2 < 0 ? 0 : r2;
}

/* ---- pass one: length, markers, peak, top sites ---------------------- */

static void scan_observer(void *ctx, struct replay *r,
			  const struct dump_event *ev,
			  const struct replay_block *freed)
{
	struct ts_scan *s = ctx;
	struct ts_mark *m;

	(void)r;
	(void)freed;
	if (ev->kind != DUMP_MARK)
		return;
	if (s->nmarks == TS_MAX_MARKS) {
		s->marks_dropped++;
		return;
	}
	if (s->nmarks == s->capmarks) {
		size_t n = s->capmarks ? s->capmarks * 2 : 64;
		struct ts_mark *nm = realloc(s->marks, n * sizeof(*nm));

		if (!nm) {
			s->marks_dropped++;
			return;
		}
		s->marks = nm;
		s->capmarks = n;
	}
	m = &s->marks[s->nmarks];
	m->time = ev->time;
	m->label = strdup(ev->text ? ev->text : "");
	if (!m->label) {
		s->marks_dropped++;
		return;
	}
	s->nmarks++;
}

static int by_own_peak(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;

	if (a->max_live_bytes != b->max_live_bytes)
		return a->max_live_bytes < b->max_live_bytes ? 1 : -1;
	if (a->allocated_bytes != b->allocated_bytes)
		return a->allocated_bytes < b->allocated_bytes ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

static int pick_top(struct ts_scan *s, struct replay *r, size_t top)
{
	struct site_stats **all, **v;
	size_t n, i, m = 0;

	all = replay_sites(r, &n);
	v = malloc((n + 1) * sizeof(*v));
	if (!v)
		return -1;
	for (i = 0; i < n; i++)
		if (all[i]->allocations && all[i]->max_live_bytes)
			v[m++] = all[i];
	qsort(v, m, sizeof(*v), by_own_peak);
	if (m > top)
		m = top;
	s->top = malloc((m + 1) * sizeof(*s->top));
	if (!s->top) {
		free(v);
		return -1;
	}
	for (i = 0; i < m; i++)
		s->top[i] = v[i]->stack;
	s->ntop = m;
	free(v);
	return 0;
}

int ts_scan(struct ts_scan *s, const char *path, size_t top)
{
	struct replay *r = NULL;
	struct dump *d;
	const struct replay_totals *t;
	int rc = -1;

	memset(s, 0, sizeof(*s));
	d = live_open(path, &s->live);
	if (!d)
		return -1;
	r = replay_new(d);
	if (!r || replay_observe(r, scan_observer, s) < 0) {
		cli_error("out of memory");
		goto out;
	}
	if (cli_replay_run(r) < 0)
		goto out;
	t = replay_totals(r);
	s->end = t->duration;
	s->end_how = t->end_how;
	/* its end record read: finished, though its process may hold the file a moment longer */
	if (s->end_how)
		s->live = 0;
	s->peak_time = t->peak_time;
	s->peak_live_bytes = t->peak_live_bytes;
	s->allocations = t->allocations + t->pool_allocations;
	if (pick_top(s, r, top) < 0) {
		cli_error("out of memory");
		goto out;
	}
	rc = 0;
out:
	replay_free(r);
	dump_close(d);
	return rc;
}

void ts_scan_release(struct ts_scan *s)
{
	size_t i;

	for (i = 0; i < s->nmarks; i++)
		free(s->marks[i].label);
	free(s->marks);
	free(s->top);
	memset(s, 0, sizeof(*s));
}

int ts_resolve(const struct ts_scan *s, const char *path, struct cli_time *t,
	       size_t n)
{
	size_t i, k;
	int rc = 0;

	for (i = 0; i < n; i++) {
		unsigned seen = 0;

		switch (t[i].kind) {
		case CLI_TIME_START:
			t[i].ns = 0;
			break;
		case CLI_TIME_END:
			t[i].ns = s->end;
			break;
		case CLI_TIME_PEAK:
			t[i].ns = s->peak_time;
			break;
		case CLI_TIME_MARK:
			for (k = 0; k < s->nmarks; k++) {
				if (strcmp(s->marks[k].label, t[i].mark))
					continue;
				if (++seen == t[i].occurrence)
					break;
			}
			if (k < s->nmarks) {
				t[i].ns = s->marks[k].time;
				break;
			}
			if (seen)
				cli_error("marker '%s' occurs %u time%s in '%s', not %u",
					  t[i].mark, seen, seen == 1 ? "" : "s",
					  path, t[i].occurrence);
			else if (s->live)
				cli_error("no marker '%s' in '%s' yet (its process still runs; the dump was read up to %s)",
					  t[i].mark, path, cli_at(s->end));
			else
				cli_error("no marker '%s' in '%s' (times are seconds like 2.5, 'peak', 'end' or marker names)",
					  t[i].mark, path);
			rc = -1;
			continue;
		default:
			if (t[i].ns > s->end) {
				cli_warn("%s is after the end of '%s' (%s): using the end",
					 cli_at(t[i].ns), path, cli_at(s->end));
				t[i].ns = s->end;
			}
		}
		t[i].resolved = 1;
	}
	return rc;
}

/* ---- pass two: sampling --------------------------------------------- */

/* The observer's state during ts_build(). */
struct build {
	struct timeseries *ts;
	int in_window;
	uint64_t cur_max;	/* highest live heap since the last sample */
	int have_sample;
	struct dump_sample sample;
	/* times of the last temporary_allocs + 1 allocations, a ring */
	uint64_t *ring;
	uint64_t ring_cap, pushes;
	int oom;
};

/* Notes that a site's live bytes changed since the last sample. */
static void mark_dirty(struct build *b, struct ts_site *s)
{
	struct timeseries *ts = b->ts;

	if (s->dirty)
		return;
	if (ts->ndirty == ts->capdirty) {
		size_t n = ts->capdirty ? ts->capdirty * 2 : 1024;
		uint32_t *nd = realloc(ts->dirty, n * sizeof(*nd));

		if (!nd) {
			b->oom = 1;
			return;
		}
		ts->dirty = nd;
		ts->capdirty = n;
	}
	s->dirty = 1;
	ts->dirty[ts->ndirty++] = s->stack;
}

/* The record of 'stack', grown on demand; NULL when out of memory. */
static struct ts_site *site_at(struct timeseries *ts, uint32_t stack)
{
	if (stack >= ts->nsites) {
		uint32_t n = ts->nsites ? ts->nsites : 1024;
		struct ts_site *ns;

		while (n <= stack)
			n *= 2;
		ns = realloc(ts->sites, (size_t)n * sizeof(*ns));
		if (!ns)
			return NULL;
		memset(ns + ts->nsites, 0, (size_t)(n - ts->nsites) * sizeof(*ns));
		ts->sites = ns;
		ts->nsites = n;
	}
	ts->sites[stack].stack = stack;
	return &ts->sites[stack];
}

static void note_temporary(struct build *b, const struct dump_event *ev,
			   const struct replay_block *blk)
{
	const struct ts_config *c = &b->ts->cfg;
	struct ts_site *s = site_at(b->ts, blk->stack);

	if (!s) {
		b->oom = 1;
		return;
	}
	mark_dirty(b, s);
	if (!b->in_window)
		return;
	if (ev->time >= blk->time && ev->time - blk->time <= c->temporary_ns)
		s->temp_time++;
	/*
	 * The ring holds the times of the last K+1 allocations: when its oldest
	 * is not after the block's own, at most K came after the block.
	 */
	if (b->pushes < b->ring_cap ||
	    b->ring[b->pushes % b->ring_cap] <= blk->time)
		s->temp_allocs++;
}

static void build_observer(void *ctx, struct replay *r,
			   const struct dump_event *ev,
			   const struct replay_block *freed)
{
	struct build *b = ctx;
	struct ts_site *s;
	uint64_t live;

	switch (ev->kind) {
	case DUMP_ALLOC:
		live = replay_totals(r)->live_bytes;
		if (live > b->cur_max)
			b->cur_max = live;
		/* fall through */
	case DUMP_POOL_ALLOC:
		s = site_at(b->ts, ev->stack < (1u << 28) ? ev->stack : HTR_STACK_NONE);
		if (!s) {
			b->oom = 1;
			return;
		}
		if (!s->first)
			s->first = ev->time ? ev->time : 1;
		mark_dirty(b, s);
		if (b->in_window)
			s->window_allocs++;
		b->ring[b->pushes % b->ring_cap] = ev->time;
		b->pushes++;
		break;
	case DUMP_FREE:
	case DUMP_POOL_FREE:
		/* a realloc moving its block is not a temporary allocation */
		if (freed && (ev->kind == DUMP_POOL_FREE || ev->api != HTR_API_REALLOC))
			note_temporary(b, ev, freed);
		else if (freed && (s = site_at(b->ts, freed->stack)))
			mark_dirty(b, s);
		break;
	case DUMP_SAMPLE:
		b->sample = ev->sample;
		b->have_sample = 1;
		break;
	default:
		break;
	}
}

/* The moment bucket k samples. */
static uint64_t bucket_time(const struct timeseries *ts, unsigned k)
{
	uint64_t span = ts->cfg.to - ts->cfg.from;

	return ts->cfg.from + (uint64_t)((unsigned __int128)span * (k + 1) / ts->npts);
}

/* sum of k for k in [0, m) and of k^2 */
static double sum_k(double m)
{
	return m * (m - 1) / 2;
}

static double sum_k2(double m)
{
	return (m - 1) * m * (2 * m - 1) / 6;
}

/* Adds the samples of buckets [k1, k2), all of value y, to the sums. */
static void sums_add(struct ts_sums *u, const struct ts_site *s,
		     unsigned k1, unsigned k2)
{
	double n = k2 - k1, y = (double)s->run_y - (double)s->y0;
	double sx = sum_k(k2) - sum_k(k1);

	u->n += n;
	u->sx += sx;
	u->sxx += sum_k2(k2) - sum_k2(k1);
	u->sy += y * n;
	u->sxy += y * sx;
	u->syy += y * y * n;
}

/* The run of value s->run_y ends before bucket k: account for it. */
static void run_end(struct timeseries *ts, struct ts_site *s, unsigned k)
{
	unsigned k1 = s->run_k, j, slot;
	double sa;

	if (k <= k1)
		return;
	sums_add(&s->all, s, k1, k);
	sa = ts->acum[k] - ts->acum[k1];
	s->sa += sa;
	s->saa += ts->acum2[k] - ts->acum2[k1];
	s->say += ((double)s->run_y - (double)s->y0) * sa;
	if (k > s->late_k) {
		unsigned l1 = k1 > s->late_k ? k1 : s->late_k;

		sums_add(&s->lat, s, l1, k);
		s->late_sum += (double)s->run_y * (k - l1);
	}
	s->samples += k - k1;
	if (s->run_y > s->max_sample_bytes)
		s->max_sample_bytes = s->run_y;
	if (s->series)
		for (j = k1; j < k; j++)
			s->series[j] = s->run_y;
	/* the last bucket falling into each sketch slot stands for it */
	for (slot = (unsigned)((size_t)k1 * TS_SKETCH / ts->npts);
	     slot <= (unsigned)((size_t)(k - 1) * TS_SKETCH / ts->npts); slot++) {
		size_t last = ((size_t)(slot + 1) * ts->npts + TS_SKETCH - 1) / TS_SKETCH - 1;

		if (last >= k1 && last < k)
			s->sketch[slot] = (float)s->run_y;
	}
	s->run_k = k;
}

/* The first bucket whose moment is at or after t (npts when none). */
static unsigned first_bucket_at(const struct timeseries *ts, uint64_t t)
{
	unsigned lo = 0, hi = ts->npts;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (bucket_time(ts, mid) >= t)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Bucket k was just filled: the sites that changed since the last one. */
static int sample_sites(struct build *b, unsigned k)
{
	struct timeseries *ts = b->ts;
	const struct ts_point *pt = &ts->pts[k];
	size_t i;

	for (i = 0; i < ts->ndirty; i++) {
		struct ts_site *s = &ts->sites[ts->dirty[i]];
		const struct site_stats *st = replay_site(ts->r, s->stack);

		s->dirty = 0;
		if (!st)
			return -1;
		if (!s->present) {
			s->present = 1;
			if (!s->first)	/* allocated before the replay could see it */
				s->first = pt->time;
			s->start = s->first > ts->cfg.from ? s->first : ts->cfg.from;
			if (s->start > pt->time)
				s->start = pt->time;
			s->late_start = s->start + (ts->cfg.to - s->start) / 3 * 2;
			s->late_k = first_bucket_at(ts, s->late_start);
			s->run_k = k;
			s->run_y = s->y0 = st->live_bytes;
			continue;
		}
		if (st->live_bytes == s->run_y)
			continue;
		run_end(ts, s, k);
		s->run_y = st->live_bytes;
	}
	ts->ndirty = 0;
	return 0;
}

/* Closes the last run of a site: its samples are complete. */
static void site_finish(struct timeseries *ts, struct ts_site *s)
{
	run_end(ts, s, ts->npts);
	s->last_bytes = s->run_y;
}

/* A fit from sums over bucket indices; x scaled by 'xs' (seconds per bucket). */
static void fit_from(struct ts_fit *f, const struct ts_sums *u, double y0, double xs)
{
	memset(f, 0, sizeof(*f));
	if (u->n <= 0)
		return;
	f->n = u->n;
	f->mx = xs * u->sx / u->n;
	f->my = y0 + u->sy / u->n;
	f->cxx = xs * xs * (u->sxx - u->sx * u->sx / u->n);
	f->cxy = xs * (u->sxy - u->sx * u->sy / u->n);
	f->cyy = u->syy - u->sy * u->sy / u->n;
}

void ts_site_fits(const struct timeseries *ts, const struct ts_site *s,
		  struct ts_fit *by_time, struct ts_fit *by_allocs,
		  struct ts_fit *late)
{
	double sec = (double)(ts->cfg.to - ts->cfg.from) / ts->npts / 1e9;
	const struct ts_sums *u = &s->all;
	struct ts_fit f;

	fit_from(&f, u, (double)s->y0, sec);
	if (by_time)
		*by_time = f;
	if (by_allocs) {
		*by_allocs = f;
		if (u->n > 0) {
			by_allocs->mx = s->sa / u->n;
			by_allocs->cxx = s->saa - s->sa * s->sa / u->n;
			by_allocs->cxy = s->say - s->sa * u->sy / u->n;
		}
	}
	if (late)
		fit_from(late, &s->lat, (double)s->y0, sec);
}

static void fill_point(struct build *b, unsigned k, uint64_t time)
{
	struct timeseries *ts = b->ts;
	const struct replay_totals *t = replay_totals(ts->r);
	struct ts_point *pt = &ts->pts[k];

	pt->time = time;
	pt->heap_live_bytes = t->live_bytes;
	pt->heap_max_bytes = b->cur_max > t->live_bytes ? b->cur_max : t->live_bytes;
	pt->allocations = t->allocations + t->pool_allocations;
	ts->acum[k + 1] = ts->acum[k] + (double)(pt->allocations - ts->window_start_allocs);
	ts->acum2[k + 1] = ts->acum2[k] +
			   (double)(pt->allocations - ts->window_start_allocs) *
			   (double)(pt->allocations - ts->window_start_allocs);
	pt->sampled = b->have_sample;
	if (b->have_sample) {
		pt->rss_bytes = b->sample.rss_bytes;
		pt->allocator_bytes = b->sample.arena_bytes + b->sample.mmap_bytes;
		pt->allocator_in_use_bytes = b->sample.in_use_bytes + b->sample.mmap_bytes;
	}
	b->cur_max = t->live_bytes;
}

/* 'p' (may be NULL): a progress line on a terminal, erased before an error */
static int replay_to(struct timeseries *ts, const char *path, uint64_t time,
		     struct cli_progress *p)
{
	if (replay_run_until(ts->r, time) >= 0) {
		if (p)
			cli_progress_update(p, dump_offset(ts->d), dump_file_size(ts->d));
		return 0;
	}
	if (p)
		cli_progress_end(p);
	cli_error("cannot read '%s': %s", path,
		  replay_error(ts->r) ? replay_error(ts->r) : "read error");
	return -1;
}

int ts_build(struct timeseries *ts, const char *path,
	     const struct ts_scan *scan, const struct ts_config *cfg)
{
	struct build b;
	unsigned k;
	size_t i, mk = 0;
	uint64_t *series = NULL;
	struct cli_progress prog;

	memset(ts, 0, sizeof(*ts));
	memset(&b, 0, sizeof(b));
	memset(&prog, 0, sizeof(prog));
	b.ts = ts;
	ts->cfg = *cfg;
	if (!ts->cfg.to || ts->cfg.to > scan->end)
		ts->cfg.to = scan->end;
	if (ts->cfg.from > ts->cfg.to)
		ts->cfg.from = ts->cfg.to;
	if (ts->cfg.buckets < 2)
		ts->cfg.buckets = 2;
	ts->npts = ts->cfg.buckets;
	ts->pts = calloc(ts->npts, sizeof(*ts->pts));
	ts->acum = calloc(ts->npts + 1, sizeof(*ts->acum));
	ts->acum2 = calloc(ts->npts + 1, sizeof(*ts->acum2));
	b.ring_cap = ts->cfg.temporary_allocs + 1;
	b.ring = malloc(b.ring_cap * sizeof(*b.ring));
	ts->drawn = calloc(scan->ntop + 1, sizeof(*ts->drawn));
	series = calloc((scan->ntop + 1) * ts->npts, sizeof(*series));
	if (!ts->pts || !ts->acum || !ts->acum2 || !b.ring || !ts->drawn || !series) {
		free(series);
		free(b.ring);
		cli_error("out of memory");
		return -1;
	}
	ts->series_block = series;
	for (i = 0; i < scan->ntop; i++) {
		struct ts_site *s = site_at(ts, scan->top[i]);

		if (!s) {
			free(b.ring);
			cli_error("out of memory");
			return -1;
		}
		/* the series block never moves, unlike the site array */
		s->series = series + i * ts->npts;
	}
	ts->d = live_open(path, &ts->live);
	if (!ts->d) {
		free(b.ring);
		return -1;
	}
	ts->r = replay_new(ts->d);
	if (!ts->r || replay_observe(ts->r, build_observer, &b) < 0)
		goto oom;
	cli_progress_begin(&prog, path);
	if (ts->cfg.from && replay_to(ts, path, ts->cfg.from, &prog) < 0)
		goto fail;
	b.cur_max = replay_totals(ts->r)->live_bytes;
	ts->window_start_allocs = replay_totals(ts->r)->allocations +
				  replay_totals(ts->r)->pool_allocations;
	b.in_window = 1;
	for (k = 0; k < ts->npts; k++) {
		uint64_t tk = bucket_time(ts, k);

		if (replay_to(ts, path, tk, &prog) < 0)
			goto fail;
		if (b.oom)
			goto oom;
		fill_point(&b, k, tk);
		if (sample_sites(&b, k) < 0)
			goto oom;
		/* the first marker inside this bucket names it */
		while (mk < scan->nmarks && scan->marks[mk].time <= ts->cfg.from)
			mk++;
		if (mk < scan->nmarks && scan->marks[mk].time <= tk) {
			ts->pts[k].mark = scan->marks[mk].label;
			while (mk < scan->nmarks && scan->marks[mk].time <= tk)
				mk++;
		}
	}
	cli_progress_end(&prog);
	ts->window_allocs = ts->pts[ts->npts - 1].allocations - ts->window_start_allocs;
	for (i = 0; i < ts->nsites; i++)
		if (ts->sites[i].present)
			site_finish(ts, &ts->sites[i]);
	/* the site array is final now: point at the drawn ones */
	for (i = 0; i < scan->ntop; i++)
		ts->drawn[i] = &ts->sites[scan->top[i]];
	ts->ndrawn = scan->ntop;
	free(b.ring);
	return 0;
oom:
	cli_progress_end(&prog);
	cli_error("out of memory");
fail:
	free(b.ring);
	return -1;
}

void ts_release(struct timeseries *ts)
{
	free(ts->series_block);
	free(ts->dirty);
	free(ts->acum);
	free(ts->acum2);
	free(ts->drawn);
	free(ts->sites);
	free(ts->pts);
	replay_free(ts->r);
	dump_close(ts->d);
	memset(ts, 0, sizeof(*ts));
}

const struct site_stats *ts_site_stats(struct timeseries *ts,
				       const struct ts_site *s)
{
	return replay_site(ts->r, s->stack);
}

/* ---- growth classes --------------------------------------------------- */

#define MIN_SAMPLES 4
#define MIN_SPAN 10		/* a site seen for under 1/10 of the window cannot be judged */
#define MIN_R2 0.6
#define MIN_RISE 0.5
#define LATE_RATIO 0.5
#define TRANSIENT_LEVEL 0.1
#define TRANSIENT_SHARE 0.5

void ts_classify(const struct timeseries *ts, const struct ts_site *s,
		 struct ts_growth *g)
{
	double span = (double)(ts->cfg.to - s->start) / 1e9;
	double max = (double)s->max_sample_bytes;
	uint64_t min_samples = ts->npts / MIN_SPAN;
	struct ts_fit by_time, by_allocs, late;
	double rise;

	if (min_samples < MIN_SAMPLES)
		min_samples = MIN_SAMPLES;
	ts_site_fits(ts, s, &by_time, &by_allocs, &late);
	g->bps = ts_fit_slope(&by_time);
	g->per1k = ts_fit_slope(&by_allocs) * 1000.0;
	g->r2 = ts_fit_r2(&by_time);
	g->late_bps = ts_fit_slope(&late);
	g->late_mean = late.n > 0 ? s->late_sum / late.n : (double)s->last_bytes;
	rise = g->bps * span;
	g->score = g->bps > 0 ? g->bps * g->r2 : 0;

	if (s->samples >= min_samples && max > 0 && g->bps > 0 &&
	    g->r2 >= MIN_R2 && rise >= MIN_RISE * max &&
	    (late.n < 3 || g->late_bps >= LATE_RATIO * g->bps))
		g->cls = TS_GROWING;
	else if (max <= 0 || g->late_mean <= TRANSIENT_LEVEL * max ||
		 (s->window_allocs &&
		  (double)s->temp_time >= TRANSIENT_SHARE * (double)s->window_allocs))
		g->cls = TS_TRANSIENT;
	else
		g->cls = TS_BOUNDED;
}

const char *ts_class_name(enum ts_class c)
{
	static const char *const names[TS_NCLASSES] = { "growing", "bounded", "transient" };

	return (unsigned)c < TS_NCLASSES ? names[c] : "unknown";
}
