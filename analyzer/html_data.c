/* html_data.c - the HTML report's process, totals, clients and fragmentation figures as JSON */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dumpjson.h"
#include "html_internal.h"

/* Key names follow 'report --json', 'clients --json' and 'frag --json'. */

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

int html_want_site(struct html *h, uint32_t stack)
{
	if (h->nwanted == h->capwanted) {
		size_t cap = h->capwanted ? h->capwanted * 2 : 256;
		uint32_t *n = realloc(h->wanted, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->wanted = n;
		h->capwanted = cap;
	}
	h->wanted[h->nwanted++] = stack;
	return 0;
}

void html_json_process(struct html *h)
{
	dumpjson_process(h->j, dump_process(h->f.d), DUMPJSON_START);
}

void html_json_totals(struct html *h)
{
	dumpjson_totals(h->j, h->f.r, replay_totals(h->f.r), DUMPJSON_RSS_TIME);
}

/* ---- clients ---------------------------------------------------------- */

#define MAX_RESIDUE_SITES 200	/* the most residue first; the flame graph has them all */

int html_json_clients(struct html *h)
{
	const struct clients *c = h->f.clients;
	const struct clients_process *p = &c->proc;
	struct json *j = h->j;
	size_t i, n = c->n;

	json_key(j, "clients");
	json_obj_begin(j);
	json_kv_double(j, "grace_seconds", seconds(c->grace));
	json_kv_u64(j, "clients", c->n);
	json_kv_u64(j, "disconnected", c->ended);
	json_kv_u64(j, "judged", c->judged);
	json_kv_u64(j, "connected_at_end", c->connected);
	json_kv_u64(j, "residue_bytes", c->residue_bytes);
	json_kv_u64(j, "residue_per_client_bytes", c->residue_mean);
	json_kv_u64(j, "residue_median_bytes", c->residue_median);
	json_kv_u64(j, "residue_max_bytes", c->residue_max);
	json_key(j, "sites");
	json_arr_begin(j);
	for (i = 0; i < c->nsites && i < MAX_RESIDUE_SITES; i++) {
		const struct client_site *s = c->sites[i];

		if (html_want_site(h, s->stack) < 0)
			return -ENOMEM;
		json_obj_begin(j);
		json_kv_u64(j, "site", s->stack);
		json_kv_u64(j, "residue_bytes", s->residue_bytes);
		json_kv_u64(j, "residue_blocks", s->residue_blocks);
		json_kv_u64(j, "clients_with_residue", s->clients);
		json_kv_str(j, "trend", clients_trend_name(s->trend));
		json_obj_end(j);
	}
	json_arr_end(j);
	json_key(j, "process");
	if (p->have_before && p->have_after) {
		json_obj_begin(j);
		json_kv_u64(j, "before_first_client_bytes", p->before_bytes);
		json_kv_double(j, "before_first_client_seconds", seconds(p->before_time));
		json_kv_u64(j, "after_last_disconnect_bytes", p->after_bytes);
		json_kv_double(j, "after_last_disconnect_seconds", seconds(p->after_time));
		json_kv_i64(j, "growth_bytes", p->growth_bytes);
		json_kv_u64(j, "attributed_residue_bytes", p->attributed_bytes);
		json_kv_u64(j, "connected_bytes", p->connected_bytes);
		json_kv_i64(j, "unattributed_growth_bytes", p->unattributed_bytes);
		json_obj_end(j);
	} else {
		json_null(j);
	}
	/*
	 * Per client, as columns (a server sees many thousands): the first
	 * max_clients in order of connection; "listed" says how many.
	 */
	if (h->opt.max_clients && n > h->opt.max_clients)
		n = h->opt.max_clients;
	json_kv_u64(j, "listed", n);
	json_key(j, "per_client");
	json_obj_begin(j);
#define COLUMN(key, expr) do { \
		json_key(j, key); \
		json_arr_begin(j); \
		for (i = 0; i < n; i++) { \
			const struct client_info *ci = &c->v[i]; \
			expr; \
		} \
		json_arr_end(j); \
	} while (0)
	COLUMN("id", json_u64(j, ci->id));
	COLUMN("label", json_str(j, ci->label));
	COLUMN("begin_seconds", json_double(j, seconds(ci->begin)));
	COLUMN("end_seconds", ci->end == CLIENTS_NO_END ? json_null(j) :
						     json_double(j, seconds(ci->end)));
	COLUMN("allocations", json_u64(j, ci->allocations));
	COLUMN("allocated_bytes", json_u64(j, ci->allocated_bytes));
	COLUMN("peak_bytes", json_u64(j, ci->peak_bytes));
	COLUMN("live_bytes", json_u64(j, ci->live_bytes));
	COLUMN("judged", json_bool(j, ci->judged));
	COLUMN("residue_bytes", json_u64(j, ci->residue_bytes));
#undef COLUMN
	json_obj_end(j);
	json_obj_end(j);
	return 0;
}

/* ---- fragmentation ---------------------------------------------------- */

