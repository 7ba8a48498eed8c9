/* launch.c - finds the shim, checks a command and runs it under LD_PRELOAD */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "launch.h"

#define LIB_NAME "libheaptrail.so"

/* ---- finding the shim ------------------------------------------------- */

static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * The shim next to the executable (build tree), in ../lib/heaptrail/
 * (installed), or $HEAPTRAIL_LIB.  Absolute, since the target may chdir.
 */
static int find_lib(char *out, size_t len)
{
	const char *env = getenv("HEAPTRAIL_LIB");
	char self[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n;
	char *slash;

	if (env && *env) {
		if (!is_file(env) || !realpath(env, out)) {
			cli_error("cannot use HEAPTRAIL_LIB='%s': %s", env,
				  is_file(env) ? strerror(errno) : "no such file");
			return -1;
		}
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		cli_error("cannot find %s: /proc/self/exe is unreadable (set HEAPTRAIL_LIB)",
			  LIB_NAME);
		return -1;
	}
	self[n] = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(cand, sizeof(cand), "%s/%s", self, LIB_NAME);
	if (!is_file(cand))
		snprintf(cand, sizeof(cand), "%s/../lib/heaptrail/%s", self, LIB_NAME);
	if (!is_file(cand) || !realpath(cand, out) || strlen(out) >= len) {
		cli_error("cannot find %s next to '%s' or in '%s/../lib/heaptrail' (build it with 'make', or set HEAPTRAIL_LIB)",
			  LIB_NAME, self, self);
		return -1;
	}
	return 0;
}

/* ---- checking the target ---------------------------------------------- */

/* CMD as execvp() would find it; -errno when it would not. */
static int resolve_cmd(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");
	int err = ENOENT;

	if (strchr(cmd, '/')) {
		if (access(cmd, F_OK) < 0)
			return -errno;
		if (access(cmd, X_OK) < 0 || !is_file(cmd))
			return -EACCES;
		snprintf(out, len, "%s", cmd);
		return 0;
	}
	if (!*cmd)
		return -ENOENT;
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *end = strchrnul(path, ':');
		int dlen = (int)(end - path);

		/* an empty PATH entry means the current directory */
		snprintf(out, len, "%.*s%s%s", dlen, dlen ? path : ".",
			 "/", cmd);
		if (is_file(out)) {
			if (access(out, X_OK) == 0)
				return 0;
			err = EACCES;
		}
		path = *end ? end + 1 : end;
	}
	return -err;
}

/* Reads the start of an ELF file; 1 if ELF, 0 if not, -errno. */
static int read_ehdr(int fd, Elf64_Ehdr *eh)
{
	ssize_t n = pread(fd, eh, sizeof(*eh), 0);

	if (n < 0)
		return -errno;
	if (n < EI_NIDENT || memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return 0;
	return 1;
}

static uint16_t own_machine(void)
{
	Elf64_Ehdr eh;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint16_t m = 0;

	if (fd >= 0 && read_ehdr(fd, &eh) == 1)
		m = eh.e_machine;
	if (fd >= 0)
		close(fd);
	return m;
}

enum elf_kind { ELF_NOT, ELF_DYNAMIC, ELF_STATIC, ELF_FOREIGN, ELF_LOADER };

/* Whether the dynamic loader will run this file (and so preload into it). */
static enum elf_kind elf_kind(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	int interp = 0, dynamic = 0;
	unsigned i;
	const char *base;

	if (fd < 0)
		return ELF_NOT;
	if (read_ehdr(fd, &eh) != 1) {
		close(fd);
		return ELF_NOT;
	}
	if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh.e_machine != own_machine()) {
		close(fd);
		return ELF_FOREIGN;
	}
	for (i = 0; i < eh.e_phnum && i < 4096; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    (ssize_t)sizeof(ph))
			break;
		if (ph.p_type == PT_INTERP)
			interp = 1;
		else if (ph.p_type == PT_DYNAMIC)
			dynamic = 1;
	}
	close(fd);
	if (interp)
		return ELF_DYNAMIC;
	/* 'ld-linux-x86-64.so.2 ./prog' preloads as well as ./prog does */
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (dynamic && !strncmp(base, "ld-", 3))
		return ELF_LOADER;
	return ELF_STATIC;
}

/* The interpreter of a "#!" script, or "" when it is not one. */
static void script_interp(const char *path, char *out, size_t len)
{
	char buf[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	size_t i = 2, k = 0;

	out[0] = 0;
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 3 || buf[0] != '#' || buf[1] != '!')
		return;
	buf[n] = 0;
	while (buf[i] == ' ' || buf[i] == '\t')
		i++;
	while (buf[i] && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' &&
	       k + 1 < len)
		out[k++] = buf[i++];
	out[k] = 0;
}

