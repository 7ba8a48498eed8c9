/* rel_churn.c - many threads churning malloc/calloc/realloc/free, blocks passed between threads */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Proves (test_stress.py, test_faults.py, soak.py): THREADS threads (64 in
 * the stress test) allocate and free as fast as they can, keeping a ring of
 * live blocks each and handing every 32nd block to a shared mailbox that
 * another thread frees; nothing deadlocks, the output is the same as
 * without the shim, and the dump's figures per site are the program's own.
 *
 * The work of each thread follows its own PRNG, so what it allocates (how
 * often at each site, how many bytes) does not depend on the scheduling:
 *
 *   rel_churn THREADS ITERATIONS [-p PAUSE_US]
 *                                   fixed work; prints, per site, the
 *                                   allocations and bytes (deterministic)
 *   rel_churn THREADS -s SECONDS [-p PAUSE_US]
 *                                   until SECONDS have passed; prints the
 *                                   same per site and the iterations done
 *                                   (the soak's long and short runs); with
 *                                   -p each thread sleeps PAUSE_US after
 *                                   every 20 iterations (a steady rate)
 *
 * Each thread leaks one block of 100 + its index bytes at churn_leak;
 * everything else is freed before exit.  Output lines:
 *   site NAME allocations N bytes B
 *   iterations N
 *   leaked_bytes B
 */

#define noinline __attribute__((noinline))
#define RING 64
#define MAILBOX 256
#define MAX_THREADS 256

enum { S_MALLOC, S_CALLOC, S_REALLOC, S_ALIGNED, S_LEAK, NSITES };
static const char *site_names[NSITES] = {
	"churn_malloc", "churn_calloc", "churn_realloc", "churn_aligned", "churn_leak",
};

struct worker {
	pthread_t th;
	int index;
	uint64_t rng;
	uint64_t iterations;
	uint64_t count[NSITES], bytes[NSITES];
	void *ring[RING];
} __attribute__((aligned(64)));

static struct worker workers[MAX_THREADS];
static void *_Atomic mailbox[MAILBOX];
static uint64_t fixed_iterations;	/* 0: run until 'stop' */
static long pause_us;
static _Atomic int stop;
static void *volatile sink;

static uint64_t next_rand(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

static noinline void *churn_malloc(size_t n) { return malloc(n); }
static noinline void *churn_calloc(size_t n) { return calloc(1, n); }
static noinline void *churn_realloc(void *p, size_t n) { return realloc(p, n); }

static noinline void *churn_aligned(size_t n)
{
	void *p = NULL;

	return posix_memalign(&p, 64, n) == 0 ? p : NULL;
}

static noinline void churn_leak(struct worker *w)
{
	size_t n = 100 + (size_t)w->index;

	sink = malloc(n);
	w->count[S_LEAK]++;
	w->bytes[S_LEAK] += n;
}

static size_t pick_size(struct worker *w)
{
	uint64_t r = next_rand(w);

	if ((r & 63) == 0)
		return 4096 + (size_t)(r >> 8) % 60000;	/* now and then a big one */
	return 16 + (size_t)(r >> 8) % 600;
}

static void step(struct worker *w, uint64_t i)
{
	unsigned slot = (unsigned)(next_rand(w) % RING);
	size_t n = pick_size(w);
	void *p;
	int site;

	free(w->ring[slot]);
	w->ring[slot] = NULL;
	if (i % 16 == 5) {
		site = S_ALIGNED;
		p = churn_aligned(n);
	} else if (i % 4 == 0) {
		site = S_CALLOC;
		p = churn_calloc(n);
	} else {
		site = S_MALLOC;
		p = churn_malloc(n);
	}
	if (!p)
		abort();
	memset(p, (int)i, n < 64 ? n : 64);
	w->count[site]++;
	w->bytes[site] += n;
	w->ring[slot] = p;

	if (i % 8 == 3) {
		unsigned other = (unsigned)(next_rand(w) % RING);
		size_t m = pick_size(w);

		/* realloc(NULL, m) when the slot is empty: still one allocation. */
		p = churn_realloc(w->ring[other], m);
		if (!p)
			abort();
		w->ring[other] = p;
		w->count[S_REALLOC]++;
		w->bytes[S_REALLOC] += m;
	}
	if (i % 32 == 7) {
		/* Hand a block to whoever takes this mailbox slot next. */
		unsigned box = (unsigned)(next_rand(w) % MAILBOX);

		p = atomic_exchange(&mailbox[box], w->ring[slot]);
		w->ring[slot] = p;
	}
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t i;

	churn_leak(w);
	for (i = 0; fixed_iterations ? i < fixed_iterations : !atomic_load(&stop); i++) {
		step(w, i);
		if (pause_us && i % 20 == 19) {
			struct timespec ts = { pause_us / 1000000, (pause_us % 1000000) * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	w->iterations = i;
	for (i = 0; i < RING; i++) {
		free(w->ring[i]);
		w->ring[i] = NULL;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads, i, s;
	double seconds = 0;
	uint64_t count[NSITES] = { 0 }, bytes[NSITES] = { 0 }, iterations = 0, leaked = 0;

	if (argc == 3 || (argc == 5 && !strcmp(argv[3], "-p"))) {
		fixed_iterations = strtoull(argv[2], NULL, 10);
		if (argc == 5)
			pause_us = atol(argv[4]);
	} else if ((argc == 4 || (argc == 6 && !strcmp(argv[4], "-p"))) &&
		   !strcmp(argv[2], "-s")) {
		seconds = strtod(argv[3], NULL);
		if (argc == 6)
			pause_us = atol(argv[5]);
	} else {
		fprintf(stderr, "usage: rel_churn THREADS ITERATIONS [-p PAUSE_US] | THREADS -s SECONDS [-p PAUSE_US]\n");
		return 2;
	}
	nthreads = atoi(argv[1]);
	if (nthreads < 1 || nthreads > MAX_THREADS)
		return 2;
	for (i = 0; i < nthreads; i++) {
		workers[i].index = i;
		workers[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		if (pthread_create(&workers[i].th, NULL, run, &workers[i]))
			return 3;
	}
	if (seconds > 0) {
		struct timespec ts = { (time_t)seconds,
				       (long)((seconds - (double)(time_t)seconds) * 1e9) };

		while (nanosleep(&ts, &ts) != 0)
			;
		atomic_store(&stop, 1);
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(workers[i].th, NULL);
		iterations += workers[i].iterations;
		for (s = 0; s < NSITES; s++) {
			count[s] += workers[i].count[s];
			bytes[s] += workers[i].bytes[s];
		}
		leaked += workers[i].bytes[S_LEAK];
	}
	for (i = 0; i < MAILBOX; i++)
		free(atomic_exchange(&mailbox[i], NULL));
	for (s = 0; s < NSITES; s++)
		printf("site %s allocations %llu bytes %llu\n", site_names[s],
		       (unsigned long long)count[s], (unsigned long long)bytes[s]);
	printf("iterations %llu\n", (unsigned long long)iterations);
	printf("leaked_bytes %llu\n", (unsigned long long)leaked);
	return 0;
}
