/* signals.c - flush on fatal signals and write markers, invisibly to the program */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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
 * and signal() report what the program would find without us (SIG_DFL, or
 * what it set itself), and the program's own handler simply replaces ours.
 * Signals the program ignores are left alone.
 *
 * Ours is wherever the program leaves the default, not only at start: many
 * programs' handlers clean up, set SIG_DFL and raise the signal again to
 * die of it (GNU sort, timeout, shells), and such a death must be recorded
 * too.  So when the program sets SIG_DFL on one of these signals through
 * sigaction() or the signal() family, our handler goes back in place (the
 * marker signal gets the fatal one: the program asked for the default,
 * death).  A handler the program installs with SA_RESETHAND, which the
 * kernel itself resets to SIG_DFL as it delivers the signal, is run by a
 * trampoline of ours installed in its place with the program's flags and
 * mask: it puts our fatal handler back (as after any SIG_DFL), then calls
 * the program's handler with the same arguments.
 */

static const int fatal[] = {
	SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGHUP,
	SIGQUIT, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2, SIGVTALRM,
	SIGSYS, SIGTRAP,
};

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*handler_t)(int);
typedef void (*info_handler_t)(int, siginfo_t *, void *);

#define NSIG_OURS 64

/*
 * Bit n: a handler of ours was put on signal n (it may have been replaced
 * since, by a path we do not see: the kernel has the last word).  Bits are
 * only ever set, so that two threads changing one signal at once cannot
 * leave ours in place unmarked.
 */
static _Atomic uint64_t ours;
/* What the program finds on signal n while a handler of ours is there. */
static struct sigaction shown[NSIG_OURS];
/* The program's SA_RESETHAND handler that the trampoline runs for signal n. */
static void *_Atomic wrapped[NSIG_OURS];

static sigaction_fn real_sigaction(void)
{
	static sigaction_fn fn;

	if (!fn)
		fn = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	return fn;
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uc);
static void on_mark_signal(int sig);
static void on_wrapped_signal(int sig);
static void on_wrapped_info_signal(int sig, siginfo_t *si, void *uc);

static uint64_t bit(int sig)
{
	return (uint64_t)1 << sig;
}

static int our_handler(handler_t h)
{
	return (void *)h == (void *)on_fatal_signal || (void *)h == (void *)on_mark_signal ||
	       (void *)h == (void *)on_wrapped_signal ||
	       (void *)h == (void *)on_wrapped_info_signal;
}

static const int sent[] = {
	SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGVTALRM, SIGXCPU,
};

static int is_sent(int sig)
{
	size_t i;

	for (i = 0; i < sizeof(sent) / sizeof(sent[0]); i++)
		if (sent[i] == sig)
			return 1;
	return 0;
}

/*
 * Our fatal handler's flags.  SA_RESETHAND for what a fault or the thread
 * itself raises: a second one inside our handler ends the process instead
 * of running it again.  Not for the signals sent from outside: the kernel
 * would make the disposition SIG_DFL as it delivers one, and a second one
 * sent at once (kill twice, a service manager's TERM then KILL is not it,
 * but two TERMs are common) would end the process before the handler put
 * itself back, without the END record.  die_of() sets SIG_DFL itself.
 */
static int fatal_flags(int sig)
{
	return is_sent(sig) ? SA_NODEFER : SA_RESETHAND | SA_NODEFER;
}

static int is_fatal(int sig)
{
	size_t i;

	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i] == sig)
			return 1;
	return 0;
}

/*
 * Is a handler of ours in place for sig?  The bit alone can be stale: the
 * program may have replaced the handler by a path we do not see (a raw
 * rt_sigaction system call; siginterrupt() calls libc's sigaction
 * internally), so the kernel is asked.
 */
static int is_ours(int sig)
{
	struct sigaction cur;
	sigaction_fn real;

	if (sig <= 0 || sig >= NSIG_OURS || !(atomic_load(&ours) & bit(sig)))
		return 0;
	real = real_sigaction();
	return real && real(sig, NULL, &cur) == 0 && our_handler(cur.sa_handler);
}

