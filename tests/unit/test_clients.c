/* test_clients.c - analyzer/clients.c against synthetic dumps with exactly known residue */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clients.h"
#include "dump.h"
#include "dumpgen.h"
#include "replay.h"

/*
 * Each case writes a dump with tests/unit/dumpgen.c (times in ns, one thread
 * per chunk), replays it with the clients observer and checks the figures
 * the script implies: the grace period, judged and pending clients, late
 * allocations, ids used twice, clients seen only through CLIENT_SET, the
 * whole-process view, per-client peaks, and both trends.
 */

static int passed, failed;

#define CHECK(c) CHECKF(c, "%s", #c)
#define CHECKF(c, ...)                                             \
	do {                                                       \
		if (c) {                                           \
			passed++;                                  \
		} else {                                           \
			failed++;                                  \
			printf("FAIL %s:%d: ", __func__, __LINE__); \
			printf(__VA_ARGS__);                       \
			printf("\n");                              \
		}                                                  \
	} while (0)
#define EQ(got, want)                                                        \
	CHECKF((uint64_t)(got) == (uint64_t)(want), "%s = %llu, want %llu", #got, \
	       (unsigned long long)(got), (unsigned long long)(want))

#define S 1000000000ull		/* one second in ns */
#define GRACE S

static char dir[] = "/tmp/heaptrail-unit-clients-XXXXXX";

static const char *tpath(const char *name)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static struct dumpgen *start(const char *path, uint32_t nstacks)
{
	static const char *const argv[] = { "./server", NULL };
	struct dg_process p = {
		.pid = 42, .ppid = 1, .start_mono_ns = 1000, .start_realtime_ns = 1,
		.page_size = 4096, .exe = "/usr/bin/server", .argv = argv,
		.unwinder = HTR_UNWIND_FP, .max_depth = 64,
	};
	struct dumpgen *g = dg_create(path, 0);
	uint32_t i;

	if (!g) {
		fprintf(stderr, "cannot create %s: %s\n", path, strerror(errno));
		exit(2);
	}
	dg_process(g, &p);
	/* stack i: one made-up frame, so that every site is distinct */
	dg_chunk_begin(g, 1, 0);
	for (i = 1; i <= nstacks; i++) {
		uint64_t ip = 0x400000 + i * 16;

		dg_stack(g, i, 1, &ip);
	}
	return g;
}

/* As the shim writes them: a begin enters the client, an end leaves it. */
static void begin(struct dumpgen *g, uint64_t t, uint64_t id, const char *label)
{
	dg_client_begin(g, t, id, label);
	dg_client_set(g, t, id);
}

static void end(struct dumpgen *g, uint64_t t, uint64_t id)
{
	dg_client_set(g, t, 0);
	dg_client_end(g, t, id);
}

struct run {
	struct dump *d;
	struct replay *r;
	struct clients *c;
};

static int analyze(const char *path, uint64_t grace, struct run *out)
{
	char err[256];

	memset(out, 0, sizeof(*out));
	out->d = dump_open(path, err, sizeof(err));
	if (!out->d) {
		printf("FAIL cannot open %s: %s\n", path, err);
		failed++;
		return -1;
	}
	out->r = replay_new(out->d);
	out->c = out->r ? clients_new(out->r, grace) : NULL;
	if (!out->c || replay_run(out->r) < 0 || clients_finish(out->c, out->r) < 0) {
		printf("FAIL cannot analyze %s\n", path);
		failed++;
		return -1;
	}
	return 0;
}

static void done(struct run *x)
{
	clients_free(x->c);
	replay_free(x->r);
	dump_close(x->d);
}

static const struct client_info *client(const struct clients *c, const char *label)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		if (c->v[i].label && !strcmp(c->v[i].label, label))
			return &c->v[i];
	return NULL;
}

static const struct client_site *site(const struct clients *c, uint32_t stack)
{
	size_t i;

	for (i = 0; i < c->nsites; i++)
		if (c->sites[i]->stack == stack)
			return c->sites[i];
	return NULL;
}

/*
 * A: its session is freed 0.5 s after it leaves (within the grace): no
 *    residue; a block it made 0.2 s after leaving stays: residue; a block
 *    made for it 3 s after it left (a worker still on it) is not its residue.
 * B: leaves 300 bytes forever.
 * C: leaves 0.5 s before a dump that ends without an exit: not judged.
 * D: still connected at the end.
 */
