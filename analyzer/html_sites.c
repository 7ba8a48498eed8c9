/* html_sites.c - the HTML report's sites (figures, top frame, stack) and the frame table they share */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dumpjson.h"
#include "frag_map.h"
#include "html_internal.h"

/*
 * Every site with an allocation or a live block is embedded, so the flame
 * graph of any cost adds up to the run's total.  A dump with more than
 * max_sites of them keeps the leaders of each table and figure (and every
 * site another page names); the rest become one "other_sites" sum.
 *
 * Stacks are lists of indexes into "frames", root first, inline frames
 * expanded: [name, file, line, module, inlined], name being the function
 * or "module+0xoff".  Deep stacks of many sites share most frames, so the
 * table keeps the document small.
 */

struct ftab {
	struct fmap idx;	/* hash -> index + 1, collisions probe on */
	const struct sym_frame **v;	/* a representative of each entry */
	char **names;
	size_t n, cap;
};

enum metric { M_LEAKED, M_PEAK, M_MAX_LIVE, M_ALLOCS, M_ALLOCATED, M_TEMPORARY,
	      M_RESIDUE, M_GROWTH, NMETRICS };

struct pick {
	struct html *h;
	enum metric m;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	while (n--)
		h = (h ^ *s++) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return fnv(h, s ? s : "\x01", s ? strlen(s) + 1 : 1);
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Index of a frame in the table, added on first use; -1 when out of memory. */
static int64_t frame_index(struct ftab *t, const struct sym_frame *fr)
{
	char name[1024];
	uint64_t h = 0xcbf29ce484222325ull, *v;
	int found, inl = !!fr->inlined;

	flame_frame_name(fr, 0, name, sizeof(name));
	h = fnv_str(h, name);
	h = fnv_str(h, fr->file);
	h = fnv(h, &fr->line, sizeof(fr->line));
	h = fnv_str(h, fr->module);
	h = fnv(h, &inl, sizeof(inl));
	for (;; h = h * 31 + 7) {
		const struct sym_frame *o;

		if (!h)
			h = 1;
		v = fmap_put(&t->idx, h, &found);
		if (!v)
			return -1;
		if (!found)
			break;
		o = t->v[*v - 1];
		if (!strcmp(t->names[*v - 1], name) && same_str(o->file, fr->file) &&
		    o->line == fr->line && same_str(o->module, fr->module) &&
		    !!o->inlined == inl)
			return (int64_t)*v - 1;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		const struct sym_frame **nv = realloc(t->v, cap * sizeof(*nv));
		char **nn;

		if (!nv)
			goto undo;
		t->v = nv;
		nn = realloc(t->names, cap * sizeof(*nn));
		if (!nn)
			goto undo;
		t->names = nn;
		t->cap = cap;
	}
	t->names[t->n] = strdup(name);
	if (!t->names[t->n])
		goto undo;
	t->v[t->n] = fr;
	*v = ++t->n;
	return (int64_t)t->n - 1;
undo:
	fmap_del(&t->idx, h);
	return -1;
}

static void ftab_release(struct ftab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->names[i]);
	free(t->names);
	free(t->v);
	fmap_release(&t->idx);
}

static void frames_json(struct json *j, const struct ftab *t)
{
	size_t i;

	json_key(j, "frames");
	json_arr_begin(j);
	for (i = 0; i < t->n; i++) {
		const struct sym_frame *fr = t->v[i];

		json_arr_begin(j);
		json_str(j, t->names[i]);
		json_str(j, fr->file);
		json_i64(j, fr->line > 0 ? fr->line : 0);
		json_str(j, fr->module);
		json_i64(j, !!fr->inlined);
		json_arr_end(j);
	}
	json_arr_end(j);
}

/* ---- which sites ------------------------------------------------------ */

static const struct html_growth *growth_of(const struct html *h, uint32_t stack)
{
	return stack < h->ngrowth && h->growth[stack].present ? &h->growth[stack] : NULL;
}

static double metric(const struct html *h, const struct site_stats *s, enum metric m)
{
	const struct html_growth *g;

	switch (m) {
	case M_LEAKED:
		return (double)s->live_bytes;
	case M_PEAK:
		return (double)s->peak_bytes;
	case M_MAX_LIVE:
		return (double)s->max_live_bytes;
	case M_ALLOCS:
		return (double)s->allocations;
	case M_ALLOCATED:
		return (double)s->allocated_bytes;
	case M_TEMPORARY:
		return (double)s->temporary;
	case M_RESIDUE:
		return (double)flame_site_cost(&h->f, s, FLAME_RESIDUE);
	default:
		g = growth_of(h, s->stack);
		return g && g->cls == TS_GROWING ? g->bps : 0;
	}
}

/* qsort has no context argument: the metric being ranked, for the comparator */
static const struct pick *ranking;

