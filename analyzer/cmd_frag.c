/* cmd_frag.c - 'heaptrail frag': why RSS stays high when live bytes are low */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "dumpjson.h"
#include "frag.h"
#include "htr_compact.h"
#include "json.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/*
 * The figures and their definitions are in frag.h and docs/fragmentation.md.
 * This file only chooses the moment, runs the replay and prints.
 */

#define DEFAULT_TOP 10
#define TEXT_ROWS 12		/* timeline rows in text */
#define JSON_ROWS 1000		/* ... and in JSON */

struct fragcmd {
	const char *path;
	struct cli_time at;
	int at_given;
	int json;
	size_t top;
	struct dump *d;
	struct replay *r;
	struct frag *f;
	const struct frag_result *res;
	struct site_ctx sc;
};

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0 / 0.0;
}

static uint64_t held(const struct frag_ladder *l)
{
	return l->sample.arena_bytes + l->sample.mmap_bytes;
}

static int64_t gap(uint64_t hi, uint64_t lo)
{
	return (int64_t)(hi - lo);
}

/* "+1.2 MiB" / "-3.0 KiB" */
static const char *signed_bytes(int64_t v, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", v < 0 ? "-" : "+",
		 cli_bytes(v < 0 ? (uint64_t)-v : (uint64_t)v));
	return buf;
}

static const char *ratio_str(double r, char *buf, size_t len)
{
	if (r != r)
		snprintf(buf, len, "-");
	else if (r >= 100)
		snprintf(buf, len, "%.0f", r);
	else
		snprintf(buf, len, "%.2f", r);
	return buf;
}

/* "of 64 bytes" or "of 48 B to 1.2 KiB" */
static const char *sizes_str(uint64_t lo, uint64_t hi, char *buf, size_t len)
{
	if (lo == hi)
		snprintf(buf, len, "of %s byte%s", cli_count(lo), lo == 1 ? "" : "s");
	else
		snprintf(buf, len, "of %s to %s", cli_bytes(lo), cli_bytes(hi));
	return buf;
}

static const char *class_str(unsigned i, char *buf, size_t len)
{
	uint64_t hi = frag_class_bound(i), lo = i ? frag_class_bound(i - 1) + 1 : 1;

	snprintf(buf, len, "%s-%s", cli_bytes(lo), cli_bytes(hi));
	return buf;
}

/* ---- text ------------------------------------------------------------- */

static void text_ladder(const struct frag_ladder *l, const char *indent)
{
	char b1[48], b2[48];

	printf("%srequested (live blocks, as asked)  %12s\n", indent,
	       cli_bytes(l->requested_bytes));
	printf("%susable (allocator's rounding)      %12s  %10s  size classes, alignment\n",
	       indent, cli_bytes(l->usable_bytes),
	       signed_bytes(gap(l->usable_bytes, l->requested_bytes), b1, sizeof(b1)));
	printf("%spages holding live blocks          %12s  %10s  headers and free bytes sharing pages with live blocks\n",
	       indent, cli_bytes(l->live_page_bytes),
	       signed_bytes(gap(l->live_page_bytes, l->usable_bytes), b1, sizeof(b1)));
	if (!l->have_sample) {
		printf("%s(the dump has no samples: allocator-held bytes and RSS unknown)\n", indent);
		return;
	}
	printf("%sallocator-held (arena + mmapped)   %12s  %10s  free pages and the top the allocator keeps\n",
	       indent, cli_bytes(held(l)),
	       signed_bytes(gap(held(l), l->live_page_bytes), b1, sizeof(b1)));
	printf("%sRSS                                %12s  %10s  code, data, stacks and the shim, less heap never touched or released\n",
	       indent, cli_bytes(l->sample.rss_bytes),
	       signed_bytes(gap(l->sample.rss_bytes, held(l)), b2, sizeof(b2)));
	printf("%s(allocator figures and RSS sampled at %s%s)\n", indent,
	       cli_at(l->sample_time),
	       l->sample_exact ? ", no heap event in between" :
				 ", heap events in between: an approximation");
}

