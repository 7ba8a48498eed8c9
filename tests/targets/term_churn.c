/* term_churn.c - threads in a tight malloc/free loop, counting what they completed, until killed
 *
 * usage: term_churn THREADS COUNTERS_FILE [ALARM_USEC]
 * Maps COUNTERS_FILE (created, struct below) shared, so that its counts
 * outlive the process.  SIGTERM and SIGALRM are blocked in the main
 * thread, which only waits: a signal sent to the process finds a worker,
 * nearly always inside malloc or free.  With ALARM_USEC, the main thread
 * sets a timer (setitimer) that long after 'ready': the kernel's SIGALRM
 * ends the process.  Worker i (0 <= i < THREADS <= 8) publishes its
 * tid, then loops: started, malloc(SIZE_BASE + i), done, started,
 * free, done.  Each count is written after the call it counts returns
 * (or before the call, for "started"), so for worker i the dump must hold
 * between done and started allocations of its size (the one in flight
 * may or may not be recorded), and as many frees of them.  'ready' is set
 * once every worker has been round its loop once.  Never exits by itself.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_THREADS 8
#define SIZE_BASE 1000

/* The layout the test reads: little-endian 64-bit words. */
struct counters {
	volatile uint64_t ready;
	volatile uint64_t nthreads;
	volatile uint64_t tid[MAX_THREADS];
	volatile uint64_t alloc_started[MAX_THREADS];
	volatile uint64_t alloc_done[MAX_THREADS];
	volatile uint64_t free_started[MAX_THREADS];
	volatile uint64_t free_done[MAX_THREADS];
};

static struct counters *cnt;
static volatile uint64_t round_one;

static void *worker(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	sigset_t term;
	void *p;

	cnt->tid[i] = (uint64_t)syscall(SYS_gettid);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);
	for (;;) {
		cnt->alloc_started[i]++;
		p = malloc(SIZE_BASE + i);
		if (!p)
			abort();
		cnt->alloc_done[i]++;
		*(volatile char *)p = 1;
		cnt->free_started[i]++;
		free(p);
		cnt->free_done[i]++;
		if (cnt->free_done[i] == 1)
			__atomic_add_fetch(&round_one, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned n, i;
	int fd;
	sigset_t term;
	pthread_t th[MAX_THREADS];

	if ((argc != 3 && argc != 4) || atoi(argv[1]) < 1 || atoi(argv[1]) > MAX_THREADS) {
		fprintf(stderr, "usage: term_churn THREADS(1-%d) COUNTERS_FILE [ALARM_USEC]\n",
			MAX_THREADS);
		return 2;
	}
	n = (unsigned)atoi(argv[1]);
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct counters)) != 0)
		return 3;
	cnt = mmap(NULL, sizeof(*cnt), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (cnt == MAP_FAILED)
		return 3;
	cnt->nthreads = n;
	/* the workers inherit the block and lift it: SIGTERM goes to one of them */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigaddset(&term, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	for (i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) != 0)
			return 4;
	while (__atomic_load_n(&round_one, __ATOMIC_SEQ_CST) < n)
		usleep(100);
	cnt->ready = 1;
	if (argc == 4) {
		struct itimerval it = { { 0, 0 }, { 0, atol(argv[3]) } };

		if (setitimer(ITIMER_REAL, &it, NULL) != 0)
			return 5;
	}
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