static int by_metric(const void *pa, const void *pb)
{
	const struct site_stats *a = *(struct site_stats *const *)pa;
	const struct site_stats *b = *(struct site_stats *const *)pb;
	double x = metric(ranking->h, a, ranking->m), y = metric(ranking->h, b, ranking->m);

	if (x != y)
		return x < y ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* Marks in 'sel' (by stack id) the sites to embed; returns how many. */
static size_t choose(struct html *h, struct site_stats **v, size_t n, uint8_t *sel,
		     uint32_t nsel)
{
	size_t i, k, per, chosen = 0;
	struct pick p;

	if (!h->opt.max_sites || n <= h->opt.max_sites) {
		for (i = 0; i < n; i++)
			sel[v[i]->stack] = 1;
		return n;
	}
	for (i = 0; i < h->nwanted; i++) {
		if (h->wanted[i] < nsel && !sel[h->wanted[i]]) {
			sel[h->wanted[i]] = 1;
			chosen++;
		}
	}
	per = h->opt.max_sites / NMETRICS + 1;
	p.h = h;
	for (k = 0; k < NMETRICS; k++) {
		size_t taken = 0;

		p.m = (enum metric)k;
		ranking = &p;
		qsort(v, n, sizeof(*v), by_metric);
		for (i = 0; i < n && taken < per; i++) {
			if (metric(h, v[i], p.m) <= 0)
				break;
			taken++;
			if (!sel[v[i]->stack]) {
				sel[v[i]->stack] = 1;
				chosen++;
			}
		}
	}
	ranking = NULL;
	return chosen;
}

/* ---- the JSON --------------------------------------------------------- */

static int site_json(struct html *h, struct ftab *t, const struct site_stats *s)
{
	struct json *j = h->j;
	const struct sym_frame *top = site_top_frame(&h->f.sc, s->stack);
	const struct sym_frame *const *fr;
	const struct html_growth *g = growth_of(h, s->stack);
	size_t n, i;
	int64_t topi = -1;
	char label[1024];

	json_obj_begin(j);
	json_kv_u64(j, "site", s->stack);
	json_kv_str(j, "function", top ? top->function : NULL);
	json_kv_str(j, "file", top ? top->file : NULL);
	json_key(j, "line");
	if (top && top->line > 0)
		json_i64(j, top->line);
	else
		json_null(j);
	json_kv_str(j, "module", top ? top->module : NULL);
	json_kv_str(j, "label", site_label(&h->f.sc, s->stack, label, sizeof(label)));
	/* after site_top_frame(): flame_stack's buffer is overwritten by nothing in between */
	n = flame_stack(&h->f, s->stack, &fr);
	json_key(j, "stack");
	json_arr_begin(j);
	for (i = 0; i < n; i++) {
		int64_t x = frame_index(t, fr[i]);

		if (x < 0)
			return -ENOMEM;
		if (fr[i] == top)
			topi = (int64_t)i;
		json_i64(j, x);
	}
	json_arr_end(j);
	json_kv_i64(j, "top", topi);
	dumpjson_site_figures(j, s);
	json_kv_u64(j, "residue_bytes", flame_site_cost(&h->f, s, FLAME_RESIDUE));
	json_key(j, "growth");
	if (g) {
		json_obj_begin(j);
		json_kv_str(j, "class", ts_class_name((enum ts_class)g->cls));
		json_kv_double(j, "growth_bytes_per_second", g->bps);
		json_kv_double(j, "growth_bytes_per_1000_allocations", g->per1k);
		json_kv_double(j, "r2", g->r2);
		json_obj_end(j);
	} else {
		json_null(j);
	}
	json_obj_end(j);
	return 0;
}

static void other_json(struct json *j, struct html *h, struct site_stats **v,
		       size_t n, const uint8_t *sel)
{
	uint64_t sum[FLAME_NCOSTS] = { 0 }, count = 0;
	size_t i, c;

	for (i = 0; i < n; i++) {
		if (sel[v[i]->stack])
			continue;
		count++;
		for (c = 0; c < FLAME_NCOSTS; c++)
			sum[c] += flame_site_cost(&h->f, v[i], (enum flame_cost)c);
	}
	json_key(j, "other_sites");
	json_obj_begin(j);
	json_kv_u64(j, "sites", count);
	json_kv_u64(j, "leaked_bytes", sum[FLAME_LEAKED]);
	json_kv_u64(j, "peak_bytes", sum[FLAME_PEAK]);
	json_kv_u64(j, "allocations", sum[FLAME_ALLOCATIONS]);
	json_kv_u64(j, "temporary", sum[FLAME_TEMPORARY]);
	json_kv_u64(j, "residue_bytes", sum[FLAME_RESIDUE]);
	json_kv_u64(j, "allocated_bytes", sum[FLAME_ALLOCATED]);
	json_obj_end(j);
}

int html_json_sites(struct html *h)
{
	size_t nall, n = 0, i;
	struct site_stats **all = replay_sites(h->f.r, &nall), **v;
	uint32_t nsel = dump_stack_count(h->f.d) + 1;
	uint8_t *sel;
	struct ftab t;
	struct cli_progress p;
	int rc = 0;

	memset(&t, 0, sizeof(t));
	for (i = 0; i < nall; i++)
		if (all[i]->stack >= nsel)
			nsel = all[i]->stack + 1;
	v = malloc((nall + 1) * sizeof(*v));
	sel = calloc(nsel, 1);
	if (!v || !sel || fmap_init(&t.idx, 4096) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < nall; i++)
		if (all[i]->allocations || all[i]->live_blocks)
			v[n++] = all[i];
	choose(h, v, n, sel, nsel);

	json_key(h->j, "sites");
	json_arr_begin(h->j);
	/* symbolizing thousands of stacks takes a while: say so on a terminal */
	cli_progress_begin(&p, "symbols");
	for (i = 0; i < n && !rc; i++) {
		if (sel[v[i]->stack])
			rc = site_json(h, &t, v[i]);
		if ((i & 127) == 0)
			cli_progress_update(&p, i, n);
	}
	cli_progress_end(&p);
	json_arr_end(h->j);
	if (rc)
		goto out;
	other_json(h->j, h, v, n, sel);
	frames_json(h->j, &t);
out:
	ftab_release(&t);
	free(sel);
	free(v);
	return rc;
}