static void text_ratios(const struct frag_ladder *l)
{
	char b[32];

	printf("\nratios\n");
	printf("  usable / requested    %8s  allocator overhead\n",
	       ratio_str(ratio(l->usable_bytes, l->requested_bytes), b, sizeof(b)));
	printf("  pages / usable        %8s  page fragmentation (jemalloc active/allocated, Redis allocator_frag_ratio)\n",
	       ratio_str(ratio(l->live_page_bytes, l->usable_bytes), b, sizeof(b)));
	if (!l->have_sample)
		return;
	printf("  held / pages          %8s  memory kept beyond live pages (jemalloc resident/active, Redis allocator_rss_ratio)\n",
	       ratio_str(ratio(held(l), l->live_page_bytes), b, sizeof(b)));
	printf("  RSS / held            %8s  Redis rss_overhead_ratio\n",
	       ratio_str(ratio(l->sample.rss_bytes, held(l)), b, sizeof(b)));
	printf("  RSS / usable          %8s  Redis mem_fragmentation_ratio (used_memory_rss / used_memory)\n",
	       ratio_str(ratio(l->sample.rss_bytes, l->usable_bytes), b, sizeof(b)));
}

static void text_classes(struct fragcmd *fc, uint32_t stack, const char *indent)
{
	const uint64_t *c = frag_site_classes(fc->f, stack);
	unsigned i, k, used = 0, top[4] = { 0 }, ntop = 0;
	char b[64];

	if (!c)
		return;
	for (i = 0; i < FRAG_NCLASS; i++)
		if (c[i])
			used++;
	/* the four most used classes, most used first */
	for (k = 0; k < 4; k++) {
		unsigned best = FRAG_NCLASS;

		for (i = 0; i < FRAG_NCLASS; i++) {
			unsigned j;
			int taken = 0;

			if (!c[i])
				continue;
			for (j = 0; j < ntop; j++)
				taken |= top[j] == i;
			if (!taken && (best == FRAG_NCLASS || c[i] > c[best]))
				best = i;
		}
		if (best == FRAG_NCLASS)
			break;
		top[ntop++] = best;
	}
	printf("%ssizes asked for: %u size class%s; most: ", indent, used,
	       used == 1 ? "" : "es");
	for (k = 0; k < ntop; k++)
		printf("%s%s x%s", k ? ", " : "", class_str(top[k], b, sizeof(b)),
		       cli_count(c[top[k]]));
	printf("\n");
}

/* callers: frames shown under the site (pool sites: the allocator's caller) */
static void text_pinners(struct fragcmd *fc, const struct frag_occ *o, const char *indent,
			 int callers)
{
	size_t i, shown = 0;
	char b[96], lab[512];

	for (i = 0; i < o->npinners && (!fc->top || shown < fc->top); i++) {
		const struct frag_pinner *p = &o->pinners[i];

		if (!p->pinned_bytes)
			break;
		shown++;
		if (callers) {
			printf("%s", indent);
			site_print(stdout, &fc->sc, p->stack, (int)strlen(indent) + 2, callers);
		} else {
			printf("%s%s\n", indent, site_label(&fc->sc, p->stack, lab, sizeof(lab)));
		}
		printf("%s    %s live block%s %s keep%s %s from being returned",
		       indent, cli_count(p->live_blocks), p->live_blocks == 1 ? "" : "s",
		       sizes_str(p->min_size, p->max_size, b, sizeof(b)),
		       p->live_blocks == 1 ? "s" : "", cli_bytes(p->pinned_bytes));
		printf(" (%s of it %s)\n", cli_bytes(p->pinned_page_bytes),
		       callers ? "on their own pages" : "even by malloc_trim");
		printf("%s    ", indent);
		text_classes(fc, p->stack, "");
	}
	if (!shown)
		printf("%s(no live block pins free memory)\n", indent);
	else if (i < o->npinners && o->pinners[i].pinned_bytes)
		printf("%s... and more sites (--top 0 shows all)\n", indent);
}

