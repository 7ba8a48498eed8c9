/* thread.c - per-thread event buffers, their hand-off to the writer, and the steal */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * Each thread writes its events into its own buffer, guarded by one state
 * word that only two parties ever touch: the thread itself (IDLE -> BUSY for
 * the length of one event) and the writer thread (IDLE -> HELD while it takes
 * a partly filled buffer away).  No event takes a lock shared with other
 * producers.  Full buffers go to a FIFO queue under a spinlock, once per
 * 32 KiB of events; the writer returns drained buffers to a free list.
 *
 * The writer's promise (the watermark, see htr_format.h) rests on this: a
 * producer reads the clock only while BUSY, and the writer takes every
 * thread's buffer (waiting out BUSY) after reading the clock itself, so any
 * event older than the writer's clock reading is in a buffer it has taken.
 *
 * When no free buffer is left (the writer fell behind) a producer waits
 * without holding BUSY: nothing is dropped, and the writer can still steal.
 *
 * Two ways to keep the two parties apart:
 *
 * - Fenced by the writer (the usual case).  The thread marks itself BUSY
 *   with a plain store and then reads its "held" word, which only the
 *   writer writes; the writer sets "held" on every thread, makes each
 *   running thread execute a full fence (fence.c: membarrier(), or a TLB
 *   shootdown), then reads their states.  Either the thread's read of
 *   "held" came after that fence and saw it set (it steps back and
 *   waits), or its BUSY is visible to the writer, which waits for the
 *   event to end.  The producer pays no atomic read-modify-write, whose
 *   locked cycle and store-buffer drain were ~2% of a malloc-heavy traced
 *   run; the writer pays a system call or two a round.
 * - Otherwise (no fence works, HEAPTRAIL__FENCE=none), one compare-and-swap
 *   on the state word: IDLE -> BUSY by the thread, IDLE -> HELD by the
 *   writer.  If the fence stops working during the run, the writer turns
 *   the threads to this (fenced = 0) and pauses a millisecond before it
 *   takes anything: a thread still in an event it began the old way
 *   finishes it in nanoseconds, and its BUSY is long visible by then.
 */

enum { ST_IDLE = 0, ST_BUSY = 1, ST_HELD = 2 };
enum { TH_FREE = 0, TH_ALIVE = 1, TH_EXITING = 2 };

struct ht_thread {
	_Atomic int state;
	_Atomic int held;	/* fenced by the writer: it holds the buffer */
	_Atomic int claim;	/* TH_* */
	uint32_t tid;
	struct ht_buf *buf;
	uint64_t last_time;	/* ticks */
	uintptr_t last_ptr;
	int timed;		/* the buffer holds a timed event (its base time is set) */
	uint64_t client;
	struct ht_thread *next_all;	/* registry: push-only list */
} __attribute__((aligned(HT_CACHELINE)));

#define MAX_BUFFERS 512		/* 16 MiB of buffers at most */

static struct ht_region thread_region, buf_region;
static struct ht_thread *_Atomic registry;
static pthread_key_t exit_key;
static int exit_key_ok;

/* Buffer pool and full queue, under one spinlock taken once per buffer. */
static atomic_flag buf_lock = ATOMIC_FLAG_INIT;
static struct ht_buf *free_list;
static struct ht_buf *full_head, *full_tail;
static unsigned nqueued;	/* buffers in the full queue */
/*
 * Full buffers that wake the writer: a few, or more while it packs, so
 * that it finds several buffers of each thread to pack as one chunk.
 */
static _Atomic unsigned wake_after = 4;
static unsigned nbuffers;
static _Atomic uint64_t recycled;	/* bumped when a buffer is freed */
static _Atomic int fenced;	/* the writer fences for the threads (fence.c) */

__thread int ht_in_shim __attribute__((tls_model("initial-exec")));
__thread int ht_thread_gone __attribute__((tls_model("initial-exec")));
__thread struct ht_thread *ht_self __attribute__((tls_model("initial-exec")));

/*
 * Waiting for another thread: spin briefly, then yield, then sleep.  A
 * thread under SCHED_FIFO waiting for a lower-priority holder on the same
 * core would yield to nobody: only sleeping lets the holder run.  A raw
 * system call, because nanosleep() is a cancellation point and a thread
 * must never be cancelled inside malloc.
 */
void ht_backoff(unsigned *spins)
{
	++*spins;
	if (*spins <= 16) {
		__builtin_ia32_pause();
	} else if (*spins <= 64) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };

		syscall(SYS_nanosleep, &ts, NULL);
	}
}


