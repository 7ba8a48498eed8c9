/* signals.c - flush on fatal signals and write markers, invisibly to the program */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "shim.h"

/*
 * Signals whose default action ends the process get a handler of ours, so
 * that the dump is complete up to the moment of death: it writes the last
 * frame with an end record "killed by signal N", restores the default and
 * lets the signal take its course.  The marker signal (USR2) writes a mark.
 *
 * The program must not notice.  Some programs decide what to do from the
 * handler they find at start (Python installs its KeyboardInterrupt handler
 * only over SIG_DFL), so while a handler of ours is in place, sigaction()
 * and signal() report SIG_DFL for it, and the program's own handler simply
 * replaces ours.  Signals the program ignores or handles are left alone.
 */

static const int fatal[] = {
	SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP,
	SIGQUIT, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2, SIGVTALRM,
	SIGSYS,
};

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static _Atomic uint64_t ours;	/* bit n: signal n has our handler */

static sigaction_fn real_sigaction(void)
{
	static sigaction_fn fn;

	if (!fn)
		fn = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	return fn;
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uc);
static void on_mark_signal(int sig);

static uint64_t bit(int sig)
{
	return (uint64_t)1 << sig;
}

static int our_handler(void (*h)(int))
{
	return (void *)h == (void *)on_fatal_signal || (void *)h == (void *)on_mark_signal;
}

/*
 * Is our handler in place for sig?  The bit alone can be stale: the program
 * may have replaced the handler by a path we do not see (sigset(),
 * sysv_signal(), siginterrupt() and signal() call libc's sigaction
 * internally; a raw rt_sigaction system call), so the kernel is asked.
 */
static int is_ours(int sig)
{
	struct sigaction cur;
	sigaction_fn real;

	if (sig <= 0 || sig >= 64 || !(atomic_load(&ours) & bit(sig)))
		return 0;
	real = real_sigaction();
	if (real && real(sig, NULL, &cur) == 0 && our_handler(cur.sa_handler))
		return 1;
	atomic_fetch_and(&ours, ~bit(sig));
	return 0;
}

/*
 * Where the signal found the thread decides what may be done: anywhere but
 * the shim's own book-keeping (which may hold its buffer or a spinlock).
 * Inside the real allocator nothing of ours is held, so the last frame can
 * be written even when the allocator itself crashed.
 */
static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int guard = ht_in_shim;
	struct sigaction dfl;

	(void)uc;
	if (guard == HT_GUARD_NONE || guard == HT_GUARD_REAL || guard == HT_GUARD_REAL_BUSY)
		ht_stop(HTR_END_SIGNAL, sig);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	real_sigaction()(sig, &dfl, NULL);
	atomic_fetch_and(&ours, ~bit(sig));
	errno = saved;
	/*
	 * A fault the kernel raised (SEGV, BUS, FPE, ILL from an instruction)
	 * comes again when the instruction is retried, now with the default
	 * action: the core dump then shows the faulting instruction, not
	 * raise().  Anything sent (kill, raise, abort) is sent again.
	 */
	if (si && si->si_code > 0 &&
	    (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL))
		return;
	raise(sig);	/* delivered with the default action once we return */
}

static void on_mark_signal(int sig)
{
	int saved = errno;
	int guard = ht_in_shim;

	(void)sig;
	/* not inside the shim's books, nor while our realloc holds the buffer */
	if ((guard == HT_GUARD_NONE || guard == HT_GUARD_REAL) &&
	    atomic_load(&ht_phase) == HT_ON) {
		ht_in_shim = HT_GUARD_SHIM;
		ev_mark("signal");
		reach_request_snapshot();
		ht_in_shim = guard;
	}
	errno = saved;
}

/* Ours only where the program has nothing: it may replace it at any time. */
static void install(int sig, void (*fn)(int), void (*fn_info)(int, siginfo_t *, void *),
		    int flags)
{
	struct sigaction old, sa;
	sigaction_fn real = real_sigaction();

	if (sig <= 0 || sig >= 64 || !real || real(sig, NULL, &old) ||
	    old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
		return;
	memset(&sa, 0, sizeof(sa));
	if (fn_info)
		sa.sa_sigaction = fn_info;
	else
		sa.sa_handler = fn;
	sa.sa_flags = flags | (fn_info ? SA_SIGINFO : 0);
	sigemptyset(&sa.sa_mask);
	if (real(sig, &sa, NULL) == 0)
		atomic_fetch_or(&ours, bit(sig));
}

void signals_install(void)
{
	size_t i;

	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i] != ht_cfg.mark_signal)
			install(fatal[i], NULL, on_fatal_signal, SA_RESETHAND | SA_NODEFER);
	if (ht_cfg.mark_signal)
		install(ht_cfg.mark_signal, on_mark_signal, NULL, SA_RESTART);
}

HT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn real = real_sigaction();
	int ret;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (!is_ours(sig))
		return real(sig, act, old);
	if (act) {
		ret = real(sig, act, NULL);
		if (ret)
			return ret;
		atomic_fetch_and(&ours, ~bit(sig));
	}
	if (old) {
		memset(old, 0, sizeof(*old));
		old->sa_handler = SIG_DFL;
	}
	return 0;
}

typedef void (*handler_t)(int);

/*
 * The rest of the family keeps libc's own semantics (signal() restarts
 * system calls unless siginterrupt() said otherwise, sysv_signal() resets,
 * sigset() holds): the real function does the work, and only the handler it
 * reports is hidden when it was ours.
 */
static handler_t hide_ours(int sig, handler_t old)
{
	if (old != SIG_ERR && our_handler(old)) {
		atomic_fetch_and(&ours, ~bit(sig));
		return SIG_DFL;
	}
	return old;
}

typedef handler_t (*signal_fn)(int, handler_t);

static handler_t call_real(signal_fn *cache, const char *name, int sig, handler_t fn)
{
	signal_fn real = *cache;

	if (!real)
		real = *cache = (signal_fn)dlsym(RTLD_NEXT, name);
	if (!real) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return hide_ours(sig, real(sig, fn));
}

HT_EXPORT handler_t signal(int sig, handler_t fn)
{
	static signal_fn real;

	return call_real(&real, "signal", sig, fn);
}

handler_t bsd_signal(int sig, handler_t fn);	/* no longer in the headers */

HT_EXPORT handler_t bsd_signal(int sig, handler_t fn)
{
	static signal_fn real;

	return call_real(&real, "bsd_signal", sig, fn);
}

HT_EXPORT handler_t sysv_signal(int sig, handler_t fn)
{
	static signal_fn real;

	return call_real(&real, "sysv_signal", sig, fn);
}

HT_EXPORT handler_t sigset(int sig, handler_t fn)
{
	static signal_fn real;

	return call_real(&real, "sigset", sig, fn);
}
