/* supp_target.c - reads a program's __lsan_default_suppressions() by calling it in a stopped child */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "suppress.h"

/*
 * Programs built for LeakSanitizer carry their suppressions in a function,
 *
 *     extern "C" const char *__lsan_default_suppressions(void)
 *     { return "leak:libfoo.so\n"; }
 *
 * which the sanitizer's runtime calls in the process.  heaptrail reads the
 * string without running the program: the function is looked up in the
 * executable's symbol table (.symtab, else .dynsym) with libelf; only when
 * it exists, the executable is started under ptrace with LD_PRELOAD and
 * every HEAPTRAIL_ setting removed and stdin/stdout/stderr on /dev/null, and
 * stopped by a breakpoint on its entry point: the dynamic loader has mapped
 * and relocated everything and the libraries' constructors ran, but the
 * program's own start-up code, its constructors and main() have not.  There
 * the function is called (the registers set up as for a call, the return
 * address pointing back at the breakpoint), the string it returns is read
 * through /proc/PID/mem, and the child is killed.
 *
 * Why not other ways: dlopen() refuses executables (glibc 2.30 and later),
 * a static reading of .rodata would have to disassemble the function, and
 * a hook in the shim would run it at the end of a recorded run only, not
 * for 'gate DUMP' on a dump recorded elsewhere.
 *
 * Limits: x86-64 only (the register set is the only architecture-specific
 * part); a function that needs the program's own initialization (its
 * constructors) may fail, and then the gate warns and goes on.  A child
 * that does not reach its entry point within PROBE_SECONDS is killed.
 */

#define SYMBOL "__lsan_default_suppressions"
#define PROBE_SECONDS 10
#define MAX_TEXT (1u << 20)

struct elf_info {
	uint64_t sym;		/* link-time address of the function */
	uint64_t entry;		/* e_entry */
};

/* 1 with info filled, 0 when there is no such function, -1 on error. */
static int find_symbol(const char *exe, struct elf_info *info, char *err,
		       size_t errlen)
{
	int fd, rc = 0, pass;
	Elf *e;
	GElf_Ehdr eh;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errlen, "libelf is unusable");
		return -1;
	}
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* gone since it was recorded: nothing to read, nothing to say */
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		snprintf(err, errlen, "cannot open it: %s", strerror(errno));
		return -1;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		/* a script or anything but ELF has no such function */
		if (e)
			elf_end(e);
		close(fd);
		return 0;
	}
	info->entry = eh.e_entry;
	/* .symtab first: an executable rarely exports the function */
	for (pass = 0; pass < 2 && !rc; pass++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;

		while (!rc && (scn = elf_nextscn(e, scn))) {
			Elf_Data *data;
			size_t i, n;

			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) ||
			    !sh.sh_entsize)
				continue;
			data = elf_getdata(scn, NULL);
			n = sh.sh_size / sh.sh_entsize;
			for (i = 0; data && i < n; i++) {
				GElf_Sym s;
				const char *name;

				if (!gelf_getsym(data, (int)i, &s) ||
				    GELF_ST_TYPE(s.st_info) != STT_FUNC ||
				    s.st_shndx == SHN_UNDEF || !s.st_value)
					continue;
				name = elf_strptr(e, sh.sh_link, s.st_name);
				if (name && !strcmp(name, SYMBOL)) {
					info->sym = s.st_value;
					rc = 1;
					break;
				}
			}
		}
	}
	elf_end(e);
	close(fd);
	return rc;
}

#if defined(__x86_64__)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Waits for the child to stop with SIGTRAP, handing any other signal back
 * to it (a library constructor may use signals).  0, or -1 with err set.
 */
static int wait_trap(pid_t pid, double deadline, char *err, size_t errlen)
{
	int st, hops = 0;
	pid_t w;

	for (;;) {
		w = waitpid(pid, &st, WNOHANG);
		if (w < 0 && errno != EINTR) {
			snprintf(err, errlen, "waitpid: %s", strerror(errno));
			return -1;
		}
		if (w == 0) {
			struct timespec ts = { 0, 2000000 };

			if (now() > deadline) {
				snprintf(err, errlen, "it did not reach its entry point within %d s",
					 PROBE_SECONDS);
				return -1;
			}
			nanosleep(&ts, NULL);
			continue;
		}
		if (w < 0)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			snprintf(err, errlen, "it ended (%s %d) before the function returned",
				 WIFEXITED(st) ? "exit status" : "signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return -2;
		}
		if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP)
			return 0;
		if (WIFSTOPPED(st) && (WSTOPSIG(st) == SIGSEGV ||
				       WSTOPSIG(st) == SIGBUS ||
				       WSTOPSIG(st) == SIGILL ||
				       WSTOPSIG(st) == SIGFPE || ++hops > 1000)) {
			snprintf(err, errlen, "it stopped with %s", strsignal(WSTOPSIG(st)));
			return -1;
		}
		if (WIFSTOPPED(st) &&
		    ptrace(PTRACE_CONT, pid, NULL, (void *)(intptr_t)WSTOPSIG(st)) < 0) {
			snprintf(err, errlen, "ptrace: %s", strerror(errno));
			return -1;
		}
	}
}

static int auxv_entry(pid_t pid, uint64_t *entry)
{
	char path[64];
	uint64_t kv[2];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (read(fd, kv, sizeof(kv)) == (ssize_t)sizeof(kv)) {
		if (kv[0] == AT_NULL)
			break;
		if (kv[0] == AT_ENTRY) {
			*entry = kv[1];
			close(fd);
			return 0;
		}
	}
	close(fd);
	return -ENOENT;
}

