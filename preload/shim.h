/* shim.h - private interfaces between the files of libheaptrail.so */
#ifndef HT_SHIM_H
#define HT_SHIM_H

/*
 * Invariants of the shim (DESIGN.md, "Rules the shim lives by"):
 * - nothing here allocates through malloc: memory comes from region_*()
 *   (mmap), bounded per region;
 * - no stdio: messages go through ht_msg() and write(2);
 * - the event path takes no global lock: a thread writes into its own buffer
 *   under its own tiny state word (thread.c); the global spinlocks guard only
 *   buffer hand-off (once per buffer) and are re-initialised in a forked child;
 * - re-entry (a signal handler or our own dependencies calling malloc while
 *   the shim is busy on this thread) passes straight to the real allocator.
 */

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "htr_format.h"
#include "htr_varint.h"

#define HT_EXPORT __attribute__((visibility("default")))
#define HT_LIKELY(x) __builtin_expect(!!(x), 1)
#define HT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HT_CACHELINE 64

/* ---- config.c: HEAPTRAIL_* settings, read once at start ---- */
struct ht_config {
	char out_pattern[1024];
	unsigned depth;		/* frames kept, <= HTR_MAX_DEPTH */
	unsigned interval_ms;	/* flush and sample period */
	int follow;		/* record forked children and exec'd images */
	int unwind;		/* enum htr_unwind */
	uint64_t sample_bytes;	/* 0 = record every event */
	int clients;		/* enum ht_clients_mode */
	int mark_signal;	/* 0 = none */
	int reach_at_exit;
	int pack;		/* enum ht_pack_mode: chunks packed into columns (HTR_PF_PACKED) */
	unsigned cpus;		/* CPUs the process may run on (sched_getaffinity) */
	int quiet;
};

enum ht_clients_mode { HT_CLIENTS_OFF, HT_CLIENTS_SOCKETS, HT_CLIENTS_THREADS };
enum ht_pack_mode { HT_PACK_OFF, HT_PACK_ON, HT_PACK_AUTO };

extern struct ht_config ht_cfg;
void config_load(void);

/* ---- packpolicy.c: whether the writer packs the next chunk ---- */
void pack_policy_start(void);	/* the writer starts (or restarts in a child) */
int pack_policy_now(void);	/* writer thread only */

/* ---- fmt.c: formatting without stdio ---- */
struct ht_str {
	char *buf;
	size_t len, cap;
};
void str_init(struct ht_str *s, char *buf, size_t cap);
void str_add(struct ht_str *s, const char *text);
void str_add_n(struct ht_str *s, const char *text, size_t n);
void str_add_u64(struct ht_str *s, uint64_t v);
/* "heaptrail: " + text + "\n" on stderr, unless HEAPTRAIL_QUIET. */
void ht_msg(const char *text);
int ht_parse_u64(const char *s, uint64_t *out);
/* The value of "key:" in a /proc status text (NUL-terminated), blanks skipped; NULL if absent. */
const char *ht_status_field(const char *text, const char *key);

/* ---- region.c: mmap-backed memory, never malloc ---- */
struct ht_region {
	uint8_t *base;
	size_t reserved;	/* address space reserved */
	_Atomic size_t used;
};
int region_reserve(struct ht_region *r, size_t bytes);
/* Bump allocation, 16-byte aligned; NULL when the region is exhausted. */
void *region_alloc(struct ht_region *r, size_t bytes);
/* Forget every allocation and give the pages back (a forked child). */
void region_reset(struct ht_region *r);
/* Unmap every region (the shim could not start). */
void region_release_all(void);
/* Total bytes handed out by all regions: the shim's own footprint. */
uint64_t region_total_used(void);

/* ---- tpool.c: per-thread blocks outside static TLS ---- */
struct ht_tpool {
	struct ht_region region;
	size_t block;
	atomic_flag lock;
	void *free;
};
int tpool_init(struct ht_tpool *p, size_t block, size_t reserve);
/* A zeroed block for this thread, or NULL (exiting, or the pool is spent). */
void *tpool_get(struct ht_tpool *p);
void tpool_put(struct ht_tpool *p, void *block);	/* NULL: nothing */
void tpool_after_fork(struct ht_tpool *p);
/* Set once the thread has given its blocks back (thread_exiting()). */
extern __thread int ht_thread_gone __attribute__((tls_model("initial-exec")));

