/* cmd_diff.c - 'heaptrail diff OLD NEW': per-site changes between two dumps, matched by symbol */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "gate.h"
#include "json.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/*
 * Sites are matched by what their stacks say, not by address: the key is
 * function, source file base name and line of every frame (gate.h's
 * gate_stack_key()), so dumps of two builds of a program, or of one build
 * loaded at other addresses, compare.  Several stacks of one dump with the
 * same key (a library loaded twice) are added up.  A frame without symbols
 * keys by module and offset, which another build does not share: such sites
 * show up as gone and new.
 */

enum { F_LEAKED, F_LEAKED_BLOCKS, F_PEAK, F_ALLOCS, F_ALLOC_BYTES, F_N };

static const char *const fig_json[F_N] = {
	"leaked_bytes", "leaked_blocks", "peak_bytes", "allocations",
	"allocated_bytes",
};

struct side {
	const char *path;
	struct dump *d;
	struct replay *r;
	struct site_ctx sc;
	uint64_t tot[F_N];
};

struct entry {
	char *key, *label;
	int side;		/* 0 old, 1 new: where 'stack' is */
	uint32_t stack;
	int in[2];
	uint64_t v[2][F_N];
};

static int64_t delta(const struct entry *e, int f)
{
	return (int64_t)(e->v[1][f] - e->v[0][f]);
}

static uint64_t mag(int64_t x)
{
	return x < 0 ? (uint64_t)-x : (uint64_t)x;
}

static int by_key(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

/* Largest change in leaked bytes first, then in peak, then in allocated bytes. */
static int by_change(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;
	static const int order[] = { F_LEAKED, F_PEAK, F_ALLOC_BYTES, F_ALLOCS };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		uint64_t x = mag(delta(a, order[i])), y = mag(delta(b, order[i]));

		if (x != y)
			return x < y ? 1 : -1;
	}
	return strcmp(a->key, b->key);
}

static int changed(const struct entry *e)
{
	int f;

	if (e->in[0] != e->in[1])
		return 1;
	for (f = 0; f < F_N; f++)
		if (e->v[0][f] != e->v[1][f])
			return 1;
	return 0;
}

static int load(struct side *s, int which, struct entry **v, size_t *n,
		size_t *cap)
{
	const struct replay_totals *t;
	struct site_stats **all;
	size_t k, m;

	if (cli_replay_dump(s->path, &s->d, &s->r) < 0)
		return -1;
	s->sc.dump = s->d;
	s->sc.sym = sym_new(s->d);
	if (!s->sc.sym) {
		cli_error("out of memory");
		return -1;
	}
	t = replay_totals(s->r);
	s->tot[F_LEAKED] = t->live_bytes;
	s->tot[F_LEAKED_BLOCKS] = t->live_blocks;
	s->tot[F_PEAK] = t->peak_live_bytes;
	s->tot[F_ALLOCS] = t->allocations;
	s->tot[F_ALLOC_BYTES] = t->allocated_bytes;
	all = replay_sites(s->r, &m);
	for (k = 0; k < m; k++) {
		const struct site_stats *st = all[k];
		struct entry *e;

		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 256;
			struct entry *nv = realloc(*v, c * sizeof(*nv));

			if (!nv) {
				cli_error("out of memory");
				return -1;
			}
			*v = nv;
			*cap = c;
		}
		e = &(*v)[*n];
		memset(e, 0, sizeof(*e));
		e->key = gate_stack_key(&s->sc, st->stack, &e->label);
		if (!e->key) {
			cli_error("out of memory");
			return -1;
		}
		e->side = which;
		e->stack = st->stack;
		e->in[which] = 1;
		e->v[which][F_LEAKED] = st->live_bytes;
		e->v[which][F_LEAKED_BLOCKS] = st->live_blocks;
		e->v[which][F_PEAK] = st->peak_bytes;
		e->v[which][F_ALLOCS] = st->allocations;
		e->v[which][F_ALLOC_BYTES] = st->allocated_bytes;
		(*n)++;
	}
	return 0;
}

/* Sorted by key; entries with one key become one, the new side's stack preferred. */
static size_t merge(struct entry *v, size_t n)
{
	size_t i, k = 0;
	int f, s;

	qsort(v, n, sizeof(*v), by_key);
	for (i = 0; i < n; i++) {
		if (k && !strcmp(v[k - 1].key, v[i].key)) {
			struct entry *t = &v[k - 1];

			for (s = 0; s < 2; s++) {
				t->in[s] |= v[i].in[s];
				for (f = 0; f < F_N; f++)
					t->v[s][f] += v[i].v[s][f];
			}
			if (v[i].side == 1 && t->side == 0) {
				free(t->label);
				t->label = v[i].label;
				t->side = 1;
				t->stack = v[i].stack;
				v[i].label = NULL;
			}
			free(v[i].key);
			free(v[i].label);
			continue;
		}
		v[k++] = v[i];
	}
	return k;
}

static const char *signed_bytes(int64_t d)
{
	static char buf[4][48];
	static int i;

	i = (i + 1) & 3;
	snprintf(buf[i], sizeof(buf[i]), "%s%s", d < 0 ? "-" : d > 0 ? "+" : "",
		 cli_bytes(mag(d)));
	return buf[i];
}

static const char *signed_count(int64_t d)
{
	static char buf[4][48];
	static int i;

	i = (i + 1) & 3;
	snprintf(buf[i], sizeof(buf[i]), "%s%s", d < 0 ? "-" : d > 0 ? "+" : "",
		 cli_count(mag(d)));
	return buf[i];
}