/* The NUL-terminated string at 'addr' in the child; malloc'd or NULL. */
static char *read_string(pid_t pid, uint64_t addr, char *err, size_t errlen)
{
	char path[64], *buf = malloc(MAX_TEXT + 1);
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!buf || fd < 0) {
		snprintf(err, errlen, "cannot read its memory: %s",
			 strerror(buf ? errno : ENOMEM));
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (len < MAX_TEXT) {
		/* page by page: the string may end just before unmapped memory */
		size_t want = 4096 - ((addr + len) & 4095);
		ssize_t n;

		if (want > MAX_TEXT - len)
			want = MAX_TEXT - len;
		n = pread(fd, buf + len, want, (off_t)(addr + len));
		if (n <= 0) {
			snprintf(err, errlen, "the function returned an unreadable address 0x%llx",
				 (unsigned long long)addr);
			free(buf);
			close(fd);
			return NULL;
		}
		if (memchr(buf + len, 0, (size_t)n)) {
			close(fd);
			return buf;
		}
		len += (size_t)n;
	}
	buf[MAX_TEXT] = 0;
	close(fd);
	return buf;
}

/* The child: traced, quiet, without the shim. */
static void child(const char *exe)
{
	extern char **environ;
	char **env, *argv[2];
	size_t n = 0, k = 0;
	int fd;

	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	while (environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	if (!env)
		_exit(127);
	for (n = 0; environ[n]; n++)
		if (strncmp(environ[n], "LD_PRELOAD=", 11) &&
		    strncmp(environ[n], "HEAPTRAIL_", 10))
			env[k++] = environ[n];
	argv[0] = (char *)exe;
	argv[1] = NULL;
	execve(exe, argv, env);
	_exit(127);
}

static int call_in_child(const char *exe, const struct elf_info *info,
			 char **text, char *err, size_t errlen)
{
	struct user_regs_struct regs;
	double deadline = now() + PROBE_SECONDS;
	uint64_t entry = 0, bias, ret;
	long word;
	pid_t pid;
	int st, rc = -1;

	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0)
		child(exe);
	/* stopped at the exec */
	if (wait_trap(pid, deadline, err, errlen) < 0) {
		if (!strncmp(err, "it ended", 8))
			snprintf(err, errlen, "it could not be started under ptrace (is ptrace allowed here?)");
		goto out;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)PTRACE_O_EXITKILL);
	if (auxv_entry(pid, &entry) < 0) {
		snprintf(err, errlen, "its entry point is unknown (no AT_ENTRY)");
		goto out;
	}
	bias = entry - info->entry;
	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, (void *)entry, NULL);
	if (errno ||
	    ptrace(PTRACE_POKETEXT, pid, (void *)entry,
		   (void *)((word & ~0xffL) | 0xcc)) < 0) {
		snprintf(err, errlen, "ptrace: %s", strerror(errno ? errno : EIO));
		goto out;
	}
	if (ptrace(PTRACE_CONT, pid, NULL, NULL) < 0 ||
	    wait_trap(pid, deadline, err, errlen) < 0 ||
	    ptrace(PTRACE_GETREGS, pid, NULL, &regs) < 0) {
		if (!err[0])
			snprintf(err, errlen, "ptrace: %s", strerror(errno));
		goto out;
	}
	if (regs.rip != entry + 1) {
		snprintf(err, errlen, "it stopped elsewhere than at its entry point");
		goto out;
	}
	/* a call: aligned stack, return address = the breakpoint, rax = 0 */
	regs.rsp = ((regs.rsp - 4096) & ~(uint64_t)15) - 8;
	if (ptrace(PTRACE_POKEDATA, pid, (void *)regs.rsp, (void *)entry) < 0) {
		snprintf(err, errlen, "ptrace: %s", strerror(errno));
		goto out;
	}
	regs.rip = bias + info->sym;
	regs.rax = 0;
	if (ptrace(PTRACE_SETREGS, pid, NULL, &regs) < 0 ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL) < 0) {
		snprintf(err, errlen, "ptrace: %s", strerror(errno));
		goto out;
	}
	if (wait_trap(pid, deadline, err, errlen) < 0)
		goto out;
	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) < 0) {
		snprintf(err, errlen, "ptrace: %s", strerror(errno));
		goto out;
	}
	if (regs.rip != entry + 1) {
		snprintf(err, errlen, "the function did not return normally");
		goto out;
	}
	ret = regs.rax;
	if (!ret) {
		*text = strdup("");	/* NULL means "no suppressions" */
		rc = *text ? 1 : -1;
		goto out;
	}
	*text = read_string(pid, ret, err, errlen);
	rc = *text ? 1 : -1;
out:
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return rc;
}

#else

static int call_in_child(const char *exe, const struct elf_info *info,
			 char **text, char *err, size_t errlen)
{
	snprintf(err, errlen, "calling it is supported on x86-64 only");
	return -1;
}

#endif

int supp_target_text(const char *exe, char **text, char *err, size_t errlen)
{
	struct elf_info info;
	int rc;

	*text = NULL;
	if (errlen)
		err[0] = 0;
	memset(&info, 0, sizeof(info));
	rc = find_symbol(exe, &info, err, errlen);
	if (rc <= 0)
		return rc;
	return call_in_child(exe, &info, text, err, errlen);
}