/*
 * The program has just changed sig's disposition (it is in the kernel as
 * the program set it).  Where that is SIG_DFL, our fatal handler goes in
 * its place; where it is a handler the kernel resets on delivery
 * (SA_RESETHAND), our trampoline, with the program's flags and mask (so
 * the program's handler runs with the signal mask and on the stack it
 * asked for).  What the kernel held is kept to show the program.  Only
 * system calls: this runs in signal handlers (the program's, resetting
 * and raising; the trampoline).
 */
static void adopt(int sig)
{
	struct sigaction cur, sa, was;
	sigaction_fn real = real_sigaction();

	if (!real || sig <= 0 || sig >= NSIG_OURS || !is_fatal(sig) ||
	    atomic_load(&ht_phase) != HT_ON || ht_foreign_process() ||
	    real(sig, NULL, &cur) || our_handler(cur.sa_handler))
		return;
	memset(&sa, 0, sizeof(sa));
	if (cur.sa_handler == SIG_DFL) {
		sa.sa_sigaction = on_fatal_signal;
		sa.sa_flags = SA_SIGINFO | fatal_flags(sig);
		sigemptyset(&sa.sa_mask);
	} else if (cur.sa_handler != SIG_IGN && (cur.sa_flags & SA_RESETHAND)) {
		/*
		 * The trampoline takes siginfo exactly when the program's
		 * handler does: the kernel then holds the program's very
		 * flags, and shows them after its reset.
		 */
		atomic_store(&wrapped[sig], (void *)cur.sa_handler);
		if (cur.sa_flags & SA_SIGINFO)
			sa.sa_sigaction = on_wrapped_info_signal;
		else
			sa.sa_handler = on_wrapped_signal;
		sa.sa_flags = cur.sa_flags;
		sa.sa_mask = cur.sa_mask;
	} else {
		return;
	}
	shown[sig] = cur;
	atomic_fetch_or(&ours, bit(sig));
	if (real(sig, &sa, &was))
		return;
	if (was.sa_handler != cur.sa_handler)
		real(sig, &was, NULL);	/* another thread changed it meanwhile: theirs stays */
}

/*
 * A signal sent from outside (another process, a tty, a timer) that finds
 * the thread in the middle of an event, its buffer BUSY (thread.c), is
 * deferred: the END record cannot be written then (the writer's last round
 * would wait for the buffer and lose it), and a few instructions later it
 * can.  The handler notes the signal in ht_signal_pending, puts itself back
 * (SA_RESETHAND made the disposition SIG_DFL on delivery) and returns; the
 * thread finishes its event and, where it lets its buffer go (release() in
 * thread.c: the end of every event, also before thread_begin() waits for
 * a buffer from a slow writer), calls signals_run_pending(), which does
 * what the handler would have done outside the shim.  The cost on the
 * event path: one thread-local load and a branch never taken.
 *
 * Which signals: only those nobody raises synchronously, by number: TERM,
 * INT, HUP, QUIT, ALRM, VTALRM, XCPU, USR1, USR2 (the 'sent' set below).
 * Not SEGV, BUS, ILL, FPE (returning re-executes the faulting
 * instruction), ABRT, SYS (the thread's own abort() or system call), nor
 * PIPE and XFSZ: the kernel sends those for the thread's own write()
 * with si_code SI_USER and the process's own pid, exactly as kill()
 * would, so si_code cannot tell them apart.  And of the sent set only
 * what came from outside: si_code SI_KERNEL (tty, alarm(), setitimer(),
 * RLIMIT_CPU, a session leader's death) or SI_TIMER (timer_create()), or
 * SI_USER, SI_TKILL, SI_QUEUE from another process.  One the process
 * sent itself may be raise() in a program's handler that interrupted the
 * shim: the program expects raise() not to return, so it is acted on at
 * once, as before (no END record in the middle of an event).
 *
 * The first pending signal is the one the process dies of: another that
 * comes meanwhile (the same, or another, on this thread) finds ours in
 * place and is dropped, as the first one would have ended the process
 * before it without the shim.  Nothing is blocked while one is pending.
 * The writer thread blocks every signal (writer.c), so only program
 * threads ever run this handler.  A forked child starts with nothing
 * pending (fork_child()).
 *
 * A thread in the shim but not in an event (unwinding before it, waiting
 * for a buffer, inside the real allocator) holds nothing the writer's last
 * round needs (its spinlocks are taken with the buffer BUSY or by the
 * writer itself), so it writes the END record at once.
 */
