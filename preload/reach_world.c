/* reach_world.c - stops the other threads and names the roots of the reachability scan */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "reach.h"

/*
 * Stopping the world.  Every thread of the process (from /proc/self/task),
 * but the scanning thread and the shim's writer, gets a realtime signal the
 * program does not use, sent with rt_tgsigqueueinfo so that its value names
 * the thread's slot.  The handler, installed for the scan only (SA_RESTART,
 * every signal masked), saves the interrupted registers and stack pointer
 * and the thread pointer, says so, and waits on a futex until the scan is
 * over.  A thread that gets the signal while it updates the live-block set
 * finishes that first (reach_in_set_op): a stopped thread never holds one
 * of the set's locks, so the scanner can walk the set.  Listing is repeated
 * until no new thread shows up.
 *
 * A thread that does not answer (it blocks the signal, or hangs in the
 * kernel) is scanned from outside: its stack pointer and syscall arguments
 * from /proc/self/task/TID/syscall, and the whole mapping holding that
 * stack pointer; the scan then reads memory only through process_vm_readv,
 * as that thread may free and unmap while it runs.  Its pending signal may
 * come later, so our handler stays installed (it ignores stale signals).
 *
 * The whole scan runs inside dl_iterate_phdr (reach.c), holding the loader's
 * lock: no thread is stopped half-way through dlopen or dlclose, and the
 * module list read here cannot change.  That lock is recursive, so the
 * module walk below can take it again.
 *
 * Roots:
 *   - the writable PT_LOAD segments of every loaded object but the shim's;
 *   - each thread's registers and its stack from the stack pointer (less a
 *     red zone of 128 bytes) up to its top: for glibc's threads the top is
 *     past the thread descriptor and the static TLS, which sit at the top
 *     of the stack block, so TLS and the pointer to the DTV (which leads
 *     to dynamic TLS, heap blocks) are scanned with it;
 *   - the main thread's static TLS and descriptor, which glibc places apart
 *     from its stack: the static TLS size on either side of tp.
 * Blocks lying inside a root range are cut out of it.  Other anonymous
 * memory (mmap) is not a root, as with LeakSanitizer (valgrind scans it).
 */

#define MAX_SLOTS 16384
#define REDZONE 128
#define MAPS_TEXT (32u << 20)
#define STOP_WAIT_NS 1000000000ull
#define BLOCKED_WAIT_NS 50000000ull

#if defined(__x86_64__)
#define NREGS NGREG
#elif defined(__aarch64__)
#define NREGS 32
#else
#define NREGS 0
#endif

enum { SL_SENT = 1, SL_PARKED, SL_GONE, SL_DEAF };

struct slot {
	_Atomic int state;
	int tid;
	uintptr_t sp, tp;
	uintptr_t regs[NREGS + 1];
	unsigned nregs;
};

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn real_sigaction;
static size_t tls_static_size = 64u << 10;	/* _dl_get_tls_static_info */
static size_t tcb_size = 4096;		/* sizeof(struct pthread) */
static uintptr_t self_base;		/* the shim's load address */
static int glibc_malloc;

static struct slot *slots;
static _Atomic unsigned nslots;
static _Atomic int stopping;
static _Atomic uint32_t parked_word, resume_word, generation;
static int stop_sig;
static int handler_kept;	/* our handler stays: a thread never answered */
static struct sigaction saved_action;
static pid_t pid;

__thread int reach_in_set_op __attribute__((tls_model("initial-exec")));
__thread int reach_park_pending __attribute__((tls_model("initial-exec")));

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, ns ? &ts : NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uintptr_t thread_pointer(void)
{
#if defined(__x86_64__)
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
#else
	return (uintptr_t)__builtin_thread_pointer();
#endif
}

