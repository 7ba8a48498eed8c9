/* rel_jemalloc.c - a program linked with jemalloc: the shim's real allocator is jemalloc */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jemalloc/jemalloc.h>

/*
 * Proves (test_matrix.py): a program whose malloc is jemalloc's (linked
 * with -ljemalloc, so its symbols come before the C library's) runs
 * unchanged under the shim, which then records jemalloc's blocks: the
 * shim's "real" malloc is the next definition after itself, jemalloc's.
 * sallocx() on a block from malloc() only works when that block is
 * jemalloc's, so the program checks that the shim handed it one; the
 * C library's own allocations (strdup, open_memstream) go to jemalloc
 * too.  mallocx/dallocx are jemalloc's own API, not interposed: they run
 * untraced.
 *
 * Built by test_matrix.py (not by make: libjemalloc-dev is optional):
 *   cc -O0 -g -pthread rel_jemalloc.c -o rel_jemalloc -ljemalloc
 *
 * Output: "allocator jemalloc", then per site "je_site N" and
 * "je_keep N" (allocations made there; je_keep's blocks all leak).
 */

#define noinline __attribute__((noinline))
#define THREADS 4
#define ROUNDS 20000

static void *volatile sink;

static noinline void *je_site(size_t n) { return malloc(n); }
static noinline void *je_keep(size_t n) { return malloc(n); }

static void *run(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull;
	void *ring[32] = { 0 };
	long bad = 0;

	for (int i = 0; i < ROUNDS; i++) {
		unsigned k;
		size_t n;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		k = (unsigned)(x % 32);
		n = 8 + (size_t)(x >> 24) % 5000;
		free(ring[k]);
		ring[k] = je_site(n);
		if (!ring[k] || sallocx(ring[k], 0) < n || malloc_usable_size(ring[k]) < n)
			bad++;
		if (i % 5 == 0) {
			void *p = realloc(ring[k], n * 2);

			if (p)
				ring[k] = p;
		}
		if (i % 9 == 0) {
			void *q = calloc(3, n);
			void *a = aligned_alloc(64, 64 * (1 + n / 64));
			void *m = NULL;

			if (posix_memalign(&m, 256, n) || ((uintptr_t)a & 63) || ((uintptr_t)m & 255))
				bad++;
			free(q);
			free(a);
			free(m);
		}
		if (i % 13 == 0) {
			void *j = mallocx(n, MALLOCX_ZERO);	/* jemalloc's own API */

			dallocx(j, 0);
		}
	}
	for (int k = 0; k < 32; k++)
		free(ring[k]);
	return (void *)bad;
}

int main(void)
{
	pthread_t th[THREADS];
	const char *version = NULL;
	size_t len = sizeof(version);
	long bad = 0;
	char *text = NULL;
	size_t text_len = 0;
	FILE *f;

	if (mallctl("version", &version, &len, NULL, 0) != 0 || !version) {
		printf("allocator unknown\n");
		return 1;
	}
	printf("allocator jemalloc\n");
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, run, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < THREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		bad += (long)r;
	}
	/* The C library allocating for itself, through jemalloc. */
	f = open_memstream(&text, &text_len);
	for (int i = 0; i < 1000; i++)
		fprintf(f, "line %d\n", i);
	fclose(f);
	sink = strdup(text);		/* leaked */
	free(text);
	for (int i = 0; i < 10; i++)
		sink = je_keep(100 + (size_t)i);	/* leaked */
	printf("je_site %d\nje_keep %d\nbad %ld\n", THREADS * ROUNDS, 10, bad);
	return bad ? 1 : 0;
}
