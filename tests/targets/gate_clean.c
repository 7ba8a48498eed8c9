/* gate_clean.c - frees all it allocates while the C runtime makes its one-time allocations */
#include <dlfcn.h>
#include <locale.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves: a program that frees everything it allocated passes
 * 'gate --max-leaked 0' although the runtime keeps blocks of its own for the
 * life of the process: the stdout buffer (printf), a thread's TLS and DTV
 * (pthread_create), the dynamic loader's link maps (dlopen without dlclose
 * of a system library), time zone data (localtime), NSS state (getpwuid).
 */

#define noinline __attribute__((noinline))

static __thread char tls_buf[4096];

static void *worker(void *arg)
{
	char *p = T_MALLOC(256);

	snprintf(tls_buf, sizeof(tls_buf), "%s", (const char *)arg);
	memcpy(p, tls_buf, 16);
	T_FREE(p);
	return NULL;
}

static noinline void own_work(void)
{
	char *a = T_MALLOC(100), *b = T_CALLOC(10, 10);

	a = T_REALLOC(a, 1000);
	T_FREE(a);
	T_FREE(b);
}

int main(void)
{
	pthread_t t;
	time_t now = time(NULL);
	struct tm *tm = localtime(&now);
	void *h;

	truth_set_exact(0, 0);
	truth_runtime_caller("main");
	printf("gate_clean: %d\n", tm ? tm->tm_year : 0);
	if (pthread_create(&t, NULL, worker, "thread") == 0)
		pthread_join(t, NULL);
	(void)getpwuid(getuid());
	/* a system library, left loaded: the loader's blocks, not the program's */
	h = dlopen("libresolv.so.2", RTLD_NOW);
	printf("dlopen: %s\n", h ? "ok" : "failed");
	own_work();
	truth_write();
	return 0;
}
