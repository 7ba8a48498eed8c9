/* dlf_main.c - dlopen, dlmopen, dlclose, fork and vfork under the shim (tests/e2e/test_dl_fork.py) */
/* test-ldflags: -ldl */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail.h"

/*
 *   dlf_main MODE LIBDIR [N]
 *
 * origin   libdlf_outer.so (RUNPATH $ORIGIN) dlopens libdlf_sib.so by bare
 *          name; sib_leak(1111) leaks once.        (review finding 1)
 * dlmopen  libdlf_sib.so in a new namespace: its function runs.
 * ctor     libdlf_ctor.so's constructor leaks 777 bytes at ctor_leak. (13)
 * twice    libdlf_sib.so loaded, leaks 1111, unloaded; loaded again at
 *          another address (the old one is taken), leaks 2222.
 * loop N   N dlopen/dlclose of libdlf_sib.so, each round allocating and
 *          freeing from 200 stacks; the last round leaks 3333 at
 *          sib_leak.                                (17)
 * forks N  two threads hammer dlopen/dlclose and dl_iterate_phdr while
 *          the main thread forks N children; each mallocs from new stacks
 *          and _exits.  Prints "hung K" (children that did not end within
 *          20 s were killed).                        (2)
 * vfork    vfork + execve /bin/true, vfork + _exit; then leaks 3 blocks of
 *          1000 bytes at after_vfork_leak.           (3)
 * marks N  a thread floods the writer's queue with marks while the main
 *          thread loads libdlf_sib.so N times, each time leaking 100 + i
 *          bytes at sib_leak and unloading it.        (21)
 *
 * Output: facts, one "name value" per line.
 */

#define noinline __attribute__((noinline))

static const char *libdir;
static void *volatile sink;

static void lib_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", libdir, name);
}

static void *must_open(const char *name, int flags)
{
	char path[4096];
	void *h;

	lib_path(path, sizeof(path), name);
	h = dlopen(path, flags);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		exit(3);
	}
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
		exit(4);
	}
	return p;
}

static int mode_origin(void)
{
	void *outer = must_open("libdlf_outer.so", RTLD_NOW | RTLD_LOCAL);
	void *(*open_sibling)(void) = (void *(*)(void))sym(outer, "outer_open_sibling");
	void *sib = open_sibling();
	void *(*leak)(size_t);

	if (!sib) {
		printf("sibling failed\n");
		return 0;
	}
	leak = (void *(*)(size_t))sym(sib, "sib_leak");
	leak(1111);
	printf("sibling ok\n");
	return 0;
}

static int mode_dlmopen(void)
{
	char path[4096];
	void *h;
	int (*value)(void);

	lib_path(path, sizeof(path), "libdlf_sib.so");
	h = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlmopen failed: %s\n", dlerror());
		return 0;
	}
	value = (int (*)(void))sym(h, "sib_value");
	printf("dlmopen value %d\n", value());
	return 0;
}

static int mode_ctor(void)
{
	void *h = must_open("libdlf_ctor.so", RTLD_NOW | RTLD_LOCAL);
	int (*loaded)(void) = (int (*)(void))sym(h, "ctor_loaded");

	printf("ctor %d\n", loaded());
	return 0;
}

static uintptr_t base_of(void *fn)
{
	Dl_info info;

	if (!dladdr(fn, &info))
		exit(5);
	return (uintptr_t)info.dli_fbase;
}

