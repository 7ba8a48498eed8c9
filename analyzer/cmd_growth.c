/* cmd_growth.c - 'heaptrail growth': sites ranked by how steadily and how fast they grow */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chart.h"
#include "cli.h"
#include "commands.h"
#include "dumpjson.h"
#include "htr_compact.h"
#include "json.h"
#include "livedump.h"
#include "site.h"
#include "symbolize.h"
#include "timeseries.h"

#define DEFAULT_TOP 10
#define DEFAULT_BUCKETS 200
#define DEFAULT_TEMPORARY_MS 10.0
#define DEFAULT_TEMPORARY_ALLOCS 16
#define MAX_TEMPORARY_ALLOCS 10000000
#define STACK_FRAMES 3

/* The classes and their rules: ts_classify() in timeseries.h. */
enum gclass { G_GROWING = TS_GROWING, G_BOUNDED = TS_BOUNDED, G_TRANSIENT = TS_TRANSIENT,
	      NCLASSES = TS_NCLASSES };

static const char *const class_name[NCLASSES] = { "growing", "bounded", "transient" };

struct grow {
	struct ts_site *s;
	const struct site_stats *st;
	enum gclass cls;
	double bps;		/* bytes per second */
	double per1k;		/* bytes per 1000 allocations of the program */
	double r2;
	double late_bps;
	double late_mean;	/* mean live bytes in the last third */
	double score;
};

struct growth {
	const char *path;
	struct ts_scan scan;
	struct timeseries ts;
	struct site_ctx sc;
	struct grow *g;
	size_t ng;
	size_t count[NCLASSES];
	size_t top;
	int json;
	double temporary_ms;
	uint64_t temporary_allocs;
	unsigned buckets;
	struct cli_time from, to;
	int have_from, have_to;
};

/*
 * A compact dump (heaptrail pack --compact) keeps every block's site, size
 * and thread, but may exchange the allocation times of two blocks of a
 * site: the temporary figures, made of lifetimes, are then approximate.
 */
static int lifetimes_approximate(const struct growth *gr)
{
	return gr->ts.d && (dump_process(gr->ts.d)->flags & HTR_PF_COMPACT);
}

/* ---- classification --------------------------------------------------- */

static void classify(struct growth *gr, struct grow *g)
{
	struct ts_growth t;

	ts_classify(&gr->ts, g->s, &t);
	g->cls = (enum gclass)t.cls;
	g->bps = t.bps;
	g->per1k = t.per1k;
	g->r2 = t.r2;
	g->late_bps = t.late_bps;
	g->late_mean = t.late_mean;
	g->score = t.score;
}

