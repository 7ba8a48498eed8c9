/* cmd_leaks.c - 'heaptrail leaks': every site with blocks left at exit, with full stacks */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "reachclass.h"
#include "commands.h"
#include "json.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/*
 * A leak is a block still live when the dump ends.  With a reachability scan
 * (HEAPTRAIL_REACH=exit) the shim classified each live block the way
 * valgrind's memcheck does; the per-class bytes come from the replay.
 */

static int by_leaked(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;

	if (a->live_bytes != b->live_bytes)
		return a->live_bytes < b->live_bytes ? 1 : -1;
	if (a->live_blocks != b->live_blocks)
		return a->live_blocks < b->live_blocks ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* Bytes of live blocks the scan did not see (allocated after it ran). */
static uint64_t unscanned(const struct site_stats *s)
{
	uint64_t c = s->reach_bytes[0] + s->reach_bytes[1] + s->reach_bytes[2] +
		     s->reach_bytes[3];

	return s->live_bytes > c ? s->live_bytes - c : 0;
}

struct leaks {
	const char *path;
	struct dump *d;
	struct replay *r;
	const struct replay_totals *t;
	struct site_ctx sc;
	struct site_stats **v;	/* leaking sites, sorted */
	size_t n, shown;
	uint64_t reach[4], reach_blocks[4], unscanned;
};

static void leaks_text(struct leaks *lk)
{
	const struct replay_totals *t = lk->t;
	size_t i;
	int k;

	if (!lk->n) {
		printf("no leaks in '%s': every block allocated was freed\n",
		       lk->path);
		return;
	}
	printf("%s %s in %s block%s from %s site%s ('%s')\n",
	       t->end_how == HTR_END_EXIT ? "leaked at exit:" : "live at the end:",
	       cli_bytes(t->live_bytes + t->pool_live_bytes),
	       cli_count(t->live_blocks + t->pool_live_blocks),
	       t->live_blocks + t->pool_live_blocks == 1 ? "" : "s",
	       cli_count(lk->n), lk->n == 1 ? "" : "s", lk->path);
	if (t->end_how != HTR_END_EXIT)
		printf("(the process did not exit normally: blocks live when the dump ends are not necessarily leaks)\n");
	if (t->have_reach) {
		printf("  ");
		reach_class_print(lk->reach, lk->unscanned);
	} else {
		printf("  (no reachability scan in the dump: record with --reach to split leaks into lost and reachable)\n");
	}
	if (lk->shown < lk->n)
		printf("  the %s largest of %s sites follow\n", cli_count(lk->shown),
		       cli_count(lk->n));

	for (i = 0; i < lk->shown; i++) {
		const struct site_stats *s = lk->v[i];

		printf("\n%s in %s block%s (%s of %s allocation%s not freed)",
		       cli_bytes(s->live_bytes), cli_count(s->live_blocks),
		       s->live_blocks == 1 ? "" : "s", cli_count(s->live_blocks),
		       cli_count(s->allocations), s->allocations == 1 ? "" : "s");
		if (t->have_reach) {
			int first = 1;

			printf(":");
			for (k = 0; k < 4; k++) {
				int c = reach_class_order[k];

				if (!s->reach_blocks[c])
					continue;
				printf("%s %s %s", first ? "" : ",", reach_class_text[c],
				       cli_bytes(s->reach_bytes[c]));
				first = 0;
			}
			if (unscanned(s))
				printf("%s not scanned %s", first ? "" : ",",
				       cli_bytes(unscanned(s)));
		}
		printf("\n    ");
		site_print(stdout, &lk->sc, s->stack, 6, -1);
	}
}

static void leaks_json(struct leaks *lk)
{
	const struct replay_totals *t = lk->t;
	struct json j;
	size_t i;
	int k;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", lk->path);
	json_key(&j, "totals");
	json_obj_begin(&j);
	json_kv_u64(&j, "leaked_bytes", t->live_bytes);
	json_kv_u64(&j, "leaked_blocks", t->live_blocks);
	json_kv_u64(&j, "pool_leaked_bytes", t->pool_live_bytes);
	json_kv_u64(&j, "pool_leaked_blocks", t->pool_live_blocks);
	json_kv_u64(&j, "sites", lk->n);
	json_key(&j, "exited");
	json_bool(&j, t->end_how == HTR_END_EXIT);
	json_key(&j, "reach_scan");
	json_bool(&j, t->have_reach);
	if (t->have_reach) {
		for (k = 0; k < 4; k++)
			json_kv_u64(&j, reach_class_json[k], lk->reach[k]);
		json_kv_u64(&j, "unscanned_bytes", lk->unscanned);
	}
	json_obj_end(&j);
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < lk->shown; i++) {
		const struct site_stats *s = lk->v[i];

		json_obj_begin(&j);
		site_json_fields(&j, &lk->sc, s->stack);
		json_kv_u64(&j, "leaked_bytes", s->live_bytes);
		json_kv_u64(&j, "leaked_blocks", s->live_blocks);
		json_kv_u64(&j, "allocations", s->allocations);
		json_kv_u64(&j, "allocated_bytes", s->allocated_bytes);
		if (t->have_reach) {
			for (k = 0; k < 4; k++)
				json_kv_u64(&j, reach_class_json[k], s->reach_bytes[k]);
			json_kv_u64(&j, "unscanned_bytes", unscanned(s));
		}
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

int cmd_leaks(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct leaks lk;
	struct site_stats **all;
	size_t n, i;
	int c, top = 0, json = 0;

	memset(&lk, 0, sizeof(lk));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage("leaks", "--top wants a number of sites, not '%s'",
						 optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			help_verb("leaks", stdout);
			return 0;
		default:
			return cli_bad_option("leaks", c, argv);
		}
	}
	if (cli_one_dump("leaks", argc, argv, "heaptrail leaks DUMP [--top N] [--json]") < 0)
		return CLI_USAGE;
	lk.path = argv[optind];
	if (cli_replay_dump(lk.path, &lk.d, &lk.r) < 0)
		return CLI_USAGE;
	lk.t = replay_totals(lk.r);
	all = replay_sites(lk.r, &n);
	lk.v = malloc((n + 1) * sizeof(*lk.v));
	lk.sc.dump = lk.d;
	lk.sc.sym = sym_new(lk.d);
	if (!lk.v || !lk.sc.sym) {
		cli_error("out of memory");
		free(lk.v);
		sym_free(lk.sc.sym);
		replay_free(lk.r);
		dump_close(lk.d);
		return CLI_USAGE;
	}
	for (i = 0; i < n; i++) {
		const struct site_stats *s = all[i];

		/* a leaked malloc(0) is a leak too, as valgrind counts it */
		if (!s->live_blocks)
			continue;
		lk.v[lk.n++] = all[i];
		for (c = 0; c < 4; c++) {
			lk.reach[c] += s->reach_bytes[c];
			lk.reach_blocks[c] += s->reach_blocks[c];
		}
		lk.unscanned += unscanned(s);
	}
	qsort(lk.v, lk.n, sizeof(*lk.v), by_leaked);
	lk.shown = top && (size_t)top < lk.n ? (size_t)top : lk.n;
	if (json)
		leaks_json(&lk);
	else
		leaks_text(&lk);
	fflush(stdout);
	if (lk.t->lost_events)
		cli_warn("%s lost: leaks may be missing or spurious",
			 cli_events_were(lk.t->lost_events));
	sym_print_warnings(lk.sc.sym);
	sym_free(lk.sc.sym);
	free(lk.v);
	replay_free(lk.r);
	dump_close(lk.d);
	return 0;
}