static void text(struct side *sd, struct entry *v, size_t n, size_t nchanged,
		 int top)
{
	static const char *const names[F_N] = {
		"leaked", "leaked blocks", "peak", "allocations", "allocated",
	};
	size_t i, shown = 0;
	int f;

	printf("heaptrail diff: '%s' -> '%s'\n\n", sd[0].path, sd[1].path);
	printf("  %-14s %12s %12s  %s\n", "", "old", "new", "change");
	for (f = 0; f < F_N; f++) {
		int count = f == F_LEAKED_BLOCKS || f == F_ALLOCS;
		int64_t d = (int64_t)(sd[1].tot[f] - sd[0].tot[f]);

		printf("  %-14s %12s %12s  %s", names[f],
		       count ? cli_count(sd[0].tot[f]) : cli_bytes(sd[0].tot[f]),
		       count ? cli_count(sd[1].tot[f]) : cli_bytes(sd[1].tot[f]),
		       count ? signed_count(d) : signed_bytes(d));
		if (d && sd[0].tot[f])
			printf(" (%+.1f%%)", 100.0 * (double)d / (double)sd[0].tot[f]);
		printf("\n");
	}
	if (!nchanged) {
		printf("\nno site changed (%s %s in both)\n", cli_count(n),
		       n == 1 ? "site" : "sites");
		return;
	}
	printf("\n%s of %s %s changed, the largest change in leaked bytes first:\n",
	       cli_count(nchanged), cli_count(n), n == 1 ? "site" : "sites");
	for (i = 0; i < n && (top <= 0 || shown < (size_t)top); i++) {
		const struct entry *e = &v[i];

		if (!changed(e))
			continue;
		shown++;
		printf("\n  %s%s\n", e->in[0] ? e->in[1] ? "" : "gone: " : "new: ",
		       e->label ? e->label : "?");
		printf("      leaked %s -> %s (%s)", cli_bytes(e->v[0][F_LEAKED]),
		       cli_bytes(e->v[1][F_LEAKED]), signed_bytes(delta(e, F_LEAKED)));
		printf(", peak %s -> %s (%s)\n", cli_bytes(e->v[0][F_PEAK]),
		       cli_bytes(e->v[1][F_PEAK]), signed_bytes(delta(e, F_PEAK)));
		printf("      allocations %s -> %s (%s), allocated %s -> %s (%s)\n",
		       cli_count(e->v[0][F_ALLOCS]), cli_count(e->v[1][F_ALLOCS]),
		       signed_count(delta(e, F_ALLOCS)), cli_bytes(e->v[0][F_ALLOC_BYTES]),
		       cli_bytes(e->v[1][F_ALLOC_BYTES]), signed_bytes(delta(e, F_ALLOC_BYTES)));
	}
	if (shown < nchanged)
		printf("\n(%s more changed %s: --top 0 shows all)\n",
		       cli_count(nchanged - shown), nchanged - shown == 1 ? "site" : "sites");
}

static void json_figs(struct json *j, const char *key, const uint64_t *v)
{
	int f;

	json_key(j, key);
	json_obj_begin(j);
	for (f = 0; f < F_N; f++)
		json_kv_u64(j, fig_json[f], v[f]);
	json_obj_end(j);
}

static void json_out(struct side *sd, struct entry *v, size_t n, int top, int all)
{
	struct json j;
	size_t i, shown = 0;
	int f, s;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	for (s = 0; s < 2; s++) {
		json_key(&j, s ? "new" : "old");
		json_obj_begin(&j);
		json_kv_str(&j, "dump", sd[s].path);
		json_figs(&j, "totals", sd[s].tot);
		json_obj_end(&j);
	}
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < n && (top <= 0 || shown < (size_t)top); i++) {
		const struct entry *e = &v[i];

		if (!all && !changed(e))
			continue;
		shown++;
		json_obj_begin(&j);
		site_json_fields(&j, &sd[e->side].sc, e->stack);
		json_kv_str(&j, "status", !e->in[0] ? "new" : !e->in[1] ? "gone" :
			    changed(e) ? "changed" : "same");
		json_figs(&j, "old", e->v[0]);
		json_figs(&j, "new", e->v[1]);
		json_key(&j, "change");
		json_obj_begin(&j);
		for (f = 0; f < F_N; f++)
			json_kv_i64(&j, fig_json[f], delta(e, f));
		json_obj_end(&j);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct side sd[2];
	struct entry *v = NULL;
	size_t n = 0, cap = 0, i, nchanged = 0;
	int c, top = 20, json = 0, all = 0, rc = CLI_USAGE;

	memset(sd, 0, sizeof(sd));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage("diff", "--top wants a number of sites, not '%s'", optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'a':
			all = 1;
			break;
		case 'h':
			help_verb("diff", stdout);
			return 0;
		default:
			return cli_bad_option("diff", c, argv);
		}
	}
	if (argc - optind != 2)
		return cli_usage("diff", "two dumps, old then new: heaptrail diff OLD NEW");
	sd[0].path = argv[optind];
	sd[1].path = argv[optind + 1];
	if (load(&sd[0], 0, &v, &n, &cap) < 0 || load(&sd[1], 1, &v, &n, &cap) < 0)
		goto out;
	n = merge(v, n);
	qsort(v, n, sizeof(*v), by_change);
	for (i = 0; i < n; i++)
		nchanged += changed(&v[i]) != 0;
	if (json)
		json_out(sd, v, n, top, all);
	else
		text(sd, v, n, nchanged, top);
	fflush(stdout);
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].label);
	}
	free(v);
	for (c = 0; c < 2; c++) {
		if (sd[c].sc.sym) {
			sym_print_warnings(sd[c].sc.sym);
			sym_free(sd[c].sc.sym);
		}
		replay_free(sd[c].r);
		dump_close(sd[c].d);
	}
	return rc;
}
