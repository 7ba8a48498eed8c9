/* html_pagemap.c - the HTML report's page map: how full each page of the malloc heaps is at the end */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "html_internal.h"

/*
 * The heaps as frag.h defines them: each range that held malloc blocks,
 * from its lowest address ever to the end of its highest live block (the
 * memory above is the top, which free() gives back).  Mmapped blocks have
 * their own mappings and are left out, as in the occupancy figures.  A page
 * holds the live bytes of the extents ([ptr - 16, ptr + usable)) on it.
 *
 * Long heaps are drawn with several pages per cell (the same number for
 * every heap, so cells compare): 'cell_pages'.  Each cell carries, as one
 * character of LEVELS, its occupied share (0 = no live byte, LEVELS - 1 =
 * full) and its share of wholly free pages, and the site with the most
 * bytes on it.
 */

#define LEVELS 64
static const char level_char[LEVELS + 1] =
	"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_";

#define CANDIDATES 3		/* sites tracked per cell, to name the one with most bytes */

struct pm_block {
	uint64_t lo, hi;
	uint32_t stack;
};

struct pm_collect {
	const struct frag *frag;
	struct pm_block *b;
	size_t n, cap;
};

struct pm_cell {
	uint64_t occ;		/* live bytes */
	uint64_t touched;	/* pages with live bytes */
	uint64_t last_page;	/* last page counted in 'touched', + 1 */
	uint64_t bytes[CANDIDATES];
	uint32_t stack[CANDIDATES];
};

static int collect(void *ctx, const struct replay_block *rb)
{
	struct pm_collect *c = ctx;
	uint64_t u = rb->usable > rb->size ? rb->usable : rb->size;

	if (frag_block_mmapped(c->frag, rb))
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		struct pm_block *nb = realloc(c->b, cap * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		c->b = nb;
		c->cap = cap;
	}
	c->b[c->n].lo = rb->ptr - FRAG_HEADER;
	c->b[c->n].hi = rb->ptr + (u ? u : 1);
	c->b[c->n].stack = rb->stack;
	c->n++;
	return 0;
}

