/* lifecycle.c - start, fork, exit and fatal signals of the traced process */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

/*
 * Start happens on the first intercepted call (which may come from the
 * dynamic loader, before any constructor): resolve the real allocator, read
 * the configuration, map our memory and open the dump.  The writer thread is
 * started from our constructor, when the C library is fully up; events made
 * before that wait in their buffers.
 *
 * The end: an atexit handler registered at start runs after the program's
 * own atexit handlers and writes the last frame with the end record; _exit,
 * fatal signals and exec flush too.
 */

_Atomic int ht_phase;
_Atomic uint64_t ht_lost[5];

static int exit_status = -1;
static unsigned fork_generation;
static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM };

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t *range = arg;
	int i;

	(void)size;
	if (info->dlpi_addr != range[0])
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			range[0] = info->dlpi_addr + ph->p_vaddr;
			range[1] = range[0] + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static void locate_self(void)
{
	Dl_info dli;
	uintptr_t range[2] = { 0, 0 };

	if (!dladdr((void *)locate_self, &dli))
		return;
	range[0] = (uintptr_t)dli.dli_fbase;
	if (dl_iterate_phdr(find_self, range) == 1)
		stacks_set_self_range(range[0], range[1]);
}

static void at_exit(void)
{
	if (exit_status >= 0)
		ht_stop(HTR_END_EXIT, exit_status);
	else
		ht_stop(HTR_END_UNKNOWN, 0);
}

static void on_fatal_signal(int sig)
{
	int saved = errno;
	struct sigaction dfl;

	if (!ht_in_shim)
		ht_stop(HTR_END_SIGNAL, sig);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	errno = saved;
	raise(sig);	/* delivered with the default action when we return */
}

static void on_mark_signal(int sig)
{
	int saved = errno;

	(void)sig;
	if (!ht_in_shim && atomic_load(&ht_phase) == HT_ON) {
		ht_in_shim = 1;
		ev_mark("signal");
		ht_in_shim = 0;
	}
	errno = saved;
}

/* Our handlers go only where the program has none: it may replace them. */
static void install_handler(int sig, void (*fn)(int), int flags)
{
	struct sigaction old, sa;

	if (sigaction(sig, NULL, &old) || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void install_signal_handlers(void)
{
	size_t i;

	for (i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		install_handler(fatal_signals[i], on_fatal_signal, SA_RESETHAND);
	if (ht_cfg.mark_signal)
		install_handler(ht_cfg.mark_signal, on_mark_signal, SA_RESTART);
}

static void after_fork_child(void)
{
	int was = ht_in_shim;

	if (atomic_load(&ht_phase) != HT_ON)
		return;
	ht_in_shim = 1;
	threads_reset_after_fork();
	stacks_reset();
	ptrset_reset(ptrset_get(HT_SET_SAMPLED));
	modules_reset_after_fork();
	writer_reset_after_fork();
	if (!ht_cfg.follow) {
		atomic_store(&ht_phase, HT_STOPPED);
		ht_in_shim = was;
		return;
	}
	ht_start_ns = ht_mono_ns();
	fork_generation++;
	if (writer_restart_in_child(fork_generation) != 0)
		atomic_store(&ht_phase, HT_STOPPED);
	ht_in_shim = was;
}

void ht_init(void)
{
	int expected = HT_OFF;
	int saved = errno;
	int was = ht_in_shim;

	if (!atomic_compare_exchange_strong(&ht_phase, &expected, HT_STARTING))
		return;
	ht_in_shim = 1;
	if (real_resolve() != 0)
		goto off;
	config_load();
	clock_init();
	locate_self();
	if (threads_init() || stacks_init() || modules_init()) {
		ht_msg("cannot map memory for the shim: running untraced");
		goto off;
	}
	if (sample_init()) {
		ht_msg("cannot map memory for HEAPTRAIL_SAMPLE's block set: recording every event");
		ht_cfg.sample_bytes = 0;
	}
	if (writer_open() != 0)
		goto off;
	pthread_atfork(NULL, NULL, after_fork_child);
	atexit(at_exit);
	install_signal_handlers();
	atomic_store(&ht_phase, HT_ON);
	ht_in_shim = was;
	errno = saved;
	return;
off:
	atomic_store(&ht_phase, HT_STOPPED);
	ht_in_shim = was;
	errno = saved;
}

__attribute__((constructor(101))) static void on_load(void)
{
	int was = ht_in_shim;

	ht_init();
	if (atomic_load(&ht_phase) != HT_ON)
		return;
	ht_in_shim = 1;
	if (writer_start_thread() != 0)
		atomic_store(&ht_phase, HT_STOPPED);
	ht_in_shim = was;
}

void ht_stop(int how, int status)
{
	int was = ht_in_shim;

	if (atomic_load(&ht_phase) != HT_ON)
		return;
	ht_in_shim = 1;
	writer_finish(how, status);
	atomic_store(&ht_phase, HT_STOPPED);
	ht_in_shim = was;
}

void ht_note_exit_status(int status)
{
	exit_status = status & 0xff;
}
