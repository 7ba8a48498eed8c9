/* test_dump.c - unit tests of the dump reader against dumps of known content */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump.h"
#include "dump_internal.h"
#include "dumpgen.h"

/*
 * Every dump here is written by dumpgen with content the test lays out
 * itself, so the expected event sequence is the test's own ground truth:
 * the events it wrote, sorted by time (frees first at equal times).
 */

static int checks_failed;
static char tmpdir[256];

#define CHECK(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, "  %s:%d: check failed: %s\n",		\
			__FILE__, __LINE__, #c);			\
		checks_failed++;					\
	}								\
} while (0)

#define CHECKF(c, ...) do {						\
	if (!(c)) {							\
		fprintf(stderr, "  %s:%d: check failed: %s: ",		\
			__FILE__, __LINE__, #c);			\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
		checks_failed++;					\
	}								\
} while (0)

static const char *tpath(const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s/%s", tmpdir, name);
	return buf[i];
}

/* ---- reading a dump into a flat list ---- */

struct tev {
	int kind;
	uint64_t time;
	uint32_t tid;
	unsigned api;
	uint64_t ptr, old_ptr, size, usable, client, id;
	uint32_t stack;
	char text[64];
};

struct result {
	int opened;
	int rc;			/* last dump_next() */
	struct tev *ev;
	size_t n, cap;
	char err[1200];
	char warn[600];
	uint64_t hold_peak;
};

static void add_ev(struct result *r, const struct dump_event *e)
{
	struct tev *t;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
		if (!r->ev)
			abort();
	}
	t = &r->ev[r->n++];
	memset(t, 0, sizeof *t);
	t->kind = e->kind;
	t->time = e->time;
	t->tid = e->tid;
	t->api = e->api;
	t->ptr = e->ptr;
	t->old_ptr = e->old_ptr;
	t->size = e->size;
	t->usable = e->usable;
	t->client = e->client;
	t->id = e->id;
	t->stack = e->stack;
	if (e->text)
		snprintf(t->text, sizeof t->text, "%s", e->text);
}

static void result_free(struct result *r)
{
	free(r->ev);
	memset(r, 0, sizeof *r);
}

static void drain(struct dump *d, struct result *r)
{
	struct dump_event e;

	while ((r->rc = dump_next(d, &e)) == 1)
		add_ev(r, &e);
	if (dump_warning(d))
		snprintf(r->warn, sizeof r->warn, "%s", dump_warning(d));
	if (r->rc < 0 && dump_error(d))
		snprintf(r->err, sizeof r->err, "%s", dump_error(d));
}

static void read_dump(const char *path, struct result *r)
{
	struct dump *d;

	memset(r, 0, sizeof *r);
	d = dump_open(path, r->err, sizeof r->err);
	if (!d)
		return;
	r->opened = 1;
	drain(d, r);
	r->hold_peak = dump_hold_peak(d);
	dump_close(d);
}

/* Only the heap events, for comparisons with a generated ground truth. */
static size_t heap_events(const struct result *r, struct tev *out)
{
	size_t i, n = 0;

	for (i = 0; i < r->n; i++)
		if (r->ev[i].kind == DUMP_ALLOC || r->ev[i].kind == DUMP_FREE)
			out[n++] = r->ev[i];
	return n;
}

static void std_process(struct dumpgen *g)
{
	static const char *const argv[] = { "./server", "--port", "8080", NULL };
	struct dg_process p = {
		.pid = 1234, .ppid = 1, .start_mono_ns = 5000000000ull,
		.start_realtime_ns = 1700000000000000000ull, .page_size = 4096,
		.exe = "/usr/bin/server", .argv = argv, .unwinder = HTR_UNWIND_FP,
		.max_depth = 64,
	};

	dg_process(g, &p);
}

static struct dumpgen *start(const char *path)
{
	struct dumpgen *g = dg_create(path, 0);

	if (!g) {
		fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
		exit(2);
	}
	std_process(g);
	return g;
}

static int ev_is(const struct tev *e, int kind, uint64_t time, uint32_t tid, uint64_t ptr)
{
	return e->kind == kind && e->time == time && e->tid == tid && e->ptr == ptr;
}

/* ---- ordering ---- */

/*
 * Three threads; chunks reach the file out of time order; thread 200 reuses
 * the address thread 100 frees at the very same nanosecond.
 */
static void write_order_dump(const char *path, uint64_t *frame2_off)
{
	struct dumpgen *g = start(path);

	dg_chunk_begin(g, 200, 20);
	dg_alloc(g, 20, HTR_API_MALLOC, 0x1000, 32, 8, 0);
	dg_free(g, 30, HTR_API_FREE, 0x1000);
	dg_chunk_end(g);
	dg_chunk_begin(g, 300, 0);
	dg_alloc(g, 5, HTR_API_MALLOC, 0x5000, 16, 0, 0);
	dg_alloc(g, 15, HTR_API_MALLOC, 0x5100, 16, 0, 0);
	dg_chunk_end(g);
	dg_watermark(g, 6);	/* only t=5 is certainly complete */
	dg_flush(g);
	if (frame2_off)
		*frame2_off = dg_offset(g);
	dg_chunk_begin(g, 100, 10);
	dg_alloc(g, 10, HTR_API_MALLOC, 0x1000, 32, 8, 0);
	dg_free(g, 20, HTR_API_FREE, 0x1000);
	dg_chunk_end(g);
	dg_watermark(g, 21);
	dg_chunk_begin(g, 300, 15);
	dg_alloc(g, 25, HTR_API_MALLOC, 0x5200, 16, 0, 0);
	dg_chunk_end(g);
	dg_end(g, 40, HTR_END_EXIT, 0, 7, 0);
	CHECK(dg_close(g) == 0);
}

static void test_order_across_threads(void)
{
	const char *path = tpath("order.htr");
	struct result r;

	write_order_dump(path, NULL);
	read_dump(path, &r);
	CHECKF(r.opened, "%s", r.err);
	CHECK(r.rc == 0);
	CHECK(r.warn[0] == 0);
	CHECKF(r.n == 8, "%zu events", r.n);
	if (r.n == 8) {
		CHECK(ev_is(&r.ev[0], DUMP_ALLOC, 5, 300, 0x5000));
		CHECK(ev_is(&r.ev[1], DUMP_ALLOC, 10, 100, 0x1000));
		CHECK(ev_is(&r.ev[2], DUMP_ALLOC, 15, 300, 0x5100));
		CHECK(ev_is(&r.ev[3], DUMP_FREE, 20, 100, 0x1000));
		CHECK(ev_is(&r.ev[4], DUMP_ALLOC, 20, 200, 0x1000));
		CHECK(ev_is(&r.ev[5], DUMP_ALLOC, 25, 300, 0x5200));
		CHECK(ev_is(&r.ev[6], DUMP_FREE, 30, 200, 0x1000));
		CHECK(r.ev[7].kind == DUMP_END && r.ev[7].time == 40);
		CHECK(r.ev[1].size == 32 && r.ev[1].usable == 40);
		CHECK(r.ev[3].api == HTR_API_FREE && r.ev[1].api == HTR_API_MALLOC);
	}
	result_free(&r);
}

