/* lifecycle.c - start, fork and exit of the traced process */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * Start happens on the first intercepted call (which may come from the
 * dynamic loader, before any constructor): resolve the real allocator, read
 * the configuration, map our memory and open the dump.  The writer thread is
 * started from our constructor, when the C library is fully up; events made
 * before that wait in their buffers.
 *
 * The end: an exit handler registered at start runs after the program's
 * own atexit handlers and writes the last frame with the end record; _exit,
 * fatal signals and exec flush too.  It belongs to no library
 * (__cxa_atexit with a NULL dso handle), so it runs in exit()'s last pass,
 * after the loader ran every library's destructors (registered later, they
 * run before it): their frees are in the dump.  Registered with our own
 * __dso_handle, as atexit() does, it would run as part of the shim's own
 * destructor, before those of libraries finalised after it.
 */

_Atomic int ht_phase;
_Atomic uint64_t ht_lost[5];

static int exit_status = -1;
static unsigned fork_generation;
static pid_t traced_pid;		/* the process this memory records */

int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

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

/* Our code's address range, or [0, 0) when it could not be found. */
static void locate_self(uintptr_t range[2])
{
	Dl_info dli;

	range[0] = range[1] = 0;
	if (!dladdr((void *)locate_self, &dli))
		return;
	range[0] = (uintptr_t)dli.dli_fbase;
	if (dl_iterate_phdr(find_self, range) == 1)
		stacks_set_self_range(range[0], range[1]);
	else
		range[0] = range[1] = 0;
}

/*
 * Is the program's malloc ours?  Another one ahead of the shim (an earlier
 * LD_PRELOAD entry such as "libtcmalloc.so libheaptrail.so", or a malloc
 * defined by the executable itself) takes the program's calls, and only
 * what it lacks reaches the shim (reallocarray, say): a dump of stray
 * blocks that look leaked.  A wrapper that hands every call on to the next
 * malloc (heaptrack's, libmemusage) is fine, and which of the two it is
 * cannot be told safely from here: say so once, name it, and go on.
 */