/* ---- real.c: the allocator under us, and the bootstrap pool ---- */
struct ht_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
};
/* hidden: a direct rip-relative load, where a GOT entry would add one (and a page) */
extern struct ht_real ht_real __attribute__((visibility("hidden")));
/* Resolve the real functions; safe to call repeatedly.  0 when resolved. */
int real_resolve(void);
/*
 * A block's usable size: read from glibc's chunk header once that is known
 * to be right (HT_CHUNKS_READ), else from malloc_usable_size() (real.c).
 */
enum { HT_CHUNKS_CALL = 0, HT_CHUNKS_CHECKING, HT_CHUNKS_READ };
extern _Atomic int ht_glibc_chunks __attribute__((visibility("hidden")));
void real_check_chunks(void);	/* at start: may the header be read? */
size_t real_usable(void *ptr, size_t size);	/* the call, and the check */

static inline size_t real_chunk_usable(const void *ptr)
{
	size_t head = ((const size_t *)ptr)[-1];

	return (head & ~(size_t)7) - (head & 2 ? 16 : 8);
}
/* dlsym() may calloc before the real allocator is known: a static pool. */
void *bootstrap_alloc(size_t size, size_t align);
int bootstrap_owns(const void *p);
size_t bootstrap_room(const void *p);	/* bytes from p to the pool's end */

/* ---- clock ---- */
extern uint64_t ht_start_ns;	/* CLOCK_MONOTONIC at start */

static inline uint64_t ht_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* clock.c: CLOCK_MONOTONIC in ns, through the TSC where the kernel trusts it. */
uint64_t ht_clock_ns(void);
void clock_init(void);		/* sets ht_start_ns */
void clock_calibrate(uint64_t interval_ns);	/* writer, each round */
int clock_fit_pending(void);	/* TSC usable but not fitted yet */

/* Dump time: ns since the start. */
static inline uint64_t ht_now(void)
{
	uint64_t t = ht_clock_ns();

	return t > ht_start_ns ? t - ht_start_ns : 0;
}

/* ---- state shared by the files ---- */
enum ht_phase {
	HT_OFF = 0,		/* not started yet */
	HT_STARTING,		/* initialisation in progress */
	HT_ON,			/* tracing */
	HT_STOPPED,		/* finished, or could not start: pass through */
};
extern _Atomic int ht_phase;
extern _Atomic uint64_t ht_lost[5];	/* by enum htr_lost */

/*
 * Per-thread recursion guard and state pointer (initial-exec TLS).  The
 * guard says where the thread is, for re-entry and for our signal handlers:
 * SHIM while the shim keeps its books (its buffer may be BUSY, a spinlock may
 * be held), REAL while only the real allocator runs (nothing of ours held),
 * REAL_BUSY inside the real realloc with the thread's buffer BUSY, WRITER for
 * the writer thread (never traced).
 */
enum { HT_GUARD_NONE = 0, HT_GUARD_SHIM = 1, HT_GUARD_REAL = 2, HT_GUARD_REAL_BUSY = 3,
       HT_GUARD_WRITER = 4 };
struct ht_thread;
extern __thread int ht_in_shim;
extern __thread struct ht_thread *ht_self;

/* ---- stacks.c: capture and intern ---- */
/*
 * Lock-free tables that grow in levels (the stack table, unwind.c's rules):
 * level k of a table whose first level has 2^b0 slots holds 2^(b0 + k)
 * and starts where the levels before it end; a level takes new entries
 * once the one before it is 3/4 full.  Slots are hashed at random, so a
 * table sized for the largest program at once was all resident early.
 */
#define HT_LEVEL_SLOTS(b0, k) (1u << ((b0) + (k)))
#define HT_LEVEL_BASE(b0, k) (((1u << (k)) - 1) << (b0))
#define HT_LEVEL_FULL(b0, k) (HT_LEVEL_SLOTS(b0, k) / 4 * 3)

struct ht_capture {
	uintptr_t ips[HTR_MAX_DEPTH];
	unsigned depth;
	int memo;		/* the walk is remembered (unwind.c): intern may tag it */
	uint64_t memo_tag;	/* what intern said of it last: epoch << 32 | id, or 0 */
};
int stacks_init(void);
void stacks_reset(void);	/* forked child: forget every stack */
/* Capture the caller's stack, skipping the shim's own frames. */
void stacks_capture(struct ht_capture *c);
/*
 * Intern a captured stack: returns its id and sets *is_new when this call
 * created it (the caller then writes its definition before the event).
 */
