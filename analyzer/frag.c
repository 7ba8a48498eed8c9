/* frag.c - fragmentation analysis: follows the replay, takes the figures at a moment */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frag.h"
#include "frag_internal.h"
#include "frag_map.h"

/*
 * One observer follows every event of the replay and keeps, cheaply enough
 * to run on every event:
 *   - the usable bytes of live heap blocks and the pages their extents
 *     touch (a page -> number of extents map for the edge pages of blocks,
 *     a plain count for pages inside one block), so the ladder is known at
 *     every sample, not only at the chosen moment;
 *   - the ranges that ever held heap blocks (the heaps) and, per pool, its
 *     live blocks and ranges;
 *   - per site, a size-class histogram and its growth steps.
 * The page occupancy proper (spans, pinning, holes) needs the live blocks in
 * address order: frag_snapshot() sorts them once, at the chosen moment.
 */

#define MMAP_MIN (128u << 10)	/* glibc's smallest mmap threshold */
#define SMALL_STEP_DIV 10	/* a step adding less than old/10 is small */

struct growth_acc {
	uint64_t grows, small_steps, reallocs, copies, in_place, max_size;
	double log_sum;
	uint32_t ndistinct;
	uint64_t distinct[FRAG_DISTINCT_MAX];
};

struct fsite {
	uint64_t classes[FRAG_NCLASS];
	struct growth_acc *g;
};

/* The last allocation of a thread, to see malloc-copy-free growth. */
struct lastalloc {
	uint64_t ptr, size;
	uint32_t stack;
	int valid;
};

struct pool_acc {
	uint64_t id;
	char *label;
	int alive;
	struct fregions ranges;
};

struct pool_blk {
	uint64_t size;
	uint32_t stack;
	uint32_t pool;		/* index into pools */
};

/* A sample with the heap-event count at its time, to find the one matching a moment. */
struct srow {
	struct frag_row row;
	uint64_t seq;
};

struct frag {
	struct replay *r;
	uint64_t ps;
	unsigned shift;
	int err;

	/* live heap figures */
	uint64_t usable;
	uint64_t mmapped_bytes, mmapped_blocks;
	struct fmap pages;	/* page + 1 -> extents touching it (edge pages) */
	uint64_t interior;	/* pages inside one block */
	uint64_t seq;		/* heap allocations and frees so far */
	struct fregions heaps;
	uint64_t requests[FRAG_NLOG2];

	struct fmap threads;	/* tid + 1 -> index into last + 1 */
	struct lastalloc *last;
	size_t nlast, caplast;

	struct pool_acc *pools;
	size_t npools, cappools;
	struct fmap pool_live;	/* ptr -> index into pblk + 1 */
	struct pool_blk *pblk;
	size_t npblk, cappblk;
	uint32_t *pfree;	/* free indexes of pblk */
	size_t npfree, cappfree;

	struct srow *rows;
	size_t nrows, caprows;

	/* the moment */
	int snapped;
	uint64_t snap_seq;
	struct fsite **sites;	/* by stack id, grown on demand */
	size_t nsites;

	struct frag_result res;
};

/* ---- per-site data ---------------------------------------------------- */

static struct fsite *fsite_get(struct frag *f, uint32_t stack)
{
	if (stack >= f->nsites) {
		size_t n = f->nsites ? f->nsites : 256;
		struct fsite **ns;

		while (n <= stack)
			n *= 2;
		ns = realloc(f->sites, n * sizeof(*ns));
		if (!ns)
			return NULL;
		memset(ns + f->nsites, 0, (n - f->nsites) * sizeof(*ns));
		f->sites = ns;
		f->nsites = n;
	}
	if (!f->sites[stack])
		f->sites[stack] = calloc(1, sizeof(struct fsite));
	return f->sites[stack];
}

const uint64_t *frag_site_classes(const struct frag *f, uint32_t stack)
{
	if (stack >= f->nsites || !f->sites[stack])
		return NULL;
	return f->sites[stack]->classes;
}