static int by_lo(const void *pa, const void *pb)
{
	const struct pm_block *a = pa, *b = pb;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static void credit(struct pm_cell *c, uint32_t stack, uint64_t bytes)
{
	unsigned i, low = 0;

	for (i = 0; i < CANDIDATES; i++) {
		if (c->bytes[i] && c->stack[i] == stack) {
			c->bytes[i] += bytes;
			return;
		}
		if (c->bytes[i] < c->bytes[low])
			low = i;
	}
	/* a site seen after the slots filled up takes the weakest one's place if larger */
	if (bytes > c->bytes[low]) {
		c->bytes[low] = bytes;
		c->stack[low] = stack;
	}
}

static char level(uint64_t part, uint64_t whole)
{
	if (!part || !whole)
		return level_char[0];
	if (part >= whole)
		return level_char[LEVELS - 1];
	return level_char[1 + part * (LEVELS - 2) / whole];
}

/* One heap: blocks [from, to) sorted, all at or above 'start'. */
static int heap_json(struct html *h, const struct pm_block *b, size_t from,
		     size_t to, uint64_t start, uint64_t cell_pages, unsigned shift)
{
	uint64_t ps = 1ull << shift, base = start >> shift, end = base, i, k;
	uint64_t pages, ncells;
	struct pm_cell *cells;
	struct json *j = h->j;
	char buf[32], *str;

	for (i = from; i < to; i++)
		if (((b[i].hi - 1) >> shift) + 1 > end)
			end = ((b[i].hi - 1) >> shift) + 1;
	pages = end - base;
	ncells = (pages + cell_pages - 1) / cell_pages;
	cells = calloc(ncells ? ncells : 1, sizeof(*cells));
	str = malloc(ncells + 1);
	if (!cells || !str) {
		free(cells);
		free(str);
		return -ENOMEM;
	}
	for (i = from; i < to; i++) {
		uint64_t lo = b[i].lo, hi = b[i].hi, p;

		if (i > from && lo < b[i - 1].hi)	/* overlapping extents (bad data): count once */
			lo = b[i - 1].hi;
		if (hi <= lo)
			continue;
		for (p = lo >> shift; p <= (hi - 1) >> shift; p++) {
			uint64_t a = p << shift, z = a + ps;
			struct pm_cell *c = &cells[(p - base) / cell_pages];

			if (a < lo)
				a = lo;
			if (z > hi)
				z = hi;
			c->occ += z - a;
			credit(c, b[i].stack, z - a);
			if (c->last_page != p + 1) {
				c->touched++;
				c->last_page = p + 1;
			}
			/* inside one block the rest of a cell is all its own: jump ahead */
			if (cell_pages > 1 && ((p - base) % cell_pages) == 0 &&
			    ((hi - 1) >> shift) >= p + cell_pages) {
				uint64_t skip = cell_pages - 1;

				c->occ += skip * ps;
				c->touched += skip;
				c->last_page = p + skip + 1;
				credit(c, b[i].stack, skip * ps);
				p += skip;
			}
		}
	}
	json_obj_begin(j);
	snprintf(buf, sizeof(buf), "0x%" PRIx64, base << shift);
	json_kv_str(j, "start", buf);
	json_kv_u64(j, "pages", pages);
	for (k = 0; k < ncells; k++) {
		uint64_t n = k + 1 < ncells ? cell_pages : pages - k * cell_pages;

		str[k] = level(cells[k].occ, n * ps);
	}
	str[ncells] = 0;
	json_kv_str(j, "occupied", str);
	for (k = 0; k < ncells; k++) {
		uint64_t n = k + 1 < ncells ? cell_pages : pages - k * cell_pages;

		str[k] = level(n - cells[k].touched, n);
	}
	json_kv_str(j, "free_pages", str);
	json_key(j, "sites");
	json_arr_begin(j);
	for (k = 0; k < ncells; k++) {
		unsigned best = 0, c;

		for (c = 1; c < CANDIDATES; c++)
			if (cells[k].bytes[c] > cells[k].bytes[best])
				best = c;
		if (!cells[k].bytes[best]) {
			json_u64(j, 0);
			continue;
		}
		/*
		 * Not a site the document must hold: a dump with more sites
		 * than --max-sites keeps the ones with most bytes, which cover
		 * most pages; the page names the others by number.
		 */
		json_u64(j, cells[k].stack[best]);
	}
	json_arr_end(j);
	json_obj_end(j);
	free(cells);
	free(str);
	return 0;
}

int html_json_pagemap(struct html *h)
{
	const uint64_t *glo, *ghi;
	size_t ng, r, i = 0;
	struct pm_collect c;
	uint64_t ps, total = 0, cell_pages;
	unsigned shift = 0;
	struct json *j = h->j;
	size_t *first, *last;
	int rc = 0;

	if (!h->f.frag) {	/* a compact dump: no addresses */
		json_key(j, "page_map");
		json_null(j);
		return 0;
	}
	ng = frag_heaps(h->f.frag, &glo, &ghi);
	ps = frag_result(h->f.frag)->page_size;

	while ((1ull << shift) < ps)
		shift++;
	memset(&c, 0, sizeof(c));
	c.frag = h->f.frag;
	first = calloc(ng + 1, sizeof(*first));
	last = calloc(ng + 1, sizeof(*last));
	if (!first || !last || replay_each_block(h->f.r, collect, &c) != 0) {
		rc = -ENOMEM;
		goto out;
	}
	if (c.n)
		qsort(c.b, c.n, sizeof(*c.b), by_lo);
	/* the blocks of each heap, and its span in pages to size the cells */
	for (r = 0; r < ng; r++) {
		uint64_t end = 0;

		while (i < c.n && c.b[i].lo < glo[r])
			i++;	/* below every heap (bad data): not drawn */
		first[r] = i;
		while (i < c.n && c.b[i].lo < ghi[r]) {
			if (c.b[i].hi > end)
				end = c.b[i].hi;
			i++;
		}
		last[r] = i;
		if (i > first[r])
			total += ((end - 1) >> shift) + 1 - (glo[r] >> shift);
	}
	cell_pages = h->opt.map_cells ? (total + h->opt.map_cells - 1) / h->opt.map_cells : 1;
	if (cell_pages < 1)
		cell_pages = 1;

	json_key(j, "page_map");
	json_obj_begin(j);
	json_kv_u64(j, "page_size", ps);
	json_kv_u64(j, "cell_pages", cell_pages);
	json_kv_u64(j, "levels", LEVELS);
	json_kv_u64(j, "pages", total);
	json_key(j, "heaps");
	json_arr_begin(j);
	for (r = 0; r < ng && !rc; r++)
		if (last[r] > first[r])
			rc = heap_json(h, c.b, first[r], last[r], glo[r], cell_pages, shift);
	json_arr_end(j);
	json_obj_end(j);
out:
	free(first);
	free(last);
	free(c.b);
	return rc;
}
