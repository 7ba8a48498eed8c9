/* test_replay.c - unit tests of the replay against a scripted event source */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analyzer/replay.h"

/*
 * replay.o is linked with this file's dump_next() & co. instead of the
 * reader: each test scripts the events, so every figure has a known answer.
 */

struct dump {
	struct dump_event *ev;
	size_t n, cap, i;
	uint64_t now;		/* time of the next scripted event */
	struct dump_process proc;	/* proc.sample_bytes: a sampled dump */
};

const struct dump_process *dump_process(const struct dump *d)
{
	return &d->proc;
}

int dump_next(struct dump *d, struct dump_event *ev)
{
	if (d->i == d->n)
		return 0;
	*ev = d->ev[d->i++];
	return 1;
}

uint64_t dump_time(const struct dump *d)
{
	return d->i ? d->ev[d->i - 1].time : 0;
}

const char *dump_error(const struct dump *d)
{
	return "scripted";
}

static int passed, failed;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (cond) {                                                  \
			passed++;                                            \
		} else {                                                     \
			failed++;                                            \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
		}                                                            \
	} while (0)

#define EQ(a, b) CHECK((uint64_t)(a) == (uint64_t)(b), "%s = %" PRIu64 ", want %" PRIu64, \
		       #a, (uint64_t)(a), (uint64_t)(b))

static struct dump_event *add(struct dump *d, enum dump_kind kind)
{
	struct dump_event *e;

	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->ev = realloc(d->ev, d->cap * sizeof(*d->ev));
		if (!d->ev)
			abort();
	}
	e = &d->ev[d->n++];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->time = ++d->now;
	e->tid = 1;
	return e;
}

static void ev_alloc(struct dump *d, uint32_t tid, uint64_t ptr, uint64_t size,
		     uint32_t stack, unsigned api)
{
	struct dump_event *e = add(d, DUMP_ALLOC);

	e->tid = tid;
	e->ptr = ptr;
	e->size = size;
	e->usable = size + 8;
	e->stack = stack;
	e->api = (uint8_t)api;
}

static void ev_free(struct dump *d, uint32_t tid, uint64_t ptr, unsigned api)
{
	struct dump_event *e = add(d, DUMP_FREE);

	e->tid = tid;
	e->ptr = ptr;
	e->api = (uint8_t)api;
}

static void ev_realloc(struct dump *d, uint32_t tid, uint64_t old, uint64_t ptr,
		       uint64_t size, uint32_t stack)
{
	struct dump_event *e;

	ev_free(d, tid, old, HTR_API_REALLOC);
	ev_alloc(d, tid, ptr, size, stack, HTR_API_REALLOC);
	e = &d->ev[d->n - 1];
	e->old_ptr = old;
}

static struct replay *run_all(struct dump *d)
{
	struct replay *r = replay_new(d);

	if (!r)
		abort();
	CHECK(replay_run(r) == 0, "replay_run failed: %s", replay_error(r));
	return r;
}

static void done(struct dump *d, struct replay *r)
{
	replay_free(r);
	free(d->ev);
	memset(d, 0, sizeof(*d));
}

static void test_basic(void)
{
	struct dump d = { 0 };
	struct replay *r;
	const struct replay_totals *t;
	const struct replay_block *b;

	ev_alloc(&d, 1, 0x1000, 100, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x2000, 200, 2, HTR_API_MALLOC);
	ev_free(&d, 1, 0x1000, HTR_API_FREE);
	ev_free(&d, 1, 0x9999, HTR_API_FREE);	/* unknown */
	ev_alloc(&d, 2, 0x3000, 0, 2, HTR_API_MALLOC);	/* malloc(0) */
	r = run_all(&d);
	t = replay_totals(r);
	EQ(t->allocations, 3);
	EQ(t->frees, 1);
	EQ(t->allocated_bytes, 300);
	EQ(t->live_bytes, 200);
	EQ(t->live_blocks, 2);
	EQ(t->peak_live_bytes, 300);
	EQ(t->peak_time, 2);
	EQ(t->unknown_frees, 1);
	EQ(t->duration, 5);
	EQ(replay_site(r, 1)->peak_bytes, 100);
	EQ(replay_site(r, 1)->live_bytes, 0);
	EQ(replay_site(r, 1)->frees, 1);
	EQ(replay_site(r, 2)->peak_bytes, 200);
	EQ(replay_site(r, 2)->live_blocks, 2);
	b = replay_lookup(r, 0x2000);
	CHECK(b != NULL, "0x2000 is live");
	if (b) {
		EQ(b->size, 200);
		EQ(b->usable, 208);
		EQ(b->stack, 2);
		EQ(b->time, 2);
		EQ(b->api, HTR_API_MALLOC);
		EQ(b->reach, 0xff);
	}
	CHECK(replay_lookup(r, 0x1000) == NULL, "0x1000 was freed");
	CHECK(replay_at_end(r), "at end");
	done(&d, r);
}