static void check_malloc_is_ours(const uintptr_t self[2])
{
	void *first = dlsym(RTLD_DEFAULT, "malloc");
	char msg[PATH_MAX + 256];
	struct ht_str s;
	Dl_info dli;
	const ElfW(Sym) *sym = NULL;

	if (!first || !self[1] || ((uintptr_t)first >= self[0] && (uintptr_t)first < self[1]))
		return;
	/*
	 * A non-PIE executable that takes malloc's address has it as an
	 * undefined symbol whose value is its PLT entry: that is what dlsym()
	 * returns, and it leads to the first definition, ours or not.  Only a
	 * definition says anything.
	 */
	if (!dladdr1(first, &dli, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    sym->st_shndx == SHN_UNDEF)
		return;
	str_init(&s, msg, sizeof(msg));
	str_add(&s, "the program's malloc is ");
	if (dli.dli_fname && dli.dli_fname[0]) {
		str_add(&s, "that of '");
		str_add(&s, dli.dli_fname);
		str_add(&s, "'");
	} else {
		str_add(&s, "the executable's own");
	}
	str_add(&s, ", found before libheaptrail.so's: unless it hands every call on to the "
		"next malloc, what it allocates is not recorded (put libheaptrail.so first "
		"in LD_PRELOAD, as 'heaptrail record' does)");
	ht_msg(msg);
}

/*
 * A vfork child shares our memory (and its parent's thread's TLS) and runs
 * no fork handlers: nothing of ours is its to finish.
 */
int ht_foreign_process(void)
{
	return traced_pid && getpid() != traced_pid;
}

/*
 * Is this a foreign process that found no writer to take its buffer
 * (thread.c)?  A copy of our memory made by a raw clone() system call
 * stops tracing for good: its memory is its own, and nothing it records
 * could ever be written.  A vfork child shares our memory and must not
 * touch the phase.  The kernel says which (kcmp); where it cannot (its
 * parent's pid does not exist in a new pid namespace: getppid() is 0
 * there; or kcmp is forbidden), a child whose parent is not the traced
 * process cannot be a vfork child of it.  Otherwise the process only
 * drops its events, and remembers that it does (a pid, which the traced
 * process never has): one getpid() an event from then on.
 */
static _Atomic pid_t dropping_pid;

int ht_foreign_here(void)
{
	pid_t self;
	long vm;

	if (!traced_pid || (self = getpid()) == traced_pid)
		return 0;
	if (atomic_load_explicit(&dropping_pid, memory_order_relaxed) == self)
		return 1;
	vm = syscall(SYS_kcmp, self, traced_pid, KCMP_VM, 0, 0);
	if (vm > 0 || (vm < 0 && getppid() != traced_pid))
		atomic_store(&ht_phase, HT_STOPPED);
	else
		atomic_store(&dropping_pid, self);
	return 1;
}

static void at_exit(void *arg)
{
	(void)arg;
	if (ht_foreign_process())
		return;
	reach_at_exit();	/* HEAPTRAIL_REACH=exit: before the last frame */
	if (exit_status >= 0)
		ht_stop(HTR_END_EXIT, exit_status);
	else
		ht_stop(HTR_END_UNKNOWN, 0);
}

static void after_fork_child(void)
{
	int was = ht_in_shim;

	traced_pid = getpid();
	if (atomic_load(&ht_phase) != HT_ON)
		return;
	ht_in_shim = 1;
	threads_reset_after_fork();
	stackbounds_open();	/* the child's own maps */
	stacks_reset();
	ptrset_reset(ptrset_get(HT_SET_SAMPLED));
	if (ht_sampled_filter)
		ht_sampled_filter = ptrset_filter(ptrset_get(HT_SET_SAMPLED));
	reach_after_fork();
	modules_after_fork(proc_loader_idle());
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

/*
 * HEAPTRAIL_FOLLOW=0 records the first process image only.  It marks the
 * environment (HEAPTRAIL__ROOT=pid) so that everything it starts, forked,
 * spawned or exec'd, finds the mark and stays untraced.  0 for those.
 */
static int only_the_first_image(void)
{
	char buf[24];
	struct ht_str s;

	if (getenv("HEAPTRAIL__ROOT"))
		return 0;
	str_init(&s, buf, sizeof(buf));
	str_add_u64(&s, (uint64_t)getpid());
	setenv("HEAPTRAIL__ROOT", buf, 1);
	return 1;
}

/*
 * Under an address-space limit (ulimit -v, RLIMIT_AS) the shim's reserved
 * regions (about 280 MiB, MAP_NORESERVE does not exempt them) count against
 * the program, whose threads each reserve an 8 MiB stack and a 64 MiB malloc
 * arena.  Start only when the regions take at most a quarter of what the
 * limit leaves, so the program keeps room to grow; otherwise run untraced.
 */
#define SHIM_ADDRESS_SPACE ((uint64_t)280 << 20)

static int address_space_allows(void)
{
	struct rlimit rl;
	char buf[64];
	uint64_t pages = 0;
	ssize_t n, i;

	if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return 1;
	n = ht_read_file("/proc/self/statm", buf, sizeof(buf));
	for (i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		pages = pages * 10 + (uint64_t)(buf[i] - '0');
	return (uint64_t)rl.rlim_cur >= pages * (uint64_t)sysconf(_SC_PAGESIZE) +
					4 * SHIM_ADDRESS_SPACE;
}

void ht_init(void)
{
	int expected = HT_OFF;
	int saved = errno;
	int was = ht_in_shim;
	uintptr_t self[2];

	if (!atomic_compare_exchange_strong(&ht_phase, &expected, HT_STARTING))
		return;
	ht_in_shim = 1;
	if (real_resolve() != 0)
		goto off;
	config_load();
	real_check_chunks();
	stackbounds_open();
	if (!ht_cfg.follow && !only_the_first_image())
		goto off;
	clock_init();
	locate_self(self);
	check_malloc_is_ours(self);
	if (!address_space_allows()) {
		ht_msg("the address-space limit (ulimit -v) leaves no room for the shim's buffers: running untraced");
		goto off;
	}
	if (threads_init() || stacks_init() || modules_init()) {
		ht_msg("cannot map memory for the shim: running untraced");
		goto off;
	}
	if (sample_init()) {
		ht_msg("cannot map memory for HEAPTRAIL_SAMPLE's block set: recording every event");
		ht_cfg.sample_bytes = 0;
	}
	reach_init();
	if (writer_open() != 0)
		goto off;
	traced_pid = getpid();
	pthread_atfork(NULL, NULL, after_fork_child);
	__cxa_atexit(at_exit, NULL, NULL);
	reentry_init();
	signals_install();
	atomic_store(&ht_phase, HT_ON);
	ht_in_shim = was;
	errno = saved;
	return;
off:
	region_release_all();
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
	proc_calibrate_loader_lock();
	if (writer_start_thread() != 0) {
		/*
		 * Nothing will be written.  The regions stay mapped: tracing was
		 * on, so another thread (started by an earlier constructor) may be
		 * inside an event this very moment.
		 */
		atomic_store(&ht_phase, HT_STOPPED);
		ht_self = NULL;
	}
	ht_in_shim = was;
}

void ht_stop(int how, int status)
{
	int was = ht_in_shim;

	if (atomic_load(&ht_phase) != HT_ON || ht_foreign_process())
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

/*
 * Was a dump whose header says (pid, start) written by an earlier image of
 * this very process (before exec)?  Only if the pid is ours and the dump
 * started after this process did; otherwise a process that had our pid
 * before (pids are reused) wrote it.  The process's start is known to a
 * clock tick (/proc/self/stat), hence the slack.
 */
int ht_earlier_image(uint32_t pid, uint64_t start_realtime_ns)
{
	char buf[1024];
	struct timespec rt, boot;
	uint64_t ticks = 0, hz, started;
	ssize_t n, i;
	int field;
	const char *p;

	if (pid != (uint32_t)getpid())
		return 0;
	n = ht_read_file("/proc/self/stat", buf, sizeof(buf));
	if (n <= 0)
		return 1;	/* cannot tell: as before */
	p = strrchr(buf, ')');	/* the command may hold spaces and parentheses */
	if (!p)
		return 1;
	/* after ")": field 3 (state) ... field 22 (starttime, in clock ticks) */
	for (field = 2, i = p - buf + 1; i < n && field < 22; i++)
		if (buf[i] == ' ')
			field++;
	for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		ticks = ticks * 10 + (uint64_t)(buf[i] - '0');
	hz = (uint64_t)sysconf(_SC_CLK_TCK);
	if (!hz || clock_gettime(CLOCK_REALTIME, &rt) || clock_gettime(CLOCK_BOOTTIME, &boot))
		return 1;
	started = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec -
		  ((uint64_t)boot.tv_sec * 1000000000u + (uint64_t)boot.tv_nsec) +
		  ticks * (1000000000u / hz);
	return start_realtime_ns + 2 * (1000000000u / hz) >= started;
}
