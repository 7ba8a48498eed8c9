/* rel_dlloop.c - four threads dlopen, use and dlclose one library in a loop */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Proves (test_stress.py): a library loaded and unloaded hundreds of times,
 * by several threads at once (so it is mapped, unmapped and mapped again,
 * maybe elsewhere, while other threads allocate and capture stacks), runs
 * unchanged under the shim; the blocks it hands out and the program frees
 * after the library is gone are released, and its leaks are all counted at
 * plug_keep even though the library is unloaded at exit.
 *
 *   rel_dlloop LIBRARY [ROUNDS]   ROUNDS per thread, default 200
 *
 * Output: "plug_make N" and "plug_keep N" (allocations made there, and
 * plug_keep's blocks all leak), "loads N".
 */

#define THREADS 4

static const char *lib;
static int rounds = 200;
static void *volatile sink;

struct result {
	int made, kept, loads;
};

static void *run(void *arg)
{
	struct result *r = arg;
	void *later[8] = { 0 };

	for (int i = 0; i < rounds; i++) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
		void *(*make)(size_t);
		void *(*keep)(void);

		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			exit(3);
		}
		r->loads++;
		*(void **)&make = dlsym(h, "plug_make");
		*(void **)&keep = dlsym(h, "plug_keep");
		if (!make || !keep)
			exit(4);
		free(later[i % 8]);	/* made by an earlier load of the library */
		later[i % 8] = make(100 + (size_t)i);
		r->made++;
		sink = keep();
		r->kept++;
		dlclose(h);
	}
	for (int i = 0; i < 8; i++)
		free(later[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	struct result res[THREADS];
	int made = 0, kept = 0, loads = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: rel_dlloop LIBRARY [ROUNDS]\n");
		return 2;
	}
	lib = argv[1];
	if (argc > 2)
		rounds = atoi(argv[2]);
	memset(res, 0, sizeof(res));
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, run, &res[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		made += res[i].made;
		kept += res[i].kept;
		loads += res[i].loads;
	}
	printf("plug_make %d\nplug_keep %d\nloads %d\n", made, kept, loads);
	return 0;
}