static void growth_step(struct frag *f, uint32_t stack, uint64_t old, uint64_t new,
			int by_realloc, int in_place)
{
	struct fsite *s = fsite_get(f, stack);
	struct growth_acc *g;
	uint32_t i;

	if (!s) {
		f->err = -ENOMEM;
		return;
	}
	if (!s->g) {
		s->g = calloc(1, sizeof(*s->g));
		if (!s->g) {
			f->err = -ENOMEM;
			return;
		}
	}
	g = s->g;
	g->grows++;
	if (new - old < old / SMALL_STEP_DIV)
		g->small_steps++;
	if (by_realloc)
		g->reallocs++;
	else
		g->copies++;
	g->in_place += in_place;
	if (old)
		g->log_sum += log((double)new / (double)old);
	if (new > g->max_size)
		g->max_size = new;
	for (i = 0; i < g->ndistinct; i++)
		if (g->distinct[i] == new)
			return;
	if (g->ndistinct < FRAG_DISTINCT_MAX)
		g->distinct[g->ndistinct++] = new;
}

static struct lastalloc *thread_last(struct frag *f, uint32_t tid)
{
	int found;
	uint64_t *v = fmap_put(&f->threads, (uint64_t)tid + 1, &found);

	if (!v)
		return NULL;
	if (!found) {
		if (f->nlast == f->caplast) {
			size_t cap = f->caplast ? f->caplast * 2 : 16;
			struct lastalloc *nl = realloc(f->last, cap * sizeof(*nl));

			if (!nl) {
				fmap_del(&f->threads, (uint64_t)tid + 1);
				return NULL;
			}
			f->last = nl;
			f->caplast = cap;
		}
		memset(&f->last[f->nlast], 0, sizeof(f->last[0]));
		*v = ++f->nlast;
	}
	return &f->last[*v - 1];
}

/* ---- pages ------------------------------------------------------------ */

/*
 * glibc maps a chunk of its own when the request reaches the mmap threshold:
 * the chunk ends on a page boundary and, but for aligned allocations (whose
 * chunk starts past the lead glibc cut off), starts on one too.
 */
static int is_mmapped(const struct frag *f, uint64_t ptr, uint64_t usable, unsigned api)
{
	int aligned_api = api == HTR_API_POSIX_MEMALIGN || api == HTR_API_ALIGNED_ALLOC ||
			  api == HTR_API_MEMALIGN || api == HTR_API_VALLOC ||
			  api == HTR_API_PVALLOC;

	return ((ptr + usable) & (f->ps - 1)) == 0 && usable + FRAG_HEADER >= MMAP_MIN &&
	       (((ptr - FRAG_HEADER) & (f->ps - 1)) == 0 || aligned_api);
}

/*
 * The bytes of a mapped chunk's mapping, as mallinfo2's hblkhd counts them:
 * from the page its header lies on (an aligned block's lead included) to
 * its end.
 */
static uint64_t mapping_bytes(const struct frag *f, uint64_t ptr, uint64_t usable)
{
	return ptr + usable - ((ptr - FRAG_HEADER) & ~(f->ps - 1));
}

static void page_ref(struct frag *f, uint64_t page, int delta)
{
	int found;
	uint64_t *v;

	if (delta > 0) {
		v = fmap_put(&f->pages, page + 1, &found);
		if (!v) {
			f->err = -ENOMEM;
			return;
		}
		(*v)++;
		return;
	}
	v = fmap_get(&f->pages, page + 1);
	if (v && --(*v) == 0)
		fmap_del(&f->pages, page + 1);
}