__thread volatile int ht_signal_pending __attribute__((tls_model("initial-exec")));

/*
 * The process is dying of a signal: the first thread to write its END
 * record sets 'dying'; another thread that comes to die meanwhile waits for
 * it to end the process (bounded: the writer's wait is, at 5 s) rather
 * than raise its own signal in the middle of the last frame.  'finishing'
 * is the thread writing it: a later signal from outside there just returns,
 * a fault there ends the process at once.
 */
static _Atomic int dying;
static __thread int finishing;

/* Sent from outside, so it may wait for the end of the event (see above). */
static int from_outside(int sig, const siginfo_t *si)
{
	if (!si || !is_sent(sig))
		return 0;
	if (si->si_code == SI_KERNEL || si->si_code == SI_TIMER)
		return 1;
	if (si->si_code == SI_USER || si->si_code == SI_TKILL || si->si_code == SI_QUEUE)
		return si->si_pid != getpid();
	return 0;
}

/* Ours back on sig after SA_RESETHAND, unless the program put something there meanwhile. */
static void rearm(int sig)
{
	struct sigaction cur, sa;
	sigaction_fn real = real_sigaction();

	if (!real || real(sig, NULL, &cur) || cur.sa_handler != SIG_DFL)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal_signal;
	sa.sa_flags = SA_SIGINFO | fatal_flags(sig);
	sigemptyset(&sa.sa_mask);
	real(sig, &sa, NULL);
}

/*
 * End the process of sig, with the END record when write_end.  Returns only
 * for a fault that the retried instruction raises again, or when the
 * signal did not end the process after all.
 */