/*
 * Random threads, chunks flushed in random order, watermarks as a writer
 * would place them; the reader must reproduce the global time order.
 */
struct gev {
	uint64_t time;
	int kind;
	uint32_t tid;
	uint64_t ptr, old_ptr, size, client;
	unsigned api;
	int realloc_half;	/* 1: FREE half, 2: ALLOC half (written once) */
};

static int gev_cmp(const void *a, const void *b)
{
	const struct gev *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_random_merge_one(uint64_t seed, int nthreads, size_t frame_max,
				  int per_thread)
{
	const char *path = tpath("random.htr");
	struct gev **tev = calloc((size_t)nthreads, sizeof *tev);
	size_t *tn = calloc((size_t)nthreads, sizeof *tn), *pos = calloc((size_t)nthreads, sizeof *pos);
	struct gev *all = malloc((size_t)nthreads * (size_t)per_thread * 2 * sizeof *all);
	size_t nall = 0, i, ok = 0, nh;
	struct dumpgen *g;
	struct result r;
	struct tev *got;
	int k;

	rng_state = seed;
	/* per-thread event lists; time = step * nthreads + k keeps them unique */
	for (k = 0; k < nthreads; k++) {
		uint64_t step = 1 + rnd() % 5, live[64];
		int nlive = 0, e;
		uint64_t client = 0;

		tev[k] = malloc((size_t)per_thread * 2 * sizeof **tev);
		for (e = 0; e < per_thread; e++) {
			struct gev *v = &tev[k][tn[k]++];
			uint64_t choice = rnd() % 10;

			memset(v, 0, sizeof *v);
			v->tid = (uint32_t)(1000 + k);
			v->time = step * (uint64_t)nthreads + (uint64_t)k;
			step += 1 + rnd() % 3;
			if (choice == 0) {
				client = rnd() % 3 ? rnd() % 5 : 0;
				v->kind = -1;	/* CLIENT_SET, not delivered */
				v->client = client;
			} else if (nlive && choice < 4) {
				int j = (int)(rnd() % (uint64_t)nlive);

				v->kind = DUMP_FREE;
				v->api = HTR_API_FREE;
				v->ptr = live[j];
				live[j] = live[--nlive];
			} else if (nlive && choice < 6) {
				int j = (int)(rnd() % (uint64_t)nlive);
				struct gev *w = &tev[k][tn[k]++];

				v->kind = DUMP_FREE;
				v->api = HTR_API_REALLOC;
				v->ptr = live[j];
				v->realloc_half = 1;
				*w = *v;
				w->kind = DUMP_ALLOC;
				w->time = step * (uint64_t)nthreads + (uint64_t)k;
				step += 1 + rnd() % 3;
				w->old_ptr = v->ptr;
				w->ptr = 0x100000ull * (uint64_t)(k + 1) + (rnd() % 4096) * 16;
				w->size = 1 + rnd() % 500;
				w->client = client;
				w->realloc_half = 2;
				live[j] = w->ptr;
			} else if (nlive < 64) {
				v->kind = DUMP_ALLOC;
				v->api = HTR_API_MALLOC;
				v->ptr = 0x100000ull * (uint64_t)(k + 1) + (rnd() % 4096) * 16;
				v->size = 1 + rnd() % 500;
				v->client = client;
				live[nlive++] = v->ptr;
			} else {
				v->kind = -1;
				v->client = client;
			}
		}
	}
	/* write: random thread, random run of its events, then a watermark */
	g = start(path);
	dg_set_frame_max(g, frame_max);
	for (;;) {
		uint64_t wm = UINT64_MAX;
		int left = 0;

		for (k = 0; k < nthreads; k++)
			left |= pos[k] < tn[k];
		if (!left)
			break;
		do
			k = (int)(rnd() % (uint64_t)nthreads);
		while (pos[k] == tn[k]);
		{
			size_t run = 1 + rnd() % 40;
			uint64_t base = pos[k] ? tev[k][pos[k] - 1].time : 0;

			dg_chunk_begin(g, (uint32_t)(1000 + k), base);
			while (run-- && pos[k] < tn[k]) {
				struct gev *v = &tev[k][pos[k]++];

				if (v->kind == -1) {
					dg_client_set(g, v->time, v->client);
				} else if (v->realloc_half == 1) {
					struct gev *w = &tev[k][pos[k]++];

					dg_realloc(g, v->time, w->time, HTR_API_REALLOC,
						   v->ptr, w->ptr, w->size, 0, 0);
				} else if (v->kind == DUMP_ALLOC) {
					dg_alloc(g, v->time, v->api, v->ptr, v->size, 0, 0);
				} else {
					dg_free(g, v->time, v->api, v->ptr);
				}
			}
			dg_chunk_end(g);
		}
		for (k = 0; k < nthreads; k++)
			if (pos[k] < tn[k] && tev[k][pos[k]].time < wm)
				wm = tev[k][pos[k]].time;
		if (wm != UINT64_MAX && rnd() % 3 == 0)
			dg_watermark(g, wm);
	}
	CHECK(dg_close(g) == 0);

	for (k = 0; k < nthreads; k++)
		for (i = 0; i < tn[k]; i++)
			if (tev[k][i].kind != -1)
				all[nall++] = tev[k][i];
	qsort(all, nall, sizeof *all, gev_cmp);

	read_dump(path, &r);
	CHECKF(r.opened, "%s", r.err);
	CHECKF(r.warn[0] == 0, "%s", r.warn);
	got = malloc((r.n + 1) * sizeof *got);
	nh = heap_events(&r, got);
	CHECKF(nh == nall, "seed %llu: %zu events, expected %zu",
	       (unsigned long long)seed, nh, nall);
	for (i = 0; i < nh && i < nall; i++) {
		const struct tev *e = &got[i];
		const struct gev *x = &all[i];

		if (e->kind == x->kind && e->time == x->time && e->tid == x->tid &&
		    e->ptr == x->ptr && e->api == x->api &&
		    (x->kind != DUMP_ALLOC ||
		     (e->size == x->size && e->client == x->client &&
		      e->old_ptr == x->old_ptr)))
			ok++;
		else if (ok == i)
			fprintf(stderr, "  seed %llu: event %zu differs: got kind %d t %llu tid %u ptr %llx client %llu, want kind %d t %llu tid %u ptr %llx client %llu\n",
				(unsigned long long)seed, i, e->kind,
				(unsigned long long)e->time, e->tid,
				(unsigned long long)e->ptr, (unsigned long long)e->client,
				x->kind, (unsigned long long)x->time, x->tid,
				(unsigned long long)x->ptr, (unsigned long long)x->client);
	}
	CHECKF(ok == nall, "seed %llu: %zu of %zu events match", (unsigned long long)seed, ok, nall);
	free(got);
	result_free(&r);
	for (k = 0; k < nthreads; k++)
		free(tev[k]);
	free(tev);
	free(tn);
	free(pos);
	free(all);
}

static void test_random_merge(void)
{
	uint64_t seed;

	for (seed = 1; seed <= 12; seed++)
		test_random_merge_one(seed * 7919, 1 + (int)(seed % 6),
				      seed % 2 ? 256 : 4096, 300);
	test_random_merge_one(99991, 16, 1024, 2000);
}

/* ---- realloc ---- */

static void test_realloc_split(void)
{
	const char *path = tpath("realloc.htr");
	struct dumpgen *g = start(path);
	struct result r;

	dg_chunk_begin(g, 1, 0);
	dg_alloc(g, 5, HTR_API_MALLOC, 0xa000, 10, 6, 3);
	dg_realloc(g, 10, 30, HTR_API_REALLOC, 0xa000, 0xb000, 64, 0, 4);
	/* next deltas are from t2 = 30 and from the new pointer */
	dg_free(g, 35, HTR_API_FREE, 0xb000);
	dg_alloc(g, 36, HTR_API_REALLOC, 0xc000, 8, 0, 0);	/* realloc(NULL, 8) */
	dg_free(g, 37, HTR_API_REALLOC, 0xc000);		/* realloc(p, 0) */
	dg_chunk_end(g);
	dg_chunk_begin(g, 2, 0);
	dg_alloc(g, 20, HTR_API_CALLOC, 0xd000, 100, 4, 0);
	dg_chunk_end(g);
	CHECK(dg_close(g) == 0);

	read_dump(path, &r);
	CHECKF(r.opened, "%s", r.err);
	CHECKF(r.n == 7, "%zu events", r.n);
	if (r.n == 7) {
		CHECK(ev_is(&r.ev[0], DUMP_ALLOC, 5, 1, 0xa000) && r.ev[0].stack == 3 &&
		      r.ev[0].usable == 16);
		CHECK(ev_is(&r.ev[1], DUMP_FREE, 10, 1, 0xa000) &&
		      r.ev[1].api == HTR_API_REALLOC);
		CHECK(ev_is(&r.ev[2], DUMP_ALLOC, 20, 2, 0xd000) &&
		      r.ev[2].api == HTR_API_CALLOC);
		CHECK(ev_is(&r.ev[3], DUMP_ALLOC, 30, 1, 0xb000) &&
		      r.ev[3].api == HTR_API_REALLOC && r.ev[3].old_ptr == 0xa000 &&
		      r.ev[3].size == 64 && r.ev[3].stack == 4);
		CHECK(ev_is(&r.ev[4], DUMP_FREE, 35, 1, 0xb000));
		CHECK(ev_is(&r.ev[5], DUMP_ALLOC, 36, 1, 0xc000) &&
		      r.ev[5].api == HTR_API_REALLOC && r.ev[5].old_ptr == 0);
		CHECK(ev_is(&r.ev[6], DUMP_FREE, 37, 1, 0xc000) &&
		      r.ev[6].api == HTR_API_REALLOC);
	}
	result_free(&r);
}

/* ---- clients ---- */

static void test_clients(void)
{
	const char *path = tpath("clients.htr");
	struct dumpgen *g = start(path);
	const uint64_t big = (1ull << 40) | 5;
	struct result r;
	size_t i, nalloc = 0;

	dg_chunk_begin(g, 1, 0);
	dg_client_begin(g, 1, 7, "10.0.0.7:5512");
	dg_client_set(g, 1, 7);
	dg_alloc(g, 2, HTR_API_MALLOC, 0x100, 1, 0, 0);
	dg_chunk_end(g);
	dg_chunk_begin(g, 2, 0);
	dg_alloc(g, 3, HTR_API_MALLOC, 0x200, 2, 0, 0);	/* other thread: none */
	dg_chunk_end(g);
	dg_chunk_begin(g, 1, 2);
	dg_alloc(g, 4, HTR_API_MALLOC, 0x110, 3, 0, 0);	/* carried over */
	dg_client_set(g, 5, 0);
	dg_alloc(g, 6, HTR_API_MALLOC, 0x120, 4, 0, 0);
	dg_client_set(g, 7, big);
	dg_pool_create(g, 7, 9, "arena");
	dg_pool_alloc(g, 8, 9, 0x5000, 48, 0);
	dg_pool_free(g, 9, 9, 0x5000);
	dg_client_end(g, 10, 7);
	dg_thread_exit(g, 11);
	dg_chunk_end(g);
	dg_chunk_begin(g, 1, 12);	/* the tid reused by a new thread */
	dg_thread_start(g, 12, 2);
	dg_alloc(g, 13, HTR_API_MALLOC, 0x130, 5, 0, 0);
	dg_chunk_end(g);
	CHECK(dg_close(g) == 0);

	read_dump(path, &r);
	CHECKF(r.opened, "%s", r.err);
	CHECK(r.warn[0] == 0);
	for (i = 0; i < r.n; i++) {
		const struct tev *e = &r.ev[i];

		if (e->kind == DUMP_ALLOC) {
			static const uint64_t want[] = { 7, 0, 7, 0, 0 };

			if (nalloc < 5)
				CHECKF(e->client == want[nalloc], "alloc %zu client %llu",
				       nalloc, (unsigned long long)e->client);
			nalloc++;
		}
		if (e->kind == DUMP_CLIENT_BEGIN)
			CHECK(e->id == 7 && !strcmp(e->text, "10.0.0.7:5512") && e->time == 1);
		if (e->kind == DUMP_CLIENT_END)
			CHECK(e->id == 7 && e->time == 10);
		if (e->kind == DUMP_POOL_CREATE)
			CHECK(e->id == 9 && !strcmp(e->text, "arena"));
		if (e->kind == DUMP_POOL_ALLOC)
			CHECK(e->id == 9 && e->ptr == 0x5000 && e->size == 48 &&
			      e->client == big && e->time == 8);
		if (e->kind == DUMP_POOL_FREE)
			CHECK(e->id == 9 && e->ptr == 0x5000);
		if (e->kind == DUMP_THREAD_START)
			CHECK(e->tid == 1 && e->id == 2 && e->time == 12);
	}
	CHECK(nalloc == 5);
	CHECK(r.n == 12);
	result_free(&r);
}

/* ---- stacks and modules ---- */

static void test_stacks_modules(void)
{
	const char *path = tpath("stacks.htr");
	struct dumpgen *g = start(path);
	static const uint8_t bid_a[] = { 0xde, 0xad, 0xbe, 0xef };
	const uint64_t seg[] = { 0x10000, 0x12000 }, seg3[] = { 0x20000, 0x21000 };
	const uint64_t ips1[] = { 0x10500, 0x10700, 0x99999999 }, ips2[] = { 0x10500 };
	const uint64_t ips3[] = { 0x11000, 0x10010 }, ips4[] = { 0x20010, 0x10020 };
	const uint64_t other[] = { 0x7777 };
	const struct dump_stack *s;
	const struct dump_module *m;
	struct dump_event e;
	struct dump *d;
	char err[1200];
	size_t nm;
	int n = 0, loads = 0, unloads = 0;

	dg_module_load(g, 1, 1, 0x10000, "/lib/a.so", bid_a, sizeof bid_a, 1, seg);
	dg_chunk_begin(g, 1, 0);
	dg_stack(g, 1, 3, ips1);
	dg_alloc(g, 2, HTR_API_MALLOC, 0x100, 1, 0, 1);
	dg_stack(g, 1, 1, other);	/* a second definition is ignored */
	dg_stack(g, 2, 1, ips2);
	dg_alloc(g, 5, HTR_API_MALLOC, 0x200, 1, 0, 2);
	dg_chunk_end(g);
	dg_module_unload(g, 3, 1);
	dg_module_load(g, 4, 2, 0x10000, "/lib/b.so", NULL, 0, 1, seg);
	dg_chunk_begin(g, 2, 0);
	dg_alloc(g, 6, HTR_API_MALLOC, 0x300, 1, 0, 3);	/* defined later */
	dg_chunk_end(g);
	dg_chunk_begin(g, 3, 0);
	dg_stack(g, 3, 2, ips3);
	dg_alloc(g, 7, HTR_API_MALLOC, 0x400, 1, 0, 3);
	dg_chunk_end(g);
	dg_module_load(g, 8, 3, 0x20000, "/lib/c.so", NULL, 0, 1, seg3);
	/* thread 1's next chunk starts with a stack using c.so, loaded at 8 */
	dg_chunk_begin(g, 1, 5);
	dg_stack(g, 4, 2, ips4);
	dg_alloc(g, 9, HTR_API_MALLOC, 0x500, 1, 0, 4);
	dg_chunk_end(g);
	CHECK(dg_close(g) == 0);

	d = dump_open(path, err, sizeof err);
	CHECKF(d != NULL, "%s", err);
	if (!d)
		return;
	while (dump_next(d, &e) == 1) {
		n++;
		if (e.kind == DUMP_MODULE_LOAD) {
			m = dump_modules(d, &nm);
			CHECK(e.id == (uint64_t)loads && e.id < nm);
			loads++;
		}
		if (e.kind == DUMP_MODULE_UNLOAD) {
			CHECK(e.id == 0 && e.time == 3);
			unloads++;
		}
		if (e.kind == DUMP_ALLOC && e.ptr == 0x300)
			CHECK(dump_stack(d, 3) == NULL);	/* not yet defined */
	}
	CHECK(dump_warning(d) == NULL);
	CHECK(loads == 3 && unloads == 1 && n == 9);
	m = dump_modules(d, &nm);
	CHECK(nm == 3);
	if (nm == 3) {
		CHECK(!strcmp(m[0].path, "/lib/a.so") && m[0].id == 1 &&
		      m[0].build_id_len == 4 && m[0].build_id[0] == 0xde &&
		      m[0].lo == 0x10000 && m[0].hi == 0x12000 &&
		      m[0].loaded_at == 1 && m[0].unloaded_at == 3);
		CHECK(!strcmp(m[1].path, "/lib/b.so") && m[1].id == 2 &&
		      m[1].loaded_at == 4 && m[1].unloaded_at == UINT64_MAX);
		CHECK(!strcmp(m[2].path, "/lib/c.so"));
	}
	CHECK(dump_stack_count(d) == 4);
	CHECK(dump_stack(d, 0) == NULL && dump_stack(d, 5) == NULL);
	s = dump_stack(d, 1);
	CHECK(s && s->depth == 3);
	if (s && s->depth == 3) {
		CHECK(s->frames[0].ip == 0x10500 && s->frames[0].module == 0 &&
		      s->frames[0].offset == 0x500);
		CHECK(s->frames[1].module == 0 && s->frames[1].offset == 0x700);
		CHECK(s->frames[2].module == -1 && s->frames[2].ip == 0x99999999);
	}
	s = dump_stack(d, 2);	/* at t=5 the range belongs to b.so */
	CHECK(s && s->depth == 1 && s->frames[0].module == 1 &&
	      s->frames[0].offset == 0x500);
	s = dump_stack(d, 3);
	CHECK(s && s->depth == 2 && s->frames[0].ip == 0x11000 &&
	      s->frames[1].ip == 0x10010 && s->frames[0].module == 1);
	s = dump_stack(d, 4);	/* resolved at t=9, after c.so's load at 8 */
	CHECK(s && s->depth == 2 && s->frames[0].module == 2 &&
	      s->frames[0].offset == 0x10 && s->frames[1].module == 1);
	dump_close(d);
}

/* ---- process record and the other top-level records ---- */

static void test_records(void)
{
	const char *path = tpath("records.htr");
	struct dumpgen *g = start(path);
	const uint64_t sample[7] = { 1000, 2000, 3000, 4000, 5000, 6000, 7000 };
	const uint64_t p1[] = { 0x100, 0x80, 0x300 }, p2[] = { 0x900 };
	const uint8_t c1[] = { HTR_REACH_LOST, HTR_REACH_REACHABLE, HTR_REACH_INDIRECT };
	const uint8_t c2[] = { HTR_REACH_POSSIBLY };
	const struct dump_process *p;
	struct dump_event e;
	struct dump *d;
	char err[1200];
	int seen[32] = { 0 }, reach = 0;

	dg_sample(g, 3, sample);
	dg_mark(g, 4, "warm");
	dg_lost(g, 5, 17, HTR_LOST_MEMORY);
	dg_chunk_begin(g, 9, 0);
	dg_thread_name(g, 1, "worker-1");
	dg_chunk_end(g);
	dg_reach(g, 6, 0, 3, p1, c1);
	dg_reach(g, 6, 0, 1, p2, c2);	/* a scan split over two records */
	dg_end(g, 7, HTR_END_SIGNAL, 9, 123, 17);
	CHECK(dg_close(g) == 0);

	d = dump_open(path, err, sizeof err);
	CHECKF(d != NULL, "%s", err);
	if (!d)
		return;
	p = dump_process(d);
	CHECK(p->pid == 1234 && p->ppid == 1 && p->start_mono_ns == 5000000000ull &&
	      p->page_size == 4096 && p->unwinder == HTR_UNWIND_FP &&
	      p->max_depth == 64 && p->argc == 3);
	CHECK(p->exe && !strcmp(p->exe, "/usr/bin/server"));
	if (p->argc == 3)
		CHECK(!strcmp(p->argv[0], "./server") && !strcmp(p->argv[2], "8080") &&
		      p->argv[3] == NULL);
	while (dump_next(d, &e) == 1) {
		if (e.kind < 32)
			seen[e.kind]++;
		switch (e.kind) {
		case DUMP_SAMPLE:
			CHECK(e.time == 3 && e.sample.rss_bytes == 1000 &&
			      e.sample.shim_bytes == 7000 && e.sample.free_bytes == 5000);
			break;
		case DUMP_MARK:
			CHECK(e.time == 4 && !strcmp(e.text, "warm"));
			break;
		case DUMP_LOST:
			CHECK(e.lost_events == 17 && e.lost_reason == HTR_LOST_MEMORY);
			break;
		case DUMP_THREAD_NAME:
			CHECK(e.tid == 9 && !strcmp(e.text, "worker-1"));
			break;
		case DUMP_REACH:
			if (reach++ == 0)
				CHECK(e.nreach == 3 && e.reach[1].ptr == 0x80 &&
				      e.reach[2].ptr == 0x300 &&
				      e.reach[0].cls == HTR_REACH_LOST &&
				      e.reach[2].cls == HTR_REACH_INDIRECT);
			else
				CHECK(e.nreach == 1 && e.reach[0].ptr == 0x900);
			break;
		case DUMP_END:
			CHECK(e.time == 7 && e.end_how == HTR_END_SIGNAL &&
			      e.end_status == 9 && e.events_written == 123 &&
			      e.lost_events == 17);
			break;
		default:
			break;
		}
	}
	CHECK(seen[DUMP_SAMPLE] == 1 && seen[DUMP_MARK] == 1 && seen[DUMP_LOST] == 1 &&
	      seen[DUMP_REACH] == 2 && seen[DUMP_END] == 1 && seen[DUMP_THREAD_NAME] == 1);
	CHECK(dump_time(d) == 7);
	CHECK(dump_offset(d) == dump_file_size(d));
	dump_close(d);
}

/* ---- truncation ---- */

static int copy_prefix(const char *from, const char *to, size_t len)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char *buf = malloc(len + 1);
	int ok = in && out && buf && fread(buf, 1, len, in) == len &&
		 fwrite(buf, 1, len, out) == len;

	if (in)
		fclose(in);
	if (out && fclose(out))
		ok = 0;
	free(buf);
	return ok ? 0 : -1;
}

