/* rel_sandbox.c - a program that sandboxes itself with seccomp mid-run, then allocates in threads */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Proves: a program that forbids system calls to all its threads after it
 * started (as sandboxes do, with SECCOMP_FILTER_FLAG_TSYNC) loses none of
 * its events.  The shim's writer fences the program's threads with
 * membarrier() or, failing that, by revoking a page (mprotect to
 * PROT_NONE); failing both, it goes back to compare-and-swap.
 *
 *   rel_sandbox membarrier   membarrier() fails with EPERM from then on
 *   rel_sandbox both         so does mprotect(..., PROT_NONE)
 *   rel_sandbox started      no filter of its own: started by
 *                            rel_sandbox_exec, inside one that kills on
 *                            membarrier()
 *
 * Four threads, started before the filter and released after it, each
 * allocate and free 20000 blocks at churn and leak 25 at sandbox_leak; so
 * does the main thread after them (its buffer reaches the dump only by
 * the writer's fenced rounds, its last one at exit).
 * Output: 'sandbox_leak N' (blocks leaked), 'churn N' (allocations).
 */

#define noinline __attribute__((noinline))
#define THREADS 4
#define ROUNDS 20000
#define LEAKS 25

static pthread_barrier_t go;
static void *volatile sink;

static noinline void *sandbox_leak(size_t n)
{
	return malloc(n);
}

static noinline void *churn(size_t n)
{
	return malloc(n);
}

static void work(void)
{
	int i;

	for (i = 0; i < ROUNDS; i++) {
		char *p = churn(16 + (size_t)(i % 500));

		p[0] = (char)i;
		free(p);
	}
	for (i = 0; i < LEAKS; i++)
		sink = sandbox_leak(100 + (size_t)i);
}

static void *run(void *arg)
{
	pthread_barrier_wait(&go);
	work();
	return arg;
}

static int sandbox(int both)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_NONE, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, both ? SECCOMP_RET_ERRNO | EPERM : SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
}

int main(int argc, char **argv)
{
	pthread_t t[THREADS];
	int i;

	if (argc != 2 || (strcmp(argv[1], "membarrier") && strcmp(argv[1], "both") &&
			  strcmp(argv[1], "started"))) {
		fprintf(stderr, "usage: rel_sandbox membarrier|both|started\n");
		return 2;
	}
	pthread_barrier_init(&go, NULL, THREADS + 1);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, run, NULL);
	usleep(50000);	/* the writer has fenced a few rounds by now */
	if (strcmp(argv[1], "started") && sandbox(!strcmp(argv[1], "both")) != 0) {
		perror("seccomp");
		return 1;
	}
	pthread_barrier_wait(&go);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	work();
	if (strcmp(argv[1], "started"))	/* there, asking would kill us */
		printf("membarrier %s\n", syscall(SYS_membarrier, 0, 0, 0) < 0 && errno == EPERM ?
		       "forbidden" : "allowed");
	printf("sandbox_leak %d\n", (THREADS + 1) * LEAKS);
	printf("churn %d\n", (THREADS + 1) * ROUNDS);
	return 0;
}
