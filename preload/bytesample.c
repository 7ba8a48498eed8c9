/* bytesample.c - Poisson sampling by bytes (HEAPTRAIL_SAMPLE), as tcmalloc does */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/*
 * Each thread counts down the bytes it allocates; when the count crosses
 * zero the allocation that crossed it is recorded and a new distance is
 * drawn from an exponential distribution with the configured mean.  An
 * allocation of s bytes is then recorded with probability 1 - exp(-s/mean),
 * which the analyzer inverts to estimate totals.  Recorded blocks go into a
 * set so that their frees are recorded too; other frees cost one bit test
 * in a summary that says which groups of 16 hash buckets hold a recorded
 * block (shim.h), and rarely a second one in the bitmap of the buckets.
 *
 * A recorded event comes after hundreds of calls that were passed over,
 * which have pushed the shim's data out of the caches: what it costs is
 * mostly the cache lines (and pages) it touches, and those another core
 * wrote last.  So the set is one small table, with its lock and size on one
 * line, in the shim's static data while it is small (at 512 KiB a program
 * rarely holds more than a few hundred recorded blocks).  It is indexed by
 * the block's bitmap bucket, so the blocks of one bucket sit in one run of
 * the table: whether a bucket still holds a block after a removal is a look
 * at that run (on the line just touched), not a per-bucket counter in
 * another array.  (It was a 256-shard set with a counting filter, a global
 * count and 65,536 bucket counters: eight lines and as many pages, most of
 * them cold or the other core's, for every recorded event; ptrset_add alone
 * was half the cost of a recorded allocation on mtmalloc.)
 *
 * Bits and table change together under the table's lock, taken only for
 * recorded blocks (rare by construction).  A bit is set before the block
 * is handed to the program, so a free of a recorded block always sees it;
 * a bit is cleared only when no block of its bucket is left.
 */

/* shim.h: the countdown is 0 unless sampling drew it (ht_sample_pass_alloc() relies on it) */
__thread int64_t ht_sample_left __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));
static __thread int seeded __attribute__((tls_model("initial-exec")));