/* One clear message and CLI_USAGE for a target the shim cannot enter. */
static int check_target(const char *path)
{
	struct stat st;
	char interp[256];
	enum elf_kind kind;

	if (stat(path, &st) == 0 &&
	    (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
	     ((st.st_mode & S_ISGID) && st.st_gid != getegid()))) {
		cli_error("cannot record '%s': it is set%cid, and the dynamic loader ignores LD_PRELOAD for setuid and setgid programs (record a copy without the %s bit, or run heaptrail as its owner)",
			  path, st.st_mode & S_ISUID ? 'u' : 'g',
			  st.st_mode & S_ISUID ? "setuid" : "setgid");
		return CLI_USAGE;
	}
	kind = elf_kind(path);
	if (kind == ELF_STATIC) {
		cli_error("cannot record '%s': it is statically linked, so there is no dynamic loader to preload libheaptrail.so into it (link it dynamically, without -static, to record it)",
			  path);
		return CLI_USAGE;
	}
	if (kind == ELF_FOREIGN) {
		cli_error("cannot record '%s': it is built for another architecture or word size than libheaptrail.so (build heaptrail for that target)",
			  path);
		return CLI_USAGE;
	}
	if (kind == ELF_NOT) {
		script_interp(path, interp, sizeof(interp));
		if (interp[0] == '/' && elf_kind(interp) == ELF_STATIC) {
			cli_error("cannot record '%s': its interpreter '%s' is statically linked, so libheaptrail.so cannot be preloaded into it",
				  path, interp);
			return CLI_USAGE;
		}
	}
	return 0;
}

/* ---- running it ------------------------------------------------------- */

static volatile pid_t child_pid;

/*
 * Signals sent to heaptrail by a process (kill, timeout, systemd) are passed
 * on.  Those from the terminal (si_code SI_KERNEL) already reached the child
 * through the foreground process group: passing them again would double
 * them, and a second Ctrl-C often means "quit now" to a server.
 */
static void forward(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	if (child_pid > 0 && (!si || si->si_code <= 0))
		kill(child_pid, sig);
	errno = saved;
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define NFORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

int launch_setenv(const char *name, const char *value)
{
	if (setenv(name, value, 1) < 0) {
		cli_error("cannot set %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- putting it together --------------------------------------------- */

/* Puts the shim first in LD_PRELOAD, keeping what the user preloads. */
static int preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *v;
	int rc;

	if (old && *old) {
		if (asprintf(&v, "%s:%s", lib, old) < 0)
			v = NULL;
	} else {
		v = strdup(lib);
	}
	if (!v) {
		cli_error("cannot set LD_PRELOAD: %s", strerror(ENOMEM));
		return -1;
	}
	rc = launch_setenv("LD_PRELOAD", v);
	free(v);
	return rc;
}

int launch_prepare(const char *cmd, char *path, size_t len)
{
	char lib[PATH_MAX];
	int rc;

	rc = resolve_cmd(cmd, path, len);
	if (rc < 0) {
		cli_error("cannot run '%s': %s", cmd, strerror(-rc));
		return rc == -ENOENT || rc == -ENOTDIR ? 127 : 126;
	}
	rc = check_target(path);
	if (rc)
		return rc;
	if (find_lib(lib, sizeof(lib)) < 0)
		return CLI_USAGE;
	if (strpbrk(lib, " :")) {
		cli_error("cannot preload '%s': LD_PRELOAD cannot hold a path with a space or colon (set HEAPTRAIL_LIB to a copy elsewhere)",
			  lib);
		return CLI_USAGE;
	}
	if (preload(lib) < 0)
		return CLI_USAGE;
	return 0;
}

int launch_run(const char *path, char **argv, int *wstatus)
{
	struct sigaction sa;
	sigset_t block, old;
	int status;
	size_t i;
	pid_t pid;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	for (i = 0; i < NFORWARDED; i++) {
		sigaction(forwarded[i], &sa, NULL);
		sigaddset(&block, forwarded[i]);
	}
	/* no signal may slip in between fork() and knowing the child's pid */
	sigprocmask(SIG_BLOCK, &block, &old);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		cli_error("cannot run '%s': fork: %s", argv[0], strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return CLI_USAGE;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execv(path, argv);
		status = errno;
		fprintf(stderr, "heaptrail: cannot run '%s': %s\n", argv[0],
			strerror(status));
		_exit(status == ENOENT ? 127 : 126);
	}
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			cli_error("cannot wait for '%s': %s", argv[0], strerror(errno));
			return CLI_USAGE;
		}
	}
	child_pid = 0;
	*wstatus = status;
	return 0;
}

int launch_exit_code(int wstatus)
{
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return WEXITSTATUS(wstatus);
}