void world_init(void)
{
	void (*tls_info)(size_t *, size_t *);
	const unsigned *pthread_size;
	Dl_info dli;

	real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	/* glibc's private answers, as LeakSanitizer reads them; guesses without */
	tls_info = (void (*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
	if (tls_info) {
		size_t size = 0, align = 0;

		tls_info(&size, &align);
		if (size)
			tls_static_size = size;
	}
	pthread_size = dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
	if (pthread_size && *pthread_size)
		tcb_size = *pthread_size;
	if (dladdr((void *)world_init, &dli))
		self_base = (uintptr_t)dli.dli_fbase;
	glibc_malloc = ht_real.malloc && dladdr((void *)ht_real.malloc, &dli) && dli.dli_fname &&
		       strstr(dli.dli_fname, "/libc.so");
}

int world_glibc_malloc(void)
{
	return glibc_malloc;
}

/* ---- the stopped thread's side ---- */

static void save_context(struct slot *sl, const void *ucv)
{
	const ucontext_t *uc = ucv;
	unsigned i;

#if defined(__x86_64__)
	for (i = 0; i < NREGS; i++)
		sl->regs[i] = (uintptr_t)uc->uc_mcontext.gregs[i];
	sl->nregs = NREGS;
	sl->sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
	for (i = 0; i < 31; i++)
		sl->regs[i] = (uintptr_t)uc->uc_mcontext.regs[i];
	sl->regs[31] = (uintptr_t)uc->uc_mcontext.sp;
	sl->nregs = 32;
	sl->sp = (uintptr_t)uc->uc_mcontext.sp;
#else
	(void)uc;
	(void)i;
	sl->nregs = 0;
	sl->sp = (uintptr_t)__builtin_frame_address(0);
#endif
}

/* Our slot in this scan, from the signal's value; -1 when stale or foreign. */
static int slot_of(unsigned v)
{
	unsigned idx = v & 0xffff;

	if (!atomic_load(&stopping) || (v >> 16) != (atomic_load(&generation) & 0x7fff) ||
	    idx >= atomic_load(&nslots) || slots[idx].tid != gettid_())
		return -1;
	return (int)idx;
}

/* 'r' was read before 'stopping' was seen set: a resume in between is seen. */
static void park(int idx, const void *uc, uint32_t r)
{
	struct slot *sl = &slots[idx];
	int expected = SL_SENT;

	save_context(sl, uc);
	sl->tp = thread_pointer();
	/* a late answer after the scanner gave up still waits, harmlessly */
	atomic_compare_exchange_strong(&sl->state, &expected, SL_PARKED);
	atomic_fetch_add(&parked_word, 1);
	futex_wake(&parked_word);
	while (atomic_load(&resume_word) == r)
		futex_wait(&resume_word, r, 0);
}

static void on_stop(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	uint32_t r = atomic_load(&resume_word);
	int idx;

	(void)sig;
	if (si->si_code != SI_QUEUE || si->si_pid != pid)
		goto out;
	idx = slot_of((unsigned)si->si_value.sival_int);
	if (idx < 0)
		goto out;
	if (reach_in_set_op) {
		/* finish the set operation first: reach.c calls world_park_deferred */
		reach_park_pending = si->si_value.sival_int + 1;
		goto out;
	}
	park(idx, uc, r);
out:
	errno = saved;
}

void world_park_deferred(void)
{
	unsigned v = (unsigned)reach_park_pending - 1;
	uint32_t r = atomic_load(&resume_word);
	ucontext_t uc;
	int idx;

	reach_park_pending = 0;
	idx = slot_of(v);
	if (idx < 0)
		return;
	getcontext(&uc);
	park(idx, &uc, r);
}

/* ---- the scanner's side ---- */

static int install_handler(void)
{
	struct sigaction sa, old;
	int sig;

	if (handler_kept)
		return 0;
	if (!real_sigaction)
		return -ENOSYS;
	/* a realtime signal left at its default: the program never sends it */
	for (sig = SIGRTMAX; sig >= SIGRTMIN; sig--) {
		if (real_sigaction(sig, NULL, &old) || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_stop;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigfillset(&sa.sa_mask);
		if (real_sigaction(sig, &sa, NULL))
			continue;
		stop_sig = sig;
		saved_action = old;
		return 0;
	}
	return -EBUSY;
}

static int send_stop(int tid, unsigned v)
{
	siginfo_t si;
	int tries;

	memset(&si, 0, sizeof(si));
	si.si_signo = stop_sig;
	si.si_code = SI_QUEUE;
	si.si_pid = pid;
	si.si_uid = getuid();
	si.si_value.sival_int = (int)v;
	for (tries = 0; tries < 100; tries++) {
		if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, stop_sig, &si) == 0)
			return 0;
		if (errno != EAGAIN)
			return -errno;
		sched_yield();	/* the realtime queue is full for now */
	}
	return -EAGAIN;
}

static int open_ro(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | flags);
}