/* Counts the pages of extent [lo, hi) in or out. */
static void extent(struct frag *f, uint64_t lo, uint64_t hi, int delta)
{
	uint64_t fp = lo >> f->shift, lp = (hi - 1) >> f->shift;

	if (hi <= lo)
		return;
	page_ref(f, fp, delta);
	if (lp > fp) {
		page_ref(f, lp, delta);
		if (delta > 0)
			f->interior += lp - fp - 1;
		else
			f->interior -= lp - fp - 1;
	}
}

static uint64_t usable_of(uint64_t size, uint64_t usable)
{
	return usable > size ? usable : size;
}

static uint64_t live_pages(const struct frag *f)
{
	return (f->pages.count + f->interior) * f->ps;
}

/* ---- the observer ----------------------------------------------------- */

static void heap_alloc(struct frag *f, const struct dump_event *ev,
		       const struct replay_block *old)
{
	uint64_t u = usable_of(ev->size, ev->usable);
	struct fsite *s = fsite_get(f, ev->stack);
	struct lastalloc *la = thread_last(f, ev->tid);
	const struct replay_totals *t = replay_totals(f->r);

	if (!s || !la) {
		f->err = -ENOMEM;
		return;
	}
	f->seq++;
	f->usable += u;
	if (is_mmapped(f, ev->ptr, u, ev->api)) {
		f->mmapped_bytes += mapping_bytes(f, ev->ptr, u);
		f->mmapped_blocks++;
	} else if (fregions_add(&f->heaps, ev->ptr - FRAG_HEADER, ev->ptr + u) < 0) {
		f->err = -ENOMEM;
	}
	extent(f, ev->ptr - FRAG_HEADER, ev->ptr + u, 1);
	s->classes[frag_class_of(ev->size)]++;
	f->requests[frag_log2_of(ev->size)]++;

	if (ev->api == HTR_API_REALLOC && old && ev->size > old->size)
		growth_step(f, ev->stack, old->size, ev->size, 1, ev->ptr == old->ptr);
	la->valid = ev->api != HTR_API_REALLOC;
	la->ptr = ev->ptr;
	la->size = ev->size;
	la->stack = ev->stack;

	/* the ladder when live bytes reach a new peak */
	if (t->live_bytes == t->peak_live_bytes && t->peak_time == ev->time) {
		f->res.peak.time = ev->time;
		f->res.peak.requested_bytes = t->live_bytes;
		f->res.peak.usable_bytes = f->usable;
		f->res.peak.live_page_bytes = live_pages(f);
		f->res.peak.mmapped_bytes = f->mmapped_bytes;
		f->res.peak.mmapped_blocks = f->mmapped_blocks;
		f->res.peak.blocks = t->live_blocks;
	}
}

static void heap_free(struct frag *f, const struct dump_event *ev,
		      const struct replay_block *b)
{
	uint64_t u = usable_of(b->size, b->usable);
	struct lastalloc *la = thread_last(f, ev->tid);

	f->seq++;
	f->usable -= u;
	if (is_mmapped(f, b->ptr, u, b->api)) {
		f->mmapped_bytes -= mapping_bytes(f, b->ptr, u);
		f->mmapped_blocks--;
	}
	extent(f, b->ptr - FRAG_HEADER, b->ptr + u, -1);
	if (!la) {
		f->err = -ENOMEM;
		return;
	}
	/* new block, then the smaller old one of the same site freed: a move */
	if (la->valid && ev->api != HTR_API_REALLOC && b->stack == la->stack &&
	    b->ptr != la->ptr && b->size < la->size && b->time <= ev->time)
		growth_step(f, la->stack, b->size, la->size, 0, 0);
	la->valid = 0;
}

static int64_t pool_find(struct frag *f, uint64_t id)
{
	size_t i;

	for (i = f->npools; i-- > 0;)
		if (f->pools[i].id == id && f->pools[i].alive)
			return (int64_t)i;
	return -1;
}

