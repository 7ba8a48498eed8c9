/* mtmalloc.c - multi-threaded malloc microbenchmark with varied call stacks */
/*
 * usage: mtmalloc [THREADS [OPS_PER_THREAD [WINDOW [PATHS]]]]
 *
 * Each thread first fills a window of WINDOW live blocks, then does
 * OPS_PER_THREAD operations: pick a random slot, free its block and malloc a
 * new one of a random size in [16, 4096], write a few bytes into it.  Every
 * operation goes through a chain of 4-12 noinline helpers; which of two
 * helpers sits at each level is chosen by the bits of one of PATHS random
 * paths (default 4), so the benchmark makes 9 x PATHS distinct call stacks
 * (the idea of jemalloc's test/include/test/btalloc.h).  At the end every
 * block is freed.
 *
 * Why only a few dozen stacks by default: heaptrack 1.4's interpreter keeps
 * one record per distinct (size, stack) pair in a hash set that degenerates
 * and dies with std::bad_alloc (after ~19 GB) at about 150,000 pairs; with
 * random sizes and thousands of stacks it cannot finish at all.  36 stacks
 * x 4081 sizes stays below that.  Pass PATHS=1000 to stress a stack table.
 *
 * Everything is deterministic: thread i seeds its generator with i.  The last
 * line on stdout gives the exact counts the program made, so a profiler's
 * totals can be checked against them:
 *   mtmalloc: threads=2 mallocs=N frees=N bytes=B
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_DEPTH 4
#define MAX_DEPTH 12
#define MIN_SIZE 16
#define MAX_SIZE 4096

struct worker {
	pthread_t thread;
	unsigned id;
	long ops;
	long window;
	uint64_t paths;
	uint64_t mallocs, frees, bytes;
	char pad[64];
};

/* xorshift64*: fast, deterministic, good enough for picking sizes. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* The bottom of every chain: replace one slot's block. */
static __attribute__((noinline)) void *leaf(void **slot, size_t size)
{
	void *old = *slot;
	char *p;

	free(old);
	p = malloc(size);
	if (!p) {
		fputs("mtmalloc: out of memory\n", stderr);
		exit(1);
	}
	/* Touch the first and last bytes, as a real user of the block would. */
	memset(p, (int)size, 16);
	p[size - 1] = 1;
	*slot = p;
	/* The empty asm keeps the compiler from proving anything about p. */
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void *level_a(void **slot, size_t size, unsigned depth, uint64_t path);
static void *level_b(void **slot, size_t size, unsigned depth, uint64_t path);

/*
 * Two helpers with distinct frames; each picks the next one by a bit of the
 * path.  The asm after the call keeps the call from being a tail call (and
 * GCC from turning the recursion into a loop), so every level stays on the
 * stack.
 */
static __attribute__((noinline, noclone)) void *level_a(void **slot, size_t size,
							 unsigned depth, uint64_t path)
{
	void *r;

	if (depth == 0)
		r = leaf(slot, size);
	else if (path & 1)
		r = level_b(slot, size, depth - 1, path >> 1);
	else
		r = level_a(slot, size, depth - 1, path >> 1);
	__asm__ volatile("" : : "r"(r) : "memory");
	return r;
}

static __attribute__((noinline, noclone)) void *level_b(void **slot, size_t size,
							 unsigned depth, uint64_t path)
{
	volatile char frame_marker[8];	/* a frame of a different size */
	void *r;

	frame_marker[0] = (char)depth;
	if (depth == 0)
		r = leaf(slot, size);
	else if (path & 1)
		r = level_a(slot, size, depth - 1, path >> 1);
	else
		r = level_b(slot, size, depth - 1, path >> 1);
	__asm__ volatile("" : : "r"(r), "r"(frame_marker[0]) : "memory");
	return r;
}

static void one_op(struct worker *w, void **slots, uint64_t *rng)
{
	uint64_t x = rng_next(rng);
	long i = (long)(x % (uint64_t)w->window);
	size_t size = MIN_SIZE + (size_t)((x >> 20) % (MAX_SIZE - MIN_SIZE + 1));
	unsigned depth = MIN_DEPTH + (unsigned)((x >> 36) % (MAX_DEPTH - MIN_DEPTH + 1));
	/* Spread the path's bits so that different paths differ near the top. */
	uint64_t path = ((x >> 44) % w->paths) * 0x9e3779b1u >> 7;

	if (slots[i])
		w->frees++;
	w->mallocs++;
	w->bytes += size;
	/* The chain has depth helpers above leaf(). */
	level_a(&slots[i], size, depth - 1, path);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (w->id + 1);
	void **slots = calloc((size_t)w->window, sizeof(*slots));
	long i;

	if (!slots) {
		fputs("mtmalloc: out of memory\n", stderr);
		exit(1);
	}
	w->mallocs++;	/* the calloc above */
	for (i = 0; i < w->window; i++) {
		uint64_t x = rng_next(&rng);
		size_t size = MIN_SIZE + (size_t)(x % (MAX_SIZE - MIN_SIZE + 1));

		w->mallocs++;
		w->bytes += size;
		level_a(&slots[i], size, MIN_DEPTH - 1, x >> 40);
	}
	for (i = 0; i < w->ops; i++)
		one_op(w, slots, &rng);
	for (i = 0; i < w->window; i++) {
		free(slots[i]);
		w->frees++;
	}
	free(slots);
	w->frees++;
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned nthreads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
	long ops = argc > 2 ? atol(argv[2]) : 1000000;
	long window = argc > 3 ? atol(argv[3]) : 1000;
	long paths = argc > 4 ? atol(argv[4]) : 4;
	struct worker *w;
	uint64_t mallocs = 1, frees = 1, bytes = 0;	/* the worker array */
	unsigned i;

	if (nthreads < 1 || nthreads > 1024 || ops < 0 || window < 1 || paths < 1) {
		fputs("usage: mtmalloc [THREADS [OPS_PER_THREAD [WINDOW [PATHS]]]]\n", stderr);
		return 2;
	}
	w = calloc(nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].ops = ops;
		w[i].window = window;
		w[i].paths = (uint64_t)paths;
		if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
			fputs("mtmalloc: cannot create thread\n", stderr);
			return 1;
		}
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		mallocs += w[i].mallocs;
		frees += w[i].frees;
		bytes += w[i].bytes;
	}
	free(w);
	printf("mtmalloc: threads=%u mallocs=%llu frees=%llu bytes=%llu\n", nthreads,
	       (unsigned long long)mallocs, (unsigned long long)frees,
	       (unsigned long long)bytes);
	return 0;
}