/* The site values at the global peak, with the peak moving twice. */
static void test_peak_snapshot(void)
{
	struct dump d = { 0 };
	struct replay *r;

	ev_alloc(&d, 1, 0x10, 100, 1, HTR_API_MALLOC);	/* 100 */
	ev_alloc(&d, 1, 0x20, 50, 2, HTR_API_MALLOC);	/* 150 peak: s1 100 s2 50 */
	ev_free(&d, 1, 0x10, HTR_API_FREE);	/* 50 */
	ev_alloc(&d, 1, 0x30, 30, 1, HTR_API_MALLOC);	/* 80 */
	ev_alloc(&d, 1, 0x40, 200, 3, HTR_API_MALLOC);	/* 280 peak: s1 30 s2 50 s3 200 */
	ev_free(&d, 1, 0x40, HTR_API_FREE);
	ev_free(&d, 1, 0x20, HTR_API_FREE);
	ev_alloc(&d, 1, 0x50, 270, 1, HTR_API_MALLOC);	/* 300 peak: s1 300 */
	ev_free(&d, 1, 0x50, HTR_API_FREE);
	r = run_all(&d);
	EQ(replay_totals(r)->peak_live_bytes, 300);
	EQ(replay_site(r, 1)->peak_bytes, 300);
	EQ(replay_site(r, 2)->peak_bytes, 0);
	EQ(replay_site(r, 3)->peak_bytes, 0);
	EQ(replay_site(r, 1)->max_live_bytes, 300);
	EQ(replay_site(r, 3)->max_live_bytes, 200);
	done(&d, r);

	/* stop at the middle peak: values at 280 */
	ev_alloc(&d, 1, 0x10, 100, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x20, 50, 2, HTR_API_MALLOC);
	ev_free(&d, 1, 0x10, HTR_API_FREE);
	ev_alloc(&d, 1, 0x30, 30, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x40, 200, 3, HTR_API_MALLOC);
	ev_free(&d, 1, 0x40, HTR_API_FREE);
	ev_free(&d, 1, 0x20, HTR_API_FREE);
	r = run_all(&d);
	EQ(replay_totals(r)->peak_live_bytes, 280);
	EQ(replay_totals(r)->peak_time, 5);
	EQ(replay_site(r, 1)->peak_bytes, 30);
	EQ(replay_site(r, 2)->peak_bytes, 50);
	EQ(replay_site(r, 3)->peak_bytes, 200);
	done(&d, r);
}

/*
 * Random churn against a plain model: checks the live map (growth,
 * backward-shift deletion under collisions) and the per-site peak values
 * computed by brute force at every new peak.
 */
