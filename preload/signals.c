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
	SIGQUIT, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ,
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

static int is_ours(int sig)
{
	return sig > 0 && sig < 64 && (atomic_load(&ours) >> sig & 1);
}

static void on_fatal_signal(int sig)
{
	int saved = errno;
	struct sigaction dfl;

	if (!ht_in_shim)
		ht_stop(HTR_END_SIGNAL, sig);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	real_sigaction()(sig, &dfl, NULL);
	errno = saved;
	raise(sig);	/* delivered with the default action once we return */
}

static void on_mark_signal(int sig)
{
	int saved = errno;

	(void)sig;
	if (!ht_in_shim && atomic_load(&ht_phase) == HT_ON) {
		ht_in_shim = 1;
		ev_mark("signal");
		reach_request_snapshot();
		ht_in_shim = 0;
	}
	errno = saved;
}

/* Ours only where the program has nothing: it may replace it at any time. */
static void install(int sig, void (*fn)(int), int flags)
{
	struct sigaction old, sa;
	sigaction_fn real = real_sigaction();

	if (!real || real(sig, NULL, &old) || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	if (real(sig, &sa, NULL) == 0)
		atomic_fetch_or(&ours, (uint64_t)1 << sig);
}

void signals_install(void)
{
	size_t i;

	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i] != ht_cfg.mark_signal)
			install(fatal[i], on_fatal_signal, SA_RESETHAND | SA_NODEFER);
	if (ht_cfg.mark_signal)
		install(ht_cfg.mark_signal, on_mark_signal, SA_RESTART);
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
		atomic_fetch_and(&ours, ~((uint64_t)1 << sig));
	}
	if (old) {
		memset(old, 0, sizeof(*old));
		old->sa_handler = SIG_DFL;
	}
	return 0;
}

typedef void (*handler_t)(int);

/* glibc's signal(): BSD semantics, through sigaction. */
HT_EXPORT handler_t signal(int sig, handler_t fn)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sig > 0 && sig < 64)
		sigaddset(&sa.sa_mask, sig);
	if (sigaction(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}
