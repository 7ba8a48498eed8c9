/* reach.c - HEAPTRAIL_REACH: the live-block set, the scans and their REACH records */
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include "reach.h"

/*
 * With HEAPTRAIL_REACH=exit the shim keeps every live block (address and
 * size) in a sharded set in its own memory (ptrset.c): added on each
 * recorded allocation, removed on each recorded free before the block is
 * handed back (so the address cannot be reused while it is still in the
 * set).  Cost: a shard lock and a table probe per event, and per live block
 * 16 bytes of entry in tables kept between 3/8 and 3/4 full, plus at most
 * one abandoned table per shard: 21 to 43 bytes, 85 at worst (about 55
 * measured at 1.2 M blocks).  A scan maps 41 more bytes per live block
 * (sorted copy and the sort's scratch, state, mark stack) and gives them
 * back afterwards (MADV_DONTNEED).  Off, none of this exists.
 *
 * A scan runs at exit (our atexit handler, before the last frame), on
 * heaptrail_reach_snapshot(), and after the marker signal (at the next free
 * of any thread, where no lock of ours or of the allocator is held; a
 * signal handler itself cannot scan safely).  It holds the scanning
 * thread BUSY, like a mark, so that its time obeys the watermark rule, and
 * stops the world inside dl_iterate_phdr (reach_world.c): the loader lock
 * then stays with us and no thread is caught half-way through dlopen.
 * The result, one class per live block, goes out as REACH records of at
 * most 64 KiB each (the writer's queue holds 256 KiB; when it is full the
 * scan asks for a round and waits).
 */

#define LIVE_RESERVE ((size_t)16 << 30)
#define SCAN_RESERVE ((size_t)16 << 30)
#define REC_BYTES (64u << 10)

int ht_reach_on;

static struct ht_ptrset *live;
static struct ht_region scan_region;
static _Atomic int scanning;
static _Atomic int snapshot_requested;
static _Atomic int set_failed;		/* a block could not be added: no scan is right */
static _Atomic int told_off, told_failed;
static int debug;			/* HEAPTRAIL_REACH_DEBUG: one line per scan */

static __thread uint64_t realloc_old_size __attribute__((tls_model("initial-exec")));
static __thread int realloc_had_old __attribute__((tls_model("initial-exec")));

void reach_init(void)
{
	const char *d = getenv("HEAPTRAIL_REACH_DEBUG");

	if (!ht_cfg.reach_at_exit)
		return;
	if (ht_cfg.sample_bytes) {
		ht_msg("HEAPTRAIL_REACH needs every block recorded: no reachability scan with HEAPTRAIL_SAMPLE");
		return;
	}
	live = ptrset_get(HT_SET_LIVE);
	if (ptrset_init(live, LIVE_RESERVE) || region_reserve(&scan_region, SCAN_RESERVE)) {
		ht_msg("cannot map memory for HEAPTRAIL_REACH's block set: no reachability scan");
		return;
	}
	debug = d && *d && strcmp(d, "0");
	world_init();
	ht_reach_on = 1;
}

void reach_after_fork(void)
{
	/* the child has the parent's heap: the set stays, its locks are free */
	if (!ht_reach_on)
		return;
	ptrset_after_fork(live);
	atomic_store(&scanning, 0);
	atomic_store(&snapshot_requested, 0);
}

/* ---- the hooks on the event path (ht_in_shim held) ---- */

static void scan_from_here(int kind);

static void after_set_op(void)
{
	if (HT_UNLIKELY(reach_park_pending))
		world_park_deferred();
}

static void set_add(uintptr_t p, uint64_t size)
{
	reach_in_set_op = 1;
	atomic_signal_fence(memory_order_seq_cst);
	if (ptrset_add(live, p, size) < 0)
		atomic_store(&set_failed, 1);
	atomic_signal_fence(memory_order_seq_cst);
	reach_in_set_op = 0;
	atomic_signal_fence(memory_order_seq_cst);
}

static int set_remove(uintptr_t p, uint64_t *size)
{
	int found;

	reach_in_set_op = 1;
	atomic_signal_fence(memory_order_seq_cst);
	found = ptrset_remove(live, p, size);
	atomic_signal_fence(memory_order_seq_cst);
	reach_in_set_op = 0;
	atomic_signal_fence(memory_order_seq_cst);
	return found;
}