#define MODEL_SLOTS 6000
#define MODEL_SITES 13

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_random_model(void)
{
	static uint64_t size[MODEL_SLOTS];
	static uint32_t stack[MODEL_SLOTS];
	static int live[MODEL_SLOTS];
	uint64_t site_live[MODEL_SITES + 1] = { 0 }, site_peak[MODEL_SITES + 1] = { 0 };
	uint64_t total = 0, peak = 0, nlive = 0, allocs = 0;
	struct dump d = { 0 };
	struct replay *r;
	struct site_stats **sites;
	size_t n, i;
	int k, bad = 0;

	for (k = 0; k < 200000; k++) {
		size_t s = rnd() % MODEL_SLOTS;
		/* addresses 16 apart, plus a far cluster, like a real heap */
		uint64_t ptr = (s & 1 ? 0x7f0000000000ull : 0x555500000000ull) + s * 16;

		if (live[s]) {
			ev_free(&d, 1, ptr, HTR_API_FREE);
			live[s] = 0;
			total -= size[s];
			site_live[stack[s]] -= size[s];
			nlive--;
		} else {
			size[s] = rnd() % 5000;
			stack[s] = (uint32_t)(1 + rnd() % MODEL_SITES);
			ev_alloc(&d, 1, ptr, size[s], stack[s], HTR_API_MALLOC);
			live[s] = 1;
			total += size[s];
			site_live[stack[s]] += size[s];
			nlive++;
			allocs++;
			if (total > peak) {
				peak = total;
				memcpy(site_peak, site_live, sizeof(site_peak));
			}
		}
	}
	r = run_all(&d);
	EQ(replay_totals(r)->allocations, allocs);
	EQ(replay_totals(r)->live_blocks, nlive);
	EQ(replay_totals(r)->live_bytes, total);
	EQ(replay_totals(r)->peak_live_bytes, peak);
	sites = replay_sites(r, &n);
	for (i = 0; i < n; i++) {
		uint32_t st = sites[i]->stack;

		if (st == 0)
			continue;
		if (sites[i]->peak_bytes != site_peak[st] ||
		    sites[i]->live_bytes != site_live[st])
			bad++;
	}
	CHECK(n == MODEL_SITES + 1, "%zu sites", n);
	CHECK(!bad, "%d sites differ from the model", bad);
	bad = 0;
	for (i = 0; i < MODEL_SLOTS; i++) {
		uint64_t ptr = (i & 1 ? 0x7f0000000000ull : 0x555500000000ull) + i * 16;
		const struct replay_block *b = replay_lookup(r, ptr);

		if (live[i] != (b != NULL) || (b && (b->size != size[i] || b->stack != stack[i])))
			bad++;
	}
	CHECK(!bad, "%d blocks differ from the model", bad);
	done(&d, r);
}

static void test_temporary(void)
{
	struct dump d = { 0 };
	struct replay *r;

	ev_alloc(&d, 1, 0x10, 8, 1, HTR_API_MALLOC);
	ev_free(&d, 1, 0x10, HTR_API_FREE);	/* temporary */
	ev_alloc(&d, 1, 0x10, 8, 2, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x20, 8, 3, HTR_API_MALLOC);
	ev_free(&d, 1, 0x10, HTR_API_FREE);	/* not: 0x20 came between */
	ev_free(&d, 1, 0x20, HTR_API_FREE);	/* not: a free came between */
	ev_alloc(&d, 1, 0x30, 8, 4, HTR_API_MALLOC);
	ev_alloc(&d, 2, 0x40, 8, 5, HTR_API_MALLOC);	/* another thread */
	ev_free(&d, 1, 0x30, HTR_API_FREE);	/* temporary (per thread) */
	ev_free(&d, 1, 0x40, HTR_API_FREE);	/* not: made by thread 2 */
	ev_alloc(&d, 1, 0x50, 8, 6, HTR_API_MALLOC);
	ev_realloc(&d, 1, 0x50, 0x60, 16, 7);	/* the realloc's free: not */
	ev_free(&d, 1, 0x60, HTR_API_FREE);	/* temporary for site 7 */
	ev_alloc(&d, 5, 0x70, 8, 8, HTR_API_MALLOC);
	add(&d, DUMP_THREAD_EXIT)->tid = 5;
	ev_free(&d, 5, 0x70, HTR_API_FREE);	/* a new thread with the same tid: not */
	r = run_all(&d);
	EQ(replay_totals(r)->temporary, 3);
	EQ(replay_site(r, 1)->temporary, 1);
	EQ(replay_site(r, 2)->temporary, 0);
	EQ(replay_site(r, 3)->temporary, 0);
	EQ(replay_site(r, 4)->temporary, 1);
	EQ(replay_site(r, 5)->temporary, 0);
	EQ(replay_site(r, 6)->temporary, 0);
	EQ(replay_site(r, 7)->temporary, 1);
	EQ(replay_site(r, 8)->temporary, 0);
	done(&d, r);
}

