/* bytesample.c - Poisson sampling by bytes (HEAPTRAIL_SAMPLE), as tcmalloc does */
#include <math.h>
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
 * in a bitmap that says which hash buckets hold a recorded block.
 *
 * Why a bitmap of its own and not the set's counting filter: the free of an
 * unrecorded block is the commonest call of all, and its one lookup at a
 * random address of the 64 KiB filter missed the L1 cache (half the cost of
 * our free() under sampling).  The bitmap is 8 KiB.  A bit is set while its
 * bucket's count is not 0; counts and bits change together under one
 * spinlock, taken only for recorded blocks (rare by construction).  A bit is
 * set before the block is handed to the program, so a free of a recorded
 * block always sees it.
 */

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

static int64_t draw(void)
{
	/* uniform in (0, 1], then -mean * ln(u) */
	double u = ((double)(next_random() >> 11) + 1.0) / 9007199254740992.0;
	double d = -log(u) * (double)ht_cfg.sample_bytes;

	return d < 1.0 ? 1 : (int64_t)d;
}

int sample_slow(size_t size)
{
	if (!seeded) {
		rng = ht_mono_ns() ^ ((uint64_t)syscall(SYS_gettid) << 32) ^ 0x9e3779b97f4a7c15ull;
		seeded = 1;
		ht_sample_left += draw();
		if (ht_sample_left > 0)
			return 0;
	}
	(void)size;
	/* the exponential is memoryless: one draw, whatever the overshoot */
	ht_sample_left = draw();
	return 1;
}

/* the summary on a line of its own (the bitmap starts on the next one) */
_Atomic uint64_t ht_sampled_summary __attribute__((aligned(HT_CACHELINE)));
_Atomic uint64_t ht_sampled_bits[HT_SAMPLED_WORDS] __attribute__((aligned(HT_CACHELINE)));
static uint16_t bucket_count[HT_SAMPLED_WORDS * 64];
static atomic_flag bits_lock __attribute__((aligned(HT_CACHELINE))) = ATOMIC_FLAG_INIT;

static void bits_lock_take(void)
{
	ht_spin_lock(&bits_lock);
}

static void bits_note(void *p, int delta)
{
	uint32_t b = ht_sampled_bucket(p);
	_Atomic uint64_t *w = &ht_sampled_bits[b / 64];
	uint64_t bit = 1ull << (b % 64);

	uint64_t group = 1ull << (b / 1024);
	unsigned i;

	bits_lock_take();
	if (delta > 0) {
		if (bucket_count[b]++ == 0) {
			atomic_fetch_or_explicit(w, bit, memory_order_release);
			atomic_fetch_or_explicit(&ht_sampled_summary, group, memory_order_release);
		}
		if (!bucket_count[b])	/* 65536 blocks in one bucket: keep it set */
			bucket_count[b] = UINT16_MAX;
	} else if (bucket_count[b] && bucket_count[b] != UINT16_MAX &&
		   --bucket_count[b] == 0) {
		if (!(atomic_fetch_and_explicit(w, ~bit, memory_order_relaxed) & ~bit)) {
			/* the word is 0 now: the group's summary bit goes with its last word */
			for (i = b / 1024 * 16; i < b / 1024 * 16 + 16; i++)
				if (atomic_load_explicit(&ht_sampled_bits[i], memory_order_relaxed))
					break;
			if (i == b / 1024 * 16 + 16)
				atomic_fetch_and_explicit(&ht_sampled_summary, ~group,
							  memory_order_relaxed);
		}
	}
	atomic_flag_clear_explicit(&bits_lock, memory_order_release);
}

/* A forked child: the sampled set starts empty (lifecycle.c), so do the bits. */
static void bits_after_fork(void)
{
	size_t i;

	atomic_flag_clear(&bits_lock);
	for (i = 0; i < HT_SAMPLED_WORDS; i++)
		atomic_store_explicit(&ht_sampled_bits[i], 0, memory_order_relaxed);
	atomic_store_explicit(&ht_sampled_summary, 0, memory_order_relaxed);
	memset(bucket_count, 0, sizeof(bucket_count));
}

int sample_init(void)
{
	int ret;

	if (!ht_cfg.sample_bytes)
		return 0;
	ret = ptrset_init(ptrset_get(HT_SET_SAMPLED), (size_t)1 << 30);
	if (!ret) {
		ht_sampled_filter = ptrset_filter(ptrset_get(HT_SET_SAMPLED));
		pthread_atfork(NULL, NULL, bits_after_fork);
	}
	return ret;
}

void sample_remember(void *p, size_t size)
{
	uint64_t old;

	/*
	 * Already in the set: freed where we did not see it (a free inside
	 * libc); it keeps one count.  The bitmap answers first: the set's
	 * filter is a cache miss away.
	 */
	if (ht_sampled_maybe(p) && ptrset_remove(ptrset_get(HT_SET_SAMPLED), (uintptr_t)p, &old))
		bits_note(p, -1);
	if (ptrset_add(ptrset_get(HT_SET_SAMPLED), (uintptr_t)p, size) < 0) {
		atomic_fetch_add(&ht_lost[HTR_LOST_MEMORY], 1);
		return;
	}
	bits_note(p, 1);
}

int sample_forget(void *p)
{
	if (!ht_sampled_maybe(p))
		return 0;
	if (!ptrset_remove(ptrset_get(HT_SET_SAMPLED), (uintptr_t)p, NULL))
		return 0;
	bits_note(p, -1);
	return 1;
}