static void test_grace(void)
{
	const char *path = tpath("grace.htr");
	struct dumpgen *g = start(path, 6);
	struct run x;
	const struct client_info *a, *b, *cc, *d;

	dg_alloc(g, 0, HTR_API_MALLOC, 0x1000, 1000, 0, 6);	/* before any client */
	begin(g, 1 * S, 1, "A");
	dg_alloc(g, 1 * S + 1, HTR_API_MALLOC, 0x2000, 100, 0, 1);
	begin(g, 2 * S, 2, "B");
	dg_alloc(g, 2 * S + 1, HTR_API_MALLOC, 0x3000, 300, 0, 2);
	end(g, 3 * S, 2);
	dg_client_set(g, 9 * S, 1);
	dg_alloc(g, 9 * S + 1, HTR_API_MALLOC, 0x4000, 40, 0, 3);
	end(g, 10 * S, 1);
	dg_client_set(g, 10 * S + 1, 1);	/* still working for A after it left */
	dg_alloc(g, 10 * S + S / 5, HTR_API_MALLOC, 0x5000, 7, 0, 4);
	dg_free(g, 10 * S + S / 2, HTR_API_FREE, 0x2000);
	dg_alloc(g, 13 * S, HTR_API_MALLOC, 0x6000, 9, 0, 5);
	dg_client_set(g, 14 * S, 0);
	begin(g, 15 * S, 3, "C");
	dg_alloc(g, 15 * S + 1, HTR_API_MALLOC, 0x7000, 50, 0, 2);
	begin(g, 16 * S, 4, "D");
	dg_alloc(g, 16 * S + 1, HTR_API_MALLOC, 0x8000, 60, 0, 2);
	dg_client_end(g, 19 * S + S / 2, 3);
	dg_client_set(g, 20 * S, 0);
	dg_alloc(g, 20 * S, HTR_API_MALLOC, 0x9000, 1, 0, 6);
	dg_chunk_end(g);
	dg_watermark(g, 20 * S);
	dg_end(g, 20 * S, HTR_END_SIGNAL, 9, 0, 0);
	CHECK(dg_close(g) == 0);

	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->n, 4);
	EQ(x.c->ended, 3);
	EQ(x.c->judged, 2);
	EQ(x.c->connected, 1);
	a = client(x.c, "A");
	b = client(x.c, "B");
	cc = client(x.c, "C");
	d = client(x.c, "D");
	CHECK(a && b && cc && d);
	if (!a || !b || !cc || !d)
		goto out;
	EQ(a->allocations, 4);
	EQ(a->allocated_bytes, 100 + 40 + 7 + 9);
	EQ(a->peak_bytes, 100 + 40 + 7);
	EQ(a->residue_bytes, 40 + 7);	/* not the late 9, not the freed 100 */
	EQ(b->residue_bytes, 300);
	CHECK(a->judged && b->judged && !cc->judged && !d->judged);
	EQ(cc->residue_bytes, 0);
	EQ(d->end, CLIENTS_NO_END);
	EQ(x.c->residue_bytes, 347);
	EQ(x.c->residue_max, 300);
	EQ(x.c->residue_mean, (347 + 1) / 2);
	EQ(x.c->residue_median, (47 + 300 + 1) / 2);
	EQ(x.c->nsites, 3);
	EQ(site(x.c, 2) ? site(x.c, 2)->residue_bytes : 0, 300);	/* only B's */
	EQ(site(x.c, 3) ? site(x.c, 3)->residue_bytes : 0, 40);
	EQ(site(x.c, 4) ? site(x.c, 4)->residue_bytes : 0, 7);
	CHECK(!site(x.c, 5));	/* allocated for A after its grace */

	/* the process: before A, and at C's end + grace = past the dump's end */
	CHECK(x.c->proc.have_before && x.c->proc.have_after);
	EQ(x.c->proc.before_bytes, 1000);
	EQ(x.c->proc.before_time, 1 * S);
	CHECK(x.c->proc.after_is_end);
	EQ(x.c->proc.after_time, 20 * S);
	EQ(x.c->proc.after_bytes, 1000 + 300 + 40 + 7 + 9 + 50 + 60 + 1);
	EQ(x.c->proc.attributed_bytes, 300 + 40 + 7 + 50);	/* C is gone too */
	EQ(x.c->proc.connected_bytes, 60);
	EQ(x.c->proc.growth_bytes, 300 + 40 + 7 + 9 + 50 + 60 + 1);
	EQ(x.c->proc.unattributed_bytes, 9 + 1);
out:
	done(&x);

	/* grace 0: C is judged, A's session was live at its end but freed later */
	if (analyze(path, 0, &x) < 0)
		return;
	EQ(x.c->judged, 3);
	cc = client(x.c, "C");
	a = client(x.c, "A");
	EQ(cc ? cc->residue_bytes : 1, 50);
	EQ(a ? a->residue_bytes : 1, 40);	/* 7 came after its end */
	done(&x);
}