static size_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (size_t)st.st_size;
}

static void write_small_dump(const char *path, uint64_t *bounds, int *nb)
{
	struct dumpgen *g = start(path);
	const uint64_t ips[] = { 0x401000, 0x401100 }, seg[] = { 0x400000, 0x402000 };
	int f;

	*nb = 0;
	dg_module_load(g, 0, 1, 0x400000, "/bin/x", NULL, 0, 1, seg);
	for (f = 0; f < 4; f++) {
		uint64_t t = (uint64_t)f * 1000000000ull;

		dg_chunk_begin(g, 1, t);
		if (f == 0)
			dg_stack(g, 1, 2, ips);
		dg_alloc(g, t + 10, HTR_API_MALLOC, 0x1000 + (uint64_t)f * 64, 24, 8, 1);
		dg_alloc(g, t + 20, HTR_API_NEW, 0x2000 + (uint64_t)f * 64, 40, 8, 1);
		dg_chunk_end(g);
		dg_chunk_begin(g, 2, t);
		dg_free(g, t + 15, HTR_API_FREE, 0x3000);
		dg_chunk_end(g);
		dg_watermark(g, t + 16);
		dg_sample(g, t + 30, (const uint64_t[7]){ 1, 2, 3, 4, 5, 6, 7 });
		dg_flush(g);
		bounds[(*nb)++] = dg_offset(g);
	}
	dg_end(g, 3200000000ull, HTR_END_EXIT, 0, 16, 0);
	dg_flush(g);
	bounds[(*nb)++] = dg_offset(g);
	CHECK(dg_close(g) == 0);
}

