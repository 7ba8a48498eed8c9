/* guard_sigalloc.c - a signal handler allocates while the interrupted thread is in malloc's fast path
 *
 * usage: guard_sigalloc N
 * The main thread makes N malloc/free pairs at loop_here() while another
 * thread sends it SIGUSR1 without pause; the handler allocates and frees a
 * small block (glibc serves it from the thread's cache).  Proves (review
 * finding L1): a handler that runs between sampling's countdown step and
 * its giving back leaves the countdown sane, so every one of the N blocks
 * of loop_here() is recorded (an earlier shim left it wrapped: the thread's
 * later allocations went unrecorded and their frees were unknown).
 * Prints "allocations N".  The handler's own blocks, made while the
 * interrupted call was inside the shim, are counted as lost (re-entry).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_t main_thread;
static volatile int done;
static volatile long nsig;
static void *volatile sink;

static void on_usr1(int sig)
{
	void *p = malloc(24);

	(void)sig;
	sink = p;
	free(p);
	nsig++;
}

static void *flood(void *arg)
{
	(void)arg;
	while (!done)
		pthread_kill(main_thread, SIGUSR1);
	return NULL;
}

static __attribute__((noinline)) void *loop_here(size_t n)
{
	return malloc(n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, i;
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_t t;

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	main_thread = pthread_self();
	if (pthread_create(&t, NULL, flood, NULL))
		return 1;
	for (i = 0; i < n; i++) {
		void *p = loop_here(40);

		sink = p;
		free(p);
	}
	done = 1;
	pthread_join(t, NULL);
	printf("allocations %ld\n", n);	/* nsig differs run to run */
	return 0;
}
