/* bytesample.c - Poisson sampling by bytes (HEAPTRAIL_SAMPLE), as tcmalloc does */
#include <math.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/*
 * Each thread counts down the bytes it allocates; when the count crosses
 * zero the allocation that crossed it is recorded and a new distance is
 * drawn from an exponential distribution with the configured mean.  An
 * allocation of s bytes is then recorded with probability 1 - exp(-s/mean),
 * which the analyzer inverts to estimate totals.  Recorded blocks go into a
 * set so that their frees are recorded too; other frees cost one lookup in
 * the set's lock-free filter.
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

int sample_init(void)
{
	int ret;

	if (!ht_cfg.sample_bytes)
		return 0;
	ret = ptrset_init(ptrset_get(HT_SET_SAMPLED), (size_t)1 << 30);
	if (!ret)
		ht_sampled_filter = ptrset_filter(ptrset_get(HT_SET_SAMPLED));
	return ret;
}

void sample_remember(void *p, size_t size)
{
	if (ptrset_add(ptrset_get(HT_SET_SAMPLED), (uintptr_t)p, size) < 0)
		atomic_fetch_add(&ht_lost[HTR_LOST_MEMORY], 1);
}

int sample_forget(void *p)
{
	return ptrset_remove(ptrset_get(HT_SET_SAMPLED), (uintptr_t)p, NULL);
}
