/* rel_getattr.c - threads asking pthread_getattr_np() about themselves before anything else */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Proves: the shim never calls pthread_getattr_np() from inside malloc.
 * glibc's holds the thread's own lock while it allocates (the main
 * thread's answer is read from /proc/self/maps with stdio; every thread's
 * CPU set comes from realloc), so a program inside it for itself, as
 * Rust's runtime is at the start of main and of every thread, used to
 * reach the shim's first stack capture of that thread with the lock held,
 * and the shim's own call then waited for ever.  The main thread and 8
 * threads each ask first, then allocate; each leaks one block at
 * getattr_leak.  Output: 'getattr_leak N', the blocks leaked.
 */

#define THREADS 8

static void *volatile sink;

static __attribute__((noinline)) void *getattr_leak(size_t n)
{
	return malloc(n);
}

static void ask(void)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;

	if (pthread_getattr_np(pthread_self(), &attr) != 0 ||
	    pthread_attr_getstack(&attr, &addr, &size) != 0 || !size)
		abort();
	pthread_attr_destroy(&attr);
}

static void *run(void *arg)
{
	ask();
	sink = getattr_leak(64);
	return arg;
}

int main(void)
{
	pthread_t t[THREADS];
	int i;

	ask();
	sink = getattr_leak(64);
	for (i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, run, NULL) != 0)
			abort();
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("getattr_leak %d\n", THREADS + 1);
	return 0;
}