static void die_of(int sig, siginfo_t *si, int write_end)
{
	int expected = 0;
	struct sigaction dfl;

	if (ht_foreign_process()) {
		/* a vfork child: our memory is its parent's, nothing of ours is its own */
	} else if (atomic_compare_exchange_strong(&dying, &expected, sig)) {
		finishing = 1;
		if (write_end)
			ht_stop(HTR_END_SIGNAL, sig);
	} else if (!finishing) {
		struct timespec ts = { 0, 10000000 };
		int i;

		/* another thread writes the END record, then ends the process */
		for (i = 0; i < 1000 && atomic_load(&ht_phase) == HT_ON; i++)
			syscall(SYS_nanosleep, &ts, NULL);
		for (i = 0; i < 100; i++)	/* and its raise() */
			syscall(SYS_nanosleep, &ts, NULL);
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	real_sigaction()(sig, &dfl, NULL);
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

/*
 * Where the signal found the thread decides what may be done: anywhere but
 * the shim's own book-keeping (which may hold its buffer or a spinlock).
 * Inside the real allocator nothing of ours is held, so the last frame can
 * be written even when the allocator itself crashed.  A signal from
 * outside that finds an event under way waits for its end (see above).
 */
static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	int guard = ht_in_shim;
	int outside = from_outside(sig, si);

	(void)uc;
	if (outside && (finishing || ht_signal_pending)) {
		/* the process dies of the first one: this one changes nothing */
		rearm(sig);
		errno = saved;
		return;
	}
	/*
	 * Only the shim's own writing of an event, which ends in moments.  Not
	 * inside the real realloc (HT_GUARD_REAL_BUSY, its buffer held across
	 * the call): that may never return (an arena lock held by a stuck
	 * thread), and a deferred TERM would then never end the process.
	 */
	if (outside && guard == HT_GUARD_SHIM && thread_busy() && !ht_foreign_process()) {
		ht_signal_pending = sig;
		rearm(sig);
		errno = saved;
		return;
	}
	die_of(sig, si, guard == HT_GUARD_NONE || guard == HT_GUARD_REAL ||
			guard == HT_GUARD_REAL_BUSY || (outside && guard == HT_GUARD_SHIM));
	errno = saved;
}

/*
 * The thread has let its buffer go with a signal pending (release() in
 * thread.c): what on_fatal_signal() would have done outside the shim.  The
 * signal was not blocked when it came, nor is it now unless the program's
 * own handler, run inside the event, left it so: it is unblocked for the
 * raise.
 */
void signals_run_pending(void)
{
	int saved = errno;
	int sig = ht_signal_pending;
	sigset_t set;

	if (!sig)
		return;
	sigemptyset(&set);
	sigaddset(&set, sig);
	die_of(sig, NULL, 1);
	/* only if the signal did not end the process (someone ignores it now) */
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	ht_signal_pending = 0;
	errno = saved;
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

/*
 * The program's SA_RESETHAND handler is due.  The kernel has just reset the
 * signal to SIG_DFL, with the program's flags: ours goes there, as after
 * any SIG_DFL, before the program's handler runs (which typically raises
 * the signal again).  The errno it sees is the interrupted code's.
 */
static void run_wrapped(int sig, siginfo_t *si, void *uc, int info)
{
	int saved = errno;
	void *h = sig > 0 && sig < NSIG_OURS ? atomic_load(&wrapped[sig]) : NULL;

	adopt(sig);
	errno = saved;
	if (!h)
		return;
	if (info)
		((info_handler_t)h)(sig, si, uc);
	else
		((handler_t)h)(sig);
}

static void on_wrapped_signal(int sig)
{
	run_wrapped(sig, NULL, NULL, 0);
}

static void on_wrapped_info_signal(int sig, siginfo_t *si, void *uc)
{
	run_wrapped(sig, si, uc, 1);
}

/* Ours only where the program has nothing: it may replace it at any time. */
static void install(int sig, void (*fn)(int), void (*fn_info)(int, siginfo_t *, void *),
		    int flags)
{
	struct sigaction old, sa;
	sigaction_fn real = real_sigaction();

	if (sig <= 0 || sig >= NSIG_OURS || !real || real(sig, NULL, &old) ||
	    old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
		return;
	memset(&sa, 0, sizeof(sa));
	if (fn_info)
		sa.sa_sigaction = fn_info;
	else
		sa.sa_handler = fn;
	sa.sa_flags = flags | (fn_info ? SA_SIGINFO : 0);
	sigemptyset(&sa.sa_mask);
	shown[sig] = old;
	atomic_fetch_or(&ours, bit(sig));
	real(sig, &sa, NULL);
}

typedef handler_t (*signal_fn)(int, handler_t);

static signal_fn real_signal, real_bsd_signal, real_sysv_signal, real_sigset;

static signal_fn resolve(signal_fn *cache, const char *name)
{
	if (!*cache)
		*cache = (signal_fn)dlsym(RTLD_NEXT, name);
	return *cache;
}

/*
 * A signal sent to a child the moment it was forked used to find the shim
 * opening the child's dump (lifecycle.c's fork handler, under the guard):
 * the child died with an empty dump, or none.  From the last prepare
 * handler until our child handler, which runs after lifecycle.c's (fork
 * handlers run in the order they were registered), the signals that others
 * send are blocked in the forking thread: one sent meanwhile waits, and is
 * delivered to the child once its dump is open (to the parent as fork
 * returns).  Signals a thread brings on itself (faults, SIGPIPE, SIGXFSZ,
 * abort's SIGABRT, SIGSYS) are never blocked: blocked, they would change
 * what happens.  The mask is back as it was before fork() returns.  (The
 * signals others send are the 'sent' set above.)
 */
static __thread sigset_t mask_before_fork;
static __thread int masked_for_fork;

static void fork_prepare(void)
{
	sigset_t set;
	size_t i;

	if (atomic_load(&ht_phase) != HT_ON || !ht_cfg.follow || ht_foreign_process())
		return;
	sigemptyset(&set);
	for (i = 0; i < sizeof(sent) / sizeof(sent[0]); i++)
		sigaddset(&set, sent[i]);
	if (pthread_sigmask(SIG_BLOCK, &set, &mask_before_fork) == 0)
		masked_for_fork = 1;
}

static void fork_done(void)
{
	if (!masked_for_fork)
		return;
	masked_for_fork = 0;
	pthread_sigmask(SIG_SETMASK, &mask_before_fork, NULL);
}

/* The parent's pending signal, or its dying, is not the child's. */
static void fork_child(void)
{
	ht_signal_pending = 0;
	finishing = 0;
	atomic_store(&dying, 0);
	fork_done();
}

void signals_install(void)
{
	size_t i;

	pthread_atfork(fork_prepare, fork_done, fork_child);

	/* now, not later in a signal handler (the program's, resetting) */
	resolve(&real_signal, "signal");
	resolve(&real_bsd_signal, "bsd_signal");
	resolve(&real_sysv_signal, "sysv_signal");
	resolve(&real_sigset, "sigset");
	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i] != ht_cfg.mark_signal)
			install(fatal[i], NULL, on_fatal_signal, fatal_flags(fatal[i]));
	if (ht_cfg.mark_signal)
		install(ht_cfg.mark_signal, on_mark_signal, NULL, SA_RESTART);
}

HT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn real = real_sigaction();
	struct sigaction prev;
	int mine, ret;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	mine = is_ours(sig);
	if (!mine && (!act || !is_fatal(sig)))
		return real(sig, act, old);
	if (mine)
		prev = shown[sig];
	if (act) {
		ret = real(sig, act, mine ? NULL : &prev);
		if (ret)
			return ret;
		if (act->sa_handler == SIG_DFL || (act->sa_flags & SA_RESETHAND))
			adopt(sig);
	}
	if (old)
		*old = prev;
	return 0;
}