static int is_subsequence(const struct result *sub, const struct result *full)
{
	size_t i = 0, j;

	for (j = 0; j < full->n && i < sub->n; j++)
		if (!memcmp(&sub->ev[i], &full->ev[j], sizeof sub->ev[i]))
			i++;
	return i == sub->n;
}

static void test_truncation_every_byte(void)
{
	const char *path = tpath("small.htr"), *cut = tpath("cut.htr");
	uint64_t bounds[8];
	struct result full, r;
	size_t size, len;
	int nb, b, clean, warned = 0, openerr = 0;

	write_small_dump(path, bounds, &nb);
	size = file_size(path);
	read_dump(path, &full);
	CHECKF(full.opened && full.n == 18 && !full.warn[0], "%zu events, %s %s",
	       full.n, full.err, full.warn);
	for (len = 0; len <= size; len++) {
		if (copy_prefix(path, cut, len)) {
			CHECK(!"copy failed");
			break;
		}
		read_dump(cut, &r);
		if (!r.opened) {
			openerr++;
			CHECKF(!strncmp(r.err, "heaptrail: cannot read '", 24), "%s", r.err);
			result_free(&r);
			continue;
		}
		CHECKF(r.rc == 0, "len %zu: rc %d %s", len, r.rc, r.err);
		CHECKF(r.n <= full.n, "len %zu", len);
		CHECKF(is_subsequence(&r, &full), "len %zu: not a subsequence", len);
		for (clean = 0, b = 0; b < nb; b++)
			clean |= bounds[b] == len;
		if (r.warn[0]) {
			warned++;
			CHECKF(!clean, "len %zu: warning at a frame boundary: %s", len, r.warn);
			CHECKF(!strncmp(r.warn, "truncated frame at byte ", 24), "%s", r.warn);
		} else {
			CHECKF(clean, "len %zu: no warning inside a frame", len);
		}
		if (len == size)
			CHECK(r.n == full.n && !r.warn[0]);
		result_free(&r);
	}
	CHECK(openerr > 0 && warned > 0);

	/* the warning tells how much was read: frames up to t = 3.03 s */
	copy_prefix(path, cut, size - 3);
	read_dump(cut, &r);
	CHECKF(strstr(r.warn, "the first 3.0 s were read") != NULL, "%s", r.warn);
	CHECKF(strstr(r.warn, "truncated frame at byte ") != NULL, "%s", r.warn);
	result_free(&r);
	result_free(&full);
}

