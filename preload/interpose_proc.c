/* interpose_proc.c - exit, _exit, exec and dlopen/dlclose: points the dump must see */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
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
	ht_note_exit_status(status);
	REAL(exit_fn, "exit")(status);
}

static __attribute__((noreturn)) void quick_exit_common(const char *name, int status)
{
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

	if (atomic_load(&ht_phase) == HT_ON && !ht_in_shim) {
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

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);

static void modules_moved(void)
{
	int saved = errno;

	if (ht_tracing()) {
		ht_in_shim = 1;
		ev_modules_changed();
		ht_in_shim = 0;
	}
	errno = saved;
}

HT_EXPORT void *dlopen(const char *file, int mode)
{
	static dlopen_fn real;
	void *h;

	if (!real)
		real = REAL(dlopen_fn, "dlopen");
	h = real(file, mode);
	if (h)
		modules_moved();
	return h;
}

HT_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
	static dlmopen_fn real;
	void *h;

	if (!real)
		real = REAL(dlmopen_fn, "dlmopen");
	h = real(lmid, file, mode);
	if (h)
		modules_moved();
	return h;
}

HT_EXPORT int dlclose(void *handle)
{
	static dlclose_fn real;
	int ret;

	if (!real)
		real = REAL(dlclose_fn, "dlclose");
	ret = real(handle);
	modules_moved();
	return ret;
}