/*
 * The rest of the family keeps libc's own semantics (signal() restarts
 * system calls unless siginterrupt() said otherwise, sysv_signal() resets,
 * sigset() holds): the real function does the work (through libc's
 * internal sigaction, which we do not see), the handler it reports is the
 * one the program would find, and then SIG_DFL or a resetting handler is
 * adopted as above.
 */
static handler_t call_real(signal_fn *cache, const char *name, int sig, handler_t fn)
{
	signal_fn real = resolve(cache, name);
	handler_t old, was = SIG_DFL;

	if (!real) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	if (is_ours(sig))
		was = shown[sig].sa_handler;
	old = real(sig, fn);
	if (old == SIG_ERR)
		return old;
	if (our_handler(old))
		old = was;
	if (fn != SIG_IGN && fn != SIG_HOLD && fn != SIG_ERR)
		adopt(sig);
	return old;
}

HT_EXPORT handler_t signal(int sig, handler_t fn)
{
	return call_real(&real_signal, "signal", sig, fn);
}

handler_t bsd_signal(int sig, handler_t fn);	/* no longer in the headers */

HT_EXPORT handler_t bsd_signal(int sig, handler_t fn)
{
	return call_real(&real_bsd_signal, "bsd_signal", sig, fn);
}

HT_EXPORT handler_t sysv_signal(int sig, handler_t fn)
{
	return call_real(&real_sysv_signal, "sysv_signal", sig, fn);
}

HT_EXPORT handler_t sigset(int sig, handler_t fn)
{
	return call_real(&real_sigset, "sigset", sig, fn);
}