uint32_t stacks_intern(const struct ht_capture *c, int *is_new);
/* A module was unloaded: addresses may now mean other code. */
void stacks_new_epoch(void);
/* The thread exits: its caches go back to their pools (tpool.c). */
void stacks_thread_exit(void);
/* The shim's own text, for skipping frames. */
void stacks_set_self_range(uintptr_t lo, uintptr_t hi);

/* ---- fence.c: the writer's fence for every thread (thread.c) ---- */
int fence_init(void);		/* 1 when a fence is at hand */
int fence_after_fork(void);	/* the child: 1 when it still is */
int fence_all_threads(void);	/* 0, or -1: no fence was made */

/* ---- thread.c: per-thread buffers, hand-off and the writer's steal ---- */
/* One round of waiting for another thread: spin, yield, then sleep (never a cancellation point). */
void ht_backoff(unsigned *spins);

/*
 * The shim's spinlocks, every one of them: held for a few instructions, and
 * a waiter backs off (a SCHED_FIFO waiter must let a preempted holder run).
 */
static inline void ht_spin_lock(atomic_flag *l)
{
	unsigned spins = 0;

	while (atomic_flag_test_and_set_explicit(l, memory_order_acquire))
		ht_backoff(&spins);
}

static inline void ht_spin_unlock(atomic_flag *l)
{
	atomic_flag_clear_explicit(l, memory_order_release);
}
#define HT_BUF_BYTES (32u << 10)
#define HT_EVENT_MAX 80		/* largest event but a stack definition */

struct ht_buf {
	struct ht_buf *next;
	uint32_t tid;
	uint32_t len;
	uint32_t nevents;
	uint64_t base_time;
	uint8_t data[HT_BUF_BYTES];
};

int threads_init(void);
void threads_reset_after_fork(void);
/* Open the calling thread's buffer for one event with 'need' bytes of room. */
struct ht_thread *thread_begin(size_t need);
uint8_t *thread_pos(struct ht_thread *t);
/* Time for the event being written: now, and the delta to write. */
uint64_t thread_delta(struct ht_thread *t, uint64_t now);
void thread_commit(struct ht_thread *t, uint8_t *end, uintptr_t last_ptr);
uintptr_t thread_last_ptr(struct ht_thread *t);
void thread_end(struct ht_thread *t);
uint64_t thread_client(struct ht_thread *t);
void thread_set_client(struct ht_thread *t, uint64_t client);
/* Writer side. */
struct ht_buf *threads_take_full(void);		/* whole queue, oldest first */
void threads_set_wake_after(unsigned n);	/* full buffers that wake the writer */
int threads_steal_all(uint64_t deadline_ns);	/* 0 when every thread was visited */
void threads_recycle(struct ht_buf *b);
void threads_reap(void);	/* recycle threads that have exited */
void thread_exiting(void);	/* key destructor: flush and mark */

/* ---- events.c: encoding events into the thread buffer ---- */
void ev_alloc(unsigned api, void *ptr, size_t size, const struct ht_capture *c);
void ev_free(unsigned api, void *ptr);
struct ev_realloc_ctx {
	struct ht_thread *t;
	uint8_t *p;
	uint32_t id;
	uint64_t t_before;
};
/* Opens the event (thread BUSY); -1 when it cannot be recorded. */
int ev_realloc_begin(struct ev_realloc_ctx *x, const struct ht_capture *c);
/* After the real call; new_ptr NULL with size > 0 means it failed. */
void ev_realloc_end(struct ev_realloc_ctx *x, unsigned api, void *old,
		    void *new_ptr, size_t size);
/* Control events: sub is enum htr_sub. */
void ev_control(unsigned sub, uint64_t a, uint64_t b, const char *text);

