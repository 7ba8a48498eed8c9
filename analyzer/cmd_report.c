/* cmd_report.c - 'heaptrail report': totals, peak, leaks and the top sites of a dump */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "reachclass.h"
#include "commands.h"
#include "dumpjson.h"
#include "json.h"
#include "replay.h"
#include "site.h"
#include "snapshot.h"
#include "symbolize.h"

#define DEFAULT_TOP 10
#define STACK_FRAMES 3		/* callers shown under each site's top frame */

enum rank { BY_LEAKED, BY_PEAK, BY_ALLOCS, BY_TEMPORARY, NRANKS };

struct report {
	const char *path;
	struct dump *d;
	struct replay *r;
	const struct replay_totals *t;
	struct site_ctx sc;
	struct site_stats **sites;	/* every site with at least one allocation */
	size_t nsites;
	size_t top;		/* rows per table */
	int json;
};

/* ---- ranking ---------------------------------------------------------- */

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

/* The tie-breaks keep the order stable from run to run. */
static int cmp_tail(const struct site_stats *a, const struct site_stats *b)
{
	int c = cmp_u64_desc(a->allocated_bytes, b->allocated_bytes);

	if (c)
		return c;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

static int by_leaked(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;
	int c = cmp_u64_desc(a->live_bytes, b->live_bytes);

	if (!c)
		c = cmp_u64_desc(a->peak_bytes, b->peak_bytes);
	if (!c)
		c = cmp_u64_desc(a->live_blocks, b->live_blocks);
	return c ? c : cmp_tail(a, b);
}

static int by_peak(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;
	int c = cmp_u64_desc(a->peak_bytes, b->peak_bytes);

	return c ? c : cmp_tail(a, b);
}

static int by_allocs(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;
	int c = cmp_u64_desc(a->allocations, b->allocations);

	return c ? c : cmp_tail(a, b);
}

static int by_temporary(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;
	int c = cmp_u64_desc(a->temporary, b->temporary);

	if (!c)
		c = cmp_u64_desc(a->allocations, b->allocations);
	return c ? c : cmp_tail(a, b);
}

static int (*const rank_cmp[NRANKS])(const void *, const void *) = {
	by_leaked, by_peak, by_allocs, by_temporary,
};

/* Whether a site belongs in a table at all. */
static int ranks(enum rank k, const struct site_stats *s)
{
	switch (k) {
	case BY_LEAKED:
		return s->live_blocks > 0;
	case BY_PEAK:
		return s->peak_bytes > 0;
	case BY_ALLOCS:
		return s->allocations > 0;
	default:
		return s->temporary > 0;
	}
}

/* The first 'top' sites of a ranking, in a new array; *n is its length. */
static struct site_stats **ranked(const struct report *rp, enum rank k,
				  size_t *n)
{
	struct site_stats **v = malloc((rp->nsites + 1) * sizeof(*v));
	size_t i, m = 0;

	if (!v) {
		*n = 0;
		return NULL;
	}
	for (i = 0; i < rp->nsites; i++)
		if (ranks(k, rp->sites[i]))
			v[m++] = rp->sites[i];
	qsort(v, m, sizeof(*v), rank_cmp[k]);
	*n = rp->top && m > rp->top ? rp->top : m;
	return v;
}

/* ---- text ------------------------------------------------------------- */

static const char *end_text(const struct replay_totals *t)
{
	static char buf[256];

	switch (t->end_how) {
	case HTR_END_EXIT:
		snprintf(buf, sizeof(buf), "exited with status %d", t->end_status);
		break;
	case HTR_END_SIGNAL:
		snprintf(buf, sizeof(buf), "killed by %s (signal %d)",
			 cli_signame(t->end_status), t->end_status);
		break;
	case HTR_END_EXEC:
		snprintf(buf, sizeof(buf),
			 "replaced itself with exec (the new program has its own dump)");
		break;
	case HTR_END_UNKNOWN:
		snprintf(buf, sizeof(buf),
			 "unknown (the shim was unloaded without seeing the exit)");
		break;
	default:
		snprintf(buf, sizeof(buf),
			 "no end record: the dump stops at %s (killed by SIGKILL or the OOM killer, or still running)",
			 cli_at(t->duration));
	}
	return buf;
}

static const char *lost_reason(int reason)
{
	switch (reason) {
	case HTR_LOST_DISK:
		return "the dump could not be written: disk full or I/O error";
	case HTR_LOST_MEMORY:
		return "the shim could not map memory";
	case HTR_LOST_REENTRANT:
		return "made inside the shim, by a signal handler";
	case HTR_LOST_STACKS:
		return "stack table full: events kept, their stacks truncated";
	default:
		return "reason unknown";
	}
}

/* "leaked at exit" only when the process exited: otherwise still live. */
static const char *leak_word(const struct replay_totals *t)
{
	return t->end_how == HTR_END_EXIT ? "leaked at exit" : "live at the end";
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

static void print_site(struct report *rp, const struct site_stats *s,
		       const char *figure)
{
	printf("  %s\n      ", figure);
	site_print(stdout, &rp->sc, s->stack, 8, STACK_FRAMES);
}

static void print_table(struct report *rp, enum rank k, const char *title,
			const char *none)
{
	struct site_stats **v;
	size_t n, i;
	char fig[256];

	v = ranked(rp, k, &n);
	printf("\n%s\n", title);
	if (!n)
		printf("  %s\n", none);
	for (i = 0; i < n; i++) {
		const struct site_stats *s = v[i];

		switch (k) {
		case BY_LEAKED:
			snprintf(fig, sizeof(fig), "%s in %s block%s (from %s allocation%s)",
				 cli_bytes(s->live_bytes), cli_count(s->live_blocks),
				 plural(s->live_blocks), cli_count(s->allocations),
				 plural(s->allocations));
			break;
		case BY_PEAK:
			snprintf(fig, sizeof(fig), "%s at the peak (%s of it)",
				 cli_bytes(s->peak_bytes),
				 cli_percent(s->peak_bytes, rp->t->peak_live_bytes));
			break;
		case BY_ALLOCS:
			snprintf(fig, sizeof(fig), "%s allocation%s, %s in total",
				 cli_count(s->allocations), plural(s->allocations),
				 cli_bytes(s->allocated_bytes));
			break;
		default:
			snprintf(fig, sizeof(fig),
				 "%s temporary of %s allocation%s (%s)",
				 cli_count(s->temporary), cli_count(s->allocations),
				 plural(s->allocations),
				 cli_percent(s->temporary, s->allocations));
		}
		print_site(rp, s, fig);
	}
	free(v);
}

static void print_mismatches(struct report *rp)
{
	struct site_stats **v = malloc((rp->nsites + 1) * sizeof(*v));
	size_t i, m = 0, shown;
	char buf[512];

	if (!v)
		return;
	for (i = 0; i < rp->nsites; i++)
		if (rp->sites[i]->mismatches)
			v[m++] = rp->sites[i];
	qsort(v, m, sizeof(*v), by_allocs);
	shown = rp->top && m > rp->top ? rp->top : m;
	for (i = 0; i < shown; i++)
		printf("                 %s x %s\n", cli_count(v[i]->mismatches),
		       site_label(&rp->sc, v[i]->stack, buf, sizeof(buf)));
	if (shown < m)
		printf("                 ... and %s more sites\n",
		       cli_count(m - shown));
	free(v);
}

static void report_text(struct report *rp)
{
	const struct dump_process *p = dump_process(rp->d);
	const struct replay_totals *t = rp->t;
	char *cmdline = cli_join_argv(p->argv);

	printf("heaptrail report for '%s'\n\n", rp->path);
	if (t->lost_events)
		printf("!!! %s lost (%s): every figure below is incomplete !!!\n\n",
		       cli_events_were(t->lost_events), lost_reason(t->lost_reason));
	printf("command        %s\n", cmdline && *cmdline ? cmdline : p->exe ? p->exe : "?");
	if (p->exe && p->argv && p->argv[0] && strcmp(p->exe, p->argv[0]))
		printf("executable     %s\n", p->exe);
	printf("pid            %u (parent %u)%s%s\n", p->pid, p->ppid,
	       p->flags & HTR_PF_FOLLOWED_FORK ? ", a forked child" : "",
	       p->flags & HTR_PF_AFTER_EXEC ? ", started by exec" : "");
	printf("duration       %s\n", cli_duration(t->duration));
	printf("ended          %s\n", end_text(t));
	if (p->sample_bytes)
		printf("sampled        one allocation per %s allocated: counts are estimates\n",
		       cli_bytes(p->sample_bytes));
	printf("allocations    %s (%s temporary, %s by realloc)\n",
	       cli_count(t->allocations), cli_count(t->temporary),
	       cli_count(t->reallocs));
	printf("frees          %s\n", cli_count(t->frees));
	printf("allocated      %s in total\n", cli_bytes(t->allocated_bytes));
	printf("peak heap      %s live at %s\n", cli_bytes(t->peak_live_bytes),
	       cli_at(t->peak_time));
	printf("%-14s %s in %s block%s\n",
	       t->end_how == HTR_END_EXIT ? "leaked" : "live at end",
	       cli_bytes(t->live_bytes), cli_count(t->live_blocks),
	       plural(t->live_blocks));
	if (t->have_reach) {
		uint64_t bytes[4], unscanned = reach_class_totals(rp->r, bytes);

		printf("               ");
		reach_class_print(bytes, unscanned);
	}
	if (t->peak_rss_bytes)
		printf("peak RSS       %s at %s\n", cli_bytes(t->peak_rss_bytes),
		       cli_at(t->peak_rss_time));
	else
		printf("peak RSS       not sampled\n");
	if (t->pool_allocations)
		printf("pool blocks    %s allocations, %s live in %s blocks\n",
		       cli_count(t->pool_allocations), cli_bytes(t->pool_live_bytes),
		       cli_count(t->pool_live_blocks));
	printf("unknown frees  %s%s\n", cli_count(t->unknown_frees),
	       t->unknown_frees ? " (blocks allocated before recording began, or by lost events)" : "");
	printf("mismatches     %s%s\n", cli_count(t->mismatches),
	       t->mismatches ? " blocks freed through the wrong family (malloc/free, new/delete, new[]/delete[]):" : "");
	if (t->mismatches)
		print_mismatches(rp);
	if (t->lost_events)
		printf("lost events    %s (%s)\n", cli_count(t->lost_events),
		       lost_reason(t->lost_reason));
	else
		printf("lost events    0\n");

	{
		char title[128];

		snprintf(title, sizeof(title), "Top sites by bytes %s:",
			 leak_word(t));
		print_table(rp, BY_LEAKED, title, "none: every block was freed");
	}
	print_table(rp, BY_PEAK, "Top sites at the peak of live heap:",
		    "none: nothing was live");
	print_table(rp, BY_ALLOCS, "Top sites by number of allocations:",
		    "none: nothing was allocated");
	print_table(rp, BY_TEMPORARY,
		    "Top sites by temporary allocations (freed right after they were made):",
		    "none");
	free(cmdline);
}

/* ---- JSON ------------------------------------------------------------- */

static void json_site(struct json *j, struct report *rp,
		      const struct site_stats *s)
{
	json_obj_begin(j);
	site_json_fields(j, &rp->sc, s->stack);
	dumpjson_site_figures(j, s);
	if (replay_totals(rp->r)->have_reach)
		reach_class_json_fields(j, s->reach_bytes);
	json_obj_end(j);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a;
	uintptr_t y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

/*
 * The sites of JSON: those any text table would show (the top N of each
 * ranking; all sites with --top 0), sorted by leaked bytes, then peak.
 */
static void report_json(struct report *rp)
{
	struct site_stats **all = malloc((rp->nsites * NRANKS + 1) * sizeof(*all));
	size_t nall = 0, i, k;
	struct json j;

	if (!all) {
		cli_error("out of memory");
		return;
	}
	for (k = 0; k < NRANKS; k++) {
		size_t n;
		struct site_stats **v = ranked(rp, (enum rank)k, &n);

		for (i = 0; v && i < n; i++)
			all[nall++] = v[i];
		free(v);
	}
	qsort(all, nall, sizeof(*all), cmp_ptr);
	for (i = k = 0; i < nall; i++)
		if (!k || all[k - 1] != all[i])
			all[k++] = all[i];
	nall = k;
	qsort(all, nall, sizeof(*all), by_leaked);

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", rp->path);
	dumpjson_process(&j, dump_process(rp->d), 0);
	dumpjson_totals(&j, rp->r, rp->t, DUMPJSON_REACH);
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < nall; i++)
		json_site(&j, rp, all[i]);
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	free(all);
}

/* ---- the verb --------------------------------------------------------- */

/*
 * cli_replay_dump(), with the symbolizer made first: once the replay is
 * under way the modules near the stacks' tops are known, and sym_prewarm()
 * reads their debug info on a thread while the rest of the replay runs
 * (libdw inflating the C library's DWARF takes about a tenth of a report
 * of mtmalloc's dump).  A dump that ends sooner is replayed as before.
 */
#define PREWARM_AFTER 16384	/* replay_step() calls, up to 16 events each */

static int replay_and_prewarm(struct report *rp)
{
	uint32_t k;
	int rc = 1;

	rp->d = cli_open_dump(rp->path);
	if (!rp->d)
		return -1;
	rp->r = replay_new(rp->d);
	rp->sc.sym = rp->r ? sym_new(rp->d) : NULL;
	if (!rp->r || !rp->sc.sym) {
		cli_error("out of memory");
		goto fail;
	}
	for (k = 0; k < PREWARM_AFTER && rc > 0; k++)
		rc = replay_step(rp->r, NULL);
	if (rc > 0)
		sym_prewarm(rp->sc.sym);
	if (rc >= 0 && cli_replay_run(rp->r) == 0)
		return 0;
	if (rc < 0) {
		const char *why = replay_error(rp->r);

		cli_error("cannot read '%s': %s", rp->path, why ? why : "read error");
	}
fail:
	sym_free(rp->sc.sym);
	replay_free(rp->r);
	dump_close(rp->d);
	rp->sc.sym = NULL;
	rp->r = NULL;
	rp->d = NULL;
	return -1;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report rp;
	struct site_stats **all;
	size_t n, i;
	int c, top = DEFAULT_TOP;

	/* --at T / --between T1 T2: the figures of that moment (snapshot.c) */
	if (snapshot_wanted(argc, argv))
		return cmd_snapshot(argc, argv);
	memset(&rp, 0, sizeof(rp));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage("report", "--top wants a number of sites, not '%s'",
						 optarg);
			break;
		case 'j':
			rp.json = 1;
			break;
		case 'h':
			help_verb("report", stdout);
			return 0;
		default:
			return cli_bad_option("report", c, argv);
		}
	}
	if (cli_one_dump("report", argc, argv, "heaptrail report DUMP [--top N] [--json]") < 0)
		return CLI_USAGE;
	rp.path = argv[optind];
	rp.top = (size_t)top;
	if (replay_and_prewarm(&rp) < 0)
		return CLI_USAGE;
	rp.t = replay_totals(rp.r);
	all = replay_sites(rp.r, &n);
	rp.sites = malloc((n + 1) * sizeof(*rp.sites));
	rp.sc.dump = rp.d;
	if (!rp.sites) {
		cli_error("out of memory");
		free(rp.sites);
		sym_free(rp.sc.sym);
		replay_free(rp.r);
		dump_close(rp.d);
		return CLI_USAGE;
	}
	for (i = 0; i < n; i++)
		if (all[i]->allocations)
			rp.sites[rp.nsites++] = all[i];
	if (rp.json)
		report_json(&rp);
	else
		report_text(&rp);
	fflush(stdout);
	if (rp.t->lost_events)
		cli_warn("%s lost (%s): the figures are incomplete",
			 cli_events_were(rp.t->lost_events), lost_reason(rp.t->lost_reason));
	sym_print_warnings(rp.sc.sym);
	sym_free(rp.sc.sym);
	free(rp.sites);
	replay_free(rp.r);
	dump_close(rp.d);
	return 0;
}