static void test_mismatch(void)
{
	struct dump d = { 0 };
	struct replay *r;

	ev_alloc(&d, 1, 0x10, 8, 1, HTR_API_NEW);
	ev_free(&d, 1, 0x10, HTR_API_FREE);	/* new / free */
	ev_alloc(&d, 1, 0x10, 8, 2, HTR_API_NEW_ARRAY);
	ev_free(&d, 1, 0x10, HTR_API_DELETE);	/* new[] / delete */
	ev_alloc(&d, 1, 0x10, 8, 3, HTR_API_NEW);
	ev_free(&d, 1, 0x10, HTR_API_DELETE_ARRAY);	/* new / delete[] */
	ev_alloc(&d, 1, 0x10, 8, 4, HTR_API_CALLOC);
	ev_free(&d, 1, 0x10, HTR_API_DELETE);	/* calloc / delete */
	ev_alloc(&d, 1, 0x10, 8, 5, HTR_API_NEW);
	ev_free(&d, 1, 0x10, HTR_API_DELETE);	/* fine */
	ev_alloc(&d, 1, 0x10, 8, 5, HTR_API_NEW_ARRAY);
	ev_free(&d, 1, 0x10, HTR_API_DELETE_ARRAY);	/* fine */
	ev_alloc(&d, 1, 0x10, 8, 5, HTR_API_POSIX_MEMALIGN);
	ev_realloc(&d, 1, 0x10, 0x20, 16, 5);	/* fine */
	ev_free(&d, 1, 0x20, HTR_API_FREE);	/* fine */
	ev_alloc(&d, 1, 0x10, 8, 6, HTR_API_NEW);
	ev_realloc(&d, 1, 0x10, 0x20, 16, 5);	/* new / realloc */
	r = run_all(&d);
	EQ(replay_totals(r)->mismatches, 5);
	EQ(replay_site(r, 1)->mismatches, 1);
	EQ(replay_site(r, 2)->mismatches, 1);
	EQ(replay_site(r, 3)->mismatches, 1);
	EQ(replay_site(r, 4)->mismatches, 1);
	EQ(replay_site(r, 5)->mismatches, 0);
	EQ(replay_site(r, 6)->mismatches, 1);
	done(&d, r);
}

struct seen {
	int allocs, frees, realloc_pairs;
	uint64_t freed_size, old_size, old_ptr;
	uint32_t freed_stack, freed_tid;
	uint64_t freed_client, freed_usable;
	int pool_frees, marks;
};

static void observer(void *ctx, struct replay *r, const struct dump_event *ev,
		     const struct replay_block *freed)
{
	struct seen *s = ctx;

	switch (ev->kind) {
	case DUMP_ALLOC:
		s->allocs++;
		if (freed) {
			s->realloc_pairs++;
			s->old_size = freed->size;
			s->old_ptr = ev->old_ptr;
		}
		break;
	case DUMP_FREE:
		if (!freed)
			break;
		s->frees++;
		s->freed_size = freed->size;
		s->freed_stack = freed->stack;
		s->freed_tid = freed->tid;
		s->freed_client = freed->client;
		s->freed_usable = freed->usable;
		break;
	case DUMP_POOL_FREE:
		if (freed)
			s->pool_frees++;
		break;
	case DUMP_MARK:
		s->marks++;
		break;
	default:
		break;
	}
}