static void text_occ(const struct frag_occ *o, const char *indent, int pool)
{
	if (pool)
		printf("%sspan                     %12s  from the pool's lowest block to the end of its highest live one\n",
		       indent, cli_bytes(o->span_bytes));
	else
		printf("%sspan                     %12s  from each heap's start to the end of its highest live block (%s heap%s)\n",
		       indent, cli_bytes(o->span_bytes), cli_count(o->heaps),
		       o->heaps == 1 ? "" : "s");
	printf("%slive extents             %12s  %s block%s (%s requested)%s\n",
	       indent, cli_bytes(o->occupied_bytes), cli_count(o->live_blocks),
	       o->live_blocks == 1 ? "" : "s", cli_bytes(o->live_bytes),
	       pool ? "" : " with their headers");
	printf("%spages holding live bytes %12s\n", indent, cli_bytes(o->live_page_bytes));
	printf("%sfree pages in the span   %12s  %s\n", indent, cli_bytes(o->free_page_bytes),
	       pool ? "whole pages the pool could give back" :
		      "malloc_trim(0) could return them; free() never does");
	printf("%spinned                   %12s  free memory below live blocks: %s\n",
	       indent, cli_bytes(o->pinned_bytes),
	       pool ? "the pool cannot shrink past them" :
		      "trimming the top cannot return it");
	printf("%s  on pages with live bytes %10s  nothing returns it but freeing those blocks\n",
	       indent, cli_bytes(o->pinned_page_bytes));
}

static void text_holes(const struct frag_result *res)
{
	const struct frag_occ *o = &res->heap;
	uint64_t nreq = 0, half, acc = 0, free_bytes = 0, small = 0;
	unsigned i, median = 0;

	printf("\nfree space shape (holes between live blocks, below the top)\n");
	if (!o->holes) {
		printf("  no holes: the live blocks lie back to back\n");
		return;
	}
	printf("  %-22s %12s %12s %14s\n", "size", "holes", "hole bytes", "requests so far");
	for (i = 0; i < FRAG_NLOG2; i++) {
		nreq += res->requests[i];
		free_bytes += o->hole_bytes[i];
	}
	for (i = 0; i < FRAG_NLOG2; i++) {
		char b[64];

		if (!o->hole_count[i] && !res->requests[i])
			continue;
		snprintf(b, sizeof(b), "%s-%s", cli_bytes(i ? 1ull << i : 0),
			 cli_bytes((2ull << i) - 1));
		printf("  %-22s %12s %12s %14s\n", b, cli_count(o->hole_count[i]),
		       cli_bytes(o->hole_bytes[i]), cli_count(res->requests[i]));
	}
	if (!nreq)
		return;
	half = (nreq + 1) / 2;
	for (i = 0; i < FRAG_NLOG2; i++) {
		acc += res->requests[i];
		if (acc >= half) {
			median = i;
			break;
		}
	}
	for (i = 0; i < median; i++)
		small += o->hole_bytes[i];
	printf("  %s of the free bytes between live blocks are in holes smaller than the typical request (%s-%s)%s\n",
	       cli_percent(small, free_bytes), cli_bytes(median ? 1ull << median : 0),
	       cli_bytes((2ull << median) - 1),
	       small * 2 > free_bytes ? ": the program's usual requests cannot reuse them" :
					": the free space could serve the usual requests");
}

