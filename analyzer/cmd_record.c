/* cmd_record.c - 'heaptrail record': runs a command under the shim and names its dumps */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

#define DEFAULT_OUT "heaptrail.%e.%p.htr"	/* the shim's own default too */
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

/* ---- the dump names --------------------------------------------------- */

/* HEAPTRAIL_OUT as a glob: every %x becomes '*', glob's own specials escaped. */
static void out_glob(const char *pattern, char *out, size_t len)
{
	size_t o = 0;

	for (; *pattern && o + 3 < len; pattern++) {
		if (*pattern == '%' && pattern[1] == '%') {
			out[o++] = '%';
			pattern++;
		} else if (*pattern == '%' && pattern[1]) {
			if (!o || out[o - 1] != '*')
				out[o++] = '*';
			pattern++;
		} else {
			if (strchr("*?[]\\", *pattern))
				out[o++] = '\\';
			out[o++] = *pattern;
		}
	}
	out[o] = 0;
}

struct seen {
	char **names;
	struct stat *st;
	size_t n;
};

static void snapshot(const char *pat, struct seen *s)
{
	glob_t g;
	size_t i;

	memset(s, 0, sizeof(*s));
	if (glob(pat, 0, NULL, &g) != 0)
		return;
	s->names = calloc(g.gl_pathc, sizeof(*s->names));
	s->st = calloc(g.gl_pathc, sizeof(*s->st));
	for (i = 0; s->names && s->st && i < g.gl_pathc; i++) {
		if (stat(g.gl_pathv[i], &s->st[s->n]) < 0)
			continue;
		s->names[s->n] = strdup(g.gl_pathv[i]);
		if (s->names[s->n])
			s->n++;
	}
	globfree(&g);
}

static void seen_free(struct seen *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s->st);
}

static int unchanged(const struct seen *before, const char *name,
		     const struct stat *st)
{
	size_t i;

	for (i = 0; i < before->n; i++)
		if (!strcmp(before->names[i], name))
			return before->st[i].st_ino == st->st_ino &&
			       before->st[i].st_size == st->st_size &&
			       before->st[i].st_mtim.tv_sec == st->st_mtim.tv_sec &&
			       before->st[i].st_mtim.tv_nsec == st->st_mtim.tv_nsec;
	return 0;
}