/* Site 4 is freed on time; the dump ends with an exit: everything is judged. */
static void test_exit_judges(void)
{
	const char *path = tpath("exit.htr");
	struct dumpgen *g = start(path, 4);
	struct run x;

	begin(g, 1 * S, 1, "A");
	dg_alloc(g, 1 * S + 1, HTR_API_MALLOC, 0x2000, 100, 0, 1);
	dg_alloc(g, 1 * S + 2, HTR_API_MALLOC, 0x2100, 64, 0, 4);
	end(g, 2 * S, 1);
	dg_free(g, 2 * S + 10, HTR_API_FREE, 0x2100);
	dg_chunk_end(g);
	dg_end(g, 2 * S + 20, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->judged, 1);
	EQ(x.c->residue_bytes, 100);
	CHECK(x.c->exited);
	EQ(x.c->nsites, 1);
	done(&x);
}

/*
 * Id 5 used twice; id 9 seen only through CLIENT_SET (its begin was in the
 * parent image); an end for an id never seen is no client.
 */
static void test_ids(void)
{
	const char *path = tpath("ids.htr");
	struct dumpgen *g = start(path, 2);
	struct run x;
	size_t i;
	int first = -1, second = -1, lazy = -1;

	begin(g, 1 * S, 5, "first");
	dg_alloc(g, 1 * S + 1, HTR_API_MALLOC, 0x1000, 11, 0, 1);
	dg_alloc(g, 1 * S + 2, HTR_API_MALLOC, 0x1100, 12, 0, 1);
	end(g, 2 * S, 5);
	begin(g, 3 * S, 5, "second");
	dg_alloc(g, 3 * S + 1, HTR_API_MALLOC, 0x2000, 22, 0, 2);
	dg_free(g, 3 * S + 2, HTR_API_FREE, 0x1000);	/* the first one's */
	end(g, 4 * S, 5);
	dg_client_set(g, 5 * S, 9);
	dg_alloc(g, 5 * S + 1, HTR_API_MALLOC, 0x3000, 33, 0, 2);
	end(g, 6 * S, 9);
	dg_client_end(g, 6 * S + 1, 77);
	dg_chunk_end(g);
	dg_end(g, 7 * S, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->n, 3);
	for (i = 0; i < x.c->n; i++) {
		const char *l = x.c->v[i].label;

		if (l && !strcmp(l, "first"))
			first = (int)i;
		else if (l && !strcmp(l, "second"))
			second = (int)i;
		else if (!l && x.c->v[i].id == 9)
			lazy = (int)i;
	}
	CHECK(first >= 0 && second >= 0 && lazy >= 0);
	if (first >= 0 && second >= 0 && lazy >= 0) {
		EQ(x.c->v[first].residue_bytes, 12);
		EQ(x.c->v[first].live_bytes, 12);
		EQ(x.c->v[second].residue_bytes, 22);
		EQ(x.c->v[lazy].residue_bytes, 33);
		EQ(x.c->v[lazy].begin, 5 * S + 1);
	}
	done(&x);
}

/*
 * 40 clients, one after another, each: a 100-byte leak at site 1, an entry
 * of a 3-entry shared cache at site 2 (evicting the oldest), a session at
 * site 3 freed after it leaves.  A second dump has 3 clients: too few.
 */
