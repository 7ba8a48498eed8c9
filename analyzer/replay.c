/* replay.c - replays a dump's events into a live map and per-site figures */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "replay.h"
#include "dump_internal.h"	/* the fast lane reads the reader's batches */

/*
 * The live heap blocks sit in an array indexed by the reader's handle (see
 * dump_internal.h): no hashing or probing on the replay's side.  A reader
 * without handles (the unit tests' scripted one) gets them from a map of
 * the replay's own.  Looking a block up by pointer (reachability scans,
 * replay_lookup()) uses an index built when needed.  Pool blocks keep a
 * table keyed by pointer: an open-addressing table with linear probing,
 * Fibonacci hashing of the address, backward-shift deletion (no tombstones,
 * so a long run of malloc/free churn never degrades the probe lengths).
 *
 * A slot is 32 bytes, two to a cache line: everything the per-event path
 * reads on a free (size, site, api, reach class) sits in the slot; the
 * fields only observers and lookups need (usable size, client, thread)
 * live in a parallel "cold" array of 16 bytes per slot that a free never
 * touches when no observer is registered.
 */

#define SLOT_SIZE_BITS 48
#define SLOT_SIZE_MASK ((UINT64_C(1) << SLOT_SIZE_BITS) - 1)
#define SLOT_API_SHIFT 48	/* 5 bits */
#define SLOT_REACH_SHIFT 53	/* 3 bits, SLOT_REACH_NONE when never scanned */
#define SLOT_REACH_NONE 7u

struct slot {
	uint64_t ptr;		/* 0 = empty */
	uint64_t time;
	uint64_t bits;		/* size | api << 48 | reach << 53 */
	uint32_t stack;
	uint32_t spare;
};

struct cold {
	uint64_t client;
	uint32_t extra;		/* usable - size, saturated; pool map: pool index */
	uint32_t tid;
};

_Static_assert(sizeof(struct slot) == 32, "a slot is half a cache line");

struct livemap {
	struct slot *s;
	struct cold *c;
	uint64_t mask;
	unsigned shift;		/* 64 - log2(capacity) */
	uint64_t count;
	uint64_t limit;		/* grow beyond this many entries */
};


static inline uint64_t lm_home(const struct livemap *m, uint64_t ptr)
{
	return (ptr * UINT64_C(0x9E3779B97F4A7C15)) >> m->shift;
}

/*
 * Table memory.  Large tables are mapped with transparent huge pages asked
 * for: every probe lands on a random page, and with 4 KiB pages nearly each
 * one would also miss the TLB (and a prefetch that misses the TLB may be
 * dropped).  Fresh anonymous memory is zeroed, which empties the slots.
 */
#define HUGE_MIN (UINT64_C(2) << 20)