void reach_note_alloc(void *p, size_t size)
{
	set_add((uintptr_t)p, size);
	after_set_op();
}

/*
 * A scan the marker signal asked for runs here, on a free: the frames of
 * the allocation functions hold a stack-capture array mostly uninitialized,
 * whose stale words the scan of this thread's stack would take for roots.
 */
void reach_note_free(void *p)
{
	set_remove((uintptr_t)p, NULL);
	after_set_op();
	if (HT_UNLIKELY(atomic_load_explicit(&snapshot_requested, memory_order_relaxed)) &&
	    atomic_exchange(&snapshot_requested, 0))
		scan_from_here(1);
}

/* Before the real realloc: the old block may be handed back inside it. */
void reach_realloc_begin(void *old)
{
	realloc_had_old = old && set_remove((uintptr_t)old, &realloc_old_size);
	if (HT_UNLIKELY(reach_park_pending))
		world_park_deferred();
}

void reach_realloc_end(void *old, void *p, size_t size)
{
	if (p)
		set_add((uintptr_t)p, size);
	else if (old && size && realloc_had_old)
		set_add((uintptr_t)old, realloc_old_size);	/* failed: old stays */
	realloc_had_old = 0;
	after_set_op();
}

/* ---- the scan ---- */

struct scan_ctx {
	int kind;
	const ucontext_t *uc;
	struct reach_scan s;
	uint64_t time;
	int done, deaf;
	uint64_t scan_ns;	/* with the world stopped */
};

static void add_block(void *arg, uintptr_t p, uint64_t size)
{
	struct reach_scan *s = arg;

	if (s->n < s->cap) {
		s->b[s->n].ptr = p;
		s->b[s->n].size = size;
		s->n++;
	}
	/* more: added by a thread that could not be stopped, after the scan's time */
}

static int collect(struct reach_scan *s)
{
	uint64_t count = ptrset_count(live);

	s->cap = (size_t)count + count / 8 + 1024;
	s->b = region_alloc(s->mem, s->cap * sizeof(*s->b));
	if (!s->b)
		return -ENOMEM;
	s->n = 0;
	ptrset_each(live, add_block, s);
	return 0;
}

/* Runs once, as dl_iterate_phdr's callback: the loader lock is ours. */
static int stopped_scan(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan_ctx *c = arg;
	struct reach_scan *s = &c->s;
	uint64_t start = ht_mono_ns();

	(void)info;
	(void)size;
	region_reset(&scan_region);
	memset(s, 0, sizeof(*s));
	s->mem = &scan_region;
	s->glibc_chunks = world_glibc_malloc();
	c->deaf = world_stop(s);
	c->time = ht_now();
	if (world_read_maps(s) == 0 && collect(s) == 0 && mark_prepare(s) == 0) {
		world_roots(s, c->uc);
		mark_finish(s);
		c->done = 1;
	}
	world_resume();
	c->scan_ns = ht_mono_ns() - start;
	return 1;
}

static void count_lost(void)
{
	atomic_fetch_add_explicit(&ht_lost[HTR_LOST_MEMORY], 1, memory_order_relaxed);
}

/*
 * Queue one record.  When the writer's queue is full, wake the writer (it
 * drains the queue between rounds too) and retry; after a while, ask for a
 * whole round; give up when the writer is gone or stuck for 10 s.
 */
static int queue(const uint8_t *rec, size_t len)
{
	uint64_t give_up = ht_mono_ns() + 10000000000ull;
	unsigned tries;

	for (tries = 0;; tries++) {
		struct timespec ts = { 0, 100000 };

		if (writer_top_record(rec, len) == 0)
			return 0;
		if (!writer_running() || ht_mono_ns() > give_up)
			return -ENOSPC;
		writer_wake();
		if (tries % 1000 == 999)
			writer_sync();
		else
			nanosleep(&ts, NULL);
	}
}