static void test_trends(void)
{
	const char *path = tpath("trend.htr");
	struct dumpgen *g = start(path, 3);
	struct run x;
	uint64_t t = S, cache[3] = { 0, 0, 0 };
	unsigned i;

	for (i = 0; i < 40; i++) {
		uint64_t id = 100 + i, base = 0x100000 + (uint64_t)i * 0x1000;

		begin(g, t, id, "c");
		dg_alloc(g, t + 1, HTR_API_MALLOC, base, 4096, 0, 3);
		dg_alloc(g, t + 2, HTR_API_MALLOC, base + 0x100, 100, 0, 1);
		if (cache[i % 3])
			dg_free(g, t + 3, HTR_API_FREE, cache[i % 3]);
		cache[i % 3] = base + 0x200;
		dg_alloc(g, t + 4, HTR_API_MALLOC, base + 0x200, 64, 0, 2);
		end(g, t + 5, id);
		dg_free(g, t + 7, HTR_API_FREE, base);
		t += S / 10;
	}
	dg_chunk_end(g);
	dg_end(g, t, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->n, 40);
	EQ(x.c->judged, 40);
	EQ(x.c->nsites, 2);
	if (x.c->nsites == 2) {
		const struct client_site *leak = site(x.c, 1), *cache_site = site(x.c, 2);

		CHECK(leak && cache_site);
		if (leak && cache_site) {
			EQ(x.c->sites[0]->stack, 1);
			EQ(leak->residue_bytes, 4000);
			EQ(leak->clients, 40);
			EQ(leak->trend, TREND_GROWS);
			EQ(cache_site->residue_bytes, 3 * 64);
			EQ(cache_site->clients, 3);
			EQ(cache_site->trend, TREND_BOUNDED);
		}
	}
	EQ(x.c->residue_median, 100);
	done(&x);

	path = tpath("few.htr");
	g = start(path, 1);
	for (i = 0; i < 3; i++) {
		begin(g, (i + 1) * S, 1 + i, "c");
		dg_alloc(g, (i + 1) * S + 1, HTR_API_MALLOC, 0x1000 + i * 0x100, 10, 0, 1);
		end(g, (i + 1) * S + 2, 1 + i);
	}
	dg_chunk_end(g);
	dg_end(g, 5 * S, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->nsites, 1);
	if (x.c->nsites)
		EQ(x.c->sites[0]->trend, TREND_UNKNOWN);
	done(&x);
}

/*
 * 24 clients all connect (each leaks 50 bytes at once), then leave one by
 * one: the held bytes are flat from the first disconnect to the last, as
 * when a loaded server closes its connections late.  Every client left its
 * block: the site grows with the clients all the same.
 */
static void test_trend_all_connected(void)
{
	const char *path = tpath("together.htr");
	struct dumpgen *g = start(path, 1);
	struct run x;
	uint64_t t = S;
	unsigned i, n = 24;

	for (i = 0; i < n; i++) {
		begin(g, t + i * 10, 1 + i, "c");
		dg_alloc(g, t + i * 10 + 1, HTR_API_MALLOC, 0x200000 + (uint64_t)i * 0x100, 50, 0, 1);
	}
	t += S;
	for (i = 0; i < n; i++)
		end(g, t + i * 10, 1 + i);
	dg_chunk_end(g);
	dg_end(g, t + S, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->judged, n);
	EQ(site(x.c, 1) ? site(x.c, 1)->clients : 0, n);
	EQ(site(x.c, 1) ? site(x.c, 1)->trend : 0, TREND_GROWS);
	done(&x);
}

/* More disconnects than samples: the sampling step doubles, trends hold. */
static void test_many_clients(void)
{
	const char *path = tpath("many.htr");
	struct dumpgen *g = start(path, 2);
	struct run x;
	uint64_t t = S, cache = 0;
	unsigned i, n = 1000;

	for (i = 0; i < n; i++) {
		uint64_t base = 0x1000000 + (uint64_t)i * 0x100;

		begin(g, t, 1 + i, "c");
		dg_alloc(g, t + 1, HTR_API_MALLOC, base, 8, 0, 1);
		if (cache)
			dg_free(g, t + 2, HTR_API_FREE, cache);
		cache = base + 0x80;
		dg_alloc(g, t + 3, HTR_API_MALLOC, cache, 16, 0, 2);
		end(g, t + 4, 1 + i);
		t += 1000;
	}
	dg_chunk_end(g);
	dg_end(g, t, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->n, n);
	EQ(site(x.c, 1) ? site(x.c, 1)->residue_bytes : 0, 8 * n);
	EQ(site(x.c, 1) ? site(x.c, 1)->trend : 0, TREND_GROWS);
	EQ(site(x.c, 2) ? site(x.c, 2)->residue_bytes : 0, 16);
	EQ(site(x.c, 2) ? site(x.c, 2)->trend : 0, TREND_BOUNDED);
	done(&x);
}

/* A dump with no client: nothing, and no process view. */
static void test_none(void)
{
	const char *path = tpath("none.htr");
	struct dumpgen *g = start(path, 1);
	struct run x;

	dg_alloc(g, 1, HTR_API_MALLOC, 0x1000, 10, 0, 1);
	dg_chunk_end(g);
	dg_end(g, 2, HTR_END_EXIT, 0, 0, 0);
	CHECK(dg_close(g) == 0);
	if (analyze(path, GRACE, &x) < 0)
		return;
	EQ(x.c->n, 0);
	EQ(x.c->nsites, 0);
	CHECK(!x.c->proc.have_before);
	done(&x);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 2;
	}
	test_grace();
	test_exit_judges();
	test_ids();
	test_trends();
	test_trend_all_connected();
	test_many_clients();
	test_none();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