/* ---- foreign, empty, newer, missing ---- */

static void write_bytes(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(b, 1, n, f) != n || fclose(f))
		CHECK(!"cannot write file");
}

static void expect_open_error(const char *path, const char *want)
{
	struct result r;
	char prefix[600];

	read_dump(path, &r);
	snprintf(prefix, sizeof prefix, "heaptrail: cannot read '%s': ", path);
	CHECKF(!r.opened, "%s opened", path);
	CHECKF(!strncmp(r.err, prefix, strlen(prefix)), "%s", r.err);
	CHECKF(strstr(r.err, want) != NULL, "'%s' lacks '%s'", r.err, want);
	result_free(&r);
}

static void test_bad_files(void)
{
	const char *p = tpath("foreign.txt");
	struct dumpgen *g;
	uint8_t hdr[64];
	FILE *f;

	write_bytes(p, "root:x:0:0:root:/root:/bin/bash\n", 32);
	expect_open_error(p, "not a heaptrail dump (bad magic)");
	write_bytes(p, "HTR", 3);
	expect_open_error(p, "truncated file header");
	write_bytes(p, "", 0);
	expect_open_error(p, "empty file");
	expect_open_error(tpath("missing.htr"), "no such file or directory");
	expect_open_error(tmpdir, "is a directory");

	p = tpath("newer.htr");
	g = dg_create(p, HTR_FORMAT_VERSION + 1);
	std_process(g);
	dg_close(g);
	expect_open_error(p, "dump format version 2 is newer than this heaptrail reads (1)");

	/* a header and nothing else: the writer died at once */
	p = tpath("header-only.htr");
	g = dg_create(p, 0);
	dg_close(g);
	expect_open_error(p, "no complete frame");

	/* a frame that does not start with the process record */
	p = tpath("no-process.htr");
	g = dg_create(p, 0);
	dg_watermark(g, 1);
	dg_close(g);
	expect_open_error(p, "does not start with a process record");

	/* a later version's bigger header is skipped (same version number) */
	p = tpath("big-header.htr");
	g = start(p);
	dg_chunk_begin(g, 1, 0);
	dg_alloc(g, 1, HTR_API_MALLOC, 0x10, 1, 0, 0);
	dg_chunk_end(g);
	dg_close(g);
	f = fopen(p, "rb");
	if (f) {
		size_t n = file_size(p);
		uint8_t *b = calloc(1, n + 16);
		struct result r;

		if (b && fread(b, 1, n, f) == n) {
			memmove(b + 80, b + 64, n - 64);
			memset(b + 64, 0xee, 16);
			b[12] = 80;
			write_bytes(p, b, n + 16);
			read_dump(p, &r);
			CHECKF(r.opened && r.n == 1 && r.ev[0].ptr == 0x10, "%s", r.err);
			result_free(&r);
		}
		free(b);
		fclose(f);
	}

	/* header size smaller than the header */
	p = tpath("hsize.htr");
	g = dg_create(p, 0);
	dg_close(g);
	f = fopen(p, "rb");
	if (f && fread(hdr, 1, 64, f) == 64) {
		hdr[12] = 8;
		hdr[13] = 0;
		write_bytes(p, hdr, 64);
		expect_open_error(p, "corrupt file header");
	}
	if (f)
		fclose(f);
}

