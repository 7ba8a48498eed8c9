/* frag_occ.c - page occupancy of live blocks: spans, pinned memory and who pins it, holes, size classes */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frag_internal.h"
#include "frag_map.h"

/* ---- size classes ----------------------------------------------------- */

uint64_t frag_class_bound(unsigned i)
{
	unsigned j, p, k;

	if (i == 0)
		return 8;
	if (i == 1)
		return 16;
	j = i - 2;
	p = 4 + j / 4;
	k = j % 4 + 1;
	if (p >= 63)
		return UINT64_MAX;
	return (1ull << p) + (uint64_t)k * (1ull << (p - 2));
}

unsigned frag_class_of(uint64_t size)
{
	unsigned p;
	uint64_t k;

	if (size <= 8)
		return 0;
	if (size <= 16)
		return 1;
	p = 63 - (unsigned)__builtin_clzll(size - 1);	/* size in (2^p, 2^(p+1)] */
	k = (size - (1ull << p) + (1ull << (p - 2)) - 1) >> (p - 2);
	return 2 + (p - 4) * 4 + (unsigned)(k - 1);
}

unsigned frag_log2_of(uint64_t size)
{
	return size < 2 ? 0 : 63 - (unsigned)__builtin_clzll(size);
}

/* ---- heap ranges ------------------------------------------------------ */

static int near(uint64_t lo, uint64_t hi, uint64_t glo, uint64_t ghi)
{
	return lo <= ghi + FRAG_REGION_GAP && hi + FRAG_REGION_GAP >= glo;
}

/* Merges range i with its neighbours while they are near. */
static void settle(struct fregions *g, size_t i)
{
	while (i + 1 < g->n && near(g->lo[i], g->hi[i], g->lo[i + 1], g->hi[i + 1])) {
		if (g->hi[i + 1] > g->hi[i])
			g->hi[i] = g->hi[i + 1];
		memmove(g->lo + i + 1, g->lo + i + 2, (g->n - i - 2) * sizeof(*g->lo));
		memmove(g->hi + i + 1, g->hi + i + 2, (g->n - i - 2) * sizeof(*g->hi));
		g->n--;
	}
	while (i > 0 && near(g->lo[i - 1], g->hi[i - 1], g->lo[i], g->hi[i])) {
		if (g->lo[i] < g->lo[i - 1])
			g->lo[i - 1] = g->lo[i];
		if (g->hi[i] > g->hi[i - 1])
			g->hi[i - 1] = g->hi[i];
		memmove(g->lo + i, g->lo + i + 1, (g->n - i - 1) * sizeof(*g->lo));
		memmove(g->hi + i, g->hi + i + 1, (g->n - i - 1) * sizeof(*g->hi));
		g->n--;
		i--;
	}
	g->last = i;
}

