/* reach_threads.c - blocks only other threads hold: a blocked thread's stack, TLS and TSD */
#include <pthread.h>
#include <signal.h>

#include "reach_truth.h"

/*
 * Proves: at exit, with two threads still blocked in read(), a block only
 * a thread's stack points to is reachable, and so are blocks only its
 * static TLS, its thread-specific data (pthread_setspecific) or the main
 * thread's TLS point to.  One of the threads blocks every signal, so it
 * cannot be stopped: it is scanned from outside (its stack mapping), and
 * its block is still reachable.  A block dropped by main is lost.  The
 * threads' own runtime blocks (DTV, ...) are the runtime's.
 */

static __thread void *tls_block;
static pthread_key_t key;
static int ready[2], never[2];

static R_NOINLINE void *blocked_worker(void *arg)
{
	void *volatile on_stack = R_ALLOC(1111, "reachable");
	char c;

	tls_block = R_ALLOC(2222, "reachable");
	pthread_setspecific(key, R_ALLOC(3333, "reachable"));
	if (write(ready[1], "r", 1) != 1)
		abort();
	/* blocks for good: the scan at exit finds it here */
	if (read(never[0], &c, 1) >= 0)
		free(on_stack);
	return arg;
}

static R_NOINLINE void *deaf_worker(void *arg)
{
	void *volatile on_stack;
	sigset_t all;
	char c;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	on_stack = R_ALLOC(4444, "reachable");
	if (write(ready[1], "d", 1) != 1)
		abort();
	if (read(never[0], &c, 1) >= 0)
		free(on_stack);
	return arg;
}

static R_NOINLINE void drop_one(void)
{
	void *volatile p = R_ALLOC(6666, "lost");

	(void)p;
}

static R_NOINLINE void start(void *(*fn)(void *))
{
	pthread_t t;
	char c;

	if (pthread_create(&t, NULL, fn, NULL) || read(ready[0], &c, 1) != 1)
		abort();
}

int main(void)
{
	if (pipe(ready) || pipe(never) || pthread_key_create(&key, NULL))
		return 1;
	tls_block = R_ALLOC(5555, "reachable");
	drop_one();
	/* one at a time: the expectations are written without a lock */
	start(blocked_worker);
	start(deaf_worker);
	reach_scrub();
	reach_write("reach_threads");
	exit(0);
}
