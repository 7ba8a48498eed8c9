/* sig_reraise.c - the program's own handler puts the default back and raises the signal again
 *
 * usage: sig_reraise MODE LEAKS
 * Leaks LEAKS blocks of 100 bytes at leak_here() (printed "leaked N"), shows
 * what it finds on a few signals (SIG_IGN stays ignored, SIGCHLD keeps what
 * it set), then dies of a signal its own handler re-raises, as GNU sort,
 * timeout and servers do:
 *   signal          signal(SIGTERM, h); h: signal(SIG_DFL), raise
 *   sigaction       sigaction(SIGTERM, h); h: sigaction(SIG_DFL), raise
 *   resethand       sigaction(SIGTERM, h, SA_RESETHAND): the kernel resets
 *                   on delivery; h only raises
 *   resethand-info  the same with SA_SIGINFO | SA_NODEFER; h checks siginfo
 *   sysv            sysv_signal(SIGTERM, h) (resets on delivery); h raises
 *   pipe            SIGPIPE from a write to a closed pipe; h: signal(SIG_DFL),
 *                   raise
 *   dfl             signal(SIGINT, h), then signal(SIGINT, SIG_DFL) (as
 *                   shells do at start) and kill(SIGINT)
 *   segv-resethand  SIGSEGV from a null read, h (SA_RESETHAND) only returns:
 *                   the retried read faults again with the default action
 * Every step prints what the program reads back (handler, flags, mask): the
 * output must be the same with and without the shim, and the process must
 * die of the same signal.
 */
/* test-cflags: -Wno-deprecated-declarations */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[1000];
static const char *mode = "";

static __attribute__((noinline)) void *leak_here(void)
{
	return malloc(100);
}

static void say(const char *s)
{
	ssize_t r = write(1, s, strlen(s));

	(void)r;
}

static void h(int sig);
static void h_info(int sig, siginfo_t *si, void *uc);

static const char *name(void (*f)(int))
{
	if (f == SIG_DFL)
		return "SIG_DFL";
	if (f == SIG_IGN)
		return "SIG_IGN";
	if (f == h)
		return "h";
	if ((void *)f == (void *)h_info)
		return "h_info";
	return "other";
}

/* What sigaction() reads back; async-signal-safe (called from handlers). */
static void show(const char *what, int sig)
{
	struct sigaction sa;
	char buf[200];
	int flags;

	if (sigaction(sig, NULL, &sa)) {
		say("sigaction failed\n");
		return;
	}
	flags = sa.sa_flags & (SA_RESTART | SA_RESETHAND | SA_SIGINFO | SA_NODEFER | SA_ONSTACK);
	/* snprintf of integers and strings only: no allocation */
	snprintf(buf, sizeof(buf), "%s: %s flags %#x mask term %d int %d pipe %d\n", what,
		 name(sa.sa_handler), (unsigned)flags, sigismember(&sa.sa_mask, SIGTERM),
		 sigismember(&sa.sa_mask, SIGINT), sigismember(&sa.sa_mask, SIGPIPE));
	say(buf);
}

static void h(int sig)
{
	struct sigaction dfl, old;

	show("in h", sig);
	if (!strcmp(mode, "signal") || !strcmp(mode, "pipe")) {
		void (*was)(int) = signal(sig, SIG_DFL);

		say("signal(SIG_DFL) returned ");
		say(name(was));
		say("\n");
	} else if (!strcmp(mode, "sigaction")) {
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, &old);
		say("sigaction(SIG_DFL) old ");
		say(name(old.sa_handler));
		say("\n");
	} else if (!strcmp(mode, "segv-resethand")) {
		show("after reset", sig);
		return;	/* the read faults again */
	}
	show("before raise", sig);
	raise(sig);
	say("h: survived raise\n");	/* blocked in here: delivered on return */
}

static void h_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	show("in h_info", sig);
	say(si && si->si_signo == sig && si->si_code == SI_USER ? "siginfo ok\n" :
	    "siginfo wrong\n");
	raise(sig);	/* SA_NODEFER: the default action, at once */
	say("h_info: survived raise\n");
}

static void on(int sig, int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	if (flags & SA_SIGINFO)
		sa.sa_sigaction = h_info;
	else
		sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sa.sa_flags = flags;
	if (sigaction(sig, &sa, NULL))
		say("cannot set the handler\n");
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 10, i, fd[2];
	struct sigaction sa;

	for (i = 0; i < n && i < 1000; i++)
		keep[i] = leak_here();
	printf("leaked %d\n", n);
	fflush(stdout);
	if (argc < 2)
		return 2;
	mode = argv[1];

	/* an ignored signal stays ignored; a non-fatal one keeps what it set */
	signal(SIGHUP, SIG_IGN);
	show("SIGHUP", SIGHUP);
	kill(getpid(), SIGHUP);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	show("SIGCHLD", SIGCHLD);

	if (!strcmp(mode, "signal")) {
		say(name(signal(SIGTERM, h)));
		say(" was on SIGTERM\n");
		show("SIGTERM", SIGTERM);
		kill(getpid(), SIGTERM);
	} else if (!strcmp(mode, "sigaction")) {
		on(SIGTERM, 0);
		show("SIGTERM", SIGTERM);
		kill(getpid(), SIGTERM);
	} else if (!strcmp(mode, "resethand")) {
		on(SIGTERM, SA_RESETHAND);
		show("SIGTERM", SIGTERM);
		kill(getpid(), SIGTERM);
	} else if (!strcmp(mode, "resethand-info")) {
		on(SIGTERM, SA_RESETHAND | SA_SIGINFO | SA_NODEFER);
		show("SIGTERM", SIGTERM);
		kill(getpid(), SIGTERM);
	} else if (!strcmp(mode, "sysv")) {
		say(name(sysv_signal(SIGTERM, h)));
		say(" was on SIGTERM\n");
		show("SIGTERM", SIGTERM);
		kill(getpid(), SIGTERM);
	} else if (!strcmp(mode, "pipe")) {
		say(name(signal(SIGPIPE, h)));
		say(" was on SIGPIPE\n");
		if (pipe(fd))
			return 4;
		close(fd[0]);
		if (write(fd[1], "x", 1) < 0)
			say("write failed\n");
	} else if (!strcmp(mode, "dfl")) {
		signal(SIGINT, h);
		say(name(signal(SIGINT, SIG_DFL)));
		say(" was on SIGINT\n");
		show("SIGINT", SIGINT);
		kill(getpid(), SIGINT);
	} else if (!strcmp(mode, "segv-resethand")) {
		volatile int *p = NULL;

		on(SIGSEGV, SA_RESETHAND);
		show("SIGSEGV", SIGSEGV);
		return *p;
	} else {
		return 2;
	}
	say("still alive\n");
	return 3;
}