static void key_destructor(void *arg)
{
	(void)arg;
	thread_exiting();
}

int threads_init(void)
{
	int ret = region_reserve(&thread_region, 8u << 20);	/* 128k threads at once */

	if (ret)
		return ret;
	ret = region_reserve(&buf_region, (size_t)MAX_BUFFERS * sizeof(struct ht_buf));
	if (ret)
		return ret;
	exit_key_ok = pthread_key_create(&exit_key, key_destructor) == 0;
	atomic_store(&fenced, fence_init());
	return 0;
}

void threads_reset_after_fork(void)
{
	struct ht_thread *self = ht_self;
	struct ht_thread *t;

	/* Only this thread survives fork; every other buffer belongs to the parent. */
	atomic_flag_clear(&buf_lock);
	free_list = NULL;
	full_head = full_tail = NULL;
	nqueued = 0;
	nbuffers = 0;
	region_reset(&buf_region);
	for (t = atomic_load(&registry); t; t = t->next_all) {
		atomic_store(&t->state, ST_IDLE);
		atomic_store(&t->held, 0);
		t->buf = NULL;
		if (t != self)
			atomic_store(&t->claim, TH_FREE);
	}
	/* the only thread so far: no event of another to mind */
	if (atomic_load(&fenced))
		atomic_store(&fenced, fence_after_fork());
	if (self) {
		self->tid = (uint32_t)syscall(SYS_gettid);
		self->last_time = 0;
		self->last_ptr = 0;
		/* the parent's client began in the parent's dump, not the child's */
		self->client = 0;
	}
}

static void queue_push_locked(struct ht_buf *b)
{
	b->next = NULL;
	if (full_tail)
		full_tail->next = b;
	else
		full_head = b;
	full_tail = b;
}

static struct ht_buf *buffer_get(void)
{
	struct ht_buf *b;

	ht_spin_lock(&buf_lock);
	b = free_list;
	if (b)
		free_list = b->next;
	else if (nbuffers < MAX_BUFFERS) {
		b = region_alloc(&buf_region, sizeof(*b));
		if (b)
			nbuffers++;
	}
	ht_spin_unlock(&buf_lock);
	if (b) {
		b->len = 0;
		b->nevents = 0;
		b->next = NULL;
	}
	return b;
}

void threads_set_wake_after(unsigned n)
{
	atomic_store_explicit(&wake_after, n, memory_order_relaxed);
}

void threads_recycle(struct ht_buf *b)
{
	ht_spin_lock(&buf_lock);
	b->next = free_list;
	free_list = b;
	ht_spin_unlock(&buf_lock);
	atomic_fetch_add(&recycled, 1);
}

struct ht_buf *threads_take_full(void)
{
	struct ht_buf *b;

	ht_spin_lock(&buf_lock);
	b = full_head;
	full_head = full_tail = NULL;
	nqueued = 0;
	ht_spin_unlock(&buf_lock);
	return b;
}