/* ---- writer.c: the writer thread and the dump file ---- */
int writer_open(void);		/* opens the dump, writes the first frame */
int writer_start_thread(void);
void writer_wake(void);		/* a full buffer is waiting */
/* Final flush: end record, last frame; waits for the writer (bounded). */
void writer_finish(int how, int status);
void writer_reset_after_fork(void);
int writer_restart_in_child(unsigned generation);
/* Ask for a full round (everything so far on disk) and wait for it. */
void writer_sync(void);
void writer_sync_exec(void);	/* writer_sync() plus an END "exec" record */
int writer_running(void);
/* Without the writer thread for a moment (see interpose_ns.c); 0 when paused. */
int writer_pause(void);
void writer_resume(void);
/*
 * Queue a top-level record (mark, module load) built by another thread; the
 * caller holds its thread BUSY (thread_begin) while it reads the record's
 * time and queues it.  -ENOSPC when the queue is full.
 */
int writer_top_record(const uint8_t *rec, size_t len);
const char *writer_path(void);
int writer_tid(void);		/* the writer thread's tid, 0 when none */
int writer_fd(void);		/* the dump's descriptor, -1 when none */
void writer_move_fd(void);	/* before the program dup2()s onto it */

/*
 * The lowest of our descriptors (the dump's, keptfile.c's) in [first, last]
 * that the program must not close, or -1; none while inside the shim.
 */
int ht_guarded_fd_in(unsigned first, unsigned last);

/* The program must not close or replace our descriptors. */
static inline int ht_guards_fd(int f)
{
	return f >= 0 && HT_UNLIKELY(ht_guarded_fd_in((unsigned)f, (unsigned)f) == f);
}

/* ---- modules.c: loaded objects, build-ids ---- */
int modules_init(void);
/* Append MODULE_LOAD/UNLOAD records for changes since the last call. */
size_t modules_sync(uint8_t *out, size_t room, uint64_t now);
int modules_changed(void);	/* cheap: the loader's add/sub counters moved */
void modules_note_change(void);	/* the next round walks the list */
/* A new stack: record modules its addresses need; 1 when the stack epoch moved. */
int modules_check_stack(const uintptr_t *ips, unsigned n);
/* A forked child; loader_idle: nobody held the loader's write lock at the fork. */
void modules_after_fork(int loader_idle);
/* 0 in a forked child that must not call the real dl_iterate_phdr(). */
int modules_loader_trusted(void);
void modules_loader_proven(void);	/* a real dl_iterate_phdr() returned */
struct dl_phdr_info;
int modules_iterate_snapshot(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data);
/* interpose_proc.c: the loader's write lock, for forked children */
void proc_calibrate_loader_lock(void);
int proc_loader_idle(void);

/* ---- keptfile.c: /proc and /sys files re-read, kept open at a high number ---- */
struct ht_kept_file {
	const char *path;
	int fd;			/* -1: not open */
	dev_t dev;
	ino_t ino;
};
#define HT_KEPT_FILE(p) { (p), -1, 0, 0 }
#define HT_KEPT_FD_MIN 900
/* (Re)open at a number >= above (HT_KEPT_FD_MIN when above <= 3); the fd or -1. */
int kept_file_open(struct ht_kept_file *k, int above);
/*
 * A small file read once (open, read, close), NUL-terminated: the bytes
 * read, <= 0 when none; for files read at start or in a forked child.
 */
ssize_t ht_read_file(const char *path, char *buf, size_t cap);
/* n bytes at off (a file read piece by piece), reopened if it is no longer ours; -1. */
ssize_t kept_file_pread(struct ht_kept_file *k, char *buf, size_t n, off_t off);

/* ---- stackbounds.c: the calling thread's stack, from /proc/self/maps ---- */
void stackbounds_open(void);	/* at start, and in a forked child */
extern __thread uintptr_t ht_stack_lo __attribute__((tls_model("initial-exec")));
extern __thread uintptr_t ht_stack_hi __attribute__((tls_model("initial-exec")));
int ht_thread_stack_learn(uintptr_t *lo, uintptr_t *hi);

/* [lo, hi) of this thread's stack, or -1 when unknown: learnt once, then two loads. */
static inline int ht_thread_stack(uintptr_t *lo, uintptr_t *hi)
{
	if (HT_LIKELY(ht_stack_hi != 0)) {
		*lo = ht_stack_lo;
		*hi = ht_stack_hi;
		return 0;
	}
	return ht_thread_stack_learn(lo, hi);
}
/* Its contents from the start, NUL-terminated, reopened if it is no longer ours; -1. */
ssize_t kept_file_read(struct ht_kept_file *k, char *buf, size_t cap);

