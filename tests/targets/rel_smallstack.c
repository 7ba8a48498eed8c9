/* rel_smallstack.c - threads on the smallest stacks glibc allows, allocating */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Proves: the shim takes no room on a thread's stack.  glibc carves static
 * TLS out of each thread's stack and refuses (EINVAL) a stack too small to
 * hold it with a little to spare: a shim with kilobytes of __thread data
 * made pthread_create() fail at PTHREAD_STACK_MIN.  Each thread, on a stack
 * of PTHREAD_STACK_MIN or a little more, allocates and frees, and leaks one
 * block at small_leak.  Output: one line per size with pthread_create()'s
 * answer (the same with and without the shim), then 'small_leak N', the
 * blocks leaked.
 */

#define noinline __attribute__((noinline))
#define ROUNDS 4

static void *volatile sink;

static noinline void *small_leak(size_t n)
{
	return malloc(n);
}

static void *run(void *arg)
{
	int i;

	for (i = 0; i < 100; i++) {
		char *p = malloc(32 + (size_t)i);

		memset(p, i, 32);
		free(p);
	}
	sink = small_leak(48);
	return arg;
}

int main(void)
{
	const size_t sizes[] = { PTHREAD_STACK_MIN, PTHREAD_STACK_MIN + 4096, 2 * PTHREAD_STACK_MIN };
	int leaked = 0, r, i;

	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < 3; i++) {
			pthread_attr_t at;
			pthread_t t;
			int e;

			pthread_attr_init(&at);
			pthread_attr_setstacksize(&at, sizes[i]);
			e = pthread_create(&t, &at, run, NULL);
			pthread_attr_destroy(&at);
			if (r == 0)
				printf("stack %zu create %d\n", sizes[i], e);
			if (!e) {
				pthread_join(t, NULL);
				leaked++;
			}
		}
	}
	printf("small_leak %d\n", leaked);
	return 0;
}