static uint64_t next_random(void)
{
	/* xorshift64*: plenty for drawing sampling distances */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

/*
 * -ln(u) for u in (0, 1], without libm: log() is a call into cold code and
 * a cold table at each recorded allocation.  u = 2^e m, m in [1, 2):
 * ln(u) = e ln 2 + ln(m), ln(m) = 2 atanh(s), s = (m - 1) / (m + 1) in
 * [0, 1/3): an odd series, whose terms up to s^15 leave an error below
 * 1e-9 (far under what a sampling distance needs).
 */
static double neg_ln(double u)
{
	union {
		double d;
		uint64_t u;
	} x = { .d = u };
	int e = (int)((x.u >> 52) & 0x7ff) - 1023;
	double m, s, s2, t;

	x.u = (x.u & ((1ull << 52) - 1)) | (1023ull << 52);
	m = x.d;
	s = (m - 1.0) / (m + 1.0);
	s2 = s * s;
	t = 1.0 / 15;
	t = t * s2 + 1.0 / 13;
	t = t * s2 + 1.0 / 11;
	t = t * s2 + 1.0 / 9;
	t = t * s2 + 1.0 / 7;
	t = t * s2 + 1.0 / 5;
	t = t * s2 + 1.0 / 3;
	t = t * s2 + 1.0;
	return -((double)e * 0.69314718055994530942 + 2.0 * s * t);
}

static int64_t draw(void)
{
	/* uniform in (0, 1] (53 bits, so never a subnormal), then -mean * ln(u) */
	double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740992.0;
	double d;

	/*
	 * A mean of one byte asks for every block: drawn, a 16-byte block
	 * would still be passed over once in e^16 (9 M) allocations.
	 */
	if (ht_cfg.sample_bytes <= 1)
		return 1;
	d = neg_ln(u) * (double)ht_cfg.sample_bytes;
	return d < 1.0 ? 1 : (int64_t)d;
}

/* The allocation of size reaches the countdown (or the thread has not drawn yet). */
int sample_slow(size_t size)
{
	if (!seeded) {
		rng = ht_mono_ns() ^ ((uint64_t)syscall(SYS_gettid) << 32) ^ 0x9e3779b97f4a7c15ull;
		seeded = 1;
		ht_sample_left = draw();
		if (ht_sample_below(size)) {
			ht_sample_left -= (int64_t)size;
			return 0;
		}
	}
	/* the exponential is memoryless: one draw, whatever the overshoot */
	ht_sample_left = draw();
	return 1;
}

/*
 * The bitmap of buckets; the summary (one bit per HT_SUMMARY_SPAN of its
 * bits) lives in real.c, beside the real functions' addresses that every
 * call reads.  Not sampling: the summary's bits are all set, so that every
 * free takes the slow path.
 */
_Atomic uint64_t ht_sampled_bits[HT_SAMPLED_WORDS] __attribute__((aligned(HT_CACHELINE)));

/* ---- the set of recorded blocks ---- */

_Static_assert(HT_SUMMARY_SPAN == 16, "shim.h: free() takes the group from address bits 8-19");

#define FIRST_CAP 512		/* 4 KiB: 256 blocks before the table grows */
#define SET_RESERVE ((size_t)1 << 30)

static struct {
	atomic_flag lock;
	unsigned shift;		/* 64 - log2(cap) */
	uint64_t cap;		/* a power of two */
	uint64_t live;
	uintptr_t *tab;		/* 0: empty */
} set __attribute__((aligned(HT_CACHELINE))) = { ATOMIC_FLAG_INIT, 64 - 9, FIRST_CAP, 0, NULL };
static uintptr_t first_tab[FIRST_CAP] __attribute__((aligned(4096)));
static struct ht_region set_region;	/* larger tables; a smaller one is left behind */

/*
 * The home slot: the bucket's 16 bits (spread by an odd multiplier, a
 * bijection) on top, other bits of the address below them.  The homes of
 * one bucket are one range of 1 (up to 65,536 slots) or cap / 65,536 slots.
 */
static inline uint64_t bucket_top(uint32_t b)
{
	return (uint64_t)(uint16_t)(b * 40503u) << 48;
}

static inline uint64_t home_of(uintptr_t p, unsigned shift)
{
	return (bucket_top(ht_sampled_bucket((void *)p)) | (ht_ptr_hash(p) >> 16)) >> shift;
}

/* Does some block of bucket b remain?  Its run: the homes, then on to an empty slot. */
static int bucket_held(uint32_t b)
{
	uint64_t mask = set.cap - 1, lo = bucket_top(b) >> set.shift, k;
	uint64_t n = set.cap > 65536 ? set.cap >> 16 : 1;

	for (k = 0; k <= mask; k++) {
		uintptr_t key = set.tab[(lo + k) & mask];

		if (!key) {
			if (k >= n)
				return 0;
			continue;
		}
		if (ht_sampled_bucket((void *)key) == b)
			return 1;
	}
	return 0;
}

/* Where p is, or the empty slot where it would go. */
static uint64_t slot_of(uintptr_t p)
{
	uint64_t mask = set.cap - 1, i = home_of(p, set.shift);

	while (set.tab[i] && set.tab[i] != p)
		i = (i + 1) & mask;
	return i;
}

static int grow(void)
{
	uint64_t ncap = set.cap * 2, i, old_cap = set.cap;
	uintptr_t *old = set.tab, *tab;

	tab = region_alloc(&set_region, ncap * sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	set.tab = tab;	/* fresh pages of the region: zero */
	set.cap = ncap;
	set.shift--;
	for (i = 0; i < old_cap; i++)
		if (old[i])
			set.tab[slot_of(old[i])] = old[i];
	return 0;
}

/* Linear probing's deletion: later keys of the run move back over the hole. */
static void remove_at(uint64_t i)
{
	uint64_t mask = set.cap - 1, j = i, h;

	for (;;) {
		j = (j + 1) & mask;
		if (!set.tab[j])
			break;
		h = home_of(set.tab[j], set.shift);
		/* the key at j stays when its home lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		set.tab[i] = set.tab[j];
		i = j;
	}
	set.tab[i] = 0;
}

/* Reads before writing: a line both cores read is written only when a bit changes. */
static void bit_set(_Atomic uint64_t *w, uint64_t bit)
{
	if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(w, bit, memory_order_release);
}

static void bits_add(uint32_t b)
{
	bit_set(&ht_sampled_bits[b / 64], 1ull << (b % 64));
	bit_set(&ht_sampled_summary[b / HT_SUMMARY_SPAN / 64], 1ull << (b / HT_SUMMARY_SPAN % 64));
}

/*
 * real.c's bootstrap pool: its blocks never reach the real free, so the
 * fast path in free() must send them to the slow path, which knows them.
 * Their summary bits stay set for good (a few groups: the pool hands out a
 * few hundred bytes, to dlsym).  seq_cst, against bits_drop(): either the
 * pin's bit comes after the drop's clear, or the drop sees the pin.
 */
static _Atomic uint64_t pinned[HT_SUMMARY_WORDS];

void sample_pin(const void *p, size_t size)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)15, end = (uintptr_t)p + (size ? size : 1);
	uint32_t g;

	for (; a < end; a += 16) {
		g = ht_sampled_bucket((void *)a) / HT_SUMMARY_SPAN;
		atomic_fetch_or(&pinned[g / 64], 1ull << (g % 64));
		atomic_fetch_or(&ht_sampled_summary[g / 64], 1ull << (g % 64));
	}
}

static void bits_drop(uint32_t b)
{
	uint32_t g = b / HT_SUMMARY_SPAN;
	uint64_t gbit = 1ull << (g % 64), left;

	left = atomic_fetch_and_explicit(&ht_sampled_bits[b / 64], ~(1ull << (b % 64)),
					 memory_order_relaxed) & ~(1ull << (b % 64));
	/* the group's 16 bits of that word */
	if ((left >> (b % 64 / HT_SUMMARY_SPAN * HT_SUMMARY_SPAN)) & 0xffff)
		return;
	if (atomic_load(&pinned[g / 64]) & gbit)
		return;
	atomic_fetch_and(&ht_sampled_summary[g / 64], ~gbit);
	if (atomic_load(&pinned[g / 64]) & gbit)	/* pinned meanwhile */
		atomic_fetch_or(&ht_sampled_summary[g / 64], gbit);
}

/* Nothing recorded: no bit but the bootstrap pool's, which never go out. */
static void bits_clear(void)
{
	size_t i;

	for (i = 0; i < HT_SAMPLED_WORDS; i++)
		atomic_store_explicit(&ht_sampled_bits[i], 0, memory_order_relaxed);
	for (i = 0; i < HT_SUMMARY_WORDS; i++)
		atomic_store(&ht_sampled_summary[i], atomic_load(&pinned[i]));
	/* a pin that came between the two: the pool's blocks, once more */
	bootstrap_pin_all();
}

/* A forked child: the sampled set starts empty (lifecycle.c), so do the bits. */
static void set_after_fork(void)
{
	atomic_flag_clear(&set.lock);
	region_reset(&set_region);
	memset(first_tab, 0, sizeof(first_tab));
	set.tab = first_tab;
	set.cap = FIRST_CAP;
	set.shift = 64 - 9;
	set.live = 0;
	bits_clear();
}

int sample_init(void)
{
	int ret;

	if (!ht_cfg.sample_bytes)
		return 0;
	ret = region_reserve(&set_region, SET_RESERVE);
	if (ret)
		return ret;
	set.tab = first_tab;
	bits_clear();
	pthread_atfork(NULL, NULL, set_after_fork);
	return 0;
}

void sample_remember(void *p, size_t size)
{
	uintptr_t k = (uintptr_t)p;
	uint64_t i;

	(void)size;
	if (!k)
		return;
	ht_spin_lock(&set.lock);
	if ((set.live + 1) * 2 > set.cap && grow() < 0) {
		ht_spin_unlock(&set.lock);
		atomic_fetch_add(&ht_lost[HTR_LOST_MEMORY], 1);
		return;
	}
	i = slot_of(k);
	/*
	 * Already there: freed where we did not see it (a free inside libc, or
	 * under our guard); it keeps its one place.
	 */
	if (!set.tab[i]) {
		set.tab[i] = k;
		set.live++;
		bits_add(ht_sampled_bucket(p));
	}
	ht_spin_unlock(&set.lock);
}

int sample_forget(void *p)
{
	uintptr_t k = (uintptr_t)p;
	uint32_t b;
	uint64_t i;

	if (!ht_sampled_maybe(p))
		return 0;
	ht_spin_lock(&set.lock);
	i = slot_of(k);
	if (!set.tab[i]) {
		ht_spin_unlock(&set.lock);
		return 0;
	}
	remove_at(i);
	set.live--;
	b = ht_sampled_bucket(p);
	if (!bucket_held(b))
		bits_drop(b);
	ht_spin_unlock(&set.lock);
	return 1;
}