/* ---- corrupt frames and records ---- */

struct hdr_mut {
	int frame, which;	/* which frame (0-based), what to do */
	int n;
};

static void mutate_header(void *ctx, struct htr_frame_header *h)
{
	struct hdr_mut *m = ctx;

	if (m->n++ != m->frame)
		return;
	switch (m->which) {
	case 0:
		h->check ^= 1;
		break;
	case 1:
		h->raw_size = HTR_FRAME_RAW_MAX + 1;
		h->check = htr_frame_check(h);
		break;
	case 2:
		h->raw_size += 1;
		h->check = htr_frame_check(h);
		break;
	case 3:
		h->magic = 0x12345678;
		break;
	}
}

static void flip_raw(void *ctx, uint8_t *raw, size_t len)
{
	(void)ctx;
	(void)raw;
	(void)len;
}

/*
 * Frame 0: process + one alloc; frame 1: what the case puts there;
 * frame 2: one more alloc.  'open_fails' when frame 0 is the bad one.
 */
static void corrupt_case(const char *name, void (*fill)(struct dumpgen *g),
			 struct hdr_mut *hm, const char *want, int open_fails)
{
	const char *path = tpath(name);
	struct dumpgen *g = start(path);
	struct result r;

	if (hm)
		dg_set_header_hook(g, mutate_header, hm);
	dg_set_raw_hook(g, flip_raw, NULL);
	dg_chunk_begin(g, 1, 0);
	dg_alloc(g, 1000000, HTR_API_MALLOC, 0x10, 1, 0, 0);
	dg_chunk_end(g);
	dg_flush(g);
	if (fill)
		fill(g);
	else {
		dg_chunk_begin(g, 1, 1000000);
		dg_alloc(g, 2000000, HTR_API_MALLOC, 0x20, 1, 0, 0);
		dg_chunk_end(g);
	}
	dg_flush(g);
	dg_chunk_begin(g, 1, 2000000);
	dg_alloc(g, 3000000, HTR_API_MALLOC, 0x30, 1, 0, 0);
	dg_chunk_end(g);
	CHECK(dg_close(g) == 0);

	read_dump(path, &r);
	if (open_fails) {
		CHECKF(!r.opened, "%s: opened", name);
		CHECKF(strstr(r.err, want) != NULL, "%s: '%s' lacks '%s'", name, r.err, want);
	} else {
		CHECKF(r.opened, "%s: %s", name, r.err);
		CHECKF(r.rc == 0, "%s: rc %d", name, r.rc);
		CHECKF(strstr(r.warn, want) != NULL, "%s: '%s' lacks '%s'", name, r.warn, want);
		CHECKF(r.n >= 1 && r.ev[0].ptr == 0x10, "%s: first frame lost", name);
		CHECKF(r.n <= 2, "%s: read past the bad frame (%zu events)", name, r.n);
	}
	result_free(&r);
}

static void fill_unknown_record(struct dumpgen *g)
{
	dg_raw(g, "\x63\x01\x02", 3);
}

static void fill_bad_event(struct dumpgen *g)
{
	dg_chunk_begin(g, 1, 1000000);
	dg_alloc(g, 2000000, HTR_API_MALLOC, 0x20, 1, 0, 0);
	dg_chunk_raw(g, "\x07\x01", 2);
	dg_chunk_end(g);
}

static void fill_runs_off(struct dumpgen *g)
{
	dg_chunk_begin(g, 1, 1000000);
	dg_chunk_raw(g, "\x09\x05\x80", 3);	/* ALLOC whose ptr varint never ends */
	dg_chunk_end(g);
}

static void fill_chunk_too_long(struct dumpgen *g)
{
	dg_raw(g, "\x04\x01\x00\x7f\x01\x02", 6);	/* CHUNK of 127 bytes, 2 present */
}

static void fill_long_string(struct dumpgen *g)
{
	dg_raw(g, "\x09\x05\x7f\x41", 4);	/* MARK with 127 bytes promised, 1 there */
}

static void fill_absurd_reach(struct dumpgen *g)
{
	dg_raw(g, "\x0a\x05\x00\xff\xff\xff\xff\x0f\x00\x00", 10);
}

static void fill_deep_stack(struct dumpgen *g)
{
	uint64_t ips[300];
	int i;

	for (i = 0; i < 300; i++)
		ips[i] = 0x1000 + (uint64_t)i;
	dg_chunk_begin(g, 1, 1000000);
	dg_stack(g, 5, 300, ips);
	dg_alloc(g, 2000000, HTR_API_MALLOC, 0x20, 1, 0, 5);
	dg_chunk_end(g);
}

static void fill_far_stack_id(struct dumpgen *g)
{
	const uint64_t ip = 0x1000;

	dg_chunk_begin(g, 1, 1000000);
	dg_stack(g, 4000000000u, 1, &ip);
	dg_alloc(g, 2000000, HTR_API_MALLOC, 0x20, 1, 0, 5);
	dg_chunk_end(g);
}

static void fill_second_process(struct dumpgen *g)
{
	std_process(g);
}

static void fill_bad_api(struct dumpgen *g)
{
	dg_chunk_begin(g, 1, 1000000);
	dg_alloc(g, 2000000, 31, 0x20, 1, 0, 0);
	dg_chunk_end(g);
}