static int64_t pool_make(struct frag *f, uint64_t id, const char *label)
{
	int64_t i = pool_find(f, id);
	struct pool_acc *p;

	if (i >= 0) {
		if (label && *label && !f->pools[i].label)
			f->pools[i].label = strdup(label);
		return i;
	}
	if (f->npools == f->cappools) {
		size_t cap = f->cappools ? f->cappools * 2 : 8;
		struct pool_acc *np = realloc(f->pools, cap * sizeof(*np));

		if (!np)
			return -1;
		f->pools = np;
		f->cappools = cap;
	}
	p = &f->pools[f->npools];
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->alive = 1;
	if (label && *label)
		p->label = strdup(label);
	return (int64_t)f->npools++;
}

static void pool_alloc(struct frag *f, const struct dump_event *ev)
{
	int64_t p = pool_make(f, ev->id, NULL);
	struct fsite *s = fsite_get(f, ev->stack);
	uint64_t *v;
	uint32_t k;
	int found;

	if (p < 0 || !s) {
		f->err = -ENOMEM;
		return;
	}
	s->classes[frag_class_of(ev->size)]++;
	if (fregions_add(&f->pools[p].ranges, ev->ptr, ev->ptr + ev->size) < 0) {
		f->err = -ENOMEM;
		return;
	}
	v = fmap_put(&f->pool_live, ev->ptr, &found);
	if (!v) {
		f->err = -ENOMEM;
		return;
	}
	if (found) {
		k = (uint32_t)(*v - 1);	/* its free was lost: reuse the entry */
	} else if (f->npfree) {
		k = f->pfree[--f->npfree];
	} else {
		if (f->npblk == f->cappblk) {
			size_t cap = f->cappblk ? f->cappblk * 2 : 256;
			struct pool_blk *nb = realloc(f->pblk, cap * sizeof(*nb));

			if (!nb) {
				fmap_del(&f->pool_live, ev->ptr);
				f->err = -ENOMEM;
				return;
			}
			f->pblk = nb;
			f->cappblk = cap;
		}
		k = (uint32_t)f->npblk++;
	}
	f->pblk[k].size = ev->size;
	f->pblk[k].stack = ev->stack;
	f->pblk[k].pool = (uint32_t)p;
	*v = (uint64_t)k + 1;
}

static void pool_free(struct frag *f, uint64_t ptr)
{
	uint64_t *v = fmap_get(&f->pool_live, ptr);
	uint32_t k;

	if (!v)
		return;
	k = (uint32_t)(*v - 1);
	fmap_del(&f->pool_live, ptr);
	if (f->npfree == f->cappfree) {
		size_t cap = f->cappfree ? f->cappfree * 2 : 256;
		uint32_t *nf = realloc(f->pfree, cap * sizeof(*nf));

		if (!nf) {
			f->err = -ENOMEM;
			return;
		}
		f->pfree = nf;
		f->cappfree = cap;
	}
	f->pfree[f->npfree++] = k;
}

static void sample(struct frag *f, const struct dump_event *ev)
{
	const struct replay_totals *t = replay_totals(f->r);
	struct srow *s;

	if (f->nrows == f->caprows) {
		size_t cap = f->caprows ? f->caprows * 2 : 256;
		struct srow *nr = realloc(f->rows, cap * sizeof(*nr));

		if (!nr) {
			f->err = -ENOMEM;
			return;
		}
		f->rows = nr;
		f->caprows = cap;
	}
	s = &f->rows[f->nrows++];
	s->row.time = ev->time;
	s->row.requested_bytes = t->live_bytes;
	s->row.usable_bytes = f->usable;
	s->row.live_page_bytes = live_pages(f);
	s->row.sample = ev->sample;
	s->seq = f->seq;
}

