/* snapshot.c - live bytes per site at one moment, or what a time window left live */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "livedump.h"
#include "replay.h"
#include "site.h"
#include "snapshot.h"
#include "symbolize.h"
#include "timeseries.h"

#define STACK_FRAMES 3

/* One row: a site's figures at the moment, or in the window. */
struct row {
	uint32_t stack;
	uint64_t live_bytes, live_blocks;
	uint64_t allocations, allocated_bytes;
};

struct snap {
	struct snapshot_opts *o;
	struct dump *d;
	struct replay *r;
	int live;
	int have_sample;
	struct dump_sample sample;
	uint64_t sample_time;
	uint64_t reached;	/* time of the last event replayed */
	struct row *rows;
	size_t nrows;
	/* --between: each site's allocation counts at the window's start */
	struct row *start;
	uint32_t nstart;
	struct row total, total_start;
	struct site_ctx sc;
};

static void sample_observer(void *ctx, struct replay *r,
			    const struct dump_event *ev,
			    const struct replay_block *freed)
{
	struct snap *s = ctx;

	(void)r;
	(void)freed;
	s->reached = ev->time;
	if (ev->kind == DUMP_SAMPLE) {
		s->sample = ev->sample;
		s->sample_time = ev->time;
		s->have_sample = 1;
	}
}