/* ---- sampler.c ---- */
struct mallinfo2;
/* Open /proc/self/statm once, at a number >= above (writer_open, after fork). */
void sampler_open(int above);
size_t sampler_record(uint8_t *out, size_t room, uint64_t now,
		      const struct mallinfo2 *fresh);

/* ---- ptrset.c: a set of live blocks, for sampling and reachability ---- */
enum { HT_SET_SAMPLED = 0, HT_SET_LIVE = 1 };
struct ht_ptrset;
struct ht_ptrset *ptrset_get(int which);
int ptrset_init(struct ht_ptrset *s, size_t reserve);
void ptrset_reset(struct ht_ptrset *s);
int ptrset_add(struct ht_ptrset *s, uintptr_t p, uint64_t size);
/* 1 and *size when p was in the set (and is no longer). */
int ptrset_remove(struct ht_ptrset *s, uintptr_t p, uint64_t *size);
/* 0 when p is certainly not in the set; lock-free. */
int ptrset_maybe(struct ht_ptrset *s, uintptr_t p);
uint64_t ptrset_count(struct ht_ptrset *s);
/* Its counting filter (1 << HT_FILTER_BITS bytes), for ht_may_keep_free(). */
_Atomic uint8_t *ptrset_filter(struct ht_ptrset *s);
void ptrset_each(struct ht_ptrset *s, void (*fn)(void *ctx, uintptr_t p, uint64_t size),
		 void *ctx);
/* A forked child: only this thread survives, so no shard lock is really held. */
void ptrset_after_fork(struct ht_ptrset *s);

/* ---- reach.c: HEAPTRAIL_REACH, the reachability scan (reach.h) ---- */
extern int ht_reach_on;		/* the live-block set is kept */
void reach_init(void);		/* after config_load() */
void reach_after_fork(void);
void reach_at_exit(void);	/* the exit scan, from our atexit handler */
void reach_snapshot(void);	/* heaptrail_reach_snapshot() */
void reach_request_snapshot(void);	/* async-signal-safe: at the next free */
/* Event path, under the guard; the free side runs before the block is handed back. */
void reach_note_alloc(void *p, size_t size);
void reach_note_free(void *p);
void reach_realloc_begin(void *old);
void reach_realloc_end(void *old, void *p, size_t size);

/* ---- bytesample.c: HEAPTRAIL_SAMPLE ---- */
/*
 * The thread's countdown: bytes to go before the next recorded allocation,
 * 0 to 2^46 (a thread starts at 0: not drawn yet, or not sampling).  A call
 * is passed over when its size is below the countdown, compared unsigned,
 * and then takes its size off: nothing can wrap, whatever the size (review
 * S1, S2: a signed countdown that malloc(PTRDIFF_MAX) drove past INT64_MIN
 * passed every later call over, and a request of 2^63 bytes or more made
 * it positive before the real malloc was known), and only sampling's own
 * draws make it positive: the fast paths need no other test.
 */
extern __thread int64_t ht_sample_left;
/*
 * Requests of this size or more never pass over (nor does any while the
 * countdown is 0 or below, as without sampling).  The countdown is drawn
 * below 2^46 (36.7 means at most, HEAPTRAIL_SAMPLE <= 2^40), so a
 * subtraction stays within (-2^47, 2^46]: the value in memory is never a
 * wrapped one, also for a signal handler that allocates between the
 * subtraction and its giving back (review finding L1).
 */
#define HT_SAMPLE_SIZE_LIMIT ((size_t)1 << 46)

/* Is size below the countdown (the call then passes over)? */
static inline int ht_sample_below(size_t size)
{
	return size < HT_SAMPLE_SIZE_LIMIT && (int64_t)size < ht_sample_left;
}
int sample_init(void);
int sample_slow(size_t size);
void sample_remember(void *p, size_t size);
int sample_forget(void *p);
/* real.c's bootstrap pool: its blocks must take free()'s slow path */
void sample_pin(const void *p, size_t size);
void bootstrap_pin_all(void);

/* Record this allocation?  Always, unless sampling says not. */
static inline int ht_keep_alloc(size_t size)
{
	if (HT_LIKELY(!ht_cfg.sample_bytes))
		return 1;
	if (ht_sample_below(size)) {
		ht_sample_left -= (int64_t)size;
		return 0;
	}
	return sample_slow(size);
}