static void observe(void *ctx, struct replay *r, const struct dump_event *ev,
		    const struct replay_block *freed)
{
	struct frag *f = ctx;
	struct lastalloc *la;

	(void)r;
	switch (ev->kind) {
	case DUMP_ALLOC:
		heap_alloc(f, ev, freed);
		break;
	case DUMP_FREE:
		if (freed)
			heap_free(f, ev, freed);
		else if ((la = thread_last(f, ev->tid)))
			la->valid = 0;
		break;
	case DUMP_SAMPLE:
		sample(f, ev);
		break;
	case DUMP_POOL_CREATE:
		if (pool_make(f, ev->id, ev->text) < 0)
			f->err = -ENOMEM;
		break;
	case DUMP_POOL_DESTROY: {
		int64_t p = pool_find(f, ev->id);

		if (p >= 0)
			f->pools[p].alive = 0;
		break;
	}
	case DUMP_POOL_ALLOC:
		pool_alloc(f, ev);
		break;
	case DUMP_POOL_FREE:
		if (freed)
			pool_free(f, freed->ptr);
		break;
	default:
		break;
	}
}

/* ---- the moment ------------------------------------------------------- */

struct collect {
	struct frag *f;
	struct occ_block *b;
	size_t n, cap;
	uint64_t requested, usable, mmapped_bytes, mmapped_blocks;
	uint64_t mmapped_usable;
};