static int cmp_rows(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;

	if (a->live_bytes != b->live_bytes)
		return a->live_bytes < b->live_bytes ? 1 : -1;
	if (a->live_blocks != b->live_blocks)
		return a->live_blocks < b->live_blocks ? 1 : -1;
	if (a->allocated_bytes != b->allocated_bytes)
		return a->allocated_bytes < b->allocated_bytes ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

static int run_to(struct snap *s, uint64_t t)
{
	if (replay_run_until(s->r, t) >= 0)
		return 0;
	cli_error("cannot read '%s': %s", s->o->path,
		  replay_error(s->r) ? replay_error(s->r) : "read error");
	return -1;
}

/* --at: every site with live blocks, from the replay's own figures. */
static int rows_at(struct snap *s)
{
	struct site_stats **all;
	size_t n, i;

	all = replay_sites(s->r, &n);
	s->rows = calloc(n + 1, sizeof(*s->rows));
	if (!s->rows)
		return -1;
	for (i = 0; i < n; i++) {
		struct row *w;

		if (!all[i]->live_blocks)
			continue;
		w = &s->rows[s->nrows++];
		w->stack = all[i]->stack;
		w->live_bytes = all[i]->live_bytes;
		w->live_blocks = all[i]->live_blocks;
		w->allocations = all[i]->allocations;
		w->allocated_bytes = all[i]->allocated_bytes;
	}
	return 0;
}

/* --between, at the start: what each site had allocated so far. */
static int remember_start(struct snap *s)
{
	const struct replay_totals *t = replay_totals(s->r);
	struct site_stats **all;
	size_t n, i;
	uint32_t max = 0;

	all = replay_sites(s->r, &n);
	for (i = 0; i < n; i++)
		if (all[i]->stack > max)
			max = all[i]->stack;
	s->nstart = max + 1;
	s->start = calloc(s->nstart, sizeof(*s->start));
	if (!s->start)
		return -1;
	for (i = 0; i < n; i++) {
		s->start[all[i]->stack].allocations = all[i]->allocations;
		s->start[all[i]->stack].allocated_bytes = all[i]->allocated_bytes;
	}
	s->total_start.allocations = t->allocations + t->pool_allocations;
	s->total_start.allocated_bytes = t->allocated_bytes;
	return 0;
}

struct window_scan {
	struct row *byid;	/* indexed by stack id */
	uint32_t n;
	uint64_t after;		/* blocks allocated after this time */
	int any_time;		/* the window starts at 0: every block counts */
	int oom;
};

static int window_block(void *ctx, const struct replay_block *b)
{
	struct window_scan *w = ctx;

	if (!w->any_time && b->time <= w->after)
		return 0;
	if (b->stack >= w->n) {
		uint32_t n = w->n ? w->n : 1024;
		struct row *nb;

		while (n <= b->stack)
			n *= 2;
		nb = realloc(w->byid, (size_t)n * sizeof(*nb));
		if (!nb) {
			w->oom = 1;
			return 1;
		}
		memset(nb + w->n, 0, (size_t)(n - w->n) * sizeof(*nb));
		w->byid = nb;
		w->n = n;
	}
	w->byid[b->stack].live_bytes += b->size;
	w->byid[b->stack].live_blocks++;
	return 0;
}

/* --between, at the end: blocks younger than the start, by site. */
static int rows_between(struct snap *s, uint64_t from)
{
	struct window_scan w;
	struct site_stats **all;
	size_t n, i;

	memset(&w, 0, sizeof(w));
	w.after = from;
	w.any_time = from == 0;
	replay_each_block(s->r, window_block, &w);
	if (w.oom) {
		free(w.byid);
		return -1;
	}
	all = replay_sites(s->r, &n);
	s->rows = calloc(n + 1, sizeof(*s->rows));
	if (!s->rows) {
		free(w.byid);
		return -1;
	}
	for (i = 0; i < n; i++) {
		uint32_t id = all[i]->stack;
		struct row *x = &s->rows[s->nrows];

		x->stack = id;
		x->allocations = all[i]->allocations;
		x->allocated_bytes = all[i]->allocated_bytes;
		if (id < s->nstart) {
			x->allocations -= s->start[id].allocations;
			x->allocated_bytes -= s->start[id].allocated_bytes;
		}
		if (id < w.n) {
			x->live_bytes = w.byid[id].live_bytes;
			x->live_blocks = w.byid[id].live_blocks;
		}
		s->total.live_bytes += x->live_bytes;
		s->total.live_blocks += x->live_blocks;
		if (x->allocations || x->live_blocks)
			s->nrows++;
	}
	free(w.byid);
	return 0;
}

/* ---- output ----------------------------------------------------------- */

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

static size_t shown(const struct snap *s)
{
	return s->o->top && s->nrows > s->o->top ? s->o->top : s->nrows;
}

static void text_at(struct snap *s)
{
	const struct replay_totals *t = replay_totals(s->r);
	size_t i, n = shown(s);

	printf("heaptrail snapshot of '%s' at %s\n\n", s->o->path,
	       cli_time_str(&s->o->at));
	if (s->live)
		printf("the process is still running: the dump was read up to its last complete frame\n");
	printf("live heap      %s in %s block%s\n", cli_bytes(t->live_bytes),
	       cli_count(t->live_blocks), plural(t->live_blocks));
	if (t->pool_live_blocks)
		printf("pool blocks    %s in %s block%s\n", cli_bytes(t->pool_live_bytes),
		       cli_count(t->pool_live_blocks), plural(t->pool_live_blocks));
	if (s->have_sample)
		printf("RSS            %s (sampled at %s)\n", cli_bytes(s->sample.rss_bytes),
		       cli_at(s->sample_time));
	else
		printf("RSS            not sampled yet\n");
	printf("allocations    %s so far, %s frees\n",
	       cli_count(t->allocations + t->pool_allocations),
	       cli_count(t->frees + t->pool_frees));
	printf("\nSites by live bytes at that moment:\n");
	if (!n)
		printf("  none: nothing was live\n");
	for (i = 0; i < n; i++) {
		const struct row *w = &s->rows[i];

		printf("  %s in %s block%s (%s of the live heap; %s allocation%s so far)\n      ",
		       cli_bytes(w->live_bytes), cli_count(w->live_blocks),
		       plural(w->live_blocks), cli_percent(w->live_bytes, t->live_bytes),
		       cli_count(w->allocations), plural(w->allocations));
		site_print(stdout, &s->sc, w->stack, 8, STACK_FRAMES);
	}
	if (n < s->nrows)
		printf("\n... and %s more site%s (--top 0 shows all)\n",
		       cli_count(s->nrows - n), plural(s->nrows - n));
}

static void text_between(struct snap *s)
{
	const struct replay_totals *t = replay_totals(s->r);
	size_t i, n = shown(s), live = 0;

	printf("heaptrail snapshot of '%s': allocated after %s", s->o->path,
	       cli_time_str(&s->o->from));
	printf(" and still live at %s\n\n", cli_time_str(&s->o->to));
	if (s->live)
		printf("the process is still running: the dump was read up to its last complete frame\n");
	printf("allocated      %s block%s, %s in the window\n",
	       cli_count(t->allocations + t->pool_allocations - s->total_start.allocations),
	       plural(t->allocations + t->pool_allocations - s->total_start.allocations),
	       cli_bytes(t->allocated_bytes - s->total_start.allocated_bytes));
	printf("still live     %s in %s block%s at its end\n",
	       cli_bytes(s->total.live_bytes), cli_count(s->total.live_blocks),
	       plural(s->total.live_blocks));
	printf("\nSites by bytes the window left live:\n");
	for (i = 0; i < n; i++) {
		const struct row *w = &s->rows[i];

		if (!w->live_blocks)
			break;
		live++;
		printf("  %s in %s block%s (of %s allocated in %s allocation%s)\n      ",
		       cli_bytes(w->live_bytes), cli_count(w->live_blocks),
		       plural(w->live_blocks), cli_bytes(w->allocated_bytes),
		       cli_count(w->allocations), plural(w->allocations));
		site_print(stdout, &s->sc, w->stack, 8, STACK_FRAMES);
	}
	if (!live)
		printf("  none: everything allocated in the window was freed in it\n");
}

static void json_time(struct json *j, const char *key, const struct cli_time *t)
{
	json_key(j, key);
	json_obj_begin(j);
	json_kv_double(j, "time_seconds", (double)t->ns / 1e9);
	json_kv_str(j, "marker", t->kind == CLI_TIME_MARK ? t->mark : NULL);
	json_kv_str(j, "label", cli_time_str(t));
	json_obj_end(j);
}

static void snap_json(struct snap *s)
{
	const struct replay_totals *t = replay_totals(s->r);
	size_t i, n = shown(s);
	struct json j;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", s->o->path);
	json_key(&j, "live");
	json_bool(&j, s->live);
	if (s->o->between) {
		json_time(&j, "from", &s->o->from);
		json_time(&j, "to", &s->o->to);
	} else {
		json_time(&j, "at", &s->o->at);
	}
	json_key(&j, "totals");
	json_obj_begin(&j);
	if (s->o->between) {
		json_kv_u64(&j, "allocations", t->allocations + t->pool_allocations -
			    s->total_start.allocations);
		json_kv_u64(&j, "allocated_bytes",
			    t->allocated_bytes - s->total_start.allocated_bytes);
		json_kv_u64(&j, "live_bytes", s->total.live_bytes);
		json_kv_u64(&j, "live_blocks", s->total.live_blocks);
	} else {
		json_kv_u64(&j, "live_bytes", t->live_bytes);
		json_kv_u64(&j, "live_blocks", t->live_blocks);
		json_kv_u64(&j, "pool_live_bytes", t->pool_live_bytes);
		json_kv_u64(&j, "allocations", t->allocations + t->pool_allocations);
		json_kv_u64(&j, "frees", t->frees + t->pool_frees);
		json_key(&j, "rss_bytes");
		s->have_sample ? json_u64(&j, s->sample.rss_bytes) : json_null(&j);
	}
	json_obj_end(&j);
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < n; i++) {
		const struct row *w = &s->rows[i];

		json_obj_begin(&j);
		site_json_fields(&j, &s->sc, w->stack);
		json_kv_u64(&j, "live_bytes", w->live_bytes);
		json_kv_u64(&j, "live_blocks", w->live_blocks);
		json_kv_u64(&j, "allocations", w->allocations);
		json_kv_u64(&j, "allocated_bytes", w->allocated_bytes);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

/* ---- running ---------------------------------------------------------- */

static int need_scan(const struct snapshot_opts *o)
{
	if (o->between)
		return !o->from.resolved || !o->to.resolved;
	return !o->at.resolved;
}

/*
 * Marker names, 'peak' and 'end' become times with a first pass: 1 when it
 * ran (and said what was wrong with the dump), 0 when not needed, -1.
 */
static int resolve(struct snapshot_opts *o)
{
	struct ts_scan scan;
	struct cli_time t[2];
	int rc;

	if (!need_scan(o))
		return 0;
	if (ts_scan(&scan, o->path, 0) < 0)
		return -1;
	t[0] = o->between ? o->from : o->at;
	t[1] = o->to;
	rc = ts_resolve(&scan, o->path, t, o->between ? 2 : 1);
	ts_scan_release(&scan);
	if (rc < 0)
		return -1;
	if (o->between) {
		o->from = t[0];
		o->to = t[1];
	} else {
		o->at = t[0];
	}
	return 1;
}

int snapshot_run(struct snapshot_opts *o)
{
	struct snap s;
	int rc = CLI_USAGE, scanned;
	uint64_t end;

	memset(&s, 0, sizeof(s));
	s.o = o;
	scanned = resolve(o);
	if (scanned < 0)
		return CLI_USAGE;
	if (o->between && o->to.ns < o->from.ns) {
		cli_error("the window is empty: %s comes after %s",
			  cli_time_str(&o->from), cli_time_str(&o->to));
		return CLI_USAGE;
	}
	s.d = live_open(o->path, &s.live);
	if (!s.d)
		return CLI_USAGE;
	s.r = replay_new(s.d);
	if (!s.r || replay_observe(s.r, sample_observer, &s) < 0) {
		cli_error("out of memory");
		goto out;
	}
	if (o->between) {
		if (run_to(&s, o->from.ns) < 0)
			goto out;
		if (remember_start(&s) < 0) {
			cli_error("out of memory");
			goto out;
		}
	}
	end = o->between ? o->to.ns : o->at.ns;
	if (run_to(&s, end) < 0)
		goto out;
	/* its end record read: finished, though its process may hold the file a moment longer */
	if (replay_totals(s.r)->end_how)
		s.live = 0;
	if (replay_at_end(s.r) && end > replay_totals(s.r)->duration)
		cli_warn("%s is after the end of '%s' (%s): these are the figures at its end",
			 cli_at(end), o->path, cli_at(replay_totals(s.r)->duration));
	if (!scanned)	/* the first pass warned already */
		cli_dump_warning(s.d);
	if ((o->between ? rows_between(&s, o->from.ns) : rows_at(&s)) < 0) {
		cli_error("out of memory");
		goto out;
	}
	qsort(s.rows, s.nrows, sizeof(*s.rows), cmp_rows);
	s.sc.dump = s.d;
	s.sc.sym = sym_new(s.d);
	if (!s.sc.sym) {
		cli_error("out of memory");
		goto out;
	}
	if (o->json)
		snap_json(&s);
	else if (o->between)
		text_between(&s);
	else
		text_at(&s);
	fflush(stdout);
	sym_print_warnings(s.sc.sym);
	rc = 0;
out:
	sym_free(s.sc.sym);
	free(s.rows);
	free(s.start);
	replay_free(s.r);
	dump_close(s.d);
	return rc;
}

int snapshot_wanted(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--between") || !strcmp(argv[i], "--at") ||
		    !strncmp(argv[i], "--at=", 5))
			return 1;
	return 0;
}
