/* guard_sigfamily.c - signal(), sigset(), sysv_signal(), siginterrupt() and raw rt_sigaction keep their meaning under the shim
 *
 * The shim puts handlers of its own on signals whose default ends the
 * process, and hides them.  Whatever path the program takes to change a
 * handler, what it reads back must be what it set, with libc's flags.
 * Prints one line per check; the test compares the plain and traced output.
 */
/* test-cflags: -Wno-deprecated-declarations */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void h1(int sig) { (void)sig; }
static void h2(int sig) { (void)sig; }
static void h3(int sig) { (void)sig; }
static void h4(int sig) { (void)sig; }

static const char *name(void (*h)(int))
{
	if (h == SIG_DFL)
		return "SIG_DFL";
	if (h == SIG_IGN)
		return "SIG_IGN";
	if (h == h1)
		return "h1";
	if (h == h2)
		return "h2";
	if (h == h3)
		return "h3";
	if (h == h4)
		return "h4";
	return "other";
}

static void show(const char *what, int sig)
{
	struct sigaction sa;

	sigaction(sig, NULL, &sa);
	printf("%s: handler %s restart %d resethand %d\n", what, name(sa.sa_handler),
	       !!(sa.sa_flags & SA_RESTART), !!(sa.sa_flags & SA_RESETHAND));
}

/* The kernel's struct for rt_sigaction on x86-64. */
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

int main(void)
{
	struct kernel_sigaction ka;

	printf("sigset old %s\n", name(sigset(SIGTERM, h1)));
	show("after sigset(SIGTERM)", SIGTERM);
	printf("sysv_signal old %s\n", name(sysv_signal(SIGHUP, h2)));
	show("after sysv_signal(SIGHUP)", SIGHUP);
	siginterrupt(SIGINT, 1);
	printf("signal old %s\n", name(signal(SIGINT, h3)));
	show("after siginterrupt + signal(SIGINT)", SIGINT);
	printf("signal old %s\n", name(signal(SIGALRM, h3)));
	show("after signal(SIGALRM)", SIGALRM);

	memset(&ka, 0, sizeof(ka));
	ka.handler = SIG_IGN;
	syscall(SYS_rt_sigaction, SIGQUIT, &ka, NULL, 8);
	show("after raw rt_sigaction(SIGQUIT)", SIGQUIT);
	printf("signal old %s\n", name(signal(SIGQUIT, h4)));
	printf("signal old %s\n", name(signal(SIGPIPE, SIG_IGN)));
	printf("signal old %s\n", name(signal(SIGPIPE, SIG_DFL)));
	show("SIGXCPU untouched", SIGXCPU);
	return 0;
}