static int collect_block(void *ctx, const struct replay_block *rb)
{
	struct collect *c = ctx;
	uint64_t u = usable_of(rb->size, rb->usable);
	struct occ_block *b;

	c->requested += rb->size;
	c->usable += u;
	if (is_mmapped(c->f, rb->ptr, u, rb->api)) {
		c->mmapped_bytes += mapping_bytes(c->f, rb->ptr, u);
		c->mmapped_usable += u;
		c->mmapped_blocks++;
		return 0;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		struct occ_block *nb = realloc(c->b, cap * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		c->b = nb;
		c->cap = cap;
	}
	b = &c->b[c->n++];
	b->lo = rb->ptr - FRAG_HEADER;
	b->hi = rb->ptr + u;
	b->size = rb->size;
	b->stack = rb->stack;
	return 0;
}

static int snap_pools(struct frag *f)
{
	struct occ_block *b = NULL;
	size_t *count = NULL, *at = NULL, p, k;
	int rc = 0;

	f->res.pools = calloc(f->npools ? f->npools : 1, sizeof(*f->res.pools));
	count = calloc(f->npools + 1, sizeof(*count));
	at = calloc(f->npools + 1, sizeof(*at));
	b = malloc((f->pool_live.count ? f->pool_live.count : 1) * sizeof(*b));
	if (!f->res.pools || !count || !at || !b) {
		rc = -ENOMEM;
		goto out;
	}
	/* group the live pool blocks by pool */
	for (k = 0; k <= f->pool_live.mask && f->pool_live.keys; k++)
		if (f->pool_live.keys[k])
			count[f->pblk[f->pool_live.vals[k] - 1].pool]++;
	for (p = 0; p < f->npools; p++)
		at[p + 1] = at[p] + count[p];
	for (k = 0; k <= f->pool_live.mask && f->pool_live.keys; k++) {
		const struct pool_blk *pb;
		struct occ_block *o;

		if (!f->pool_live.keys[k])
			continue;
		pb = &f->pblk[f->pool_live.vals[k] - 1];
		o = &b[at[pb->pool]++];
		o->lo = f->pool_live.keys[k];
		o->hi = o->lo + (pb->size ? pb->size : 1);
		o->size = pb->size;
		o->stack = pb->stack;
	}
	for (p = 0; p < f->npools; p++) {
		struct frag_pool *fp;
		size_t first = at[p] - count[p];

		if (!f->pools[p].alive && !count[p])
			continue;
		fp = &f->res.pools[f->res.npools++];
		fp->id = f->pools[p].id;
		fp->label = f->pools[p].label;
		fp->alive = f->pools[p].alive;
		rc = frag_occ_compute(&fp->occ, b + first, count[p], &f->pools[p].ranges, f->ps);
		if (rc)
			goto out;
		fp->occ.usable_bytes = fp->occ.live_bytes;
	}
out:
	free(b);
	free(count);
	free(at);
	return rc;
}

int frag_snapshot(struct frag *f, uint64_t at)
{
	struct collect c;
	const struct replay_totals *t = replay_totals(f->r);
	struct frag_ladder *l = &f->res.ladder;
	int rc;

	if (f->err)
		return f->err;
	memset(&c, 0, sizeof(c));
	c.f = f;
	rc = replay_each_block(f->r, collect_block, &c);
	if (rc) {
		free(c.b);
		return rc < 0 ? rc : -ENOMEM;
	}
	rc = frag_occ_compute(&f->res.heap, c.b, c.n, &f->heaps, f->ps);
	free(c.b);
	if (rc)
		return rc;
	f->res.heap.usable_bytes = c.usable - c.mmapped_usable;
	f->res.at = at;
	l->requested_bytes = c.requested;
	l->usable_bytes = c.usable;
	l->live_page_bytes = live_pages(f);
	l->mmapped_bytes = c.mmapped_bytes;
	l->mmapped_blocks = c.mmapped_blocks;
	l->blocks = t->live_blocks;
	memcpy(f->res.requests, f->requests, sizeof(f->requests));
	f->snap_seq = f->seq;
	f->snapped = 1;
	return snap_pools(f);
}

/* The sample for moment 'at' with heap-event count 'seq': one with no heap event in between if any. */
static void pick_sample(struct frag *f, struct frag_ladder *l, uint64_t at, uint64_t seq)
{
	size_t i, best = SIZE_MAX;
	uint64_t bestd = UINT64_MAX;
	int best_exact = 0;

	for (i = 0; i < f->nrows; i++) {
		const struct srow *s = &f->rows[i];
		uint64_t d = s->row.time > at ? s->row.time - at : at - s->row.time;
		int exact = s->seq == seq;

		if ((exact && !best_exact) || (exact == best_exact && d < bestd)) {
			best = i;
			bestd = d;
			best_exact = exact;
		}
	}
	if (best == SIZE_MAX)
		return;
	l->have_sample = 1;
	l->sample_exact = best_exact;
	l->sample_time = f->rows[best].row.time;
	l->sample = f->rows[best].row.sample;
}

static int by_growth(const void *pa, const void *pb)
{
	const struct frag_growth *a = pa, *b = pb;

	if (a->pattern != b->pattern)
		return a->pattern == FRAG_EXACT_FIT ? -1 : 1;
	if (a->grows != b->grows)
		return a->grows < b->grows ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

static int finish_growth(struct frag *f)
{
	size_t i, n = 0;

	for (i = 0; i < f->nsites; i++)
		if (f->sites[i] && f->sites[i]->g && f->sites[i]->g->grows >= FRAG_MIN_GROWS)
			n++;
	f->res.growth = calloc(n ? n : 1, sizeof(*f->res.growth));
	if (!f->res.growth)
		return -ENOMEM;
	for (i = 0; i < f->nsites; i++) {
		const struct growth_acc *g;
		struct frag_growth *o;

		if (!f->sites[i] || !f->sites[i]->g || f->sites[i]->g->grows < FRAG_MIN_GROWS)
			continue;
		g = f->sites[i]->g;
		o = &f->res.growth[f->res.ngrowth++];
		o->stack = (uint32_t)i;
		o->grows = g->grows;
		o->small_steps = g->small_steps;
		o->reallocs = g->reallocs;
		o->copies = g->copies;
		o->in_place = g->in_place;
		o->distinct_sizes = g->ndistinct;
		o->mean_ratio = exp(g->log_sum / (double)g->grows);
		o->max_size = g->max_size;
		/*
		 * Exact fit: most steps add little (a message, a line) to a
		 * block that is already much larger, through many distinct
		 * sizes.  Geometric growth multiplies the size: few steps,
		 * each adding a fixed fraction.
		 */
		o->pattern = g->small_steps * 2 >= g->grows && g->ndistinct >= FRAG_MIN_GROWS ?
			     FRAG_EXACT_FIT : FRAG_GEOMETRIC;
	}
	if (f->res.ngrowth)
		qsort(f->res.growth, f->res.ngrowth, sizeof(*f->res.growth), by_growth);
	return 0;
}

int frag_finish(struct frag *f)
{
	size_t i;
	int rc;

	if (f->err)
		return f->err;
	if (!f->snapped && (rc = frag_snapshot(f, replay_totals(f->r)->duration)) < 0)
		return rc;
	f->res.ladder.time = f->res.at;
	pick_sample(f, &f->res.ladder, f->res.at, f->snap_seq);
	if (f->res.peak.time || f->res.peak.requested_bytes)
		pick_sample(f, &f->res.peak, f->res.peak.time, UINT64_MAX);
	for (i = 0; i < f->nrows; i++) {
		const struct frag_row *w = &f->rows[i].row;

		if (w->sample.rss_bytes > f->res.peak_rss_bytes) {
			f->res.peak_rss_bytes = w->sample.rss_bytes;
			f->res.peak_rss_time = w->time;
			f->res.peak_rss_requested = w->requested_bytes;
			f->res.peak_rss_usable = w->usable_bytes;
		}
	}
	f->res.rows = calloc(f->nrows ? f->nrows : 1, sizeof(*f->res.rows));
	if (!f->res.rows)
		return -ENOMEM;
	for (i = 0; i < f->nrows; i++)
		f->res.rows[i] = f->rows[i].row;
	f->res.nrows = f->nrows;
	return finish_growth(f);
}

const struct frag_result *frag_result(const struct frag *f)
{
	return &f->res;
}

size_t frag_heaps(const struct frag *f, const uint64_t **lo, const uint64_t **hi)
{
	*lo = f->heaps.lo;
	*hi = f->heaps.hi;
	return f->heaps.n;
}

int frag_block_mmapped(const struct frag *f, const struct replay_block *b)
{
	return is_mmapped(f, b->ptr, usable_of(b->size, b->usable), b->api);
}

/* ---- life ------------------------------------------------------------- */

struct frag *frag_new(struct replay *r)
{
	struct frag *f = calloc(1, sizeof(*f));
	const struct dump_process *p;

	if (!f)
		return NULL;
	f->r = r;
	p = dump_process(replay_dump(r));
	f->ps = p && p->page_size && !(p->page_size & (p->page_size - 1)) ?
		p->page_size : 4096;
	while ((1ull << f->shift) < f->ps)
		f->shift++;
	f->res.page_size = f->ps;
	if (fmap_init(&f->pages, 1024) < 0 || fmap_init(&f->threads, 16) < 0 ||
	    replay_observe(r, observe, f) < 0) {
		frag_free(f);
		errno = ENOMEM;
		return NULL;
	}
	return f;
}

void frag_free(struct frag *f)
{
	size_t i;

	if (!f)
		return;
	fmap_release(&f->pages);
	fmap_release(&f->threads);
	fmap_release(&f->pool_live);
	fregions_release(&f->heaps);
	for (i = 0; i < f->npools; i++) {
		free(f->pools[i].label);
		fregions_release(&f->pools[i].ranges);
	}
	for (i = 0; i < f->res.npools; i++)
		frag_occ_release(&f->res.pools[i].occ);
	free(f->res.pools);
	free(f->pools);
	free(f->pblk);
	free(f->pfree);
	free(f->last);
	free(f->rows);
	for (i = 0; i < f->nsites; i++) {
		if (f->sites[i])
			free(f->sites[i]->g);
		free(f->sites[i]);
	}
	free(f->sites);
	frag_occ_release(&f->res.heap);
	free(f->res.rows);
	free(f->res.growth);
	free(f);
}