/*
 * Sampling's fast path, first thing in malloc: 1 when the call is passed
 * over (its size below the countdown, which it takes; never, not sampling).
 * 0 leaves the countdown as it was, and the slow path decides with
 * ht_keep_alloc().  Calls that will not be traced (re-entry, stopped) count
 * too: they are rare.  x86-64: one subtraction in place, added back when
 * the result is 0 or below (single instructions, and the value between
 * them a small negative one: a signal handler's calls in between take the
 * slow path and give back their own share, see HT_SAMPLE_SIZE_LIMIT).
 */
static inline int ht_sample_pass_alloc(size_t size)
{
#if defined(__x86_64__)
	if (HT_UNLIKELY(size >= HT_SAMPLE_SIZE_LIMIT))
		return 0;
	__asm__ goto("movq ht_sample_left@gottpoff(%%rip), %%rax\n\t"
		     "subq %0, %%fs:(%%rax)\n\t"
		     "jle %l[keep]"
		     : : "r"(size) : "rax", "cc", "memory" : keep);
	return 1;
keep:
	__asm__ volatile("movq ht_sample_left@gottpoff(%%rip), %%rax\n\t"
			 "addq %0, %%fs:(%%rax)"
			 : : "r"(size) : "rax", "cc", "memory");
	return 0;
#else
	if (ht_sample_below(size)) {
		ht_sample_left -= (int64_t)size;
		return 1;
	}
	return 0;
#endif
}

/* ptrset.c: the sampled set's filter when sampling kept its blocks there (lifecycle.c resets it) */
extern _Atomic uint8_t *ht_sampled_filter;

static inline uint64_t ht_ptr_hash(uintptr_t p)
{
	uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;

	return h ^ (h >> 29);
}

#define HT_FILTER_BITS 16	/* 64 KiB counting filter: stays in cache */

/* bytesample.c: one bit per hash bucket holding a recorded block (8 KiB) */
#define HT_SAMPLED_WORDS 1024
extern _Atomic uint64_t ht_sampled_bits[HT_SAMPLED_WORDS] __attribute__((visibility("hidden")));

/*
 * Blocks are 16-byte aligned: address bits 4-19 (1 MiB), the low 4 of them
 * folded with bits 20-23 (no multiply).  Bits 8-19 alone make its top 12
 * bits, the summary's group (below): free() computes those in two shifts.
 */
static inline uint32_t ht_sampled_bucket(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	return (uint32_t)(((a >> 4) & (HT_SAMPLED_WORDS * 64 - 1)) ^ ((a >> 20) & 15));
}

/*
 * The summary, in real.c beside ht_real: bit g says that one of the 16
 * buckets g * 16 .. g * 16 + 15 holds a recorded block (or a block of
 * real.c's bootstrap pool is there).  4096 bits, 8 lines that every free
 * reads (each line an eighth of them), so they stay in L1; with few
 * recorded blocks live, nearly every free is answered here alone: at 512
 * KiB a dozen groups are set, a free goes on to the bitmap (a line not in
 * L1) once in 300.  All bits are set while sampling is off, so that every
 * free takes the slow path.
 */
#define HT_SUMMARY_WORDS 64
#define HT_SUMMARY_SPAN (HT_SAMPLED_WORDS * 64 / (HT_SUMMARY_WORDS * 64))	/* buckets a bit covers */
extern _Atomic uint64_t ht_sampled_summary[HT_SUMMARY_WORDS] __attribute__((visibility("hidden")));

static inline int ht_sampled_summary_maybe(const void *p)
{
	uintptr_t a = (uintptr_t)p;	/* group ht_sampled_bucket(p) / HT_SUMMARY_SPAN: bits 8-19 */

	return (atomic_load_explicit(&ht_sampled_summary[(a >> 14) & (HT_SUMMARY_WORDS - 1)],
				     memory_order_relaxed) >> ((a >> 8) & 63)) & 1;
}

static inline int ht_sampled_maybe(const void *p)
{
	uint32_t b = ht_sampled_bucket(p);

	if (!ht_sampled_summary_maybe(p))
		return 0;
	return (atomic_load_explicit(&ht_sampled_bits[b / 64], memory_order_relaxed) >>
		(b % 64)) & 1;
}

/*
 * Might this free be of a recorded block?  Lock-free, no guard needed: with
 * sampling, most frees are of blocks never recorded and leave here for the
 * real free at once.
 */
