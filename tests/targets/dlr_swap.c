/* dlr_swap.c - two libraries with different frames take turns at one address (test_dl_fork 'swap') */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * usage: dlr_swap LIBDIR ROUNDS
 *
 * Round r loads libdlr_x.so (r even) or libdlr_y.so (r odd), which the
 * loader puts where the previous one was; the main thread, then a second
 * thread, allocate PER_THREAD blocks each through dlr_outer() ->
 * dlr_entry() (the library) -> dlr_leaf() -> malloc, and free them; the
 * library is unloaded.  The shim must walk every one of those stacks
 * through the library loaded at that moment: dlr_leaf, dlr_entry,
 * dlr_outer.  Prints the allocations made at dlr_leaf and how many rounds
 * found their library at the previous one's address.
 */

#define PER_THREAD 50

typedef void *(*dlr_cb)(void);
typedef void *(*dlr_entry_fn)(dlr_cb);

static dlr_entry_fn entry;
static pthread_barrier_t go, done;
static unsigned long leaf_allocations;

__attribute__((noinline)) static void *dlr_leaf(void)
{
	void *p = malloc(24);

	__asm__ volatile("" ::: "memory");	/* no tail call */
	return p;
}

__attribute__((noinline)) static void *dlr_outer(dlr_entry_fn e)
{
	void *p = e(dlr_leaf);

	__asm__ volatile("" ::: "memory");
	return p;
}

static void batch(void)
{
	int i;

	for (i = 0; i < PER_THREAD; i++)
		free(dlr_outer(entry));
	__atomic_fetch_add(&leaf_allocations, PER_THREAD, __ATOMIC_RELAXED);
}

static void *second(void *arg)
{
	int rounds = *(int *)arg, r;

	for (r = 0; r < rounds; r++) {
		pthread_barrier_wait(&go);
		batch();
		pthread_barrier_wait(&done);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char path[4096];
	void *prev = NULL;
	int rounds, r, same = 0;
	pthread_t t;

	if (argc != 3) {
		fprintf(stderr, "usage: dlr_swap LIBDIR ROUNDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	pthread_barrier_init(&go, NULL, 2);
	pthread_barrier_init(&done, NULL, 2);
	if (pthread_create(&t, NULL, second, &rounds) != 0)
		return 1;
	for (r = 0; r < rounds; r++) {
		void *h;

		snprintf(path, sizeof(path), "%s/libdlr_%c.so", argv[1], r % 2 ? 'y' : 'x');
		h = dlopen(path, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlr_swap: %s\n", dlerror());
			return 1;
		}
		entry = (dlr_entry_fn)dlsym(h, "dlr_entry");
		if (!entry)
			return 1;
		if ((void *)entry == prev)
			same++;
		prev = (void *)entry;
		batch();	/* the main thread first: it meets the new library */
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		dlclose(h);
	}
	pthread_join(t, NULL);
	printf("leaf_allocations %lu\n", leaf_allocations);
	printf("same_address %d\n", same);
	return 0;
}
