/* rel_forkmt.c - fork, posix_spawn and exec from a parent whose other threads keep allocating */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * Proves (test_stress.py): fork() while other threads are inside malloc and
 * inside the shim (its buffers, stack table, the unwinder) leaves a child
 * that can allocate, start a thread of its own, exit with its status, or
 * exec; posix_spawn (no fork handlers) works too.  A child that hangs (a
 * lock copied in its held state) is killed after 60 s and reported, so the
 * test sees "child K hung" instead of waiting forever.
 *
 *   rel_forkmt [CHILDREN]     default 24
 *   rel_forkmt --exec-child K (what some children exec: allocates, exits K % 7)
 *
 * Child K exits with K % 7: through exit() when K is odd, _exit() when even;
 * every sixth child execs this program with --exec-child K instead.  Each
 * forked child and each exec'd image leaks one block at child_leak.  The
 * output is one line per child and is the same with and without the shim:
 *   child K status S
 */

#define noinline __attribute__((noinline))
#define CHURNERS 6

extern char **environ;

static _Atomic int stop;
static void *volatile sink;

static noinline void *fork_churn_alloc(size_t n) { return malloc(n); }

static void *churn(void *arg)
{
	uint64_t x = (uintptr_t)arg * 2654435761u + 1;
	void *ring[32] = { 0 };

	while (!atomic_load(&stop)) {
		unsigned i;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		i = (unsigned)(x % 32);
		free(ring[i]);
		ring[i] = fork_churn_alloc(16 + (size_t)(x >> 20) % 2000);
	}
	for (unsigned i = 0; i < 32; i++)
		free(ring[i]);
	return NULL;
}

static void *child_thread(void *arg)
{
	for (int i = 0; i < 200; i++) {
		char *p = malloc(32 + (size_t)i);

		sink = p;
		free(p);
	}
	return arg;
}

static noinline void child_leak(void)
{
	sink = strdup("child");		/* one leak per child */
	__asm__ volatile("" ::: "memory");
}

static noinline void child_work(int k)
{
	pthread_t th;
	char *keep[100];

	for (int i = 0; i < 100; i++)
		keep[i] = malloc(64 + (size_t)i * 8);
	if (pthread_create(&th, NULL, child_thread, NULL) == 0)
		pthread_join(th, NULL);
	for (int i = 0; i < 100; i++)
		free(keep[i]);
	child_leak();
	(void)k;
}

static void child(int k, const char *self)
{
	child_work(k);
	if (k % 6 == 0) {
		char arg[16];

		snprintf(arg, sizeof(arg), "%d", k);
		execl(self, self, "--exec-child", arg, (char *)NULL);
		_exit(100);	/* exec failed */
	}
	if (k % 2)
		exit(k % 7);
	_exit(k % 7);
}

/* Waits up to 60 s for pid; -1 when it had to be killed. */
static int wait_bounded(pid_t pid)
{
	struct timespec ms = { 0, 1000000 };
	int status;

	for (int i = 0; i < 60000; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0 && errno != EINTR)
			return -2;
		nanosleep(&ms, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

int main(int argc, char **argv)
{
	pthread_t th[CHURNERS];
	int children = 24, failed = 0;

	if (argc == 3 && !strcmp(argv[1], "--exec-child")) {
		int k = atoi(argv[2]);

		child_work(k);
		return k % 7;
	}
	if (argc == 2)
		children = atoi(argv[1]);
	for (int i = 0; i < CHURNERS; i++)
		pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1));

	for (int k = 0; k < children; k++) {
		pid_t pid;
		int status;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 3;
		}
		if (pid == 0)
			child(k, argv[0]);
		status = wait_bounded(pid);
		if (status == -1) {
			printf("child %d hung (killed after 60 s)\n", k);
			failed = 1;
		} else {
			printf("child %d status %d\n", k, status);
		}
	}

	/* posix_spawn: no fork handlers run in the child, which execs at once. */
	for (int k = 0; k < 4; k++) {
		char arg[16];
		char *args[] = { argv[0], "--exec-child", arg, NULL };
		pid_t pid;

		snprintf(arg, sizeof(arg), "%d", 100 + k);
		if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ) != 0) {
			perror("posix_spawn");
			return 3;
		}
		printf("spawned %d status %d\n", 100 + k, wait_bounded(pid));
	}

	atomic_store(&stop, 1);
	for (int i = 0; i < CHURNERS; i++)
		pthread_join(th[i], NULL);
	return failed;
}
