/* realloc_threads.c - threads that do nothing but realloc, counting their calls */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Proves: a compact dump (heaptrail pack --compact) keeps every realloc
 * whole although its windows end while some thread is between a
 * realloc's free and its allocation: with every thread reallocating all
 * the time, one of them almost always is.
 *
 *   realloc_threads THREADS CALLS   (default 4 threads, 100000 calls each)
 *
 * Prints "reallocs N" (every call, each moving or resizing one of 64
 * blocks per thread to a size in [16, 1040)) and "mallocs N".
 */

#define BLOCKS 64

static long calls = 100000;

static void *run(void *arg)
{
	unsigned seed = (unsigned)(unsigned long)arg * 2654435761u + 1;
	void *b[BLOCKS];
	long i;
	int k;

	for (k = 0; k < BLOCKS; k++)
		b[k] = malloc(16);
	for (i = 0; i < calls; i++) {
		void *p;

		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 8) % BLOCKS);
		p = realloc(b[k], 16 + (seed >> 16) % 1024);
		if (!p)
			abort();
		b[k] = p;
	}
	for (k = 0; k < BLOCKS; k++)
		free(b[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 4, i;
	pthread_t *t;

	if (argc > 2)
		calls = atol(argv[2]);
	if (n < 1 || n > 256 || calls < 0)
		return 2;
	t = malloc((size_t)n * sizeof(*t));
	if (!t)
		return 1;
	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, (void *)(unsigned long)(i + 1)))
			return 1;
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	free(t);
	printf("reallocs %ld\nmallocs %ld\n", n * calls, n * BLOCKS);
	return 0;
}