static void emit(struct scan_ctx *c)
{
	struct reach_scan *s = &c->s;
	uint8_t *body = region_alloc(s->mem, REC_BYTES);
	uint8_t *rec = region_alloc(s->mem, REC_BYTES + 64);
	size_t i = 0;

	if (!body || !rec) {
		count_lost();
		return;
	}
	do {
		uint8_t *p = body, *q = rec;
		uintptr_t prev = 0;
		uint64_t count = 0;

		while (i < s->n && (size_t)(p - body) < REC_BYTES - 2 * HTR_VARINT_MAX) {
			p = htr_put_s64(p, (int64_t)(s->b[i].ptr - prev));
			p = htr_put_u64(p, mark_class(s, i));
			prev = s->b[i].ptr;
			i++;
			count++;
		}
		*q++ = HTR_REC_REACH;
		q = htr_put_u64(q, c->time);
		q = htr_put_u64(q, (uint64_t)c->kind);
		q = htr_put_u64(q, count);
		memcpy(q, body, (size_t)(p - body));
		q += p - body;
		if (queue(rec, (size_t)(q - rec)) < 0) {
			count_lost();
			return;
		}
	} while (i < s->n);
}

static void say_debug(const struct scan_ctx *c, uint64_t ns)
{
	const struct reach_scan *s = &c->s;
	uint64_t by[4] = { 0, 0, 0, 0 };
	char buf[256];
	struct ht_str m;
	size_t i;

	for (i = 0; i < s->n; i++)
		by[mark_class(s, i)] += s->b[i].size;
	str_init(&m, buf, sizeof(buf));
	str_add(&m, c->kind ? "reach snapshot: " : "reach at exit: ");
	str_add_u64(&m, s->n);
	str_add(&m, " blocks, lost ");
	str_add_u64(&m, by[HTR_REACH_LOST]);
	str_add(&m, " B, indirect ");
	str_add_u64(&m, by[HTR_REACH_INDIRECT]);
	str_add(&m, " B, possibly ");
	str_add_u64(&m, by[HTR_REACH_POSSIBLY]);
	str_add(&m, " B, reachable ");
	str_add_u64(&m, by[HTR_REACH_REACHABLE]);
	str_add(&m, " B; roots ");
	str_add_u64(&m, s->root_bytes);
	str_add(&m, " B, heap scanned ");
	str_add_u64(&m, s->heap_bytes);
	str_add(&m, " B; stopped ");
	str_add_u64(&m, c->scan_ns / 1000000u);
	str_add(&m, " ms, in all ");
	str_add_u64(&m, ns / 1000000u);
	str_add(&m, c->deaf ? " ms; some threads did not stop" : " ms");
	ht_msg(buf);
}

static __attribute__((noinline)) void run_scan(int kind, const ucontext_t *uc)
{
	struct scan_ctx c;
	struct ht_thread *t;
	uint64_t start = ht_mono_ns();

	if (atomic_exchange(&scanning, 1))
		return;
	if (atomic_load(&set_failed)) {
		if (!atomic_exchange(&told_failed, 1))
			ht_msg("HEAPTRAIL_REACH's block set ran out of memory: no reachability scan");
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.kind = kind;
	c.uc = uc;
	/* BUSY from before the scan's time is read until its records are queued */
	t = thread_begin(0);
	if (!t) {
		count_lost();
		goto out;
	}
	dl_iterate_phdr(stopped_scan, &c);
	if (c.done)
		emit(&c);
	thread_end(t);
	if (c.done && debug)
		say_debug(&c, ht_mono_ns() - start);
	region_reset(&scan_region);	/* its pages go back until the next scan */
out:
	atomic_store(&scanning, 0);
}

/*
 * The scanning thread's registers and stack are roots from here up: the
 * frames of the scan itself lie below this one and are not scanned.
 */
static __attribute__((noinline)) void scan_from_here(int kind)
{
	ucontext_t uc;

	if (reach_in_set_op)
		return;
	/* getcontext leaves parts alone: their stale bytes would be roots */
	memset(&uc, 0, sizeof(uc));
	getcontext(&uc);
	run_scan(kind, &uc);
}

void reach_at_exit(void)
{
	int was = ht_in_shim;

	/* exit() from a signal handler that interrupted the shim: locks may be held */
	if (!ht_reach_on || was || atomic_load(&ht_phase) != HT_ON)
		return;
	ht_in_shim = 1;
	scan_from_here(0);
	ht_in_shim = was;
}

void reach_snapshot(void)
{
	if (!ht_reach_on) {
		if (!atomic_exchange(&told_off, 1))
			ht_msg("heaptrail_reach_snapshot() needs HEAPTRAIL_REACH=exit (record --reach): ignored");
		return;
	}
	scan_from_here(1);
}

void reach_request_snapshot(void)
{
	if (ht_reach_on)
		atomic_store(&snapshot_requested, 1);
}
