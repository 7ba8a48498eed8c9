/* interpose_proc.c - exit, _exit, exec and dl_iterate_phdr: points the dump must see */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

#define REAL(type, name) ((type)dlsym(RTLD_NEXT, name))

typedef void (*exit_fn)(int) __attribute__((noreturn));
typedef int (*main_fn)(int, char **, char **);
typedef int (*start_main_fn)(main_fn, int, char **, void (*)(void),
			     void (*)(void), void (*)(void), void *);

/*
 * Returning from main() calls exit() inside the C library, where we cannot
 * see it; wrapping main() gives the end record the real exit status.
 */
static main_fn real_main;

static int main_wrapper(int argc, char **argv, char **envp)
{
	int status = real_main(argc, argv, envp);

	ht_note_exit_status(status);
	return status;
}

HT_EXPORT int __libc_start_main(main_fn main_, int argc, char **argv,
				void (*init)(void), void (*fini)(void),
				void (*rtld_fini)(void), void *stack_end);

int __libc_start_main(main_fn main_, int argc, char **argv,
		      void (*init)(void), void (*fini)(void),
		      void (*rtld_fini)(void), void *stack_end)
{
	start_main_fn real = REAL(start_main_fn, "__libc_start_main");

	real_main = main_;
	return real(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

HT_EXPORT void exit(int status)
{
	if (!ht_foreign_process())
		ht_note_exit_status(status);
	REAL(exit_fn, "exit")(status);
}

/*
 * A vfork child shares our memory and runs no fork handlers: its _exit or
 * exec must touch nothing of ours (the parent's recording goes on).
 */
static __attribute__((noreturn)) void quick_exit_common(const char *name, int status)
{
	if (ht_foreign_process()) {
		syscall(SYS_exit_group, status);
		__builtin_unreachable();
	}
	ht_stop(HTR_END_EXIT, status);
	REAL(exit_fn, name)(status);
}

HT_EXPORT void _exit(int status)
{
	quick_exit_common("_exit", status);
}

HT_EXPORT void _Exit(int status)
{
	quick_exit_common("_Exit", status);
}

/* Before an exec replaces us, everything so far must be on disk. */
static void before_exec(void)
{
	int saved = errno;

	if (atomic_load(&ht_phase) == HT_ON && !ht_in_shim && !ht_foreign_process()) {
		ht_in_shim = 1;
		writer_sync_exec();
		ht_in_shim = 0;
	}
	errno = saved;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

HT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	/* Shells try execve() along PATH: sync only for a file that can run. */
	if (access(path, X_OK) == 0)
		before_exec();
	return REAL(execve_fn, "execve")(path, argv, envp);
}

HT_EXPORT int execv(const char *path, char *const argv[])
{
	if (access(path, X_OK) == 0)
		before_exec();
	return REAL(execv_fn, "execv")(path, argv);
}

HT_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	return REAL(execv_fn, "execvp")(file, argv);
}

HT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(execve_fn, "execvpe")(file, argv, envp);
}

HT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(fexecve_fn, "fexecve")(fd, argv, envp);
}

/* The execl family builds an argv on the stack and takes the v path. */
#define MAX_EXECL_ARGS 4096

static int collect(const char *arg0, va_list ap, char **argv, char ***envp)
{
	int n = 0;
	const char *a = arg0;

	while (a && n < MAX_EXECL_ARGS - 1) {
		argv[n++] = (char *)a;
		a = va_arg(ap, const char *);
	}
	if (a) {
		errno = E2BIG;
		return -1;
	}
	argv[n] = NULL;
	if (envp)
		*envp = va_arg(ap, char **);
	return 0;
}

HT_EXPORT int execl(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS];
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = collect(arg, ap, argv, NULL);
	va_end(ap);
	return ret ? ret : execv(path, argv);
}

HT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS];
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = collect(arg, ap, argv, NULL);
	va_end(ap);
	return ret ? ret : execvp(file, argv);
}

HT_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS];
	char **envp = NULL;
	va_list ap;
	int ret;

	va_start(ap, arg);
	ret = collect(arg, ap, argv, &envp);
	va_end(ap);
	return ret ? ret : execve(path, argv, envp);
}