static void close_(int fd)
{
	syscall(SYS_close, fd);
}

static int known(int tid)
{
	unsigned i, n = atomic_load(&nslots);

	for (i = 0; i < n; i++)
		if (slots[i].tid == tid)
			return 1;
	return 0;
}

/* Signal every thread not seen yet; the number of new ones. */
static unsigned list_and_signal(int self, int writer, unsigned gen)
{
	char buf[4096];
	unsigned fresh = 0;
	int fd = open_ro("/proc/self/task", O_DIRECTORY);

	if (fd < 0)
		return 0;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		long off = 0;

		if (n <= 0)
			break;
		while (off < n) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; }
				*d = (void *)(buf + off);
			uint64_t tid;
			unsigned k;
			int ret;

			off += d->reclen;
			if (ht_parse_u64(d->name, &tid) < 0 || !tid || (int)tid == self ||
			    (int)tid == writer || known((int)tid))
				continue;
			k = atomic_load(&nslots);
			if (k >= MAX_SLOTS)
				continue;	/* beyond this many, scanned as running */
			memset(&slots[k], 0, sizeof(slots[k]));
			slots[k].tid = (int)tid;
			atomic_store(&slots[k].state, SL_SENT);
			atomic_store(&nslots, k + 1);
			fresh++;
			ret = send_stop((int)tid, (gen & 0x7fff) << 16 | k);
			if (ret == -ESRCH)
				atomic_store(&slots[k].state, SL_GONE);
			else if (ret < 0)
				atomic_store(&slots[k].state, SL_DEAF);
		}
	}
	close_(fd);
	return fresh;
}

static int alive(int tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) == 0 || errno != ESRCH;
}