static void test_corrupt(void)
{
	struct hdr_mut hm;

	hm = (struct hdr_mut){ 1, 0, 0 };
	corrupt_case("bad-check.htr", NULL, &hm, "bad frame header", 0);
	hm = (struct hdr_mut){ 1, 3, 0 };
	corrupt_case("bad-magic.htr", NULL, &hm, "bad frame header", 0);
	hm = (struct hdr_mut){ 1, 1, 0 };
	corrupt_case("too-big.htr", NULL, &hm, "more than the", 0);
	hm = (struct hdr_mut){ 1, 2, 0 };
	corrupt_case("raw-size.htr", NULL, &hm, "its header says", 0);
	hm = (struct hdr_mut){ 0, 0, 0 };
	corrupt_case("first-bad.htr", NULL, &hm, "corrupt frame at byte 64 (bad frame header)", 1);
	corrupt_case("unknown-rec.htr", fill_unknown_record, NULL, "unknown record type 99", 0);
	corrupt_case("bad-event.htr", fill_bad_event, NULL, "unknown event type", 0);
	corrupt_case("runs-off.htr", fill_runs_off, NULL, "runs off the end of its chunk", 0);
	corrupt_case("chunk-long.htr", fill_chunk_too_long, NULL, "runs off its end", 0);
	corrupt_case("reach.htr", fill_absurd_reach, NULL, "malformed", 0);
	corrupt_case("string.htr", fill_long_string, NULL, "malformed", 0);
	corrupt_case("deep.htr", fill_deep_stack, NULL, "bad stack definition", 0);
	corrupt_case("far-id.htr", fill_far_stack_id, NULL, "far beyond", 0);
	corrupt_case("process2.htr", fill_second_process, NULL, "second process record", 0);
	corrupt_case("api.htr", fill_bad_api, NULL, "bad api", 0);
}

/* A byte flipped in compressed data: zstd's checksum catches it. */
static void test_zstd_error(void)
{
	const char *path = tpath("zflip.htr"), *bad = tpath("zflip-bad.htr");
	uint64_t bounds[8];
	size_t size;
	uint8_t *buf;
	FILE *f;
	struct result r;
	int nb;

	write_small_dump(path, bounds, &nb);
	size = file_size(path);
	buf = malloc(size);
	f = fopen(path, "rb");
	if (!f || fread(buf, 1, size, f) != size)
		CHECK(!"read failed");
	if (f)
		fclose(f);
	{
		/* the middle of frame 2's zstd data */
		struct htr_frame_header h;

		memcpy(&h, buf + bounds[1], sizeof h);
		buf[bounds[1] + 16 + h.compressed_size / 2] ^= 0x55;
	}
	write_bytes(bad, buf, size);
	read_dump(bad, &r);
	CHECK(r.opened && r.rc == 0);
	CHECKF(strstr(r.warn, "corrupt frame at byte") && strstr(r.warn, "zstd"), "%s", r.warn);
	result_free(&r);
	free(buf);
}

/* ---- follow mode ---- */

static void test_follow(void)
{
	const char *src = tpath("follow-src.htr"), *dst = tpath("follow.htr");
	uint64_t f2;
	struct result full, r;
	struct dump *d = NULL;
	size_t size, len, step = 7;
	uint8_t *buf;
	FILE *in, *out;
	char err[1200];

	/* the watermark rule: only t=5 may be replayed after the first frame */
	write_order_dump(src, &f2);
	read_dump(src, &full);
	size = file_size(src);
	buf = malloc(size);
	in = fopen(src, "rb");
	if (!in || fread(buf, 1, size, in) != size)
		CHECK(!"read failed");
	if (in)
		fclose(in);
	write_bytes(dst, buf, (size_t)f2);
	d = dump_open(dst, err, sizeof err);
	CHECKF(d != NULL, "%s", err);
	if (!d) {
		free(buf);
		return;
	}
	memset(&r, 0, sizeof r);
	dump_set_follow(d, 1);
	drain(d, &r);
	CHECKF(r.n == 1 && r.ev[0].time == 5, "%zu events", r.n);
	CHECK(r.rc == 0 && dump_warning(d) == NULL);

	/* the writer appends a few bytes at a time: a partial frame is "not yet" */
	out = fopen(dst, "ab");
	for (len = (size_t)f2; len < size; len += step) {
		size_t n = len + step > size ? size - len : step;

		if (fwrite(buf + len, 1, n, out) != n || fflush(out))
			CHECK(!"append failed");
		drain(d, &r);
		CHECK(r.rc == 0);
		CHECKF(dump_warning(d) == NULL, "%s", dump_warning(d));
	}
	fclose(out);
	/* the end record lets everything out even in follow mode */
	CHECKF(r.n == full.n, "%zu of %zu events", r.n, full.n);
	CHECK(r.n == full.n && !memcmp(r.ev, full.ev, r.n * sizeof *r.ev));
	dump_close(d);
	result_free(&r);

	/* follow without an end record: a dangling partial frame, then follow off */
	{
		const char *p2 = tpath("follow2.htr");
		uint64_t bounds[8];
		int nb;

		write_small_dump(src, bounds, &nb);
		free(buf);
		size = file_size(src);
		buf = malloc(size);
		in = fopen(src, "rb");
		if (!in || fread(buf, 1, size, in) != size)
			CHECK(!"read failed");
		if (in)
			fclose(in);
		write_bytes(p2, buf, (size_t)bounds[1] + 20);
		d = dump_open(p2, err, sizeof err);
		CHECKF(d != NULL, "%s", err);
		if (d) {
			memset(&r, 0, sizeof r);
			dump_set_follow(d, 1);
			drain(d, &r);
			CHECK(r.rc == 0 && dump_warning(d) == NULL);
			/* t=1.000000020 is not below the last watermark: held back */
			CHECKF(r.n > 0 && r.ev[r.n - 1].time < 1000000016ull, "%zu", r.n);
			dump_set_follow(d, 0);
			drain(d, &r);
			CHECK(r.rc == 0);
			CHECKF(dump_warning(d) &&
			       strstr(dump_warning(d), "truncated frame at byte"),
			       "%s", dump_warning(d) ? dump_warning(d) : "(none)");
			CHECK(r.n > 0 && r.ev[r.n - 1].time == 1000000030ull);
			dump_close(d);
			result_free(&r);
		}
	}
	result_free(&full);
	free(buf);
}

/* ---- memory bounds ---- */

static void write_long_dump(const char *path, int watermarks, int backwards)
{
	struct dumpgen *g = start(path);
	uint64_t t = 0;
	int c, i, k;

	dg_set_frame_max(g, 32768);
	for (c = 0; c < 400; c++) {
		for (k = 0; k < 4; k++) {
			uint64_t base = backwards && c % 2 ? t - 50 * 4 : t;

			dg_chunk_begin(g, (uint32_t)(10 + k), base);
			for (i = 0; i < 50; i++) {
				uint64_t et = base + (uint64_t)i * 4 + (uint64_t)k + 1;
				uint64_t p = 0x10000 * (uint64_t)(k + 1) + (uint64_t)(i % 8) * 64;

				if (i % 2 == 0)
					dg_alloc(g, et, HTR_API_MALLOC, p, 24, 8, 0);
				else
					dg_free(g, et, HTR_API_FREE, p - 64 * (i % 8 ? 0 : 0));
			}
			dg_chunk_end(g);
		}
		if (!backwards || c % 2 == 0)
			t += 50 * 4;
		if (watermarks)
			dg_watermark(g, t);
	}
	CHECK(dg_close(g) == 0);
}