/* acquire() found the buffer held by the writer: wait for it, not BUSY. */
static __attribute__((noinline)) void acquire_wait(struct ht_thread *t)
{
	int expected;
	unsigned spins = 0;

	/*
	 * acquire()'s fenced try left BUSY behind (only this thread ever
	 * stores BUSY): take it back, whichever way the writer works now, or
	 * a compare-and-swap from IDLE would never succeed.
	 */
	if (atomic_load_explicit(&t->state, memory_order_relaxed) == ST_BUSY)
		atomic_store_explicit(&t->state, ST_IDLE, memory_order_release);
	while (atomic_load_explicit(&fenced, memory_order_relaxed)) {
		ht_backoff(&spins);
		atomic_store_explicit(&t->state, ST_BUSY, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&t->held, memory_order_acquire))
			return;
		atomic_store_explicit(&t->state, ST_IDLE, memory_order_release);
	}
	for (;;) {
		ht_backoff(&spins);
		expected = ST_IDLE;
		if (atomic_compare_exchange_weak_explicit(&t->state, &expected, ST_BUSY,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
	}
}

/* Marks the buffer BUSY, once the writer does not hold it (see the top). */
static inline void acquire(struct ht_thread *t)
{
	int expected = ST_IDLE;

	if (HT_LIKELY(atomic_load_explicit(&fenced, memory_order_relaxed))) {
		atomic_store_explicit(&t->state, ST_BUSY, memory_order_relaxed);
		/* the writer's membarrier() is the fence; the compiler must not move the load */
		atomic_signal_fence(memory_order_seq_cst);
		if (HT_LIKELY(!atomic_load_explicit(&t->held, memory_order_acquire)))
			return;
	} else if (atomic_compare_exchange_weak_explicit(&t->state, &expected, ST_BUSY,
							 memory_order_acquire,
							 memory_order_relaxed)) {
		return;
	}
	acquire_wait(t);
}

/*
 * The end of every event (and of every other BUSY stretch): a signal from
 * outside that came meanwhile was deferred to here (signals.c).  The check
 * comes after the store, which the compiler must not sink below it: a
 * signal after the store finds the thread not BUSY and acts itself.
 */
static void release(struct ht_thread *t)
{
	atomic_store_explicit(&t->state, ST_IDLE, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
	if (HT_UNLIKELY(ht_signal_pending))
		signals_run_pending();
}

/* Is the calling thread inside an event (its buffer BUSY)?  Async-signal-safe. */
int thread_busy(void)
{
	struct ht_thread *t = ht_self;

	return t && atomic_load_explicit(&t->state, memory_order_relaxed) == ST_BUSY;
}

/*
 * Hand the thread's buffer to the writer (caller is BUSY or HELD); returns
 * how many buffers now wait for it.
 */
static unsigned hand_off(struct ht_thread *t)
{
	struct ht_buf *b = t->buf;
	unsigned n;

	if (!b)
		return 0;
	t->buf = NULL;
	if (!b->len) {
		threads_recycle(b);
		return 0;
	}
	b->tid = t->tid;
	ht_spin_lock(&buf_lock);
	queue_push_locked(b);
	n = ++nqueued;
	ht_spin_unlock(&buf_lock);
	return n;
}

static struct ht_thread *thread_register(void)
{
	struct ht_thread *t;
	struct ht_thread *head;
	int expected;

	for (t = atomic_load(&registry); t; t = t->next_all) {
		expected = TH_FREE;
		if (atomic_load(&t->claim) == TH_FREE &&
		    atomic_compare_exchange_strong(&t->claim, &expected, TH_ALIVE))
			goto claimed;
	}
	t = region_alloc(&thread_region, sizeof(*t));
	if (!t)
		return NULL;
	atomic_store(&t->state, ST_IDLE);
	atomic_store(&t->claim, TH_ALIVE);
	head = atomic_load(&registry);
	do {
		t->next_all = head;
	} while (!atomic_compare_exchange_weak(&registry, &head, t));
claimed:
	/*
	 * A reused record: the writer's steal may have seen it claimed and be
	 * holding it (HELD) this very moment.  Take it BUSY like any event
	 * before touching its fields.
	 */
	acquire(t);
	t->tid = (uint32_t)syscall(SYS_gettid);
	hand_off(t);		/* nothing is expected there: be safe */
	t->client = 0;
	t->last_time = 0;
	t->last_ptr = 0;
	t->timed = 0;
	release(t);
	ht_self = t;
	if (exit_key_ok)
		pthread_setspecific(exit_key, t);
	return t;
}

static int writer_alive(void)
{
	return writer_running() && atomic_load(&ht_phase) != HT_STOPPED;
}

static void count_lost(int reason)
{
	atomic_fetch_add_explicit(&ht_lost[reason], 1, memory_order_relaxed);
}

struct ht_thread *thread_begin(size_t need)
{
	struct ht_thread *t = ht_self;
	int is_new = 0;

	if (HT_UNLIKELY(!t)) {
		t = thread_register();
		if (!t) {
			count_lost(HTR_LOST_MEMORY);
			return NULL;
		}
		is_new = 1;
	}
	acquire(t);
	while (HT_UNLIKELY(!t->buf || t->buf->len + need > HT_BUF_BYTES)) {
		struct ht_buf *b;

		/*
		 * A child made by a raw clone() system call rather than fork()
		 * (Chromium's zygote, some sandboxes) ran no fork handler of
		 * ours: it has our memory but no writer thread, so no buffer
		 * would ever come back (each wait gave up after 5 s, and the
		 * zygote's child missed its deadline), and a lock the writer
		 * held at the clone stays held.  It runs untraced from its
		 * first full buffer on.  A vfork child, which shares our
		 * memory, drops its events from there (lifecycle.c).  One
		 * getpid() a buffer; one an event in a process that drops.
		 */
		if (HT_UNLIKELY(ht_foreign_here())) {
			release(t);
			return NULL;
		}
		/* a few buffers a wake-up (its rounds take the rest) */
		if (t->buf && hand_off(t) >= atomic_load_explicit(&wake_after,
								memory_order_relaxed))
			writer_wake();
		b = buffer_get();
		if (b) {
			t->buf = b;
			break;
		}
		/* The writer is behind: wait for a buffer, not holding BUSY. */
		release(t);
		if (!writer_alive())
			return NULL;	/* after the end: nothing more is recorded */
		{
			uint64_t seen = atomic_load(&recycled);
			uint64_t give_up = ht_mono_ns() + 5000000000ull;
			struct timespec ts = { 0, 200000 };

			writer_wake();
			while (atomic_load(&recycled) == seen && writer_alive()) {
				/* A writer stuck for 5 s (a stopped disk?): count, go on. */
				if (ht_mono_ns() > give_up) {
					count_lost(HTR_LOST_DISK);
					return NULL;
				}
				/* raw: nanosleep() is a cancellation point */
				syscall(SYS_nanosleep, &ts, NULL);
			}
		}
		acquire(t);
	}
	if (!t->buf->len) {
		t->last_ptr = 0;
		t->timed = 0;
		/* until a timed event sets it; never before the thread's last event */
		t->buf->base_time = t->last_time << HTR_TICK_SHIFT;
	}
	if (HT_UNLIKELY(is_new)) {
		/* The thread's first event: say it started. */
		uint8_t *p = t->buf->data + t->buf->len;
		uint64_t now = ht_now();

		*p++ = HTR_EV_BYTE(HTR_EV_CONTROL, 0);
		p = htr_put_u64(p, thread_delta(t, now));
		p = htr_put_u64(p, HTR_SUB_THREAD_START);
		p = htr_put_u64(p, 0);
		t->buf->len = (uint32_t)(p - t->buf->data);
		t->buf->nevents++;
		clients_thread_start(t);
		if (t->buf->len + need > HT_BUF_BYTES) {
			/* Cannot happen with need <= a stack record; be safe. */
			release(t);
			count_lost(HTR_LOST_MEMORY);
			return NULL;
		}
	}
	return t;
}

uint8_t *thread_pos(struct ht_thread *t)
{
	return t->buf->data + t->buf->len;
}

/*
 * Time deltas are written in ticks of 1 << HTR_TICK_SHIFT ns
 * (HTR_PF_TIME_TICKS): small numbers that compress well.  last_time counts
 * ticks; a chunk's base time is the first event's tick, in ns.
 */
uint64_t thread_delta(struct ht_thread *t, uint64_t now)
{
	uint64_t tick = now >> HTR_TICK_SHIFT, d;

	/*
	 * The chunk's first timed event sets its base time.  Not "len == 0": a
	 * stack definition may come first, and a realloc asks twice (before
	 * and after the call) before its event is committed.
	 */
	if (!t->timed) {
		t->buf->base_time = tick << HTR_TICK_SHIFT;
		t->last_time = tick;
		t->timed = 1;
		return 0;
	}
	d = tick >= t->last_time ? tick - t->last_time : 0;
	t->last_time += d;
	return d;
}

void thread_commit(struct ht_thread *t, uint8_t *end, uintptr_t last_ptr)
{
	t->buf->len = (uint32_t)(end - t->buf->data);
	t->buf->nevents++;
	t->last_ptr = last_ptr;
}

uintptr_t thread_last_ptr(struct ht_thread *t)
{
	return t->last_ptr;
}

void thread_end(struct ht_thread *t)
{
	release(t);
}

uint64_t thread_client(struct ht_thread *t)
{
	return t->client;
}

void thread_set_client(struct ht_thread *t, uint64_t client)
{
	t->client = client;
}

/* Waits out an event in progress; 0 when the thread is not BUSY any more. */
static int wait_not_busy(struct ht_thread *t, uint64_t deadline_ns)
{
	unsigned spins = 0;

	while (atomic_load_explicit(&t->state, memory_order_acquire) == ST_BUSY) {
		if (++spins > 16) {
			if (ht_mono_ns() > deadline_ns)
				return -1;
			sched_yield();
		}
	}
	return 0;
}

/*
 * threads_steal_all(), fenced by the writer: see the top of the file.  The
 * threads not BUSY are taken and let go at once; only then does the writer
 * wait for those that were, one at a time, so that one long event (a
 * realloc copying, a thread stopped in a signal handler) holds up no other
 * thread.  0 when every thread was taken, -1 when some was not, 1 when
 * there is no fence any more.
 */
static int steal_all_fenced(uint64_t deadline_ns)
{
	struct ht_thread *t;
	int complete = 1, busy = 0;

	for (t = atomic_load(&registry); t; t = t->next_all)
		if (atomic_load(&t->claim) != TH_FREE)
			atomic_store_explicit(&t->held, 1, memory_order_relaxed);
	if (fence_all_threads() != 0) {
		struct timespec pause = { 0, 1000000 };

		/* a BUSY may not be visible: take nothing yet, and fall back */
		atomic_store(&fenced, 0);
		for (t = atomic_load(&registry); t; t = t->next_all)
			atomic_store_explicit(&t->held, 0, memory_order_release);
		syscall(SYS_nanosleep, &pause, NULL);
		return 1;
	}
	for (t = atomic_load(&registry); t; t = t->next_all) {
		if (!atomic_load_explicit(&t->held, memory_order_relaxed))
			continue;
		if (atomic_load_explicit(&t->state, memory_order_acquire) == ST_BUSY) {
			busy = 1;
			continue;
		}
		if (t->buf && t->buf->len)
			hand_off(t);
		atomic_store_explicit(&t->held, 0, memory_order_release);
	}
	for (t = atomic_load(&registry); busy && t; t = t->next_all) {
		if (!atomic_load_explicit(&t->held, memory_order_relaxed))
			continue;
		if (wait_not_busy(t, deadline_ns) != 0)
			complete = 0;	/* stuck BUSY (a stopped thread?): next round */
		else if (t->buf && t->buf->len)
			hand_off(t);
		atomic_store_explicit(&t->held, 0, memory_order_release);
	}
	return complete ? 0 : -1;
}

int threads_steal_all(uint64_t deadline_ns)
{
	struct ht_thread *t;
	int complete = 1;

	if (atomic_load(&fenced)) {
		int r = steal_all_fenced(deadline_ns);

		if (r <= 0)
			return r;
		/* no fence any more: compare-and-swap from now on, this round too */
	}

	for (t = atomic_load(&registry); t; t = t->next_all) {
		unsigned spins = 0;
		int held = 0;

		if (atomic_load(&t->claim) == TH_FREE)
			continue;
		for (;;) {
			int expected = ST_IDLE;

			if (atomic_compare_exchange_weak(&t->state, &expected, ST_HELD)) {
				held = 1;
				break;
			}
			if (++spins > 16) {
				if (ht_mono_ns() > deadline_ns)
					break;
				sched_yield();
			}
		}
		if (!held) {
			complete = 0;	/* stuck BUSY (a stopped thread?): next round */
			continue;
		}
		if (t->buf && t->buf->len)
			hand_off(t);
		atomic_store_explicit(&t->state, ST_IDLE, memory_order_release);
	}
	return complete ? 0 : -1;
}

void threads_reap(void)
{
	struct ht_thread *t;
	pid_t pid = getpid();

	for (t = atomic_load(&registry); t; t = t->next_all) {
		int expected = ST_IDLE;

		if (atomic_load(&t->claim) != TH_EXITING)
			continue;
		if (syscall(SYS_tgkill, pid, t->tid, 0) == 0 || errno != ESRCH)
			continue;
		/* gone: only an event cut short (BUSY for ever) keeps it */
		if (atomic_load(&fenced)) {
			if (atomic_load(&t->state) != ST_IDLE)
				continue;
		} else if (!atomic_compare_exchange_strong(&t->state, &expected, ST_HELD)) {
			continue;
		}
		if (t->buf)
			hand_off(t);
		atomic_store(&t->state, ST_IDLE);
		atomic_store(&t->claim, TH_FREE);
	}
}

void thread_exiting(void)
{
	struct ht_thread *t = ht_self;
	int saved = errno;

	/* stopped: the shim's memory may be gone (it could not start) */
	if (!t || ht_in_shim || atomic_load(&ht_phase) == HT_STOPPED) {
		errno = saved;
		return;
	}
	ht_in_shim = 1;
	/* not ht_tracing(): it answers 0 under the guard just set */
	if (atomic_load(&ht_phase) == HT_ON) {
		char name[32] = "";

		/* the exiting thread itself: no descriptor needed (a low fd would show) */
		if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0)
			name[0] = '\0';
		name[sizeof(name) - 1] = '\0';
		if (name[0])
			ev_control(HTR_SUB_THREAD_NAME, 0, 0, name);
		clients_thread_exit();
		ev_control(HTR_SUB_THREAD_EXIT, 0, 0, NULL);
	}
	acquire(t);
	hand_off(t);
	atomic_store(&t->claim, TH_EXITING);
	release(t);
	/* later destructors may still allocate: they do without the caches */
	ht_thread_gone = 1;
	stacks_thread_exit();
	ht_in_shim = 0;
	errno = saved;
}