/* Does the thread block our signal?  From SigBlk in its status. */
static int blocks_signal(int tid)
{
	char path[64], buf[2048];
	struct ht_str s;
	int fd;
	long n;
	const char *p;
	uint64_t mask = 0;

	str_init(&s, path, sizeof(path));
	str_add(&s, "/proc/self/task/");
	str_add_u64(&s, (uint64_t)tid);
	str_add(&s, "/status");
	fd = open_ro(path, 0);
	if (fd < 0)
		return 0;
	n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	close_(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = ht_status_field(buf, "SigBlk");
	if (!p)
		return 0;
	for (; *p; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' :
			*p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (d < 0)
			break;
		mask = mask << 4 | (uint64_t)d;
	}
	return (int)(mask >> (stop_sig - 1) & 1);
}

/* Wait for the signalled threads; the ones that do not answer turn DEAF. */
static void wait_answers(void)
{
	uint64_t start = ht_mono_ns();
	int checked_blocked = 0;

	for (;;) {
		uint32_t seen = atomic_load(&parked_word);
		unsigned i, n = atomic_load(&nslots), waiting = 0;
		uint64_t now = ht_mono_ns();

		for (i = 0; i < n; i++)
			if (atomic_load(&slots[i].state) == SL_SENT)
				waiting++;
		if (!waiting)
			return;
		if (!checked_blocked && now - start > BLOCKED_WAIT_NS) {
			/* a thread that blocks the signal (sigwait loops) will not answer */
			checked_blocked = 1;
			for (i = 0; i < n; i++) {
				if (atomic_load(&slots[i].state) != SL_SENT)
					continue;
				if (!alive(slots[i].tid))
					atomic_store(&slots[i].state, SL_GONE);
				else if (blocks_signal(slots[i].tid))
					atomic_store(&slots[i].state, SL_DEAF);
			}
			continue;
		}
		if (now - start > STOP_WAIT_NS) {
			for (i = 0; i < n; i++) {
				int expected = SL_SENT;

				atomic_compare_exchange_strong(&slots[i].state, &expected,
							       alive(slots[i].tid) ? SL_DEAF : SL_GONE);
			}
			return;
		}
		futex_wait(&parked_word, seen, 5000000);
	}
}

int world_stop(struct reach_scan *s)
{
	int self = gettid_(), writer = writer_tid();
	uint64_t until = ht_mono_ns() + STOP_WAIT_NS;
	unsigned gen, i, n, passes;
	int deaf = 0;

	/* a short program may end before the writer thread ever ran: wait for its tid */
	while (!writer && writer_running() && ht_mono_ns() < until) {
		sched_yield();
		writer = writer_tid();
	}
	pid = getpid();
	slots = region_alloc(s->mem, (size_t)MAX_SLOTS * sizeof(*slots));
	atomic_store(&nslots, 0);
	if (!slots || install_handler() < 0) {
		/* nobody can be stopped: every other thread runs on */
		s->safe_reads = 1;
		return 1;
	}
	gen = atomic_fetch_add(&generation, 1) + 1;
	atomic_store(&stopping, 1);
	for (passes = 0; passes < 64; passes++) {
		if (!list_and_signal(self, writer, gen))
			break;
		wait_answers();
	}
	n = atomic_load(&nslots);
	for (i = 0; i < n; i++)
		if (atomic_load(&slots[i].state) == SL_DEAF)
			deaf++;
	if (deaf)
		s->safe_reads = 1;
	return deaf ? 1 : 0;
}

void world_resume(void)
{
	unsigned i, n = slots ? atomic_load(&nslots) : 0;
	int keep = 0;

	atomic_store(&stopping, 0);
	atomic_fetch_add(&resume_word, 1);
	futex_wake(&resume_word);
	for (i = 0; i < n; i++)
		if (atomic_load(&slots[i].state) == SL_DEAF && alive(slots[i].tid))
			keep = 1;
	if (stop_sig && !keep && real_sigaction) {
		real_sigaction(stop_sig, &saved_action, NULL);
		handler_kept = 0;
	} else if (stop_sig) {
		handler_kept = 1;
	}
}

/* ---- /proc/self/maps ---- */

static const char *hex(const char *p, uintptr_t *out)
{
	uintptr_t v = 0;

	for (;; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' :
			*p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (d < 0)
			break;
		v = v << 4 | (uintptr_t)d;
	}
	*out = v;
	return p;
}

static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

static void parse_map_line(struct reach_map *m, const char *p, const char *end)
{
	const char *perms, *path;
	uintptr_t inode;

	p = hex(p, &m->lo);
	if (*p == '-')
		p++;
	p = hex(p, &m->hi);
	while (p < end && *p == ' ')
		p++;
	perms = p;
	p = skip_field(p, end);		/* perms */
	p = skip_field(p, end);		/* offset */
	p = skip_field(p, end);		/* device */
	hex(p, &inode);			/* decimal, but only zero matters */
	path = skip_field(p, end);
	m->flags = 0;
	if (perms[0] != 'r')
		m->flags |= REACH_MAP_GUARD;
	if (perms[1] == 'w')
		m->flags |= REACH_MAP_W;
	if (!inode)
		m->flags |= REACH_MAP_ANON;
	if (end - path >= 7 && !memcmp(path, "[stack]", 7))
		m->flags |= REACH_MAP_STACK;
	/* never read the kernel's special pages or device memory */
	if ((end - path >= 6 && !memcmp(path, "[vvar]", 6)) ||
	    (end - path >= 10 && !memcmp(path, "[vsyscall]", 10)) ||
	    (end - path >= 5 && !memcmp(path, "/dev/", 5) && inode))
		m->flags |= REACH_MAP_GUARD;
}

int world_read_maps(struct reach_scan *s)
{
	char *text = region_alloc(s->mem, MAPS_TEXT);
	size_t len = 0, lines = 0, i;
	const char *p, *end;
	int fd;

	if (!text)
		return -ENOMEM;
	fd = open_ro("/proc/self/maps", 0);
	if (fd < 0)
		return -errno;
	while (len < MAPS_TEXT) {
		long n = syscall(SYS_read, fd, text + len, MAPS_TEXT - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close_(fd);
	for (i = 0; i < len; i++)
		lines += text[i] == '\n';
	s->maps = region_alloc(s->mem, (lines + 1) * sizeof(*s->maps));
	if (!s->maps)
		return -ENOMEM;
	s->nmaps = 0;
	for (p = text, end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl)
			break;	/* a cut last line: the buffer was full */
		parse_map_line(&s->maps[s->nmaps], p, nl);
		if (s->maps[s->nmaps].hi > s->maps[s->nmaps].lo)
			s->nmaps++;
		p = nl + 1;
	}
	return 0;
}

/* ---- roots ---- */

static int module_roots(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct reach_scan *s = arg;
	int i;

	(void)size;
	if (self_base && info->dlpi_addr == self_base)
		return 0;	/* the shim's own data holds no program pointers that count */
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		lo = info->dlpi_addr + ph->p_vaddr;
		mark_root_range(s, lo, lo + ph->p_memsz);
	}
	return 0;
}

/*
 * A thread's stack from sp to its top, and its TLS: the descriptor and the
 * static TLS lie on either side of the thread pointer (below it on x86-64,
 * above it on aarch64), so the range is taken on both sides.
 */
static void thread_roots(struct reach_scan *s, int tid, uintptr_t sp, uintptr_t tp)
{
	const struct reach_map *m = mark_map_at(s, sp);
	const struct reach_map *mt = tp ? mark_map_at(s, tp) : NULL;
	size_t around = tls_static_size > tcb_size ? tls_static_size : tcb_size;
	uintptr_t lo, hi;

	if (m) {
		lo = sp - REDZONE > m->lo && sp > REDZONE ? sp - REDZONE : m->lo;
		hi = m->hi;
		/* glibc's threads: descriptor and TLS top the stack block */
		if (tid != pid && mt == m && tp > sp && m->hi - tp > around)
			hi = tp + around;
		mark_root_range(s, lo, hi);
	}
	if (mt) {
		lo = tp - mt->lo > around ? tp - around : mt->lo;
		hi = mt->hi - tp > around ? tp + around : mt->hi;
		mark_root_range(s, lo, hi);
	}
}

/* A thread that did not stop: what /proc says of it, and its whole stack mapping. */
static void outside_roots(struct reach_scan *s, int tid)
{
	char path[64], buf[512];
	uintptr_t words[16];
	unsigned nw = 0, i;
	struct ht_str str;
	const char *p;
	long n;
	int fd;

	str_init(&str, path, sizeof(path));
	str_add(&str, "/proc/self/task/");
	str_add_u64(&str, (uint64_t)tid);
	str_add(&str, "/syscall");
	fd = open_ro(path, 0);
	if (fd < 0)
		return;
	n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	close_(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* "nr arg1..arg6 sp pc", "-1 sp pc" or "running" */
	for (p = buf; *p && nw < 16;) {
		while (*p == ' ' || *p == '\n')
			p++;
		if (p[0] == '0' && p[1] == 'x') {
			p = hex(p + 2, &words[nw++]);
		} else {
			while (*p && *p != ' ' && *p != '\n')
				p++;
		}
	}
	if (nw < 2)
		return;		/* running: nothing known */
	for (i = 0; i < nw; i++)
		mark_root_word(s, words[i]);
	{
		const struct reach_map *m = mark_map_at(s, words[nw - 2]);

		if (m)
			mark_root_range(s, m->lo, m->hi);
	}
}

void world_roots(struct reach_scan *s, const void *own_uc)
{
	struct slot self;
	unsigned i, n = slots ? atomic_load(&nslots) : 0;

	dl_iterate_phdr(module_roots, s);

	memset(&self, 0, sizeof(self));
	save_context(&self, own_uc);
	for (i = 0; i < self.nregs; i++)
		mark_root_word(s, self.regs[i]);
	thread_roots(s, gettid_(), self.sp, thread_pointer());

	for (i = 0; i < n; i++) {
		struct slot *sl = &slots[i];
		unsigned k;

		switch (atomic_load(&sl->state)) {
		case SL_PARKED:
			for (k = 0; k < sl->nregs; k++)
				mark_root_word(s, sl->regs[k]);
			thread_roots(s, sl->tid, sl->sp, sl->tp);
			break;
		case SL_DEAF:
			outside_roots(s, sl->tid);
			break;
		default:
			break;
		}
	}
}