/* Names the dumps this run wrote; relative to the current directory if under it. */
static void tell_dumps(const char *pat, const struct seen *before,
		       const char *cwd)
{
	struct seen after;
	size_t i, cl = strlen(cwd), k = 0;

	snapshot(pat, &after);
	for (i = 0; i < after.n; i++) {
		const char *name = after.names[i];

		if (unchanged(before, name, &after.st[i]))
			continue;
		if (!strncmp(name, cwd, cl) && name[cl] == '/')
			name += cl + 1;
		fprintf(stderr, "heaptrail: dump written to '%s'\n", name);
		k++;
	}
	if (!k)
		cli_warn("no dump was written (expected a file matching '%s'); did the command start, and is the directory writable?",
			 pat);
	seen_free(&after);
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

static int set_env(const char *name, const char *value)
{
	if (setenv(name, value, 1) < 0) {
		cli_error("cannot set %s: %s", name, strerror(errno));
		return -1;
	}
	return 0;
}

struct record_opts {
	const char *out;
	const char *follow;
	const char *depth;
	const char *interval;
	const char *sample;
	const char *unwind;
	const char *clients;
	int reach;
};

static int apply_opts(const struct record_opts *o, const char *lib,
		      char *pattern, size_t plen)
{
	const char *old = getenv("LD_PRELOAD");
	const char *out = o->out ? o->out : getenv("HEAPTRAIL_OUT");
	char *preload;
	char cwd[PATH_MAX];
	uint64_t v;
	int n;

	if (!out || !*out)
		out = DEFAULT_OUT;
	if (out[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		snprintf(pattern, plen, "%s", out);
	else
		snprintf(pattern, plen, "%s/%s", cwd, out);
	if (set_env("HEAPTRAIL_OUT", pattern) < 0)
		return -1;
	if (old && *old) {
		if (asprintf(&preload, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		preload = strdup(lib);
	}
	if (!preload || set_env("LD_PRELOAD", preload) < 0) {
		free(preload);
		return -1;
	}
	free(preload);
	if (o->follow && set_env("HEAPTRAIL_FOLLOW", o->follow) < 0)
		return -1;
	if (o->depth && set_env("HEAPTRAIL_DEPTH", o->depth) < 0)
		return -1;
	if (o->interval && set_env("HEAPTRAIL_INTERVAL_MS", o->interval) < 0)
		return -1;
	if (o->sample) {
		char num[32];

		if (cli_parse_size(o->sample, &v) < 0)
			return -1;
		n = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
		if (n < 0 || set_env("HEAPTRAIL_SAMPLE", num) < 0)
			return -1;
	}
	if (o->unwind && set_env("HEAPTRAIL_UNWIND", o->unwind) < 0)
		return -1;
	if (o->clients && set_env("HEAPTRAIL_CLIENTS", o->clients) < 0)
		return -1;
	if (o->reach && set_env("HEAPTRAIL_REACH", "exit") < 0)
		return -1;
	return 0;
}

static int run(const char *path, char **argv)
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
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "follow-forks", required_argument, NULL, 'f' },
		{ "depth", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "sample", required_argument, NULL, 's' },
		{ "unwind", required_argument, NULL, 'u' },
		{ "clients", required_argument, NULL, 'c' },
		{ "reach", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct record_opts o;
	char lib[PATH_MAX], path[PATH_MAX], pattern[PATH_MAX + 64];
	char glob_pat[2 * PATH_MAX], cwd[PATH_MAX];
	struct seen before;
	uint64_t v;
	int c, x, rc;

	memset(&o, 0, sizeof(o));
	optind = 0;
	opterr = 0;
	/* '+': options end at CMD, whose own options are its business */
	while ((c = getopt_long(argc, argv, "+:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!*optarg)
				return cli_usage("record", "-o wants a file name");
			o.out = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				return cli_usage("record", "--follow-forks is 0 or 1, not '%s'", optarg);
			o.follow = optarg;
			break;
		case 'd':
			if (cli_parse_int(optarg, 1, HTR_MAX_DEPTH, &x) < 0)
				return cli_usage("record", "--depth is a number of frames from 1 to %d, not '%s'",
						 HTR_MAX_DEPTH, optarg);
			o.depth = optarg;
			break;
		case 'i':
			if (cli_parse_int(optarg, 1, 60000, &x) < 0)
				return cli_usage("record", "--interval is in milliseconds, from 1 to 60000, not '%s'",
						 optarg);
			o.interval = optarg;
			break;
		case 's':
			if (cli_parse_size(optarg, &v) < 0 || v > (UINT64_C(1) << 40))
				return cli_usage("record", "--sample is a size like 4096, 64KiB or 1MiB (up to 1 TiB), not '%s'",
						 optarg);
			o.sample = optarg;
			break;
		case 'u':
			if (strcmp(optarg, "libunwind") && strcmp(optarg, "fp"))
				return cli_usage("record", "--unwind is libunwind or fp, not '%s'", optarg);
			o.unwind = optarg;
			break;
		case 'c':
			if (strcmp(optarg, "off") && strcmp(optarg, "sockets") &&
			    strcmp(optarg, "threads"))
				return cli_usage("record", "--clients is off, sockets or threads, not '%s'",
						 optarg);
			o.clients = optarg;
			break;
		case 'r':
			o.reach = 1;
			break;
		case 'h':
			help_verb("record", stdout);
			return 0;
		default:
			return cli_bad_option("record", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage("record", "which command? usage: heaptrail record [-o FILE] [OPTIONS] -- CMD [ARGS...]");

	rc = resolve_cmd(argv[optind], path, sizeof(path));
	if (rc < 0) {
		cli_error("cannot run '%s': %s", argv[optind], strerror(-rc));
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
	if (apply_opts(&o, lib, pattern, sizeof(pattern)) < 0) {
		cli_error("cannot set up the environment: %s", strerror(errno ? errno : ENOMEM));
		return CLI_USAGE;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	out_glob(pattern, glob_pat, sizeof(glob_pat));
	snapshot(glob_pat, &before);
	rc = run(path, argv + optind);
	tell_dumps(glob_pat, &before, cwd);
	seen_free(&before);
	return rc;
}