static int mode_twice(void)
{
	void *h = must_open("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);
	void *(*leak)(size_t) = (void *(*)(size_t))sym(h, "sib_leak");
	uintptr_t first = base_of((void *)leak), second;
	void *block;

	leak(1111);
	dlclose(h);
	/* take the old address so that the next load lands elsewhere */
	block = mmap((void *)first, 4096, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	h = must_open("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);
	leak = (void *(*)(size_t))sym(h, "sib_leak");
	second = base_of((void *)leak);
	leak(2222);
	printf("moved %d\n", block != MAP_FAILED && first != second);
	return 0;
}

/* 4 sites x 50 depths = 200 stacks, allocated and freed */
static noinline void *depth_alloc(int depth, int site, size_t n)
{
	void *p;

	if (depth > 0) {
		p = depth_alloc(depth - 1, site, n);
		__asm__ volatile("" ::: "memory");
		return p;
	}
	switch (site) {
	case 0: p = malloc(n); break;
	case 1: p = calloc(1, n); break;
	case 2: p = malloc(n + 1); break;
	default: p = realloc(NULL, n); break;
	}
	return p;
}

static int mode_loop(int rounds)
{
	void *(*leak)(size_t) = NULL;
	void *h = NULL;
	int i, d, s;

	for (i = 0; i < rounds; i++) {
		h = must_open("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);
		leak = (void *(*)(size_t))sym(h, "sib_leak");
		for (d = 0; d < 50; d++)
			for (s = 0; s < 4; s++)
				free(depth_alloc(d, s, 16));
		if (i == rounds - 1)
			leak(3333);
		dlclose(h);
	}
	printf("rounds %d\n", rounds);
	return 0;
}

static _Atomic int stop;

static void *hammer_dlopen(void *arg)
{
	(void)arg;
	while (!stop) {
		void *h = must_open("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);

		dlclose(h);
	}
	return NULL;
}

static int count_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)info;
	(void)size;
	++*(int *)data;
	return 0;
}

static void *hammer_iterate(void *arg)
{
	(void)arg;
	while (!stop) {
		int n = 0;

		dl_iterate_phdr(count_cb, &n);
	}
	return NULL;
}

/* new code for the child's unwinder: stacks it has never seen */
static noinline void child_work(int i)
{
	int k;

	for (k = 0; k < 8; k++)
		sink = depth_alloc(k + (i % 7), k % 4, 64);
}

static int mode_forks(int n)
{
	pthread_t a, b;
	int i, hung = 0, bad = 0;

	if (pthread_create(&a, NULL, hammer_dlopen, NULL) ||
	    pthread_create(&b, NULL, hammer_iterate, NULL))
		return 6;
	for (i = 0; i < n; i++) {
		pid_t pid = fork();
		int status, waited;

		if (pid < 0)
			return 7;
		if (pid == 0) {
			child_work(i);
			_exit(0);
		}
		for (waited = 0; waited < 20000; waited++) {
			struct timespec ms = { 0, 1000000 };
			pid_t r = waitpid(pid, &status, WNOHANG);

			if (r == pid)
				break;
			nanosleep(&ms, NULL);
		}
		if (waited == 20000) {
			hung++;
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "child %d: status 0x%x\n", (int)pid, status);
			bad++;
		}
	}
	stop = 1;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("forks %d\nhung %d\nbad %d\n", n, hung, bad);
	return 0;
}

static void *flood_marks(void *arg)
{
	static char label[1001];

	(void)arg;
	memset(label, 'm', sizeof(label) - 1);
	while (!stop)
		heaptrail_mark(label);
	return NULL;
}

static int mode_marks(int n)
{
	pthread_t a;
	int i;

	if (pthread_create(&a, NULL, flood_marks, NULL))
		return 6;
	for (i = 0; i < n; i++) {
		void *h = must_open("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);
		void *(*leak)(size_t) = (void *(*)(size_t))sym(h, "sib_leak");

		leak(100 + (size_t)i);
		dlclose(h);
	}
	stop = 1;
	pthread_join(a, NULL);
	printf("loads %d\n", n);
	return 0;
}

static noinline void after_vfork_leak(void)
{
	sink = malloc(1000);
	__asm__ volatile("" ::: "memory");
}

static int mode_vfork(void)
{
	char *argv[] = { "true", NULL };
	char *envp[] = { NULL };
	int status, i;
	pid_t pid;

	pid = vfork();
	if (pid == 0) {
		execve("/bin/true", argv, envp);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return 8;
	pid = vfork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 9;
	for (i = 0; i < 3; i++)
		after_vfork_leak();
	printf("vfork leaks 3\n");
	return 0;
}

int main(int argc, char **argv)
{
	int n;

	if (argc < 3)
		return 2;
	libdir = argv[2];
	n = argc > 3 ? atoi(argv[3]) : 0;
	if (!strcmp(argv[1], "origin"))
		return mode_origin();
	if (!strcmp(argv[1], "dlmopen"))
		return mode_dlmopen();
	if (!strcmp(argv[1], "ctor"))
		return mode_ctor();
	if (!strcmp(argv[1], "twice"))
		return mode_twice();
	if (!strcmp(argv[1], "loop"))
		return mode_loop(n ? n : 5000);
	if (!strcmp(argv[1], "forks"))
		return mode_forks(n ? n : 200);
	if (!strcmp(argv[1], "vfork"))
		return mode_vfork();
	if (!strcmp(argv[1], "marks"))
		return mode_marks(n ? n : 200);
	return 2;
}