static void text_growth(struct fragcmd *fc)
{
	const struct frag_result *res = fc->res;
	size_t i;
	char lab[512];

	printf("\ngrowth patterns (sites whose blocks grow step by step)\n");
	if (!res->ngrowth) {
		printf("  none: no site grew a block %d times or more\n", FRAG_MIN_GROWS);
		return;
	}
	for (i = 0; i < res->ngrowth && (!fc->top || i < fc->top); i++) {
		const struct frag_growth *g = &res->growth[i];

		printf("  %s: %s\n", g->pattern == FRAG_EXACT_FIT ? "exact-fit" : "geometric",
		       site_label(&fc->sc, g->stack, lab, sizeof(lab)));
		printf("      %s growth steps (%s by realloc, %s by a new block and a free), through %s%s distinct sizes, x%.2f a step on average, up to %s\n",
		       cli_count(g->grows), cli_count(g->reallocs), cli_count(g->copies),
		       g->distinct_sizes >= FRAG_DISTINCT_MAX ? "at least " : "",
		       cli_count(g->distinct_sizes), g->mean_ratio, cli_bytes(g->max_size));
		printf("      ");
		text_classes(fc, g->stack, "");
		if (g->pattern == FRAG_EXACT_FIT)
			printf("      advice: grow the capacity geometrically (x1.5 or x2) or round sizes up to the allocator's size classes (malloc_usable_size); each exact-fit step leaves a hole of the old size behind\n");
	}
}

/* Evenly spread rows of the timeline, the first and last included. */
static size_t pick_rows(size_t n, size_t want, size_t k)
{
	if (n <= want)
		return k;
	return want > 1 ? k * (n - 1) / (want - 1) : n - 1;
}

static void text_timeline(const struct frag_result *res)
{
	size_t k, want = res->nrows < TEXT_ROWS ? res->nrows : TEXT_ROWS;

	if (!res->nrows)
		return;
	printf("\nover time (%s samples)\n", cli_count(res->nrows));
	printf("  %10s %11s %11s %11s %11s %11s %8s\n", "time", "requested", "usable",
	       "live pages", "held", "RSS", "RSS/used");
	for (k = 0; k < want; k++) {
		const struct frag_row *w = &res->rows[pick_rows(res->nrows, want, k)];
		char b[32];

		printf("  %10s %11s %11s %11s %11s %11s %8s\n", cli_at(w->time),
		       cli_bytes(w->requested_bytes), cli_bytes(w->usable_bytes),
		       cli_bytes(w->live_page_bytes),
		       cli_bytes(w->sample.arena_bytes + w->sample.mmap_bytes),
		       cli_bytes(w->sample.rss_bytes),
		       ratio_str(ratio(w->sample.rss_bytes, w->usable_bytes), b, sizeof(b)));
	}
}

static void frag_text(struct fragcmd *fc)
{
	const struct frag_result *res = fc->res;
	const struct frag_ladder *l = &res->ladder;
	const struct frag_ladder *pk = &res->peak;
	size_t i;
	char b[32];

	printf("fragmentation in '%s' at %s\n", fc->path, cli_time_str(&fc->at));
	printf("\nbyte ladder%*s%12s  %10s\n", 24, "", "bytes", "step");
	text_ladder(l, "  ");
	if (l->mmapped_blocks)
		printf("  (%s of it in %s mmapped block%s: their own mappings, returned on free, never fragmented)\n",
		       cli_bytes(l->mmapped_bytes), cli_count(l->mmapped_blocks),
		       l->mmapped_blocks == 1 ? "" : "s");
	text_ratios(l);

	printf("\nheap occupancy (malloc heaps, mmapped blocks left out)\n");
	text_occ(&res->heap, "  ", 0);
	printf("\nwho pins it\n");
	text_pinners(fc, &res->heap, "  ", 0);
	text_holes(res);
	text_growth(fc);
	text_timeline(res);

	printf("\nfootprint against live bytes\n");
	if (pk->requested_bytes) {
		printf("  at the peak of live heap (%s): %s requested, %s usable, %s of pages",
		       cli_at(pk->time), cli_bytes(pk->requested_bytes),
		       cli_bytes(pk->usable_bytes), cli_bytes(pk->live_page_bytes));
		if (pk->have_sample)
			printf(", held %s, RSS %s (RSS/requested %s, sampled at %s)",
			       cli_bytes(held(pk)), cli_bytes(pk->sample.rss_bytes),
			       ratio_str(ratio(pk->sample.rss_bytes, pk->requested_bytes), b, sizeof(b)),
			       cli_at(pk->sample_time));
		printf("\n");
	}
	if (res->peak_rss_bytes)
		printf("  highest RSS sampled: %s at %s with %s live (RSS/requested %s)\n",
		       cli_bytes(res->peak_rss_bytes), cli_at(res->peak_rss_time),
		       cli_bytes(res->peak_rss_requested),
		       ratio_str(ratio(res->peak_rss_bytes, res->peak_rss_requested), b, sizeof(b)));

	for (i = 0; i < res->npools; i++) {
		const struct frag_pool *p = &res->pools[i];

		printf("\npool %llu%s%s%s%s\n", (unsigned long long)p->id,
		       p->label ? " '" : "", p->label ? p->label : "", p->label ? "'" : "",
		       p->alive ? "" : " (destroyed)");
		text_occ(&p->occ, "  ", 1);
		printf("  who pins it\n");
		text_pinners(fc, &p->occ, "    ", 2);
	}
}