static int cmp_double_desc(double a, double b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

static int by_rank(const void *pa, const void *pb)
{
	const struct grow *a = pa, *b = pb;
	int c;

	if (a->cls != b->cls)
		return a->cls < b->cls ? -1 : 1;
	switch (a->cls) {
	case G_GROWING:
		c = cmp_double_desc(a->score, b->score);
		if (!c)
			c = cmp_double_desc(a->bps, b->bps);
		break;
	case G_BOUNDED:
		c = cmp_double_desc(a->late_mean, b->late_mean);
		break;
	default:
		c = cmp_double_desc((double)a->s->window_allocs,
				    (double)b->s->window_allocs);
	}
	if (!c)
		c = cmp_double_desc((double)a->s->max_sample_bytes,
				    (double)b->s->max_sample_bytes);
	if (!c)
		c = a->s->stack < b->s->stack ? -1 : a->s->stack > b->s->stack;
	return c;
}

static int rank_sites(struct growth *gr)
{
	uint32_t i;

	gr->g = calloc(gr->ts.nsites + 1, sizeof(*gr->g));
	if (!gr->g)
		return -1;
	for (i = 0; i < gr->ts.nsites; i++) {
		struct ts_site *s = &gr->ts.sites[i];
		struct grow *g;

		/* sites that did nothing in the window have nothing to say */
		if (!s->present || (!s->window_allocs && !s->max_sample_bytes))
			continue;
		g = &gr->g[gr->ng++];
		g->s = s;
		g->st = ts_site_stats(&gr->ts, s);
		classify(gr, g);
		gr->count[g->cls]++;
	}
	qsort(gr->g, gr->ng, sizeof(*gr->g), by_rank);
	return 0;
}

/* ---- text ------------------------------------------------------------- */

static const char *rate(double bps, const char *per)
{
	static char bufs[4][64];
	static int k;
	char *b = bufs[k++ & 3];
	double a = fabs(bps);

	snprintf(b, 64, "%s%s%s", bps < 0 ? "-" : "+",
		 cli_bytes((uint64_t)(a + 0.5)), per);
	return b;
}

static const char *share(uint64_t n, uint64_t total)
{
	return cli_percent(n, total);
}

static void print_sketch(const struct ts_site *s)
{
	double v[TS_SKETCH];
	char buf[TS_SKETCH * 4 + 1];
	double max = 0;
	size_t i;

	for (i = 0; i < TS_SKETCH; i++) {
		v[i] = s->sketch[i];
		if (v[i] > max)
			max = v[i];
	}
	printf("      |%s|\n", chart_spark(buf, sizeof(buf), v, TS_SKETCH, max));
}

static void print_row(struct growth *gr, size_t rank, const struct grow *g)
{
	const struct ts_site *s = g->s;
	uint64_t allocs = s->window_allocs;

	switch (g->cls) {
	case G_GROWING:
		printf("  #%-3zu %s  (%s per 1000 allocations)  R^2 %.3f  live %s\n",
		       rank, rate(g->bps, "/s"), rate(g->per1k, ""), g->r2,
		       cli_bytes(s->last_bytes));
		break;
	case G_BOUNDED:
		printf("  #%-3zu plateau %s, live %s, highest %s  (%s/s, R^2 %.3f)\n",
		       rank, cli_bytes((uint64_t)(g->late_mean + 0.5)),
		       cli_bytes(s->last_bytes), cli_bytes(g->st->max_live_bytes),
		       rate(g->bps, ""), g->r2);
		break;
	default:
		printf("  #%-3zu %s allocation%s, live %s, highest %s\n", rank,
		       cli_count(allocs), allocs == 1 ? "" : "s",
		       cli_bytes(s->last_bytes), cli_bytes(g->st->max_live_bytes));
	}
	if (allocs)
		printf("       temporary: %s freed within %g ms, %s with <= %s allocation%s in between%s\n",
		       share(s->temp_time, allocs), gr->temporary_ms,
		       share(s->temp_allocs, allocs), cli_count(gr->temporary_allocs),
		       gr->temporary_allocs == 1 ? "" : "s",
		       lifetimes_approximate(gr) ? " (about: a compact dump)" : "");
	print_sketch(s);
	printf("      ");
	site_print(stdout, &gr->sc, s->stack, 8, STACK_FRAMES);
}

static void growth_text(struct growth *gr)
{
	static const char *const heading[NCLASSES] = {
		"Growing: live bytes rise steadily to the end",
		"Bounded: live bytes rose, then stayed",
		"Transient: allocated and freed again",
	};
	const struct ts_config *c = &gr->ts.cfg;
	size_t i, n = gr->top && gr->ng > gr->top ? gr->top : gr->ng;
	int last = -1;

	printf("heaptrail growth for '%s'\n\n", gr->path);
	if (gr->ts.live)
		printf("the process is still running: read up to %s (the last complete frame)\n",
		       cli_at(gr->scan.end));
	printf("window         %s to %s (%u samples)\n", cli_at(c->from),
	       cli_at(c->to), c->buckets);
	printf("allocations    %s in the window\n", cli_count(gr->ts.window_allocs));
	printf("sites          %zu growing, %zu bounded, %zu transient\n",
	       gr->count[G_GROWING], gr->count[G_BOUNDED], gr->count[G_TRANSIENT]);
	if (!gr->count[G_GROWING])
		printf("\nNo site grows steadily.\n");
	for (i = 0; i < n; i++) {
		const struct grow *g = &gr->g[i];

		if ((int)g->cls != last) {
			printf("\n%s:\n", heading[g->cls]);
			last = (int)g->cls;
		}
		print_row(gr, i + 1, g);
	}
	if (n < gr->ng)
		printf("\n... and %s more site%s (--top 0 shows all)\n",
		       cli_count(gr->ng - n), gr->ng - n == 1 ? "" : "s");
}

/* ---- JSON ------------------------------------------------------------- */

static void growth_json(struct growth *gr)
{
	const struct ts_config *c = &gr->ts.cfg;
	size_t i, n = gr->top && gr->ng > gr->top ? gr->top : gr->ng;
	struct json j;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", gr->path);
	json_key(&j, "live");
	json_bool(&j, gr->ts.live);
	/* a compact dump may have exchanged blocks' allocation times (docs/usage.md) */
	json_key(&j, "lifetimes_approximate");
	json_bool(&j, lifetimes_approximate(gr));
	json_kv_double(&j, "duration_seconds", (double)gr->scan.end / 1e9);
	json_kv_double(&j, "from_seconds", (double)c->from / 1e9);
	json_kv_double(&j, "to_seconds", (double)c->to / 1e9);
	json_kv_u64(&j, "samples", c->buckets);
	json_kv_double(&j, "temporary_ms", gr->temporary_ms);
	json_kv_u64(&j, "temporary_allocations", gr->temporary_allocs);
	json_kv_u64(&j, "allocations", gr->ts.window_allocs);
	json_key(&j, "counts");
	json_obj_begin(&j);
	for (i = 0; i < NCLASSES; i++)
		json_kv_u64(&j, class_name[i], gr->count[i]);
	json_obj_end(&j);
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < n; i++) {
		const struct grow *g = &gr->g[i];
		const struct ts_site *s = g->s;

		json_obj_begin(&j);
		site_json_fields(&j, &gr->sc, s->stack);
		json_kv_str(&j, "class", class_name[g->cls]);
		json_kv_double(&j, "growth_bytes_per_second", g->bps);
		json_kv_double(&j, "growth_bytes_per_1000_allocations", g->per1k);
		json_kv_double(&j, "r2", g->r2);
		json_kv_double(&j, "late_growth_bytes_per_second", g->late_bps);
		json_kv_u64(&j, "live_bytes", s->last_bytes);
		json_kv_u64(&j, "late_mean_bytes", (uint64_t)(g->late_mean + 0.5));
		json_kv_u64(&j, "window_allocations", s->window_allocs);
		/* the figures of 'report --json', at the window's end */
		dumpjson_site_figures(&j, g->st);
		json_kv_u64(&j, "temporary_by_time", s->temp_time);
		json_kv_u64(&j, "temporary_by_allocations", s->temp_allocs);
		json_kv_double(&j, "first_allocation_seconds", (double)s->first / 1e9);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

/* ---- the verb --------------------------------------------------------- */

static void growth_release(struct growth *gr)
{
	sym_free(gr->sc.sym);
	gr->sc.sym = NULL;
	free(gr->g);
	gr->g = NULL;
	gr->ng = 0;
	memset(gr->count, 0, sizeof(gr->count));
	ts_release(&gr->ts);
	ts_scan_release(&gr->scan);
}

/* One analysis of the dump as it is now: 0, or CLI_USAGE after printing why. */
static int growth_once(struct growth *gr)
{
	struct cli_time t[2];
	struct ts_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	if (ts_scan(&gr->scan, gr->path, 0) < 0)
		return CLI_USAGE;
	t[0] = gr->from;
	t[1] = gr->to;
	if (ts_resolve(&gr->scan, gr->path, t, 2) < 0)
		return CLI_USAGE;
	if (gr->have_from && gr->have_to && t[1].ns <= t[0].ns) {
		cli_error("the window is empty: %s is not before %s",
			  cli_time_str(&t[0]), cli_time_str(&t[1]));
		return CLI_USAGE;
	}
	cfg.buckets = gr->buckets;
	cfg.from = gr->have_from ? t[0].ns : 0;
	cfg.to = gr->have_to ? t[1].ns : 0;
	cfg.temporary_ns = (uint64_t)(gr->temporary_ms * 1e6 + 0.5);
	cfg.temporary_allocs = gr->temporary_allocs;
	if (ts_build(&gr->ts, gr->path, &gr->scan, &cfg) < 0)
		return CLI_USAGE;
	gr->sc.dump = gr->ts.d;
	gr->sc.sym = sym_new(gr->ts.d);
	if (!gr->sc.sym || rank_sites(gr) < 0) {
		cli_error("out of memory");
		return CLI_USAGE;
	}
	if (gr->json)
		growth_json(gr);
	else
		growth_text(gr);
	fflush(stdout);
	sym_print_warnings(gr->sc.sym);
	return 0;
}

static int parse_ms(const char *s, double *ms)
{
	char *end;

	if (!s || !*s)
		return -1;
	*ms = strtod(s, &end);
	if (!strcmp(end, "ms"))
		end += 2;
	return *end || !(*ms >= 0) || *ms > 1e9 ? -1 : 0;
}

/* One pass of --follow (live_follow). */
static int growth_pass(void *arg, int *ended)
{
	struct growth *gr = arg;
	int rc = growth_once(gr);

	/* until the writer's end record, or its process is gone */
	*ended = !gr->scan.live || gr->scan.end_how;
	growth_release(gr);
	return rc;
}

int cmd_growth(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'T' },
		{ "samples", required_argument, NULL, 'b' },
		{ "temporary-ms", required_argument, NULL, 'm' },
		{ "temporary-allocs", required_argument, NULL, 'a' },
		{ "follow", no_argument, NULL, 'F' },
		{ "interval", required_argument, NULL, 'i' },
		{ "ascii", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb = argv[0];
	struct growth gr;
	uint64_t interval = 2000000000ull, u;
	int c, top = DEFAULT_TOP, follow = 0, rc, n;

	memset(&gr, 0, sizeof(gr));
	gr.buckets = DEFAULT_BUCKETS;
	gr.temporary_ms = DEFAULT_TEMPORARY_MS;
	gr.temporary_allocs = DEFAULT_TEMPORARY_ALLOCS;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage(verb, "--top wants a number of sites, not '%s'", optarg);
			break;
		case 'j':
			gr.json = 1;
			break;
		case 'f':
			if (cli_parse_time(optarg, &gr.from) < 0)
				return cli_usage(verb, "--from wants a time (seconds like 2.5, 'peak' or a marker name), not '%s'", optarg);
			gr.have_from = 1;
			break;
		case 'T':
			if (cli_parse_time(optarg, &gr.to) < 0)
				return cli_usage(verb, "--to wants a time (seconds like 2.5, 'peak' or a marker name), not '%s'", optarg);
			gr.have_to = 1;
			break;
		case 'b':
			if (cli_parse_int(optarg, TS_SKETCH, 100000, &n) < 0)
				return cli_usage(verb, "--samples wants a number from %d to 100000, not '%s'",
						 TS_SKETCH, optarg);
			gr.buckets = (unsigned)n;
			break;
		case 'm':
			if (parse_ms(optarg, &gr.temporary_ms) < 0)
				return cli_usage(verb, "--temporary-ms wants milliseconds like 10 or 0.5, not '%s'", optarg);
			break;
		case 'a':
			if (cli_parse_u64(optarg, &u) < 0 || u > MAX_TEMPORARY_ALLOCS)
				return cli_usage(verb, "--temporary-allocs wants a number from 0 to %d, not '%s'",
						 MAX_TEMPORARY_ALLOCS, optarg);
			gr.temporary_allocs = u;
			break;
		case 'F':
			follow = 1;
			break;
		case 'i':
			if (cli_parse_seconds(optarg, &interval) < 0 || interval < 1000000)
				return cli_usage(verb, "--interval wants a duration like 2 or 500ms, not '%s'", optarg);
			break;
		case 'A':
			chart_set_ascii(1);
			break;
		case 'h':
			help_verb("growth", stdout);
			return 0;
		default:
			return cli_bad_option(verb, c, argv);
		}
	}
	if (cli_one_dump(verb, argc, argv, "heaptrail growth DUMP [--json] [--top N]") < 0)
		return CLI_USAGE;
	gr.path = argv[optind];
	gr.top = (size_t)top;
	if (!gr.have_to)
		cli_parse_time("end", &gr.to);
	if (!follow) {
		rc = growth_once(&gr);
		growth_release(&gr);
		return rc;
	}
	return live_follow(gr.path, interval, !gr.json, growth_pass, &gr);
}