static void *table_alloc(uint64_t bytes)
{
	void *p;

	if (bytes < HUGE_MIN)
		return calloc(1, bytes);
	bytes = (bytes + HUGE_MIN - 1) & ~(HUGE_MIN - 1);
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

static void table_free(void *p, uint64_t bytes)
{
	if (!p)
		return;
	if (bytes < HUGE_MIN) {
		free(p);
		return;
	}
	munmap(p, (bytes + HUGE_MIN - 1) & ~(HUGE_MIN - 1));
}

static int lm_init(struct livemap *m, unsigned bits)
{
	uint64_t cap = UINT64_C(1) << bits;

	m->s = table_alloc(cap * sizeof(*m->s));
	m->c = table_alloc(cap * sizeof(*m->c));
	if (!m->s || !m->c) {
		table_free(m->s, cap * sizeof(*m->s));
		table_free(m->c, cap * sizeof(*m->c));
		m->s = NULL;
		m->c = NULL;
		return -ENOMEM;
	}
	m->mask = cap - 1;
	m->shift = 64 - bits;
	m->count = 0;
	/* 5/8 load: short probe runs, and a live set of 10 M blocks stays < 1 GB */
	m->limit = cap / 2 + cap / 8;
	return 0;
}

static void lm_release(struct livemap *m)
{
	if (m->s) {
		table_free(m->s, (m->mask + 1) * sizeof(*m->s));
		table_free(m->c, (m->mask + 1) * sizeof(*m->c));
	}
	memset(m, 0, sizeof(*m));
}

static int lm_grow(struct livemap *m)
{
	struct livemap n;
	uint64_t i;

	if (lm_init(&n, 64 - m->shift + 1) < 0)
		return -ENOMEM;
	for (i = 0; i <= m->mask; i++) {
		uint64_t j;

		if (!m->s[i].ptr)
			continue;
		j = lm_home(&n, m->s[i].ptr);
		while (n.s[j].ptr)
			j = (j + 1) & n.mask;
		n.s[j] = m->s[i];
		n.c[j] = m->c[i];
	}
	n.count = m->count;
	lm_release(m);
	*m = n;
	return 0;
}

/* Index of ptr's slot, or -1. */
static inline int64_t lm_find(const struct livemap *m, uint64_t ptr)
{
	uint64_t i = lm_home(m, ptr);

	for (;;) {
		uint64_t p = m->s[i].ptr;

		if (p == ptr)
			return (int64_t)i;
		if (!p)
			return -1;
		i = (i + 1) & m->mask;
	}
}

/*
 * The slot for ptr: its existing slot (*found = 1) or a fresh empty one
 * (*found = 0, already counted).  -1 when the table cannot grow.
 */
static inline int64_t lm_put(struct livemap *m, uint64_t ptr, int *found)
{
	uint64_t i;

	if (m->count >= m->limit && lm_grow(m) < 0)
		return -1;
	i = lm_home(m, ptr);
	for (;;) {
		uint64_t p = m->s[i].ptr;

		if (p == ptr) {
			*found = 1;
			return (int64_t)i;
		}
		if (!p) {
			*found = 0;
			m->count++;
			return (int64_t)i;
		}
		i = (i + 1) & m->mask;
	}
}

/* Empties slot i and shifts later members of its probe run back. */
static inline void lm_delete(struct livemap *m, uint64_t i)
{
	uint64_t j = i;

	for (;;) {
		uint64_t h;

		j = (j + 1) & m->mask;
		if (!m->s[j].ptr)
			break;
		h = lm_home(m, m->s[j].ptr);
		/* j may move to i unless its home lies in the cyclic range (i, j] */
		if (((j - h) & m->mask) >= ((j - i) & m->mask)) {
			m->s[i] = m->s[j];
			m->c[i] = m->c[j];
			i = j;
		}
	}
	m->s[i].ptr = 0;
	m->count--;
}

/* The live heap blocks by handle; slot 0 stays empty (HANDLE_NONE). */
struct heapset {
	struct slot *s;
	struct cold *c;
	uint64_t cap;		/* slots */
	uint64_t count;		/* live blocks */
};

static int hs_grow(struct heapset *h, uint64_t handle)
{
	uint64_t cap = h->cap ? h->cap : 1024;
	struct slot *s;
	struct cold *c;

	while (cap <= handle)
		cap *= 2;
	s = realloc(h->s, cap * sizeof(*s));
	if (!s)
		return -ENOMEM;
	h->s = s;
	c = realloc(h->c, cap * sizeof(*c));
	if (!c)
		return -ENOMEM;
	h->c = c;
	memset(s + h->cap, 0, (cap - h->cap) * sizeof(*s));
	memset(c + h->cap, 0, (cap - h->cap) * sizeof(*c));
	h->cap = cap;
	return 0;
}

static void hs_release(struct heapset *h)
{
	free(h->s);
	free(h->c);
	memset(h, 0, sizeof(*h));
}

static inline uint64_t slot_size(const struct slot *s)
{
	return s->bits & SLOT_SIZE_MASK;
}

static inline unsigned slot_api(const struct slot *s)
{
	return (unsigned)(s->bits >> SLOT_API_SHIFT) & 31u;
}

static inline unsigned slot_reach(const struct slot *s)
{
	return (unsigned)(s->bits >> SLOT_REACH_SHIFT) & 7u;
}

static inline void slot_set_reach(struct slot *s, unsigned cls)
{
	s->bits = (s->bits & ~(UINT64_C(7) << SLOT_REACH_SHIFT)) |
		  ((uint64_t)(cls & 7u) << SLOT_REACH_SHIFT);
}

static void slot_to_block(const struct slot *s, const struct cold *c,
			  struct replay_block *b, int pool)
{
	unsigned reach = slot_reach(s);

	b->ptr = s->ptr;
	b->size = slot_size(s);
	b->usable = b->size + (pool ? 0 : c->extra);
	b->time = s->time;
	b->stack = s->stack;
	b->client = c->client;
	b->tid = c->tid;
	b->api = (uint8_t)slot_api(s);
	b->reach = reach == SLOT_REACH_NONE ? 0xff : (uint8_t)reach;
}

/* Per-site figures plus the bookkeeping of the lazy peak snapshot. */
struct site {
	struct site_stats s;	/* first: replay_site() hands out &site->s */
	uint64_t last_seq;	/* event sequence of its last change */
};

#define SITE_SLAB 256
#define MAX_STACK_ID (UINT32_C(1) << 28)

struct site_slab {
	struct site_slab *next;
	unsigned used;
	struct site sites[SITE_SLAB];
};

/* Per-thread state: temporaries and the half of a realloc in flight. */
struct thr {
	uint32_t tid;
	int realloc_pending;
	uint64_t last_alloc;	/* ptr of its last heap event if that was an allocation */
	struct replay_block realloc_old;	/* the block its realloc just released */
};

struct pool {
	uint64_t id;
	int alive;
};

struct observer {
	replay_observer_fn fn;
	void *ctx;
};

#define MAX_OBSERVERS 16
#define LOOKAHEAD 16		/* a power of two */

struct replay {
	struct dump *d;
	double sample_bytes;	/* > 0: the dump holds a Poisson sample by bytes */
	int sampled;		/* sample_bytes > 0 */
	struct heapset live;
	struct livemap pool_live;
	struct hmap own;	/* ptr -> handle when the reader gives none */
	struct hmap idx;	/* ptr -> handle, built for lookups by pointer */
	uint64_t idx_seq;	/* r->seq + 1 when idx was built, 0 = never */
	struct replay_totals t;

	uint64_t seq;		/* heap events applied */
	uint64_t peak_seq;	/* seq at which the global peak was last reached */

	struct site **byid;
	uint32_t nbyid;
	struct site_stats **list;
	size_t nlist, caplist;
	struct site_slab *slabs;

	struct thr *thr;
	size_t nthr, capthr;
	uint32_t *thr_index;	/* open addressing: tid + 1 -> index + 1 */
	uint32_t *thr_key;
	size_t thr_cap;		/* power of two */
	uint32_t last_tid;
	size_t last_thr;
	uint32_t prev_tid;	/* the thread before last_tid, SIZE_MAX prev_thr: none */
	size_t prev_thr;

	struct pool *pools;
	size_t npools, cappools;

	struct observer obs[MAX_OBSERVERS];
	int nobs;

	/*
	 * Events read ahead but not applied yet: ring[head] is the next.  The
	 * read-ahead lets the live-map slot of each event be prefetched some
	 * events before it is needed, which hides most of the cache miss a
	 * large live set costs per event.  An event holding pointers into the
	 * reader (text, reach) stops the read-ahead until it is applied: the
	 * next dump_next() would invalidate them.
	 */
	struct dump_event ring[LOOKAHEAD];
	unsigned head, count;
	int unsafe;		/* events in the ring holding reader pointers */
	int reader_rc;		/* 1 while the reader has more */
	int at_end;
	/* the fast lane: entries lent by the reader, run_i of them applied */
	const struct bev *run;
	size_t run_n, run_i;
	uint64_t run_max;	/* the latest time among them */
	struct replay_block freed;	/* the block the current event released */
	struct replay_block scratch;	/* replay_lookup's answer */
	char err[160];
};

static int fail_oom(struct replay *r)
{
	snprintf(r->err, sizeof(r->err),
		 "out of memory while replaying (%llu live blocks)",
		 (unsigned long long)r->live.count);
	return -1;
}

/* ---- sites ------------------------------------------------------------ */

static struct site *site_create(struct replay *r, uint32_t stack)
{
	struct site *st;

	if (stack >= r->nbyid) {
		uint32_t n = r->nbyid ? r->nbyid : 1024;
		struct site **nb;

		while (n <= stack)
			n *= 2;
		nb = realloc(r->byid, (size_t)n * sizeof(*nb));
		if (!nb)
			return NULL;
		memset(nb + r->nbyid, 0, (size_t)(n - r->nbyid) * sizeof(*nb));
		r->byid = nb;
		r->nbyid = n;
	}
	if (r->nlist == r->caplist) {
		size_t n = r->caplist ? r->caplist * 2 : 1024;
		struct site_stats **nl = realloc(r->list, n * sizeof(*nl));

		if (!nl)
			return NULL;
		r->list = nl;
		r->caplist = n;
	}
	if (!r->slabs || r->slabs->used == SITE_SLAB) {
		struct site_slab *sl = calloc(1, sizeof(*sl));

		if (!sl)
			return NULL;
		sl->next = r->slabs;
		r->slabs = sl;
	}
	st = &r->slabs->sites[r->slabs->used++];
	st->s.stack = stack;
	r->byid[stack] = st;
	r->list[r->nlist++] = &st->s;
	return st;
}

static inline struct site *site_get(struct replay *r, uint32_t stack)
{
	if (stack >= MAX_STACK_ID)	/* corrupt id: keep it out of the table */
		stack = HTR_STACK_NONE;
	if (stack < r->nbyid && r->byid[stack])
		return r->byid[stack];
	return site_create(r, stack);
}

/*
 * Lazy peak snapshot: a site that has not changed since the global peak was
 * last reached still holds its value at the peak, so it is saved just
 * before its first change after the peak (and at read time for the rest).
 */
static inline void site_touch(struct replay *r, struct site *st)
{
	if (st->last_seq <= r->peak_seq)
		st->s.peak_bytes = st->s.live_bytes;
	st->last_seq = r->seq;
}

static inline void site_settle(const struct replay *r, struct site *st)
{
	if (st->last_seq <= r->peak_seq)
		st->s.peak_bytes = st->s.live_bytes;
}

/* ---- threads ---------------------------------------------------------- */

static int thr_rehash(struct replay *r, size_t cap)
{
	uint32_t *key = calloc(cap, sizeof(*key));
	uint32_t *idx = calloc(cap, sizeof(*idx));
	size_t i;

	if (!key || !idx) {
		free(key);
		free(idx);
		return -ENOMEM;
	}
	for (i = 0; i < r->nthr; i++) {
		size_t h = (r->thr[i].tid * 2654435761u) & (cap - 1);

		while (key[h])
			h = (h + 1) & (cap - 1);
		key[h] = r->thr[i].tid + 1;
		idx[h] = (uint32_t)i;
	}
	free(r->thr_key);
	free(r->thr_index);
	r->thr_key = key;
	r->thr_index = idx;
	r->thr_cap = cap;
	return 0;
}

static struct thr *thr_slow(struct replay *r, uint32_t tid)
{
	size_t h;

	if (tid == UINT32_MAX)	/* keeps tid + 1 non-zero */
		tid = 0;
	if (r->nthr) {
		r->prev_tid = r->last_tid;
		r->prev_thr = r->last_thr;
	}
	if (r->thr_cap) {
		h = (tid * 2654435761u) & (r->thr_cap - 1);
		while (r->thr_key[h]) {
			if (r->thr_key[h] == tid + 1) {
				r->last_tid = tid;
				r->last_thr = r->thr_index[h];
				return &r->thr[r->last_thr];
			}
			h = (h + 1) & (r->thr_cap - 1);
		}
	}
	if (r->nthr == r->capthr) {
		size_t n = r->capthr ? r->capthr * 2 : 64;
		struct thr *nt = realloc(r->thr, n * sizeof(*nt));

		if (!nt)
			return NULL;
		r->thr = nt;
		r->capthr = n;
	}
	memset(&r->thr[r->nthr], 0, sizeof(r->thr[0]));
	r->thr[r->nthr].tid = tid;
	r->nthr++;
	if (r->nthr * 2 > r->thr_cap) {
		if (thr_rehash(r, r->thr_cap ? r->thr_cap * 2 : 64) < 0) {
			r->nthr--;
			return NULL;
		}
	} else {
		h = (tid * 2654435761u) & (r->thr_cap - 1);
		while (r->thr_key[h])
			h = (h + 1) & (r->thr_cap - 1);
		r->thr_key[h] = tid + 1;
		r->thr_index[h] = (uint32_t)(r->nthr - 1);
	}
	r->last_tid = tid;
	r->last_thr = r->nthr - 1;
	return &r->thr[r->last_thr];
}

/*
 * Events come in per-thread runs, or two threads interleaved by the merge:
 * one or two compares find the thread mostly.
 */
static inline struct thr *thr_get(struct replay *r, uint32_t tid)
{
	if (tid == r->last_tid && r->nthr)
		return &r->thr[r->last_thr];
	if (tid == r->prev_tid && r->prev_thr != SIZE_MAX) {
		size_t i = r->prev_thr;

		r->prev_tid = r->last_tid;
		r->prev_thr = r->last_thr;
		r->last_tid = tid;
		r->last_thr = i;
		return &r->thr[i];
	}
	return thr_slow(r, tid);
}

/* ---- pools ------------------------------------------------------------ */

static int64_t pool_index(struct replay *r, uint64_t id, int create)
{
	size_t i;

	for (i = r->npools; i-- > 0;)
		if (r->pools[i].id == id && r->pools[i].alive)
			return (int64_t)i;
	if (!create)
		return -1;
	if (r->npools == r->cappools) {
		size_t n = r->cappools ? r->cappools * 2 : 16;
		struct pool *np = realloc(r->pools, n * sizeof(*np));

		if (!np)
			return -2;
		r->pools = np;
		r->cappools = n;
	}
	r->pools[r->npools].id = id;
	r->pools[r->npools].alive = 1;
	return (int64_t)r->npools++;
}

/* ---- applying events -------------------------------------------------- */

#define HT_LIKELY_REPLAY(x) __builtin_expect(!!(x), 1)

static void notify(struct replay *r, const struct dump_event *ev,
		   const struct replay_block *freed)
{
	int i;

	for (i = 0; i < r->nobs; i++)
		r->obs[i].fn(r->obs[i].ctx, r, ev, freed);
}

static inline void global_peak(struct replay *r, uint64_t time)
{
	if (r->t.live_bytes > r->t.peak_live_bytes) {
		r->t.peak_live_bytes = r->t.live_bytes;
		r->t.peak_time = time;
		r->peak_seq = r->seq;
	}
}

/*
 * Sampled dumps: a block of s bytes was recorded with probability
 * p = 1 - exp(-s / mean), so it stands for 1/p blocks and s/p bytes
 * (the unbiased estimate tcmalloc and jemalloc use).  Full dumps: 1 and s.
 */
static inline double sample_weight(const struct replay *r, uint64_t size)
{
	double p;

	if (HT_LIKELY_REPLAY(r->sample_bytes <= 0))
		return 1.0;
	p = -expm1(-(double)(size ? size : 1) / r->sample_bytes);
	return p > 0 ? 1.0 / p : 1.0;
}

static inline uint64_t est_count(const struct replay *r, uint64_t size)
{
	return r->sample_bytes <= 0 ? 1 : (uint64_t)(sample_weight(r, size) + 0.5);
}

static inline uint64_t est_bytes(const struct replay *r, uint64_t size)
{
	return r->sample_bytes <= 0 ? size :
	       (uint64_t)((double)size * sample_weight(r, size) + 0.5);
}

/* Which family an api belongs to (enum htr_family), by table: a free looks it up twice. */
static const uint8_t api_family[32] = {
	[HTR_API_NEW] = HTR_FAMILY_NEW,
	[HTR_API_DELETE] = HTR_FAMILY_NEW,
	[HTR_API_NEW_ARRAY] = HTR_FAMILY_NEW_ARRAY,
	[HTR_API_DELETE_ARRAY] = HTR_FAMILY_NEW_ARRAY,
};
_Static_assert(HTR_FAMILY_MALLOC == 0, "the table's default is malloc's family");

/* Takes a block out of the accounting of its site (and the totals). */
static inline __attribute__((always_inline)) void unaccount(struct replay *r, const struct slot *s, int heap)
{
	/* the site exists: the block was accounted to it (a slot's stack is its site's) */
	struct site *st = r->byid[s->stack];
	uint64_t size = slot_size(s), n = 1;
	unsigned reach = slot_reach(s);

	if (heap && __builtin_expect(r->sampled, 0)) {
		n = est_count(r, size);
		size = est_bytes(r, size);
	}
	site_touch(r, st);
	st->s.live_bytes -= size;
	st->s.live_blocks -= n;
	st->s.frees += n;
	if (reach != SLOT_REACH_NONE) {
		st->s.reach_bytes[reach & 3] -= size;
		st->s.reach_blocks[reach & 3] -= n;
	}
	if (heap) {
		r->t.live_bytes -= size;
		r->t.live_blocks -= n;
		r->t.frees += n;
	} else {
		r->t.pool_live_bytes -= size;
		r->t.pool_live_blocks--;
		r->t.pool_frees++;
	}
}

/*
 * Heap allocations and frees come two ways: as a struct dump_event (the
 * general path, with observers) or straight from the reader's batch (the
 * fast lane, see replay_step()).  Both expand these bodies, which take the
 * fields one by one; 'ev' is only for the observers.
 */
#define HOT static inline __attribute__((always_inline))

HOT int alloc_core(struct replay *r, uint64_t time, uint32_t tid, unsigned api,
		   uint64_t ptr, uint64_t old_ptr, uint64_t esize, uint64_t usable,
		   uint32_t stack, uint64_t client, uint32_t i,
		   const struct dump_event *ev)
{
	struct thr *th;
	struct site *st;
	struct slot *s;
	int found;
	uint64_t size = esize & SLOT_SIZE_MASK;
	uint64_t extra;

	if (!ptr)
		return 0;
	r->seq++;
	r->t.recorded_events++;
	th = thr_get(r, tid);
	if (!th)
		return fail_oom(r);
	/* the reader names the old block; a realloc(p, 0) is not a pair */
	if (th->realloc_pending &&
	    (api != HTR_API_REALLOC || old_ptr != th->realloc_old.ptr))
		th->realloc_pending = 0;
	if (th->realloc_pending)
		r->t.reallocs++;
	if (i == HANDLE_NONE)
		i = hmap_alloc(&r->own, ptr);
	if (i == HANDLE_NONE || i == HANDLE_UNKNOWN ||
	    (i >= r->live.cap && hs_grow(&r->live, i) < 0))
		return fail_oom(r);
	s = &r->live.s[i];
	found = s->ptr != 0;
	if (found)	/* its free was never seen (lost events): drop the old one */
		unaccount(r, s, 1);
	else
		r->live.count++;
	st = site_get(r, stack);
	if (!st)
		return fail_oom(r);
	extra = usable > esize ? usable - esize : 0;
	s->ptr = ptr;
	s->time = time;
	s->bits = size | ((uint64_t)(api & 31u) << SLOT_API_SHIFT) |
		  ((uint64_t)SLOT_REACH_NONE << SLOT_REACH_SHIFT);
	s->stack = st->s.stack;
	s->spare = 0;
	r->live.c[i].client = client;
	r->live.c[i].extra = extra > UINT32_MAX ? UINT32_MAX : (uint32_t)extra;
	r->live.c[i].tid = tid;

	site_touch(r, st);
	{
		uint64_t n = 1, bytes = size;

		if (__builtin_expect(r->sampled, 0)) {
			n = est_count(r, size);
			bytes = est_bytes(r, size);
		}
		st->s.allocations += n;
		st->s.allocated_bytes += bytes;
		st->s.live_bytes += bytes;
		st->s.live_blocks += n;
		r->t.allocations += n;
		r->t.allocated_bytes += bytes;
		r->t.live_bytes += bytes;
		r->t.live_blocks += n;
	}
	if (st->s.live_bytes > st->s.max_live_bytes)
		st->s.max_live_bytes = st->s.live_bytes;
	global_peak(r, time);
	th->last_alloc = ptr;
	if (r->nobs)
		notify(r, ev, th->realloc_pending ? &th->realloc_old : NULL);
	th->realloc_pending = 0;
	return 0;
}

HOT int free_core(struct replay *r, uint32_t tid, unsigned api, uint64_t ptr,
		  uint32_t i, const struct dump_event *ev)
{
	struct thr *th = thr_get(r, tid);
	struct slot *s;
	struct site *st;
	int temporary;

	if (!th)
		return fail_oom(r);
	temporary = th->last_alloc == ptr;
	th->last_alloc = 0;
	th->realloc_pending = 0;
	if (!ptr)
		return 0;
	if (i == HANDLE_NONE) {
		i = hmap_free(&r->own, ptr);
		if (i == HANDLE_NONE)
			return fail_oom(r);
	}
	if (i >= r->live.cap || r->live.s[i].ptr != ptr) {	/* not live */
		r->t.unknown_frees++;
		if (r->nobs)
			notify(r, ev, NULL);
		return 0;
	}
	r->seq++;
	r->t.recorded_events++;
	s = &r->live.s[i];
	unaccount(r, s, 1);
	st = r->byid[s->stack];
	/* a realloc's release of its own block is not a temporary allocation */
	if (temporary && api != HTR_API_REALLOC) {
		st->s.temporary++;
		r->t.temporary++;
	}
	if (api && api_family[api & 31u] != api_family[slot_api(s)]) {
		st->s.mismatches++;
		r->t.mismatches++;
	}
	if (api == HTR_API_REALLOC || r->nobs)
		slot_to_block(s, &r->live.c[i], &r->freed, 0);
	if (api == HTR_API_REALLOC) {
		th->realloc_old = r->freed;
		th->realloc_pending = 1;
	}
	s->ptr = 0;
	r->live.count--;
	if (r->nobs)
		notify(r, ev, &r->freed);
	return 0;
}

static int apply_alloc(struct replay *r, const struct dump_event *ev)
{
	return alloc_core(r, ev->time, ev->tid, ev->api, ev->ptr, ev->old_ptr,
			  ev->size, ev->usable, ev->stack, ev->client, ev->handle, ev);
}

static int apply_free(struct replay *r, const struct dump_event *ev)
{
	return free_core(r, ev->tid, ev->api, ev->ptr, ev->handle, ev);
}

/* The fast lane's: an allocation or a free straight from the reader's batch. */
HOT int apply_bev(struct replay *r, const struct bev *e)
{
	/* the caller keeps r->t.duration */
	if (e->kind == DUMP_ALLOC)
		return alloc_core(r, e->time, e->tid, e->api, e->ptr, e->aux,
				  e->size, e->usable, e->stack, e->client, e->handle, NULL);
	return free_core(r, e->tid, e->api, e->ptr, e->handle, NULL);
}

static int apply_pool_alloc(struct replay *r, struct dump_event *ev)
{
	int64_t p = pool_index(r, ev->id, 1);
	struct site *st;
	struct slot *s;
	int64_t i;
	int found;

	if (p == -2)
		return fail_oom(r);
	if (!ev->ptr)
		return 0;
	r->seq++;
	i = lm_put(&r->pool_live, ev->ptr, &found);
	if (i < 0)
		return fail_oom(r);
	s = &r->pool_live.s[i];
	if (found)
		unaccount(r, s, 0);
	st = site_get(r, ev->stack);
	if (!st)
		return fail_oom(r);
	s->ptr = ev->ptr;
	s->time = ev->time;
	s->bits = (ev->size & SLOT_SIZE_MASK) |
		  ((uint64_t)SLOT_REACH_NONE << SLOT_REACH_SHIFT);
	s->stack = st->s.stack;
	s->spare = 0;
	r->pool_live.c[i].client = ev->client;
	r->pool_live.c[i].extra = (uint32_t)p;
	r->pool_live.c[i].tid = ev->tid;
	site_touch(r, st);
	st->s.allocations++;
	st->s.allocated_bytes += slot_size(s);
	st->s.live_bytes += slot_size(s);
	st->s.live_blocks++;
	if (st->s.live_bytes > st->s.max_live_bytes)
		st->s.max_live_bytes = st->s.live_bytes;
	r->t.pool_allocations++;
	r->t.pool_live_bytes += slot_size(s);
	r->t.pool_live_blocks++;
	if (r->nobs)
		notify(r, ev, NULL);
	return 0;
}

/* Releases pool block i and tells observers (with 'ev' as the event). */
static void pool_release(struct replay *r, int64_t i,
			 const struct dump_event *ev)
{
	struct slot *s = &r->pool_live.s[i];

	r->seq++;
	unaccount(r, s, 0);
	if (r->nobs)
		slot_to_block(s, &r->pool_live.c[i], &r->freed, 1);
	lm_delete(&r->pool_live, (uint64_t)i);
	if (r->nobs)
		notify(r, ev, &r->freed);
}

static int apply_pool_destroy(struct replay *r, struct dump_event *ev)
{
	int64_t p = pool_index(r, ev->id, 0);
	uint64_t *ptrs = NULL;
	size_t n = 0, cap = 0, k;
	uint64_t i;

	if (p < 0)
		return 0;
	/* collect first: backward shifts would move entries under a scan */
	for (i = 0; i <= r->pool_live.mask && r->pool_live.s; i++) {
		if (!r->pool_live.s[i].ptr || r->pool_live.c[i].extra != (uint32_t)p)
			continue;
		if (n == cap) {
			uint64_t *np;

			cap = cap ? cap * 2 : 256;
			np = realloc(ptrs, cap * sizeof(*np));
			if (!np) {
				free(ptrs);
				return fail_oom(r);
			}
			ptrs = np;
		}
		ptrs[n++] = r->pool_live.s[i].ptr;
	}
	for (k = 0; k < n; k++) {
		/* each block is released as if by a POOL_FREE */
		struct dump_event fe = *ev;
		int64_t j = lm_find(&r->pool_live, ptrs[k]);

		fe.kind = DUMP_POOL_FREE;
		fe.ptr = ptrs[k];
		if (j >= 0)
			pool_release(r, j, &fe);
	}
	free(ptrs);
	r->pools[p].alive = 0;
	if (r->nobs)
		notify(r, ev, NULL);
	return 0;
}

/*
 * The handle of the live heap block at ptr, -1 when none.  With the
 * reader's handles, an index of the live blocks by pointer is built on the
 * first lookup after the live set changed: lookups come in bursts (a
 * reachability scan), never per event.  -2 when out of memory.
 */
static int64_t heap_find(struct replay *r, uint64_t ptr)
{
	uint32_t h;

	if (!ptr)
		return -1;
	if (r->own.n) {
		h = hmap_get(&r->own, ptr);
	} else {
		if (r->idx_seq != r->seq + 1) {
			uint64_t i;

			hmap_release(&r->idx);
			for (i = 1; i < r->live.cap; i++)
				if (r->live.s[i].ptr &&
				    hmap_put(&r->idx, r->live.s[i].ptr, (uint32_t)i) < 0) {
					hmap_release(&r->idx);
					return -2;
				}
			r->idx_seq = r->seq + 1;
		}
		h = hmap_get(&r->idx, ptr);
	}
	if (h == HANDLE_UNKNOWN || h >= r->live.cap || r->live.s[h].ptr != ptr)
		return -1;
	return h;
}

static int apply_reach(struct replay *r, const struct dump_event *ev)
{
	size_t k;

	r->t.have_reach = 1;
	for (k = 0; k < ev->nreach; k++) {
		int64_t i = heap_find(r, ev->reach[k].ptr);
		struct slot *s;
		struct site *st;
		unsigned old, cls = ev->reach[k].cls & 3u;
		uint64_t size, n;

		if (i == -2)
			return fail_oom(r);
		if (i < 0)
			continue;
		s = &r->live.s[i];
		st = r->byid[s->stack];
		size = est_bytes(r, slot_size(s));
		n = est_count(r, slot_size(s));
		old = slot_reach(s);
		if (old != SLOT_REACH_NONE) {
			st->s.reach_bytes[old & 3] -= size;
			st->s.reach_blocks[old & 3] -= n;
		}
		st->s.reach_bytes[cls] += size;
		st->s.reach_blocks[cls] += n;
		slot_set_reach(s, cls);
	}
	return 0;
}

static int apply(struct replay *r, struct dump_event *ev)
{
	int64_t i;

	switch (ev->kind) {
	case DUMP_ALLOC:
		return apply_alloc(r, ev);
	case DUMP_FREE:
		return apply_free(r, ev);
	case DUMP_SAMPLE:
		r->t.last_rss_bytes = ev->sample.rss_bytes;
		if (ev->sample.rss_bytes > r->t.peak_rss_bytes) {
			r->t.peak_rss_bytes = ev->sample.rss_bytes;
			r->t.peak_rss_time = ev->time;
		}
		break;
	case DUMP_POOL_ALLOC:
		return apply_pool_alloc(r, ev);
	case DUMP_POOL_FREE:
		i = ev->ptr ? lm_find(&r->pool_live, ev->ptr) : -1;
		if (i >= 0)
			pool_release(r, i, ev);
		else if (r->nobs)
			notify(r, ev, NULL);
		return 0;
	case DUMP_POOL_CREATE:
		if (pool_index(r, ev->id, 1) == -2)
			return fail_oom(r);
		break;
	case DUMP_POOL_DESTROY:
		return apply_pool_destroy(r, ev);
	case DUMP_REACH:
		if (apply_reach(r, ev) < 0)
			return -1;
		break;
	case DUMP_THREAD_EXIT: {
		/* the tid may be reused by a new thread */
		struct thr *th = thr_get(r, ev->tid);

		if (th) {
			th->last_alloc = 0;
			th->realloc_pending = 0;
		}
		break;
	}
	case DUMP_LOST:
		r->t.lost_events = ev->lost_events;
		r->t.lost_reason = ev->lost_reason;
		break;
	case DUMP_END:
		r->t.end_how = ev->end_how;
		r->t.end_status = ev->end_status;
		if (ev->lost_events > r->t.lost_events)
			r->t.lost_events = ev->lost_events;
		break;
	default:
		break;
	}
	if (r->nobs)
		notify(r, ev, NULL);
	return 0;
}

/* ---- public ----------------------------------------------------------- */

struct replay *replay_new(struct dump *d)
{
	struct replay *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->d = d;
	if (dump_process(d))
		r->sample_bytes = (double)dump_process(d)->sample_bytes;
	r->sampled = r->sample_bytes > 0;
	if (hs_grow(&r->live, 1) < 0 || lm_init(&r->pool_live, 4) < 0) {
		replay_free(r);
		errno = ENOMEM;
		return NULL;
	}
	/* the "no stack" site always exists so that counts have a home */
	if (!site_create(r, HTR_STACK_NONE)) {
		replay_free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->last_tid = UINT32_MAX;
	r->prev_thr = SIZE_MAX;
	r->reader_rc = 1;
	return r;
}

void replay_free(struct replay *r)
{
	struct site_slab *sl, *next;

	if (!r)
		return;
	hs_release(&r->live);
	hmap_release(&r->own);
	hmap_release(&r->idx);
	lm_release(&r->pool_live);
	for (sl = r->slabs; sl; sl = next) {
		next = sl->next;
		free(sl);
	}
	free(r->byid);
	free(r->list);
	free(r->thr);
	free(r->thr_key);
	free(r->thr_index);
	free(r->pools);
	free(r);
}

static void fast_sync(struct replay *r);

int replay_observe(struct replay *r, replay_observer_fn fn, void *ctx)
{
	if (r->nobs == MAX_OBSERVERS)
		return -ENOSPC;
	/* observers see every event: the rest of a lent run goes the general way */
	fast_sync(r);
	r->obs[r->nobs].fn = fn;
	r->obs[r->nobs].ctx = ctx;
	r->nobs++;
	return 0;
}

static void finish(struct replay *r)
{
	uint64_t t = dump_time(r->d);

	if (t > r->t.duration)
		r->t.duration = t;
	r->at_end = 1;
}

static inline int holds_pointers(const struct dump_event *e)
{
	return e->text || e->reach;
}

/*
 * A macro, not a function: GCC 12 judges a function whose only effect is a
 * prefetch to be pure and deletes the call to it.
 */
#define PREFETCH_SLOT(r, e)							\
	do {									\
		if (((e)->kind == DUMP_FREE || (e)->kind == DUMP_ALLOC) &&	\
		    (e)->handle < (r)->live.cap) {				\
			__builtin_prefetch(&(r)->live.s[(e)->handle], 1);	\
			__builtin_prefetch(&(r)->live.c[(e)->handle], 1);	\
		}								\
	} while (0)

/*
 * Tops the read-ahead up; 1 when an event is ready, else 0 or -1.  Without
 * observers it reads one event at a time: the fast lane below does the
 * read-ahead then, and it only runs with nothing in the ring.
 */
static inline int fetch(struct replay *r)
{
	unsigned want = r->nobs ? LOOKAHEAD : 1;

	while (r->count < want && r->reader_rc > 0 && !r->unsafe) {
		struct dump_event *e = &r->ring[(r->head + r->count) & (LOOKAHEAD - 1)];
		int rc;

		/* the reader sets these only for the kinds that carry them */
		e->text = NULL;
		e->reach = NULL;
		e->nreach = 0;
		rc = dump_next(r->d, e);
		if (rc <= 0) {
			r->reader_rc = rc;
			break;
		}
		r->count++;
		if (holds_pointers(e))
			r->unsafe++;
		else
			PREFETCH_SLOT(r, e);
	}
	if (r->count)
		return 1;
	if (r->reader_rc == 0)
		finish(r);
	return r->reader_rc;
}

static inline struct dump_event *next_event(struct replay *r)
{
	return &r->ring[r->head];
}

static inline int consume(struct replay *r)
{
	struct dump_event *e = &r->ring[r->head];

	r->head = (r->head + 1) & (LOOKAHEAD - 1);
	r->count--;
	if (holds_pointers(e))
		r->unsafe--;
	if (e->time > r->t.duration)
		r->t.duration = e->time;
	return apply(r, e) < 0 ? -1 : 1;
}

/*
 * The fast lane.  With no observer and nothing in the ring, allocations and
 * frees go from the reader's batch to the live map with no struct
 * dump_event in between: dump_heap_run() lends the entries of the batch,
 * which are also the read-ahead (the entry FAST_AHEAD further on names the
 * slot to prefetch), and the lane applies them up to the first that is
 * neither.  Anything else takes the general path, one event at a time.
 *
 * The reader's functions are weak: the unit tests link replay.o with a
 * scripted reader of their own, which has no fast lane.
 */
#define FAST_AHEAD 16
#define FAST_RUN 1024		/* entries lent at a time */
#define FAST_STEP 16		/* applied by one replay_step(r, NULL) at most */
/* Tables below this many slots stay in the cache: no prefetch needed. */
#define PREFETCH_MIN_SLOTS (UINT64_C(1) << 10)

extern size_t dump_heap_run(struct dump *d, const struct bev **first, size_t max)
	__attribute__((weak));
extern void dump_heap_took(struct dump *d, size_t n, uint64_t max_time)
	__attribute__((weak));

/* Gives the reader back what the lane took: before any dump_next(). */
static void fast_sync(struct replay *r)
{
	if (r->run_i)
		dump_heap_took(r->d, r->run_i, r->run_max);
	r->run = NULL;
	r->run_n = r->run_i = 0;
	r->run_max = 0;
}

static inline int is_heap(const struct bev *e)
{
	return e->kind == DUMP_ALLOC || e->kind == DUMP_FREE;
}

/* The next entry of the lent run when the lane may apply it, else NULL. */
static inline const struct bev *fast_peek(struct replay *r)
{
	if (r->run_i < r->run_n)
		return is_heap(&r->run[r->run_i]) ? &r->run[r->run_i] : NULL;
	if (r->nobs || r->count || !dump_heap_run)
		return NULL;
	fast_sync(r);
	r->run_n = dump_heap_run(r->d, &r->run, FAST_RUN);
	return r->run_n && is_heap(r->run) ? r->run : NULL;
}

/*
 * Applies up to n of the next entries of the lent run, stopping before the
 * first that is not an allocation or a free: 1, or -1.  One loop with the
 * bodies expanded in it, the tests that hold for the whole run (prefetch or
 * not, the latest time) taken out of the per-event path.
 */
static inline __attribute__((always_inline)) int fast_take_n(struct replay *r, size_t n)
{
	const struct bev *e = r->run + r->run_i, *end = e + n;
	/* the entries FAST_AHEAD further on exist up to here */
	const struct bev *ahead = r->run_n > FAST_AHEAD ? r->run + r->run_n - FAST_AHEAD : r->run;
	uint64_t mx = r->run_max;
	int rc = 1;

	if (r->live.cap < PREFETCH_MIN_SLOTS)
		ahead = r->run;
	for (; e < end; e++) {
		if (!is_heap(e))
			break;
		if (e < ahead) {
			const struct bev *a = e + FAST_AHEAD;

			if (a->handle < r->live.cap) {
				__builtin_prefetch(&r->live.s[a->handle], 1);
				__builtin_prefetch(&r->live.c[a->handle], 1);
			}
		}
		if (e->time > mx)
			mx = e->time;
		if (apply_bev(r, e) < 0) {
			e++;
			rc = -1;
			break;
		}
	}
	r->run_i = (size_t)(e - r->run);
	r->run_max = mx;
	if (mx > r->t.duration)
		r->t.duration = mx;
	return rc;
}

int replay_step(struct replay *r, struct dump_event *ev)
{
	struct dump_event *e;
	int rc;

	if (!ev && fast_peek(r)) {
		size_t n = r->run_n - r->run_i;

		/* a few in one call: the caller's loop is not worth a call per event */
		return fast_take_n(r, n < FAST_STEP ? n : FAST_STEP);
	}
	fast_sync(r);
	rc = fetch(r);

	if (rc <= 0)
		return rc;
	e = next_event(r);
	rc = consume(r);
	/* the slot stays as it is until the next fetch() */
	if (rc > 0 && ev)
		*ev = *e;
	return rc;
}

int replay_run(struct replay *r)
{
	int rc;

	for (;;) {
		while (fast_peek(r))
			if (fast_take_n(r, r->run_n - r->run_i) < 0)
				goto fail;
		fast_sync(r);
		if ((rc = fetch(r)) <= 0)
			return rc;
		if (consume(r) < 0)
			return -1;
	}
fail:
	fast_sync(r);
	return -1;
}

int replay_run_until(struct replay *r, uint64_t time)
{
	const struct bev *b;
	int rc;

	for (;;) {
		while ((b = fast_peek(r))) {
			size_t n = 0, left = r->run_n - r->run_i;

			while (n < left && is_heap(&b[n]) && b[n].time <= time)
				n++;
			if (!n) {
				fast_sync(r);
				return 0;
			}
			if (fast_take_n(r, n) < 0) {
				fast_sync(r);
				return -1;
			}
		}
		fast_sync(r);
		if ((rc = fetch(r)) <= 0)
			return rc;
		if (next_event(r)->time > time)
			return 0;	/* stays pending for the next call */
		if (consume(r) < 0)
			return -1;
	}
}

int replay_at_end(const struct replay *r)
{
	return r->at_end && !r->count;
}

const char *replay_error(const struct replay *r)
{
	if (r->err[0])
		return r->err;
	return dump_error(r->d);
}

struct dump *replay_dump(struct replay *r)
{
	return r->d;
}

const struct replay_totals *replay_totals(const struct replay *r)
{
	return &r->t;
}

struct site_stats *replay_site(struct replay *r, uint32_t stack)
{
	struct site *st = site_get(r, stack);

	if (!st)
		return NULL;
	site_settle(r, st);
	return &st->s;
}

struct site_stats **replay_sites(struct replay *r, size_t *n)
{
	size_t i;

	for (i = 0; i < r->nlist; i++)
		site_settle(r, (struct site *)r->list[i]);
	*n = r->nlist;
	return r->list;
}

const struct replay_block *replay_lookup(const struct replay *r, uint64_t ptr)
{
	/* the replay itself is never a const object: the scratch is writable */
	struct replay *w = (struct replay *)r;
	int64_t i = heap_find(w, ptr);

	if (i < 0)
		return NULL;
	slot_to_block(&r->live.s[i], &r->live.c[i], &w->scratch, 0);
	return &w->scratch;
}

int replay_each_block(const struct replay *r,
		      int (*fn)(void *ctx, const struct replay_block *b),
		      void *ctx)
{
	struct replay_block b;
	uint64_t i;
	int rc;

	for (i = 1; i < r->live.cap; i++) {
		if (!r->live.s[i].ptr)
			continue;
		slot_to_block(&r->live.s[i], &r->live.c[i], &b, 0);
		rc = fn(ctx, &b);
		if (rc)
			return rc;
	}
	return 0;
}