/* ---- JSON ------------------------------------------------------------- */

static void json_classes(struct json *j, struct fragcmd *fc, uint32_t stack)
{
	const uint64_t *c = frag_site_classes(fc->f, stack);
	unsigned i;

	json_key(j, "size_classes");
	json_arr_begin(j);
	for (i = 0; c && i < FRAG_NCLASS; i++) {
		if (!c[i])
			continue;
		json_obj_begin(j);
		json_kv_u64(j, "min_bytes", i ? frag_class_bound(i - 1) + 1 : 0);
		json_kv_u64(j, "max_bytes", frag_class_bound(i));
		json_kv_u64(j, "allocations", c[i]);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_ladder(struct json *j, const struct frag_ladder *l)
{
	json_obj_begin(j);
	json_kv_double(j, "time_seconds", (double)l->time / 1e9);
	json_kv_u64(j, "requested_bytes", l->requested_bytes);
	json_kv_u64(j, "usable_bytes", l->usable_bytes);
	json_kv_u64(j, "live_page_bytes", l->live_page_bytes);
	json_key(j, "allocator_held_bytes");
	if (l->have_sample)
		json_u64(j, held(l));
	else
		json_null(j);
	json_key(j, "rss_bytes");
	if (l->have_sample)
		json_u64(j, l->sample.rss_bytes);
	else
		json_null(j);
	json_kv_u64(j, "mmapped_bytes", l->mmapped_bytes);
	json_kv_u64(j, "mmapped_blocks", l->mmapped_blocks);
	json_key(j, "sample");
	if (l->have_sample) {
		json_obj_begin(j);
		json_kv_double(j, "time_seconds", (double)l->sample_time / 1e9);
		json_key(j, "exact");
		json_bool(j, l->sample_exact);
		dumpjson_sample(j, &l->sample);
		json_obj_end(j);
	} else {
		json_null(j);
	}
	json_key(j, "gaps");
	json_obj_begin(j);
	json_kv_i64(j, "rounding_bytes", gap(l->usable_bytes, l->requested_bytes));
	json_kv_i64(j, "page_bytes", gap(l->live_page_bytes, l->usable_bytes));
	json_key(j, "held_free_bytes");
	if (l->have_sample)
		json_i64(j, gap(held(l), l->live_page_bytes));
	else
		json_null(j);
	json_key(j, "rss_over_held_bytes");
	if (l->have_sample)
		json_i64(j, gap(l->sample.rss_bytes, held(l)));
	else
		json_null(j);
	json_obj_end(j);
	json_key(j, "ratios");
	json_obj_begin(j);
	json_kv_double(j, "usable_per_requested", ratio(l->usable_bytes, l->requested_bytes));
	json_kv_double(j, "pages_per_usable", ratio(l->live_page_bytes, l->usable_bytes));
	json_kv_double(j, "held_per_pages",
		       l->have_sample ? ratio(held(l), l->live_page_bytes) : 0.0 / 0.0);
	json_kv_double(j, "rss_per_held",
		       l->have_sample ? ratio(l->sample.rss_bytes, held(l)) : 0.0 / 0.0);
	json_kv_double(j, "mem_fragmentation_ratio",
		       l->have_sample ? ratio(l->sample.rss_bytes, l->usable_bytes) : 0.0 / 0.0);
	json_obj_end(j);
	json_obj_end(j);
}

static void json_pinners(struct json *j, struct fragcmd *fc, const struct frag_occ *o)
{
	size_t i, shown = 0;

	json_key(j, "pinning_sites");
	json_arr_begin(j);
	for (i = 0; i < o->npinners && (!fc->top || shown < fc->top); i++) {
		const struct frag_pinner *p = &o->pinners[i];

		if (!p->pinned_bytes)
			break;
		shown++;
		json_obj_begin(j);
		site_json_fields(j, &fc->sc, p->stack);
		json_kv_u64(j, "pinned_bytes", p->pinned_bytes);
		json_kv_u64(j, "pinned_page_bytes", p->pinned_page_bytes);
		json_kv_u64(j, "releasable_bytes", p->releasable_bytes);
		json_kv_u64(j, "live_bytes", p->live_bytes);
		json_kv_u64(j, "live_blocks", p->live_blocks);
		json_kv_u64(j, "min_size_bytes", p->min_size);
		json_kv_u64(j, "max_size_bytes", p->max_size);
		json_classes(j, fc, p->stack);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void json_occ(struct json *j, struct fragcmd *fc, const struct frag_occ *o,
		     const uint64_t *requests)
{
	unsigned i;

	json_kv_u64(j, "heaps", o->heaps);
	json_kv_u64(j, "heap_span_bytes", o->span_bytes);
	json_kv_u64(j, "heap_live_bytes", o->live_bytes);
	json_kv_u64(j, "heap_live_blocks", o->live_blocks);
	json_kv_u64(j, "heap_usable_bytes", o->usable_bytes);
	json_kv_u64(j, "occupied_bytes", o->occupied_bytes);
	json_kv_u64(j, "live_page_bytes", o->live_page_bytes);
	json_kv_u64(j, "free_page_bytes", o->free_page_bytes);
	json_kv_u64(j, "pinned_bytes", o->pinned_bytes);
	json_kv_u64(j, "pinned_page_bytes", o->pinned_page_bytes);
	json_kv_u64(j, "releasable_bytes", o->releasable_bytes);
	json_pinners(j, fc, o);
	json_key(j, "holes");
	json_arr_begin(j);
	for (i = 0; i < FRAG_NLOG2; i++) {
		if (!o->hole_count[i] && !(requests && requests[i]))
			continue;
		json_obj_begin(j);
		json_kv_u64(j, "min_bytes", i ? 1ull << i : 0);
		json_kv_u64(j, "max_bytes", (2ull << i) - 1);
		json_kv_u64(j, "holes", o->hole_count[i]);
		json_kv_u64(j, "hole_bytes", o->hole_bytes[i]);
		if (requests)
			json_kv_u64(j, "requests", requests[i]);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void frag_json(struct fragcmd *fc)
{
	const struct frag_result *res = fc->res;
	struct json j;
	size_t i, want;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", fc->path);
	json_kv_double(&j, "at_seconds", (double)res->at / 1e9);
	json_kv_u64(&j, "page_size_bytes", res->page_size);
	json_kv_u64(&j, "live_bytes", res->ladder.requested_bytes);
	json_kv_u64(&j, "usable_bytes", res->ladder.usable_bytes);
	json_kv_u64(&j, "mmapped_bytes", res->ladder.mmapped_bytes);
	json_kv_u64(&j, "mmapped_blocks", res->ladder.mmapped_blocks);
	json_occ(&j, fc, &res->heap, res->requests);
	json_key(&j, "ladder");
	json_ladder(&j, &res->ladder);

	json_key(&j, "realloc_patterns");
	json_arr_begin(&j);
	for (i = 0; i < res->ngrowth; i++) {
		const struct frag_growth *g = &res->growth[i];

		json_obj_begin(&j);
		site_json_fields(&j, &fc->sc, g->stack);
		json_kv_str(&j, "pattern", g->pattern == FRAG_EXACT_FIT ? "exact-fit" : "geometric");
		json_kv_u64(&j, "grows", g->grows);
		json_kv_u64(&j, "small_steps", g->small_steps);
		json_kv_u64(&j, "reallocs", g->reallocs);
		json_kv_u64(&j, "copies", g->copies);
		json_kv_u64(&j, "in_place", g->in_place);
		json_kv_u64(&j, "distinct_sizes", g->distinct_sizes);
		json_kv_double(&j, "mean_growth_ratio", g->mean_ratio);
		json_kv_u64(&j, "max_size_bytes", g->max_size);
		json_classes(&j, fc, g->stack);
		json_obj_end(&j);
	}
	json_arr_end(&j);

	json_key(&j, "peak");
	json_ladder(&j, &res->peak);
	json_key(&j, "peak_rss");
	json_obj_begin(&j);
	json_kv_u64(&j, "rss_bytes", res->peak_rss_bytes);
	json_kv_double(&j, "time_seconds", (double)res->peak_rss_time / 1e9);
	json_kv_u64(&j, "requested_bytes", res->peak_rss_requested);
	json_kv_u64(&j, "usable_bytes", res->peak_rss_usable);
	json_obj_end(&j);

	json_key(&j, "timeline");
	json_arr_begin(&j);
	want = res->nrows < JSON_ROWS ? res->nrows : JSON_ROWS;
	for (i = 0; i < want; i++) {
		const struct frag_row *w = &res->rows[pick_rows(res->nrows, want, i)];

		json_obj_begin(&j);
		json_kv_double(&j, "time_seconds", (double)w->time / 1e9);
		json_kv_u64(&j, "requested_bytes", w->requested_bytes);
		json_kv_u64(&j, "usable_bytes", w->usable_bytes);
		json_kv_u64(&j, "live_page_bytes", w->live_page_bytes);
		json_kv_u64(&j, "allocator_held_bytes", w->sample.arena_bytes + w->sample.mmap_bytes);
		json_kv_u64(&j, "rss_bytes", w->sample.rss_bytes);
		json_obj_end(&j);
	}
	json_arr_end(&j);

	json_key(&j, "pools");
	json_arr_begin(&j);
	for (i = 0; i < res->npools; i++) {
		const struct frag_pool *p = &res->pools[i];

		json_obj_begin(&j);
		json_kv_u64(&j, "id", p->id);
		json_kv_str(&j, "label", p->label);
		json_key(&j, "alive");
		json_bool(&j, p->alive);
		json_kv_u64(&j, "live_bytes", p->occ.live_bytes);
		json_kv_u64(&j, "live_blocks", p->occ.live_blocks);
		json_occ(&j, fc, &p->occ, NULL);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

/* ---- the verb --------------------------------------------------------- */

static int read_error(struct fragcmd *fc)
{
	const char *why = replay_error(fc->r);

	cli_error("cannot read '%s': %s", fc->path, why ? why : "read error");
	return -1;
}

/* Replays to the moment, takes the snapshot there, then replays the rest. */
static int run(struct fragcmd *fc)
{
	uint64_t at;
	int rc;

	fc->d = cli_open_dump(fc->path);
	if (!fc->d)
		return -1;
	if (dump_process(fc->d)->flags & HTR_PF_COMPACT) {
		cli_error("cannot map '%s': it is a compact dump (heaptrail pack --compact), which "
			  "keeps no block addresses; run frag on the dump as it was recorded", fc->path);
		return -1;
	}
	fc->r = replay_new(fc->d);
	fc->f = fc->r ? frag_new(fc->r) : NULL;
	if (!fc->f) {
		cli_error("out of memory");
		return -1;
	}
	if (fc->at.kind == CLI_TIME_END) {
		if (cli_replay_run(fc->r) < 0)
			return -1;
		at = replay_totals(fc->r)->duration;
		fc->at.ns = at;
		rc = frag_snapshot(fc->f, at);
	} else {
		at = fc->at.kind == CLI_TIME_START ? 0 : fc->at.ns;
		if (replay_run_until(fc->r, at) < 0)
			return read_error(fc);
		rc = frag_snapshot(fc->f, at);
		if (rc == 0 && cli_replay_run(fc->r) < 0)
			return -1;
		if (at > replay_totals(fc->r)->duration)
			cli_warn("%s is after the end of '%s' (%s): the figures are those at the end",
				 cli_time_str(&fc->at), fc->path,
				 cli_at(replay_totals(fc->r)->duration));
	}
	if (rc == 0)
		rc = frag_finish(fc->f);
	if (rc < 0) {
		cli_error("out of memory");
		return -1;
	}
	fc->res = frag_result(fc->f);
	return 0;
}

int cmd_frag(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "at", required_argument, NULL, 'a' },
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fragcmd fc;
	int c, top = DEFAULT_TOP, rc = CLI_USAGE;

	memset(&fc, 0, sizeof(fc));
	fc.at.kind = CLI_TIME_END;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (cli_parse_time(optarg, &fc.at) < 0)
				return cli_usage("frag", "--at wants seconds (2.5, 500ms), 'start', 'end', 'peak' or a marker name, not '%s'",
						 optarg);
			fc.at_given = 1;
			break;
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage("frag", "--top wants a number of sites, not '%s'",
						 optarg);
			break;
		case 'j':
			fc.json = 1;
			break;
		case 'h':
			help_verb("frag", stdout);
			return 0;
		default:
			return cli_bad_option("frag", c, argv);
		}
	}
	if (cli_one_dump("frag", argc, argv, "heaptrail frag DUMP [--at T] [--json]") < 0)
		return CLI_USAGE;
	fc.path = argv[optind];
	fc.top = (size_t)top;
	/* 'end' needs no pass of its own: the replay ends there anyway */
	if (fc.at.kind != CLI_TIME_END && cli_resolve_times(fc.path, &fc.at, 1) < 0)
		return CLI_USAGE;
	if (run(&fc) == 0) {
		fc.sc.dump = fc.d;
		fc.sc.sym = sym_new(fc.d);
		if (!fc.sc.sym) {
			cli_error("out of memory");
		} else {
			if (fc.json)
				frag_json(&fc);
			else
				frag_text(&fc);
			fflush(stdout);
			sym_print_warnings(fc.sc.sym);
			rc = 0;
		}
	}
	if (rc == 0 && dump_process(fc.d) && dump_process(fc.d)->sample_bytes)
		cli_warn("'%s' holds a sample of the allocations (--sample): page occupancy, pinning and holes see only the sampled blocks",
			 fc.path);
	if (rc == 0 && replay_totals(fc.r)->lost_events)
		cli_warn("%s lost: the figures are incomplete",
			 cli_events_were(replay_totals(fc.r)->lost_events));
	sym_free(fc.sc.sym);
	frag_free(fc.f);
	replay_free(fc.r);
	if (fc.d)
		dump_close(fc.d);
	return rc;
}
