/* rel_signals.c - signal handlers running while threads are inside malloc and free */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/*
 * Proves (test_stress.py): what a real program may do around signals does
 * not deadlock or change under the shim.  malloc in a handler that
 * interrupts malloc is undefined behaviour, so the modes test what is
 * allowed:
 *
 *   storm      SIGALRM and SIGPROF timers every 50 us (no SA_RESTART: the
 *              shim's own system calls in program threads see EINTR) while
 *              four threads and main run malloc/free loops; the handlers
 *              set flags and count
 *   handler    main raise()s SIGUSR1 2000 times (raise is async-signal-safe,
 *              so the handler may allocate); the handler runs on an
 *              alternate signal stack and calls malloc, frees most blocks,
 *              keeps one in ten at handler_keep: unwinding from malloc goes
 *              through the signal frame
 *   exit       SIGTERM sent to worker threads that are inside malloc loops;
 *              the program's handler writes "terminated" and calls _exit(5)
 *              (async-signal-safe) wherever the thread was
 *   exit-locked  the same, but the thread is certainly inside the allocator
 *              with the arena lock held (malloc_trim) when the handler runs
 *
 * Output is deterministic ("storm: done N", "storm_alloc N" (allocations made
 * at storm_alloc), "handler: allocations N kept K",
 * "terminated"); exit status 0, or 5 in mode exit.  The counts of signals
 * are not printed (they depend on timing), only that both timers fired.
 */

#define noinline __attribute__((noinline))
#define WORKERS 4
#define STORM_ROUNDS 150000

static volatile sig_atomic_t got_alarm, got_prof;
static _Atomic long alarms, profs;
static void *volatile sink;

/* --- storm --------------------------------------------------------------- */

static void on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	got_alarm = 1;
	atomic_fetch_add(&alarms, 1);
	errno = saved;
}

static void on_prof(int sig)
{
	(void)sig;
	got_prof = 1;
	atomic_fetch_add(&profs, 1);
}

static noinline void *storm_alloc(size_t n) { return malloc(n); }

static long storm_loop(uint64_t seed, long iterations)
{
	void *ring[16] = { 0 };
	long sum = 0;

	for (long i = 0; i < iterations; i++) {
		unsigned k;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		k = (unsigned)(seed % 16);
		free(ring[k]);
		ring[k] = storm_alloc(8 + (size_t)(seed >> 32) % 3000);
		if (i % 7 == 0) {
			void *p = realloc(ring[k], 16 + (size_t)(seed >> 40) % 5000);

			if (p)
				ring[k] = p;
		}
		sum += (long)(seed % 1000);
	}
	for (int k = 0; k < 16; k++)
		free(ring[k]);
	return sum;
}

static void *storm_worker(void *arg)
{
	return (void *)(intptr_t)storm_loop((uintptr_t)arg * 0x9e3779b97f4a7c15ull, STORM_ROUNDS);
}

static int storm(void)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	pthread_t th[WORKERS];
	long total = 0;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_prof;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, storm_worker, (void *)(intptr_t)(i + 1));
	total += storm_loop(99, STORM_ROUNDS);
	for (int i = 0; i < WORKERS; i++) {
		void *r;

		pthread_join(th[i], &r);
		total += (long)(intptr_t)r;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	setitimer(ITIMER_PROF, &off, NULL);
	printf("storm: done %ld\n", total);
	printf("storm_alloc %d\n", (WORKERS + 1) * STORM_ROUNDS);
	printf("storm: %s\n", atomic_load(&alarms) && atomic_load(&profs) ?
	       "both timers delivered" : "a timer never fired");
	return 0;
}

/* --- handler ------------------------------------------------------------- */

static int handler_calls, handler_kept;

static noinline void *handler_alloc(size_t n) { return malloc(n); }
static noinline void *handler_keep(size_t n) { return malloc(n); }

static void on_usr1(int sig)
{
	char *p = handler_alloc(64 + (size_t)handler_calls % 512);

	(void)sig;
	if (p) {
		memset(p, 1, 64);
		free(p);
	}
	if (handler_calls % 10 == 0) {
		sink = handler_keep(32);
		handler_kept++;
	}
	handler_calls++;
}

static int handler(void)
{
	struct sigaction sa;
	stack_t ss;

	ss.ss_sp = malloc(1 << 16);
	ss.ss_size = 1 << 16;
	ss.ss_flags = 0;
	if (!ss.ss_sp || sigaltstack(&ss, NULL))
		return 3;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 2000; i++)
		raise(SIGUSR1);
	printf("handler: allocations %d kept %d\n", handler_calls, handler_kept);
	return 0;
}

/* --- exit from a handler --------------------------------------------------- */

static noinline void *exit_alloc(size_t n) { return malloc(n); }

static void on_term(int sig)
{
	static const char msg[] = "terminated\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(6);
	_exit(5);
}

static void *exit_worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg;
	void *ring[16] = { 0 };

	for (;;) {
		unsigned k;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		k = (unsigned)(seed % 16);
		free(ring[k]);
		ring[k] = exit_alloc(8 + (size_t)(seed >> 32) % 3000);
	}
	return NULL;
}

static int exit_mode(void)
{
	struct sigaction sa;
	sigset_t term;
	pthread_t th[WORKERS];
	struct timespec ts = { 0, 200000000 };

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	/* Only the workers take SIGTERM: they are always in or near malloc. */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, exit_worker, (void *)(intptr_t)(i + 1));
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	nanosleep(&ts, NULL);
	for (;;) {
		struct timespec ms = { 0, 1000000 };

		pthread_kill(th[0], SIGTERM);
		nanosleep(&ms, NULL);
	}
	return 0;
}

/*
 * The same, made certain: main holds the main arena's lock most of the
 * time (malloc_trim walks thousands of free chunks and madvises each), and
 * a helper thread sends it SIGTERM; the handler's _exit runs while the
 * lock is held, exactly as it may in any program that is interrupted
 * inside free().
 */
static void *exit_sender(void *arg)
{
	struct timespec ts = { 0, 100000000 };

	nanosleep(&ts, NULL);
	for (;;) {
		struct timespec ms = { 0, 1000000 };

		pthread_kill(*(pthread_t *)arg, SIGTERM);
		nanosleep(&ms, NULL);
	}
	return NULL;
}

static int exit_locked_mode(void)
{
	static void *blocks[20000];
	static pthread_t main_thread;
	struct sigaction sa;
	pthread_t th;

	for (int i = 0; i < 20000; i++)
		blocks[i] = exit_alloc(8192);
	for (int i = 0; i < 20000; i += 2)
		free(blocks[i]);	/* 10000 free chunks, each with a whole page */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	main_thread = pthread_self();
	pthread_create(&th, NULL, exit_sender, &main_thread);
	for (;;)
		malloc_trim(0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "storm"))
		return storm();
	if (!strcmp(mode, "handler"))
		return handler();
	if (!strcmp(mode, "exit"))
		return exit_mode();
	if (!strcmp(mode, "exit-locked"))
		return exit_locked_mode();
	fprintf(stderr, "usage: rel_signals storm|handler|exit|exit-locked\n");
	return 2;
}