static void test_realloc_observer(void)
{
	struct dump d = { 0 };
	struct seen s = { 0 };
	struct replay *r;
	struct dump_event *e;

	ev_alloc(&d, 3, 0x10, 10, 1, HTR_API_MALLOC);
	e = &d.ev[d.n - 1];
	e->client = 0x123456789abcull;
	ev_realloc(&d, 3, 0x10, 0x80, 20, 2);
	ev_free(&d, 3, 0x80, HTR_API_FREE);
	/* realloc(p, 0) frees; the realloc(NULL, n) after it is no pair */
	ev_alloc(&d, 3, 0x90, 5, 1, HTR_API_MALLOC);
	ev_free(&d, 3, 0x90, HTR_API_REALLOC);
	ev_alloc(&d, 3, 0xa0, 7, 1, HTR_API_REALLOC);
	add(&d, DUMP_MARK)->text = "m";
	r = replay_new(&d);
	replay_observe(r, observer, &s);
	CHECK(replay_run(r) == 0, "run");
	EQ(replay_totals(r)->allocations, 4);
	EQ(replay_totals(r)->frees, 3);
	EQ(replay_totals(r)->reallocs, 1);
	EQ(replay_totals(r)->allocated_bytes, 42);
	EQ(replay_totals(r)->live_bytes, 7);
	EQ(replay_totals(r)->peak_live_bytes, 20);
	EQ(s.allocs, 4);
	EQ(s.realloc_pairs, 1);
	EQ(s.old_size, 10);
	EQ(s.old_ptr, 0x10);
	EQ(s.frees, 3);
	EQ(s.marks, 1);
	done(&d, r);

	/* the freed block as observers see it */
	memset(&s, 0, sizeof(s));
	ev_alloc(&d, 9, 0x10, 10, 4, HTR_API_MALLOC);
	d.ev[d.n - 1].client = 0x123456789abcull;
	d.ev[d.n - 1].usable = 16;
	ev_free(&d, 2, 0x10, HTR_API_FREE);
	r = replay_new(&d);
	replay_observe(r, observer, &s);
	CHECK(replay_run(r) == 0, "run");
	EQ(s.freed_size, 10);
	EQ(s.freed_usable, 16);
	EQ(s.freed_stack, 4);
	EQ(s.freed_tid, 9);
	EQ(s.freed_client, 0x123456789abcull);
	done(&d, r);
}

static void test_samples_end_lost(void)
{
	struct dump d = { 0 };
	struct replay *r;
	struct dump_event *e;
	const struct replay_totals *t;

	add(&d, DUMP_SAMPLE)->sample.rss_bytes = 1000;
	add(&d, DUMP_SAMPLE)->sample.rss_bytes = 5000;
	add(&d, DUMP_SAMPLE)->sample.rss_bytes = 3000;
	e = add(&d, DUMP_LOST);
	e->lost_events = 7;
	e->lost_reason = HTR_LOST_DISK;
	e = add(&d, DUMP_END);
	e->end_how = HTR_END_SIGNAL;
	e->end_status = 9;
	r = run_all(&d);
	t = replay_totals(r);
	EQ(t->peak_rss_bytes, 5000);
	EQ(t->peak_rss_time, 2);
	EQ(t->last_rss_bytes, 3000);
	EQ(t->lost_events, 7);
	EQ(t->lost_reason, HTR_LOST_DISK);
	EQ(t->end_how, HTR_END_SIGNAL);
	EQ(t->end_status, 9);
	done(&d, r);
}

static void test_reach(void)
{
	struct dump d = { 0 };
	struct replay *r;
	struct dump_reach_entry ents[] = {
		{ 0x10, HTR_REACH_LOST }, { 0x20, HTR_REACH_INDIRECT },
		{ 0x30, HTR_REACH_REACHABLE }, { 0x999, HTR_REACH_LOST },
	};
	struct dump_reach_entry again[] = { { 0x10, HTR_REACH_POSSIBLY } };
	struct dump_event *e;
	struct site_stats *s;

	ev_alloc(&d, 1, 0x10, 100, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x20, 20, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x30, 3, 2, HTR_API_MALLOC);
	e = add(&d, DUMP_REACH);
	e->reach = ents;
	e->nreach = 4;
	ev_free(&d, 1, 0x30, HTR_API_FREE);	/* freed after the scan */
	e = add(&d, DUMP_REACH);	/* a second scan reclassifies */
	e->reach = again;
	e->nreach = 1;
	ev_alloc(&d, 1, 0x40, 1000, 1, HTR_API_MALLOC);	/* never scanned */
	r = run_all(&d);
	CHECK(replay_totals(r)->have_reach, "have_reach");
	s = replay_site(r, 1);
	EQ(s->reach_bytes[HTR_REACH_LOST], 0);
	EQ(s->reach_bytes[HTR_REACH_POSSIBLY], 100);
	EQ(s->reach_bytes[HTR_REACH_INDIRECT], 20);
	EQ(s->reach_blocks[HTR_REACH_INDIRECT], 1);
	EQ(s->live_bytes, 1120);
	s = replay_site(r, 2);
	EQ(s->reach_bytes[HTR_REACH_REACHABLE], 0);
	EQ(s->reach_blocks[HTR_REACH_REACHABLE], 0);
	EQ(replay_lookup(r, 0x10)->reach, HTR_REACH_POSSIBLY);
	EQ(replay_lookup(r, 0x40)->reach, 0xff);
	done(&d, r);
}

