/* rel_thread_exit.cc - allocation and free inside TLS destructors while threads exit */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <string>
#include <vector>

/*
 * Proves (test_stress.py): threads that allocate and free while they exit
 * (C++ thread_local destructors, pthread key destructors that free their
 * value, allocate a new one and set it again so that they run again, and
 * keep one block each) run unchanged under the shim, whose own per-thread
 * state is torn down among them; every block made during thread exit is
 * recorded: dtor_keep leaks exactly one 77-byte block per thread.
 *
 * 24 waves of 12 threads: joined ones that return, joined ones that call
 * pthread_exit from a nested function, and detached ones (main waits for
 * them on counters).  Output: "threads N", "dtor_keep N" (blocks kept),
 * "rounds N" (again_destructor calls, 3 per thread, so dtor_again made
 * 2 per thread).
 */

#define noinline __attribute__((noinline))

#define WAVES 24
#define PER_WAVE 12

static pthread_key_t key_again, key_keep;
static std::atomic<int> kept{0}, rounds{0}, detached_done{0};
static void *volatile sink;

extern "C" {

static noinline void *dtor_keep(void)
{
	void *p = malloc(77);

	__asm__ volatile("" ::: "memory");
	return p;
}

static noinline void *dtor_again(size_t n)
{
	void *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	return p;
}

/* Runs up to PTHREAD_DESTRUCTOR_ITERATIONS times: frees, allocates, sets again. */
static void again_destructor(void *value)
{
	long *v = (long *)value;
	long left = v[0];

	free(v);
	rounds++;
	if (left > 0) {
		long *next = (long *)dtor_again(sizeof(long) * 8);

		next[0] = left - 1;
		pthread_setspecific(key_again, next);
	}
}

static void keep_destructor(void *value)
{
	free(value);
	sink = dtor_keep();
	kept++;
}

} // extern "C"

/* A thread_local object whose destructor allocates and frees. */
struct Local {
	std::vector<std::string> names;
	Local() { names.reserve(4); }
	~Local()
	{
		std::string s(100, 'z');

		names.push_back(s + "done");
		names.clear();
		names.shrink_to_fit();
	}
};

static thread_local Local local;

static noinline int quit_from_depth(int depth)
{
	if (depth <= 0)
		pthread_exit(nullptr);
	if (depth > 100)
		return depth;	/* never: keeps the recursion finite for the compiler */
	return quit_from_depth(depth - 1) + 1;
}

static void *body(void *arg)
{
	long kind = (long)arg;
	long *again = (long *)malloc(sizeof(long) * 8);

	again[0] = 2;		/* two more rounds after the first */
	pthread_setspecific(key_again, again);
	pthread_setspecific(key_keep, malloc(50));
	local.names.push_back(std::string(60, 'a' + (char)(kind % 26)));
	for (int i = 0; i < 50; i++)
		free(malloc(16 + (size_t)i * 10));
	if (kind % 3 == 1)
		sink = (void *)(long)quit_from_depth(5);
	if (kind % 3 == 2)
		detached_done++;
	return nullptr;
}

int main()
{
	int threads = 0;

	pthread_key_create(&key_again, again_destructor);
	pthread_key_create(&key_keep, keep_destructor);
	for (int w = 0; w < WAVES; w++) {
		pthread_t th[PER_WAVE];
		int detached = 0;

		for (int i = 0; i < PER_WAVE; i++) {
			long kind = w * PER_WAVE + i;

			if (pthread_create(&th[i], nullptr, body, (void *)kind) != 0)
				return 3;
			threads++;
			if (kind % 3 == 2) {
				pthread_detach(th[i]);
				detached++;
			}
		}
		for (int i = 0; i < PER_WAVE; i++)
			if ((w * PER_WAVE + i) % 3 != 2)
				pthread_join(th[i], nullptr);
		(void)detached;
	}
	/* Detached threads: wait until every destructor has run its rounds. */
	while (kept.load() < threads || rounds.load() < threads * 3) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, nullptr);
	}
	printf("threads %d\ndtor_keep %d\nrounds %d\n", threads, kept.load(), rounds.load());
	return 0;
}