/*
 * dl_iterate_phdr: no dlopen/dlclose wrappers (glibc reads the caller's
 * RUNPATH and namespace from their return address), but this one is ours,
 * for two reasons.  It counts the calls in flight, so that a forked child
 * can tell whether some thread of its parent held the loader's
 * dl_load_write_lock at the fork (glibc 2.36 does not reset that lock in
 * the child: any dl_iterate_phdr there would wait forever); and in such a
 * child it serves the shim's own calls (libunwind's, the module list's)
 * from the parent's module list (modules.c) until the program itself gets
 * through the real one.  dl_iterate_phdr reports the caller's namespace:
 * only callers of the base namespace see this wrapper (the preloaded shim
 * is not in the others), so the answer is the same.
 */
typedef int (*phdr_cb)(struct dl_phdr_info *, size_t, void *);
typedef int (*iterate_fn)(phdr_cb, void *);

static iterate_fn real_iterate;
static _Atomic int iterating;	/* real calls in flight */

HT_EXPORT int dl_iterate_phdr(phdr_cb cb, void *data)
{
	iterate_fn real = real_iterate;
	int ret;

	if (ht_in_shim && !modules_loader_trusted())
		return modules_iterate_snapshot(cb, data);
	if (!real) {
		real = REAL(iterate_fn, "dl_iterate_phdr");
		real_iterate = real;
	}
	atomic_fetch_add_explicit(&iterating, 1, memory_order_acq_rel);
	ret = real(cb, data);
	atomic_fetch_sub_explicit(&iterating, 1, memory_order_release);
	if (!ht_in_shim)
		modules_loader_proven();
	return ret;
}

/*
 * Where is dl_load_write_lock?  It is a recursive pthread mutex inside ld.so's
 * _rtld_global, at an offset that changes between glibc versions, so it is
 * found by watching: inside a dl_iterate_phdr() callback the lock is ours,
 * so its owner field holds our tid; after the call it holds 0.  Exactly one
 * such field, or we do not claim to know.
 */
#define MAX_CANDIDATES 8

static const uint8_t *rtld_global;
static long wlock_owner = -1;	/* offset of the lock's __owner field */

struct calib {
	const uint8_t *g;
	size_t size;
	int tid;
	long cand[MAX_CANDIDATES];
	int n;
};

static int calib_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct calib *c = arg;
	size_t o;

	(void)info;
	(void)size;
	/* pthread_mutex_t: int __lock, unsigned __count, int __owner, ... */
	for (o = 8; o + 4 <= c->size; o += 4) {
		int owner, lock;
		unsigned count;

		memcpy(&owner, c->g + o, 4);
		if (owner != c->tid)
			continue;
		memcpy(&lock, c->g + o - 8, 4);
		memcpy(&count, c->g + o - 4, 4);
		if (lock != 0 && count >= 1) {
			if (c->n == MAX_CANDIDATES)
				return 1;
			c->cand[c->n++] = (long)o;
		}
	}
	return 1;
}

void proc_calibrate_loader_lock(void)
{
	struct calib c;
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	int i, found = 0;
	long at = -1;

	memset(&c, 0, sizeof(c));
	c.g = dlsym(RTLD_DEFAULT, "_rtld_global");
	if (!c.g || !dladdr1((void *)c.g, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
		return;
	c.size = sym->st_size;
	c.tid = (int)gettid();
	dl_iterate_phdr(calib_cb, &c);
	for (i = 0; i < c.n; i++) {
		int owner;

		memcpy(&owner, c.g + c.cand[i], 4);
		if (owner == 0) {
			at = c.cand[i];
			found++;
		}
	}
	if (found == 1) {
		rtld_global = c.g;
		wlock_owner = at;
	}
}

/*
 * In a forked child: was the loader idle at the fork?  When the lock was
 * found, its lock word says so exactly.  Otherwise: no real
 * dl_iterate_phdr in flight, and no dlopen/dlclose announcing a change to
 * debuggers (r_state RT_ADD / RT_DELETE) in any namespace.
 */
int proc_loader_idle(void)
{
	const struct r_debug_extended *r = (const struct r_debug_extended *)&_r_debug;
	int n, word;

	if (rtld_global) {
		/*
		 * The lock word, not the owner: pthread_mutex_lock takes the
		 * word before it names the owner, and unlock clears the owner
		 * before it frees the word.
		 */
		memcpy(&word, rtld_global + wlock_owner - 8, 4);
		return word == 0;
	}
	if (atomic_load(&iterating))
		return 0;
	for (n = 0; r && n < 256; n++) {
		if (r->base.r_state != RT_CONSISTENT)
			return 0;
		if (r->base.r_version < 2)
			break;
		r = r->r_next;
	}
	return 1;
}
