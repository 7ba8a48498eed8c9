/* pack_phases.c - busy phases between which a test tells the writer whether to pack */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Proves (test_writer.py): under HEAPTRAIL_PACK=auto the writer packs some
 * chunks and leaves others as they are, in one dump, and every event still
 * reads back.  The test points HEAPTRAIL__PACK_PROBE at PROBE; this program
 * writes into it, phase by phase, the spare CPU the writer is to believe
 * (thousandths of a CPU), then allocates for PHASE_MS.
 *
 *   pack_phases PROBE PHASE_MS SPARE...
 *
 * Prints "allocations N", "leaked_blocks N", "leaked_bytes N": what it
 * allocated and what it kept (one block of 100 + phase bytes per phase).
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

static noinline void *phase_alloc(size_t n)
{
	void *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	return p;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int main(int argc, char **argv)
{
	unsigned long phase_ms, n = 0, kept = 0, kept_bytes = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int ph;

	if (argc < 4) {
		fprintf(stderr, "usage: pack_phases PROBE PHASE_MS SPARE...\n");
		return 2;
	}
	phase_ms = strtoul(argv[2], NULL, 10);
	for (ph = 3; ph < argc; ph++) {
		FILE *f = fopen(argv[1], "w");
		uint64_t until;
		void *keep;

		if (!f || fputs(argv[ph], f) < 0 || fclose(f) != 0) {
			perror(argv[1]);
			return 1;
		}
		until = now_ms() + phase_ms;
		while (now_ms() < until) {
			unsigned i;

			for (i = 0; i < 2000; i++) {
				void *p;

				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				p = phase_alloc(16 + (size_t)(rng % 500));
				if (!p)
					abort();
				sink = p;
				free(p);
				n++;
			}
			{
				struct timespec ts = { 0, 1000000 };

				nanosleep(&ts, NULL);
			}
		}
		keep = phase_alloc(100 + (size_t)ph);
		if (!keep)
			abort();
		sink = keep;
		n++;
		kept++;
		kept_bytes += 100 + (unsigned long)ph;
	}
	printf("allocations %lu\nleaked_blocks %lu\nleaked_bytes %lu\n", n, kept, kept_bytes);
	return 0;
}
