/* writer_burst.c - idle, busy, idle, ...: bursts of allocations between quiet spells */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Proves (test_writer.py, review finding 4): a program that alternates
 * long quiet spells (the writer compresses many tiny frames) with bursts
 * (large frames) is recorded completely, however many times it does so.
 * zstd shrinks a context that stayed oversized for a while and grows it
 * again for the next large frame; the shim's writer must not run out of
 * memory over that.
 *
 *   writer_burst CYCLES BURST IDLE_MS
 *
 * Prints "allocations N": the blocks burst_alloc made (each freed at once).
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

static noinline void *burst_alloc(size_t n)
{
	void *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	return p;
}

int main(int argc, char **argv)
{
	unsigned long cycles, burst, idle_ms, c, i, n = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	if (argc != 4) {
		fprintf(stderr, "usage: writer_burst CYCLES BURST IDLE_MS\n");
		return 2;
	}
	cycles = strtoul(argv[1], NULL, 10);
	burst = strtoul(argv[2], NULL, 10);
	idle_ms = strtoul(argv[3], NULL, 10);
	for (c = 0; c < cycles; c++) {
		struct timespec ts = { (time_t)(idle_ms / 1000), (long)(idle_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
		for (i = 0; i < burst; i++) {
			void *p;

			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			p = burst_alloc(16 + (size_t)(rng % 2000));
			if (!p)
				abort();
			sink = p;
			free(p);
			n++;
		}
	}
	printf("allocations %lu\n", n);
	return 0;
}