static void test_pools(void)
{
	struct dump d = { 0 };
	struct seen s = { 0 };
	struct replay *r;
	struct dump_event *e;

	ev_alloc(&d, 1, 0x1000, 4096, 1, HTR_API_MALLOC);	/* the arena */
	add(&d, DUMP_POOL_CREATE)->id = 77;
	e = add(&d, DUMP_POOL_ALLOC);
	e->id = 77;
	e->ptr = 0x1000;	/* same address as the arena: another table */
	e->size = 64;
	e->stack = 2;
	e = add(&d, DUMP_POOL_ALLOC);
	e->id = 77;
	e->ptr = 0x1040;
	e->size = 32;
	e->stack = 2;
	e = add(&d, DUMP_POOL_FREE);
	e->id = 77;
	e->ptr = 0x1040;
	e = add(&d, DUMP_POOL_ALLOC);
	e->id = 77;
	e->ptr = 0x1080;
	e->size = 16;
	e->stack = 3;
	r = replay_new(&d);
	replay_observe(r, observer, &s);
	CHECK(replay_run_until(r, 6) == 0, "run");
	EQ(replay_site(r, 2)->live_bytes, 64);
	EQ(replay_site(r, 3)->live_bytes, 16);
	EQ(replay_totals(r)->pool_live_bytes, 80);
	EQ(replay_totals(r)->live_bytes, 4096);
	CHECK(replay_lookup(r, 0x1000) && replay_lookup(r, 0x1000)->size == 4096,
	      "the heap block is untouched");
	replay_free(r);
	d.i = 0;

	add(&d, DUMP_POOL_DESTROY)->id = 77;
	memset(&s, 0, sizeof(s));
	r = replay_new(&d);
	replay_observe(r, observer, &s);
	CHECK(replay_run(r) == 0, "run");
	EQ(replay_site(r, 2)->live_bytes, 0);
	EQ(replay_site(r, 3)->live_bytes, 0);
	EQ(replay_site(r, 2)->allocations, 2);
	EQ(replay_totals(r)->pool_live_blocks, 0);
	EQ(replay_totals(r)->pool_allocations, 3);
	EQ(replay_totals(r)->live_bytes, 4096);
	EQ(s.pool_frees, 3);
	done(&d, r);
}

static void test_run_until_and_step(void)
{
	struct dump d = { 0 };
	struct dump_event ev;
	struct replay *r;
	int i;

	for (i = 0; i < 10; i++)
		ev_alloc(&d, 1, 0x100 + (uint64_t)i * 16, 1, 1, HTR_API_MALLOC);
	r = replay_new(&d);
	CHECK(replay_run_until(r, 5) == 0, "until 5");
	EQ(replay_totals(r)->allocations, 5);
	CHECK(!replay_at_end(r), "not at end");
	CHECK(replay_run_until(r, 5) == 0, "until 5 again");
	EQ(replay_totals(r)->allocations, 5);
	CHECK(replay_step(r, &ev) == 1, "step");
	EQ(ev.time, 6);
	EQ(ev.ptr, 0x150);
	EQ(replay_totals(r)->allocations, 6);
	CHECK(replay_run_until(r, 100) == 0, "until 100");
	EQ(replay_totals(r)->allocations, 10);
	CHECK(replay_at_end(r), "at end");
	CHECK(replay_step(r, &ev) == 0, "no more");
	done(&d, r);
}