static inline int ht_may_keep_free(const void *p)
{
	if (HT_LIKELY(!ht_cfg.sample_bytes))
		return 1;
	return ht_sampled_maybe(p);
}

/* real.c's bootstrap pool: its blocks never reach the real free */
#define HT_BOOT_POOL_BYTES (64u << 10)
extern uint8_t ht_boot_pool[HT_BOOT_POOL_BYTES] __attribute__((visibility("hidden")));

/* bootstrap_owns(), inline for free()'s slow path */
static inline int ht_boot_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)ht_boot_pool < HT_BOOT_POOL_BYTES;
}

/*
 * Sampling's fast path in free: a block never recorded goes straight
 * through.  Not sampling, and for the bootstrap pool's blocks, the summary
 * says "maybe": the slow path sorts them out.
 */
static inline int ht_sample_pass_free(const void *p)
{
	return !ht_sampled_summary_maybe(p);
}

/* Record this free?  Always, unless sampling never recorded the block. */
static inline int ht_keep_free(void *p)
{
	if (HT_LIKELY(!ht_cfg.sample_bytes))
		return 1;
	return sample_forget(p);
}

/*
 * interpose_cxx.c: an operator new whose first try failed hands over to the
 * real operator (new_handler loop); the retry that succeeds comes back through
 * malloc or aligned_alloc and is recorded as the operator's event.
 */
struct ht_new_pending {
	unsigned api;		/* 0: none */
	size_t size, slack;
};
extern __thread struct ht_new_pending ht_new_pending;

static inline unsigned ht_api_for(unsigned api, size_t size)
{
	if (HT_UNLIKELY(ht_new_pending.api) && size >= ht_new_pending.size &&
	    size - ht_new_pending.size <= ht_new_pending.slack) {
		api = ht_new_pending.api;
		ht_new_pending.api = 0;
	}
	return api;
}

/* ---- signals.c ---- */
void signals_install(void);
/* A fatal signal from outside deferred to the end of the event (release() in thread.c). */
extern __thread volatile int ht_signal_pending __attribute__((tls_model("initial-exec")));
void signals_run_pending(void);	/* acts on it: END record, default action, raise */
int thread_busy(void);		/* thread.c: the caller's buffer is BUSY (inside an event) */

/* ---- lifecycle.c ---- */
void ht_init(void);		/* idempotent; called on first intercepted call */
void ht_stop(int how, int status);	/* final flush; later events pass through */
void ht_note_exit_status(int status);
int ht_foreign_process(void);	/* a vfork child sharing our memory */
int ht_foreign_here(void);	/* foreign with a full buffer: stop or drop (thread.c) */
/* Did an earlier image of this process (before exec) write a dump so marked? */
int ht_earlier_image(uint32_t pid, uint64_t start_realtime_ns);

/* reentry.c: a call that arrived under the guard SHIM, from 'caller' */
void reentry_init(void);
void ht_note_reentry(const void *caller);

/*
 * 1 when this call should be recorded; starts the shim on first use.  A
 * macro, so that the caller's address is that of the intercepted call.
 */
#define ht_tracing() ht_tracing_from(__builtin_return_address(0))

static inline int ht_tracing_from(const void *caller)
{
	int phase;

	if (HT_UNLIKELY(ht_in_shim)) {
		/* under the real allocator's own calls (guard REAL) nothing is lost */
		if (ht_in_shim == HT_GUARD_SHIM)
			ht_note_reentry(caller);
		return 0;
	}
	phase = atomic_load_explicit(&ht_phase, memory_order_relaxed);
	if (HT_LIKELY(phase == HT_ON))
		return 1;
	if (phase == HT_OFF) {
		ht_init();
		return atomic_load(&ht_phase) == HT_ON;
	}
	return 0;
}

/* ---- clients.c: automatic client attribution (HEAPTRAIL_CLIENTS) ---- */
/* A thread's first event (thread_begin, BUSY held): threads mode begins its client. */
void clients_thread_start(struct ht_thread *t);
/* thread_exiting(), under the guard, before THREAD_EXIT: threads mode ends it. */
void clients_thread_exit(void);

/* ---- events.c (more) ---- */
void ev_pool_alloc(uint64_t pool, const void *ptr, size_t size,
		   const struct ht_capture *c);
/* A top-level record (mark) with the current time, queued for the writer. */
void ev_mark(const char *label);

#endif
