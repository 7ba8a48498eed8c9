/* threads.c - producers allocate, a consumer frees: cross-thread frees and address reuse */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: a block freed by another thread than the one that allocated it is
 * released (the leaks are exact: the blocks the consumer keeps on purpose
 * and one block per producer); with a short queue the allocator hands the
 * same addresses out again and again across threads, so a free and the
 * next allocation of its address in another thread must replay in the
 * right order.  The consumer also allocates temporaries, taking addresses
 * the producers' blocks just left.  The threads' own control blocks
 * (pthread_create) are the runtime's: spawn_threads is a runtime caller.
 */

#define noinline __attribute__((noinline))

#define PRODUCERS 3
#define ITEMS 20000		/* per producer */
#define KEEP_EVERY 997		/* the consumer keeps (leaks) items 0, 997, 1994, ... */
#define QUEUE 8

static void *queue[QUEUE];
static unsigned qhead, qtail;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qnot_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t qnot_full = PTHREAD_COND_INITIALIZER;

static void *kept[PRODUCERS * (ITEMS / KEEP_EVERY + 1)];
static unsigned nkept;

/* Addresses items ever had, to count how often one was handed out again. */
#define SEEN_SLOTS (1u << 16)
static uintptr_t seen[SEEN_SLOTS];
static unsigned nseen, reused;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_reuse(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	unsigned i = (unsigned)((a >> 4) * 0x9e3779b1u) & (SEEN_SLOTS - 1);

	pthread_mutex_lock(&seen_lock);
	while (seen[i] && seen[i] != a)
		i = (i + 1) & (SEEN_SLOTS - 1);
	if (seen[i])
		reused++;
	else if (nseen < SEEN_SLOTS / 2)
		seen[i] = a, nseen++;
	pthread_mutex_unlock(&seen_lock);
}

static void push(void *p)
{
	pthread_mutex_lock(&qlock);
	while (qtail - qhead == QUEUE)
		pthread_cond_wait(&qnot_full, &qlock);
	queue[qtail++ % QUEUE] = p;
	pthread_cond_signal(&qnot_empty);
	pthread_mutex_unlock(&qlock);
}

static void *pop(void)
{
	void *p;

	pthread_mutex_lock(&qlock);
	while (qtail == qhead)
		pthread_cond_wait(&qnot_empty, &qlock);
	p = queue[qhead++ % QUEUE];
	pthread_cond_signal(&qnot_full);
	pthread_mutex_unlock(&qlock);
	return p;
}

/* An item starts with its index, so which ones are kept does not depend on timing. */
static noinline void *make_item(unsigned i)
{
	size_t n = 16 * (i % 7 + 1);
	char *p = T_MALLOC(n);

	memset(p, (int)i, n);
	memcpy(p, &i, sizeof(i));
	count_reuse(p);
	return p;
}

static noinline void producer_leak(void)
{
	truth_sink = T_MALLOC(333);
}

static void *producer(void *arg)
{
	unsigned i;

	for (i = 0; i < ITEMS; i++)
		push(make_item(i));
	producer_leak();
	return arg;
}

static noinline void consume(void *item)
{
	unsigned i;

	/* A temporary that likely reuses an address a producer's block just had. */
	char *tmp = T_MALLOC(48);

	memcpy(tmp, item, 16);
	memcpy(&i, item, sizeof(i));
	truth_sink = tmp;
	T_FREE(tmp);
	if (i % KEEP_EVERY == 0)
		kept[nkept++] = item;
	else
		T_FREE(item);
}

static void *consumer(void *arg)
{
	unsigned n;

	for (n = 1; n <= PRODUCERS * ITEMS; n++)
		consume(pop());
	return arg;
}

static noinline void spawn_threads(pthread_t *t, int n, void *(*fn)(void *))
{
	int i;

	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, NULL))
			abort();
}

static noinline void join_threads(pthread_t *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

int main(void)
{
	pthread_t prod[PRODUCERS], cons;

	truth_runtime_caller("spawn_threads");
	truth_runtime_caller("join_threads");
	truth_set_exact(0, 0);
	spawn_threads(&cons, 1, consumer);
	spawn_threads(prod, PRODUCERS, producer);
	join_threads(prod, PRODUCERS);
	join_threads(&cons, 1);
	truth_fact("kept", nkept);
	/* Items whose address an earlier item (freed by the consumer) had. */
	truth_fact("reused", reused);
	truth_write();
	return 0;
}