int fregions_add(struct fregions *g, uint64_t lo, uint64_t hi)
{
	size_t a, b;

	if (g->n && lo >= g->lo[g->last] && hi <= g->hi[g->last])
		return 0;
	/* the first range whose end is not below lo - gap */
	a = 0;
	b = g->n;
	while (a < b) {
		size_t m = (a + b) / 2;

		if (g->hi[m] + FRAG_REGION_GAP < lo)
			a = m + 1;
		else
			b = m;
	}
	if (a < g->n && near(lo, hi, g->lo[a], g->hi[a])) {
		if (lo < g->lo[a])
			g->lo[a] = lo;
		if (hi > g->hi[a])
			g->hi[a] = hi;
		settle(g, a);
		return 0;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		uint64_t *nl = realloc(g->lo, cap * sizeof(*nl));
		uint64_t *nh;

		if (!nl)
			return -ENOMEM;
		g->lo = nl;
		nh = realloc(g->hi, cap * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		g->hi = nh;
		g->cap = cap;
	}
	memmove(g->lo + a + 1, g->lo + a, (g->n - a) * sizeof(*g->lo));
	memmove(g->hi + a + 1, g->hi + a, (g->n - a) * sizeof(*g->hi));
	g->lo[a] = lo;
	g->hi[a] = hi;
	g->n++;
	g->last = a;
	return 0;
}

void fregions_release(struct fregions *g)
{
	free(g->lo);
	free(g->hi);
	memset(g, 0, sizeof(*g));
}

/* ---- the sweep -------------------------------------------------------- */

/* A page that holds live bytes at a block's edge (interior pages are a block's alone). */
struct pg {
	uint64_t page;
	uint64_t occ;		/* bytes of live extents on it */
	uint32_t ntouch;	/* live blocks on it */
	uint32_t first;		/* the lowest of them: gets the remainder of the shares */
};

struct sweep {
	struct frag_occ *o;
	struct occ_block *b;
	uint64_t ps;
	unsigned shift;
	struct pg *pg;
	size_t npg, cappg;
	struct fmap site;	/* stack + 1 -> index into o->pinners + 1 */
	size_t cappin;
};

static int by_lo(const void *pa, const void *pb)
{
	const struct occ_block *a = pa, *b = pb;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static struct frag_pinner *pinner(struct sweep *s, uint32_t stack)
{
	struct frag_occ *o = s->o;
	int found;
	uint64_t *v = fmap_put(&s->site, (uint64_t)stack + 1, &found);

	if (!v)
		return NULL;
	if (found)
		return &o->pinners[*v - 1];
	if (o->npinners == s->cappin) {
		size_t cap = s->cappin ? s->cappin * 2 : 64;
		struct frag_pinner *np = realloc(o->pinners, cap * sizeof(*np));

		if (!np) {
			fmap_del(&s->site, (uint64_t)stack + 1);
			return NULL;
		}
		o->pinners = np;
		s->cappin = cap;
	}
	memset(&o->pinners[o->npinners], 0, sizeof(o->pinners[0]));
	o->pinners[o->npinners].stack = stack;
	o->pinners[o->npinners].min_size = UINT64_MAX;
	*v = ++o->npinners;
	return &o->pinners[*v - 1];
}

/* Adds 'occ' bytes of block i on 'page'; returns the entry's index or -1. */
static int64_t touch(struct sweep *s, uint64_t page, uint64_t occ, uint32_t i)
{
	struct pg *p;

	if (s->npg && s->pg[s->npg - 1].page == page) {
		p = &s->pg[s->npg - 1];
		p->occ += occ;
		p->ntouch++;
		return (int64_t)s->npg - 1;
	}
	if (s->npg == s->cappg) {
		size_t cap = s->cappg ? s->cappg * 2 : 1024;
		struct pg *np = realloc(s->pg, cap * sizeof(*np));

		if (!np)
			return -1;
		s->pg = np;
		s->cappg = cap;
	}
	p = &s->pg[s->npg];
	p->page = page;
	p->occ = occ;
	p->ntouch = 1;
	p->first = i;
	return (int64_t)s->npg++;
}

/* Bytes of [lo, hi) on 'page'. */
static uint64_t on_page(const struct sweep *s, uint64_t lo, uint64_t hi, uint64_t page)
{
	uint64_t a = page << s->shift, z = a + s->ps;

	if (lo > a)
		a = lo;
	if (hi < z)
		z = hi;
	return z > a ? z - a : 0;
}

/* One heap: blocks [from, to) of the sorted array, all inside [glo, ghi). */
static int sweep_heap(struct sweep *s, size_t from, size_t to, uint64_t glo)
{
	struct frag_occ *o = s->o;
	uint64_t base = glo >> s->shift;
	uint64_t prev_hi = glo;		/* end of the live extents so far */
	uint64_t next_page = base;	/* first page not yet accounted */
	uint64_t interior = 0, occupied = 0;
	size_t i, k;

	s->npg = 0;
	for (i = from; i < to; i++) {
		struct occ_block *b = &s->b[i];
		struct frag_pinner *p = pinner(s, b->stack);
		uint64_t lo = b->lo > prev_hi ? b->lo : prev_hi;
		uint64_t fp, lp;
		int64_t e;

		if (!p)
			return -ENOMEM;
		p->live_blocks++;
		p->live_bytes += b->size;
		if (b->size < p->min_size)
			p->min_size = b->size;
		if (b->size > p->max_size)
			p->max_size = b->size;
		b->edge[0] = b->edge[1] = UINT32_MAX;
		if (b->hi <= lo)
			continue;	/* wholly inside the block below (bad data): no page of its own */
		if (lo > prev_hi) {
			uint64_t h = lo - prev_hi;
			unsigned c = frag_log2_of(h);

			o->holes++;
			o->hole_count[c]++;
			o->hole_bytes[c] += h;
		}
		fp = lo >> s->shift;
		lp = (b->hi - 1) >> s->shift;
		/* whole free pages below this block: it keeps the top from coming down to them */
		if (fp > next_page) {
			uint64_t free = (fp - next_page) * s->ps;

			o->free_page_bytes += free;
			p->releasable_bytes += free;
			p->pinned_bytes += free;
		}
		/* fp may be the page the block below ended on */
		e = touch(s, fp, on_page(s, lo, b->hi, fp), (uint32_t)i);
		if (e < 0)
			return -ENOMEM;
		b->edge[0] = (uint32_t)e;
		if (lp > fp) {
			e = touch(s, lp, on_page(s, lo, b->hi, lp), (uint32_t)i);
			if (e < 0)
				return -ENOMEM;
			b->edge[1] = (uint32_t)e;
			interior += lp - fp - 1;
		}
		occupied += b->hi - lo;
		prev_hi = b->hi;
		next_page = lp + 1;
	}
	if (next_page <= base)
		return 0;	/* no live extent here */
	o->heaps++;
	o->span_bytes += (next_page - base) * s->ps;
	o->live_page_bytes += (s->npg + interior) * s->ps;
	o->occupied_bytes += occupied;

	/* the free bytes of each live page, in equal shares to the blocks on it */
	for (i = from; i < to; i++) {
		struct occ_block *b = &s->b[i];
		struct frag_pinner *p;
		uint64_t share = 0;

		for (k = 0; k < 2; k++) {
			const struct pg *g;
			uint64_t free;

			if (b->edge[k] == UINT32_MAX)
				continue;
			g = &s->pg[b->edge[k]];
			free = g->occ < s->ps ? s->ps - g->occ : 0;
			share += free / g->ntouch;
			if (g->first == i)
				share += free % g->ntouch;
		}
		if (!share)
			continue;
		p = pinner(s, b->stack);
		if (!p)
			return -ENOMEM;
		p->pinned_page_bytes += share;
		p->pinned_bytes += share;
	}
	return 0;
}

static int by_pinned(const void *pa, const void *pb)
{
	const struct frag_pinner *a = pa, *b = pb;

	if (a->pinned_bytes != b->pinned_bytes)
		return a->pinned_bytes < b->pinned_bytes ? 1 : -1;
	if (a->live_bytes != b->live_bytes)
		return a->live_bytes < b->live_bytes ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

int frag_occ_compute(struct frag_occ *o, struct occ_block *b, size_t n,
		     const struct fregions *g, uint64_t page_size)
{
	struct sweep s;
	size_t i = 0, r;
	int rc = 0;

	memset(o, 0, sizeof(*o));
	memset(&s, 0, sizeof(s));
	s.o = o;
	s.b = b;
	s.ps = page_size;
	while ((1ull << s.shift) < page_size)
		s.shift++;
	if (n)
		qsort(b, n, sizeof(*b), by_lo);
	for (r = 0; r < g->n && rc == 0; r++) {
		size_t from;

		/* blocks below this range belong to none (bad data): counted, not swept */
		for (; i < n && b[i].lo < g->lo[r]; i++) {
			struct frag_pinner *p = pinner(&s, b[i].stack);

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			p->live_blocks++;
			p->live_bytes += b[i].size;
		}
		from = i;
		while (i < n && b[i].lo < g->hi[r])
			i++;
		if (rc == 0 && i > from)
			rc = sweep_heap(&s, from, i, g->lo[r]);
	}
	for (; rc == 0 && i < n; i++) {
		struct frag_pinner *p = pinner(&s, b[i].stack);

		if (!p)
			rc = -ENOMEM;
		else {
			p->live_blocks++;
			p->live_bytes += b[i].size;
		}
	}
	free(s.pg);
	fmap_release(&s.site);
	if (rc) {
		frag_occ_release(o);
		return rc;
	}
	for (i = 0; i < n; i++) {
		o->live_blocks++;
		o->live_bytes += b[i].size;
	}
	o->releasable_bytes = o->free_page_bytes;
	o->pinned_bytes = o->span_bytes > o->occupied_bytes ?
			  o->span_bytes - o->occupied_bytes : 0;
	o->pinned_page_bytes = o->live_page_bytes > o->occupied_bytes ?
			       o->live_page_bytes - o->occupied_bytes : 0;
	for (i = 0; i < o->npinners; i++)
		if (o->pinners[i].min_size == UINT64_MAX)
			o->pinners[i].min_size = 0;
	if (o->npinners)
		qsort(o->pinners, o->npinners, sizeof(*o->pinners), by_pinned);
	return 0;
}

void frag_occ_release(struct frag_occ *o)
{
	free(o->pinners);
	o->pinners = NULL;
	o->npinners = 0;
}