static void test_duplicate_and_none(void)
{
	struct dump d = { 0 };
	struct replay *r;

	ev_alloc(&d, 1, 0x10, 100, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x10, 30, 2, HTR_API_MALLOC);	/* its free was lost */
	ev_alloc(&d, 1, 0x20, 5, HTR_STACK_NONE, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x30, 5, 0xffffffffu, HTR_API_MALLOC);	/* corrupt id */
	r = run_all(&d);
	EQ(replay_totals(r)->live_bytes, 40);
	EQ(replay_totals(r)->live_blocks, 3);
	EQ(replay_site(r, 1)->live_bytes, 0);
	EQ(replay_site(r, 2)->live_bytes, 30);
	EQ(replay_site(r, HTR_STACK_NONE)->live_bytes, 10);
	done(&d, r);
}

static int count_block(void *ctx, const struct replay_block *b)
{
	(*(int *)ctx)++;
	return 0;
}

static void test_each_block(void)
{
	struct dump d = { 0 };
	struct replay *r;
	int i, n = 0;

	for (i = 0; i < 5000; i++)
		ev_alloc(&d, 1, 0x10000 + (uint64_t)i * 32, 1, 1, HTR_API_MALLOC);
	for (i = 0; i < 5000; i += 2)
		ev_free(&d, 1, 0x10000 + (uint64_t)i * 32, HTR_API_FREE);
	r = run_all(&d);
	replay_each_block(r, count_block, &n);
	EQ(n, 2500);
	done(&d, r);
}

/*
 * A sampled dump: each recorded block of s bytes stands for 1/p blocks and
 * s/p bytes, p = 1 - exp(-s/mean).  The expected figures are computed here
 * from that formula, independently of the replay.
 */
static void test_sampled_estimates(void)
{
	struct dump d = { 0 };
	struct replay *r;
	const struct replay_totals *t;
	double mean = 524288.0;
	double w100 = 1.0 / -expm1(-100.0 / mean);
	double w1m = 1.0 / -expm1(-1048576.0 / mean);
	uint64_t b100 = (uint64_t)(100.0 * w100 + 0.5), n100 = (uint64_t)(w100 + 0.5);
	uint64_t b1m = (uint64_t)(1048576.0 * w1m + 0.5), n1m = (uint64_t)(w1m + 0.5);

	d.proc.sample_bytes = 524288;
	ev_alloc(&d, 1, 0x1000, 100, 1, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x2000, 1048576, 2, HTR_API_MALLOC);
	ev_alloc(&d, 1, 0x3000, 100, 1, HTR_API_MALLOC);
	ev_free(&d, 1, 0x1000, HTR_API_FREE);
	r = run_all(&d);
	t = replay_totals(r);
	CHECK(n100 > 5000 && n1m == 1, "weights %" PRIu64 " %" PRIu64, n100, n1m);
	EQ(t->allocations, 2 * n100 + n1m);
	EQ(t->allocated_bytes, 2 * b100 + b1m);
	EQ(t->frees, n100);
	EQ(t->live_bytes, b100 + b1m);
	EQ(t->live_blocks, n100 + n1m);
	EQ(t->peak_live_bytes, 2 * b100 + b1m);
	EQ(replay_site(r, 1)->live_bytes, b100);
	EQ(replay_site(r, 1)->allocations, 2 * n100);
	EQ(replay_site(r, 2)->live_bytes, b1m);
	done(&d, r);
}

int main(void)
{
	test_basic();
	test_sampled_estimates();
	test_peak_snapshot();
	test_random_model();
	test_temporary();
	test_mismatch();
	test_realloc_observer();
	test_samples_end_lost();
	test_reach();
	test_pools();
	test_run_until_and_step();
	test_duplicate_and_none();
	test_each_block();
	printf("test_replay: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