static void json_ladder(struct json *j, const char *key, const struct frag_ladder *l)
{
	json_key(j, key);
	json_obj_begin(j);
	json_kv_double(j, "time_seconds", seconds(l->time));
	json_kv_u64(j, "requested_bytes", l->requested_bytes);
	json_kv_u64(j, "usable_bytes", l->usable_bytes);
	json_kv_u64(j, "live_page_bytes", l->live_page_bytes);
	json_kv_u64(j, "mmapped_bytes", l->mmapped_bytes);
	json_kv_u64(j, "mmapped_blocks", l->mmapped_blocks);
	json_kv_u64(j, "blocks", l->blocks);
	json_key(j, "sample");
	if (l->have_sample) {
		json_obj_begin(j);
		json_kv_double(j, "time_seconds", seconds(l->sample_time));
		json_key(j, "exact");
		json_bool(j, l->sample_exact);
		dumpjson_sample(j, &l->sample);
		json_kv_u64(j, "allocator_held_bytes",
			    l->sample.arena_bytes + l->sample.mmap_bytes);
		json_obj_end(j);
	} else {
		json_null(j);
	}
	json_obj_end(j);
}

#define MAX_PINNERS 50

int html_json_frag(struct html *h)
{
	const struct frag_result *res;
	const struct frag_occ *o;
	struct json *j = h->j;
	size_t i, n;

	json_key(j, "frag");
	if (!h->f.frag) {	/* a compact dump: no addresses */
		json_null(j);
		return 0;
	}
	res = frag_result(h->f.frag);
	o = &res->heap;
	json_obj_begin(j);
	json_kv_u64(j, "page_size", res->page_size);
	json_ladder(j, "ladder", &res->ladder);
	json_ladder(j, "peak", &res->peak);
	json_kv_u64(j, "peak_rss_bytes", res->peak_rss_bytes);
	json_kv_double(j, "peak_rss_time_seconds", seconds(res->peak_rss_time));
	json_key(j, "heap");
	json_obj_begin(j);
	json_kv_u64(j, "heaps", o->heaps);
	json_kv_u64(j, "live_blocks", o->live_blocks);
	json_kv_u64(j, "live_bytes", o->live_bytes);
	json_kv_u64(j, "usable_bytes", o->usable_bytes);
	json_kv_u64(j, "heap_span_bytes", o->span_bytes);
	json_kv_u64(j, "occupied_bytes", o->occupied_bytes);
	json_kv_u64(j, "live_page_bytes", o->live_page_bytes);
	json_kv_u64(j, "pinned_bytes", o->pinned_bytes);
	json_kv_u64(j, "pinned_page_bytes", o->pinned_page_bytes);
	json_kv_u64(j, "releasable_bytes", o->releasable_bytes);
	json_kv_u64(j, "holes", o->holes);
	json_obj_end(j);
	json_key(j, "pinners");
	json_arr_begin(j);
	n = o->npinners < MAX_PINNERS ? o->npinners : MAX_PINNERS;
	for (i = 0; i < n; i++) {
		const struct frag_pinner *p = &o->pinners[i];

		if (!p->pinned_bytes)
			break;
		if (html_want_site(h, p->stack) < 0)
			return -ENOMEM;
		json_obj_begin(j);
		json_kv_u64(j, "site", p->stack);
		json_kv_u64(j, "pinned_bytes", p->pinned_bytes);
		json_kv_u64(j, "pinned_page_bytes", p->pinned_page_bytes);
		json_kv_u64(j, "releasable_bytes", p->releasable_bytes);
		json_kv_u64(j, "live_bytes", p->live_bytes);
		json_kv_u64(j, "live_blocks", p->live_blocks);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_key(j, "growth");
	json_arr_begin(j);
	n = res->ngrowth < MAX_PINNERS ? res->ngrowth : MAX_PINNERS;
	for (i = 0; i < n; i++) {
		const struct frag_growth *g = &res->growth[i];

		if (html_want_site(h, g->stack) < 0)
			return -ENOMEM;
		json_obj_begin(j);
		json_kv_u64(j, "site", g->stack);
		json_kv_str(j, "pattern", g->pattern == FRAG_EXACT_FIT ? "exact-fit" : "geometric");
		json_kv_u64(j, "grows", g->grows);
		json_kv_u64(j, "reallocs", g->reallocs);
		json_kv_u64(j, "copies", g->copies);
		json_kv_double(j, "mean_ratio", g->mean_ratio);
		json_kv_u64(j, "max_size_bytes", g->max_size);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_key(j, "hole_sizes");
	json_arr_begin(j);
	for (i = 0; i < FRAG_NLOG2; i++) {
		if (!o->hole_count[i])
			continue;
		json_obj_begin(j);
		json_kv_u64(j, "from_bytes", 1ull << i);
		json_kv_u64(j, "holes", o->hole_count[i]);
		json_kv_u64(j, "hole_bytes", o->hole_bytes[i]);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
	return 0;
}
