/* clock.c - event time: CLOCK_MONOTONIC, read through the TSC when that is safe */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * Every event reads the clock, so its cost matters.  When the kernel itself
 * keeps time with the TSC (clocksource "tsc": invariant and synchronised
 * across CPUs, checked by the kernel), events read the TSC and convert it
 * with a linear segment that the writer thread fits to CLOCK_MONOTONIC each
 * round.  Consecutive segments meet where one hands over to the next, so the
 * time stays continuous; the slope is steered so that the converted time
 * follows CLOCK_MONOTONIC (within microseconds).  A reader preempted
 * between taking a segment and reading the TSC converts with the old slope
 * past the hand-over: up to a microsecond off (a review measured 1.3 us
 * with a writer fitting every 20 us); a thread's event times are kept in
 * order anyway (thread_delta()).  Until the first fit, and everywhere else,
 * events call clock_gettime().
 *
 * There are two segments: the writer (their only writer) fills the one not
 * in use, under its own sequence counter, then makes it the current one.
 * Readers take the current one and check its counter, so a segment is
 * never read half-updated, and never waited for: a writer preempted (or a
 * process forked) in the middle of an update leaves the current segment
 * whole.
 */

uint64_t ht_start_ns;

struct segment {
	uint64_t tsc0;		/* TSC at the segment's start */
	uint64_t ns0;		/* CLOCK_MONOTONIC ns it stands for */
	uint64_t mult;		/* ns per tick, 32.32 fixed point; 0 = unusable */
};

/* one cache line, read by every event */
static struct {
	struct segment seg[2];
	_Atomic uint32_t seq[2];	/* odd while seg[i] is written */
	_Atomic uint32_t cur;		/* the segment in use */
} clk __attribute__((aligned(64)));
static _Atomic int tsc_ok;	/* the writer may turn it off */
static uint64_t cal_tsc, cal_ns;	/* first calibration point */

#if defined(__x86_64__)
/*
 * No fence: rdtsc does not wait for earlier instructions, but an
 * allocation's time is read after the stack capture and the stack-table
 * lookup, hundreds to thousands of instructions after the load that found
 * its block, far beyond any out-of-order window; and a free's time is read
 * before the block is handed back, so it cannot come late.  A fence would
 * cost 3-5% of the traced run's CPU (measured on mtmalloc).
 */
static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}
#else
static inline uint64_t rdtsc(void)
{
	return 0;
}
#endif

uint64_t ht_clock_ns(void)
{
	if (atomic_load_explicit(&tsc_ok, memory_order_relaxed)) {
		uint32_t s1, s2;
		struct segment cur;
		unsigned i;

		do {
			i = atomic_load_explicit(&clk.cur, memory_order_acquire) & 1;
			s1 = atomic_load_explicit(&clk.seq[i], memory_order_acquire);
			cur = clk.seg[i];
			atomic_thread_fence(memory_order_acquire);
			s2 = atomic_load_explicit(&clk.seq[i], memory_order_relaxed);
		} while (s1 != s2 || (s1 & 1));
		if (cur.mult) {
			uint64_t t = rdtsc();
			uint64_t d = t > cur.tsc0 ? t - cur.tsc0 : 0;

			return cur.ns0 + (uint64_t)(((unsigned __int128)d * cur.mult) >> 32);
		}
	}
	return ht_mono_ns();
}

/* re-read every few rounds: kept open (keptfile.c) */
static struct ht_kept_file clocksource =
	HT_KEPT_FILE("/sys/devices/system/clocksource/clocksource0/current_clocksource");

/* Does the kernel keep time with the TSC (so it checks its stability for us)? */
static int kernel_uses_tsc(void)
{
	char buf[32];

	kept_file_read(&clocksource, buf, sizeof(buf));
#if defined(__x86_64__)
	return !strcmp(buf, "tsc\n");
#else
	return 0;
#endif
}