static void test_bounded_memory(void)
{
	const char *path = tpath("long.htr");
	struct result r;
	struct dump *d;
	char err[1200];
	size_t i;
	int sorted = 1;

	write_long_dump(path, 1, 0);
	read_dump(path, &r);
	CHECKF(r.opened && r.n == 400 * 4 * 50 && !r.warn[0], "%zu %s %s", r.n, r.err, r.warn);
	/* with a watermark after every round, about a frame is ever held */
	CHECKF(r.hold_peak < 3 * 32768 + 64 * 1024, "held %llu bytes",
	       (unsigned long long)r.hold_peak);
	result_free(&r);

	/* no watermarks at all: the hold limit keeps memory down */
	write_long_dump(path, 0, 0);
	d = dump_open(path, err, sizeof err);
	CHECKF(d != NULL, "%s", err);
	if (!d)
		return;
	dump_set_hold_limit(d, 100000);
	memset(&r, 0, sizeof r);
	drain(d, &r);
	CHECKF(r.n == 400 * 4 * 50, "%zu", r.n);
	CHECKF(dump_hold_peak(d) < 100000 + 2 * 32768 + 64 * 1024, "held %llu",
	       (unsigned long long)dump_hold_peak(d));
	for (i = 1; i < r.n; i++)
		sorted &= r.ev[i].time >= r.ev[i - 1].time;
	/* frames hold whole rounds here, so the order should survive */
	CHECKF(sorted || dump_warning(d), "out of order without a warning");
	dump_close(d);
	result_free(&r);

	/* ... and says so when that broke the order */
	write_long_dump(path, 0, 1);
	d = dump_open(path, err, sizeof err);
	if (!d)
		return;
	dump_set_hold_limit(d, 20000);
	memset(&r, 0, sizeof r);
	drain(d, &r);
	CHECK(r.n == 400 * 4 * 50);
	CHECKF(dump_warning(d) && strstr(dump_warning(d), "came after later ones"),
	       "%s", dump_warning(d) ? dump_warning(d) : "(none)");
	dump_close(d);
	result_free(&r);
}

/* ---- threads that come and go ---- */

static void test_thread_churn(void)
{
	const char *path = tpath("churn.htr");
	struct dumpgen *g = start(path);
	struct result r;
	uint32_t i;
	size_t allocs = 0, j;

	dg_set_frame_max(g, 64);	/* a frame per chunk: exits retire threads */
	for (i = 0; i < 3000; i++) {
		uint64_t t = (uint64_t)i * 10;

		dg_chunk_begin(g, 100000 + i % 7, t);	/* tids reused */
		dg_thread_start(g, t + 1, 1);
		dg_client_set(g, t + 2, i + 1);
		dg_alloc(g, t + 3, HTR_API_MALLOC, 0x1000 + i * 16ull, 8, 0, 0);
		dg_thread_exit(g, t + 4);
		dg_chunk_end(g);
		dg_watermark(g, t + 5);
	}
	CHECK(dg_close(g) == 0);
	read_dump(path, &r);
	CHECK(r.opened && !r.warn[0] && r.n == 9000);
	for (j = 0; j < r.n; j++)
		if (r.ev[j].kind == DUMP_ALLOC)
			CHECK(r.ev[j].client == ++allocs);
	result_free(&r);
}

/*
 * Many threads living and dying at random, tids drawn again from a small
 * pool as soon as they are free: every allocation must keep the client of
 * the thread instance that made it (the client is the allocation's ptr).
 */
static void test_thread_churn_random(void)
{
	enum { POOL = 46, STEPS = 30000 };	/* 46 tids fill a 64-slot map: probing */
	const char *path = tpath("churn2.htr");
	struct dumpgen *g = start(path);
	uint64_t client[POOL] = { 0 }, next_client = 1, t = 0, want_allocs = 0;
	uint64_t last_t[POOL] = { 0 };
	struct result r;
	size_t j, allocs = 0, bad = 0;
	int alive[POOL] = { 0 }, s;

	rng_state = 4242;
	dg_set_frame_max(g, 128);
	for (s = 0; s < STEPS; s++) {
		int k = (int)(rnd() % POOL);
		uint32_t tid = 7000 + (uint32_t)k * 13;

		dg_chunk_begin(g, tid, last_t[k]);
		if (!alive[k]) {
			alive[k] = 1;
			client[k] = next_client++;
			dg_thread_start(g, ++t, 1);
			dg_client_set(g, ++t, client[k]);
		}
		dg_alloc(g, ++t, HTR_API_MALLOC, client[k], 8, 0, 0);
		want_allocs++;
		if (rnd() % 4 == 0) {
			dg_thread_exit(g, ++t);
			alive[k] = 0;
		}
		last_t[k] = t;
		dg_chunk_end(g);
		if (rnd() % 3 == 0)
			dg_watermark(g, t + 1);
	}
	CHECK(dg_close(g) == 0);
	read_dump(path, &r);
	CHECKF(r.opened && !r.warn[0], "%s %s", r.err, r.warn);
	for (j = 0; j < r.n; j++) {
		if (r.ev[j].kind != DUMP_ALLOC)
			continue;
		allocs++;
		bad += r.ev[j].client != r.ev[j].ptr;
		if (j && r.ev[j].time <= r.ev[j - 1].time)
			bad++;
	}
	CHECKF(allocs == want_allocs && bad == 0, "%zu allocs, %zu wrong", allocs, bad);
	result_free(&r);
}

/* ---- driver ---- */

struct test {
	const char *name;
	void (*fn)(void);
};

static const struct test tests[] = {
	{ "order across threads", test_order_across_threads },
	{ "random merge", test_random_merge },
	{ "realloc split", test_realloc_split },
	{ "client attribution", test_clients },
	{ "stacks and modules", test_stacks_modules },
	{ "process and top-level records", test_records },
	{ "truncation at every byte", test_truncation_every_byte },
	{ "foreign, empty, newer, missing files", test_bad_files },
	{ "corrupt frames and records", test_corrupt },
	{ "zstd error", test_zstd_error },
	{ "follow mode", test_follow },
	{ "bounded memory", test_bounded_memory },
	{ "thread churn", test_thread_churn },
	{ "thread churn, random tid reuse", test_thread_churn_random },
};

static void rm_tmpdir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

int main(void)
{
	const char *base = getenv("TMPDIR");
	size_t i;
	int passed = 0, failed = 0;

	snprintf(tmpdir, sizeof tmpdir, "%s/htr-test-dump.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		int before = checks_failed;

		tests[i].fn();
		if (checks_failed == before) {
			passed++;
			printf("ok   %s\n", tests[i].name);
		} else {
			failed++;
			printf("FAIL %s\n", tests[i].name);
		}
	}
	rm_tmpdir();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