/*
 * HEAPTRAIL__CLOCK_STALL_MS=N (tests only): the writer's first fit stops
 * N ms halfway through its update, as a writer preempted there would
 * (tests/e2e/test_dl_fork.py forks then).
 */
static unsigned stall_ms;

static void stall_for_test(void)
{
	struct timespec ts;

	if (!stall_ms)
		return;
	ts.tv_sec = stall_ms / 1000;
	ts.tv_nsec = (long)(stall_ms % 1000) * 1000000L;
	stall_ms = 0;
	syscall(SYS_nanosleep, &ts, NULL);
}

void clock_init(void)
{
	const char *stall = getenv("HEAPTRAIL__CLOCK_STALL_MS");

	stall_ms = stall ? (unsigned)strtoul(stall, NULL, 10) : 0;
	ht_start_ns = ht_mono_ns();
	tsc_ok = kernel_uses_tsc();
	memset(&clk, 0, sizeof(clk));
	if (tsc_ok) {
		cal_tsc = rdtsc();
		cal_ns = ht_mono_ns();
	}
}

/*
 * Until the first fit every event pays for clock_gettime() (23 ns against
 * rdtsc's 10 here): the writer fits as soon as the baseline allows, not at
 * its first round (100 ms by default, the whole of a short program).
 */
int clock_fit_pending(void)
{
	return atomic_load_explicit(&tsc_ok, memory_order_relaxed) && !clk.seg[clk.cur & 1].mult;
}

/* A close (TSC, CLOCK_MONOTONIC) pair: the reading with the tightest bracket. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 5; i++) {
		uint64_t a = rdtsc();
		uint64_t m = ht_mono_ns();
		uint64_t b = rdtsc();

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = m;
		}
	}
}

void clock_calibrate(uint64_t interval_ns)
{
	uint64_t tsc = 0, ns = 0, base, mult, start;
	struct segment next;
	double slope, correction;
	unsigned other = (atomic_load_explicit(&clk.cur, memory_order_relaxed) + 1) & 1;
	const struct segment *now = &clk.seg[other ^ 1];
	uint32_t s;

	static unsigned rounds;

	if (!tsc_ok)
		return;
	/*
	 * The kernel's watchdog may find the TSC unstable and switch away
	 * from it; then so do we (events fall back to clock_gettime()).
	 */
	if (++rounds % 16 == 0 && !kernel_uses_tsc()) {
		atomic_store_explicit(&tsc_ok, 0, memory_order_relaxed);
		return;
	}
	pair(&tsc, &ns);
	if (ns - cal_ns < 2000000u || tsc <= cal_tsc)
		return;		/* too short a baseline for a slope yet (2 ms: +-1e-5) */
	slope = (double)(ns - cal_ns) / (double)(tsc - cal_tsc);
	if (now->mult) {
		/* Continue from where the current segment stands now ... */
		start = now->ns0 + (uint64_t)(((unsigned __int128)(tsc - now->tsc0) * now->mult) >> 32);
		/* ... and steer towards CLOCK_MONOTONIC over the next interval. */
		correction = ((double)ns - (double)start) / (double)(interval_ns ? interval_ns : 1);
		if (correction > 0.01)
			correction = 0.01;
		if (correction < -0.01)
			correction = -0.01;
		slope *= 1.0 + correction;
	} else {
		start = ns;
	}
	base = tsc;
	mult = (uint64_t)(slope * 4294967296.0);
	if (!mult)
		return;
	next.tsc0 = base;
	next.ns0 = start;
	next.mult = mult;
	/* the other segment: odd (whatever a fork left it), written, even, current */
	s = atomic_load_explicit(&clk.seq[other], memory_order_relaxed) | 1;
	atomic_store_explicit(&clk.seq[other], s, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	clk.seg[other] = next;
	stall_for_test();
	atomic_store_explicit(&clk.seq[other], s + 1, memory_order_release);
	atomic_store_explicit(&clk.cur, other, memory_order_release);
}
