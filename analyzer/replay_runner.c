/* replay_runner.c - finds allocator libraries and runs heaptrail-replay-child on each */
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "replay_runner.h"

#define CHILD_NAME "heaptrail-replay-child"

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__i386__)
#define MULTIARCH "i386-linux-gnu"
#else
#define MULTIARCH "unknown-linux-gnu"
#endif

static const char *const lib_dirs[] = {
	"/usr/lib/" MULTIARCH, "/lib/" MULTIARCH, "/usr/lib64", "/usr/lib",
	"/usr/local/lib", "/usr/local/lib64",
};

/* Known allocators: the file names their packages install, preferred first. */
static const struct known {
	const char *name;
	const char *files[4];
	const char *package;
} known[] = {
	{ "jemalloc", { "libjemalloc.so.2", "libjemalloc.so", NULL }, "libjemalloc2" },
	{ "tcmalloc", { "libtcmalloc_minimal.so.4", "libtcmalloc.so.4",
			"libtcmalloc_minimal.so", NULL }, "libtcmalloc-minimal4" },
	{ "mimalloc", { "libmimalloc.so.2", "libmimalloc.so.2.*", "libmimalloc.so", NULL },
	  "libmimalloc2.0" },
};

#define NKNOWN (sizeof(known) / sizeof(known[0]))
#define NDIRS (sizeof(lib_dirs) / sizeof(lib_dirs[0]))

static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_glibc(const char *spec)
{
	return !strcmp(spec, "glibc") || !strcmp(spec, "libc") ||
	       !strcmp(spec, "system") || !strcmp(spec, "ptmalloc");
}

/* A file name (glob pattern allowed) in the library directories: 0 with 'out' set. */
static int find_in_dirs(const char *file, char *out, size_t len)
{
	size_t i;

	for (i = 0; i < NDIRS; i++) {
		char pat[PATH_MAX];
		glob_t g;
		int found = 0;

		snprintf(pat, sizeof(pat), "%s/%s", lib_dirs[i], file);
		if (glob(pat, 0, NULL, &g) == 0) {
			size_t k;

			for (k = 0; k < g.gl_pathc && !found; k++) {
				/* the name as installed (often a link), not the versioned file */
				if (is_file(g.gl_pathv[k]) && strlen(g.gl_pathv[k]) < len) {
					memcpy(out, g.gl_pathv[k], strlen(g.gl_pathv[k]) + 1);
					found = 1;
				}
			}
		}
		globfree(&g);
		if (found)
			return 0;
	}
	return -1;
}

static const struct known *known_of(const char *name)
{
	size_t i;

	for (i = 0; i < NKNOWN; i++)
		if (!strcmp(known[i].name, name))
			return &known[i];
	return NULL;
}

static int find_known(const struct known *k, char *out, size_t len)
{
	size_t i;

	for (i = 0; k->files[i]; i++)
		if (find_in_dirs(k->files[i], out, len) == 0)
			return 0;
	return -1;
}

int replay_alloc_resolve(const char *spec, struct replay_alloc *a)
{
	const struct known *k;
	const char *base;

	memset(a, 0, sizeof(*a));
	if (!spec || !*spec) {
		cli_error("--allocator wants a name (glibc, jemalloc, tcmalloc, mimalloc) or a library path");
		return -1;
	}
	if (is_glibc(spec)) {
		snprintf(a->name, sizeof(a->name), "glibc");
		return 0;
	}
	k = known_of(spec);
	if (k) {
		snprintf(a->name, sizeof(a->name), "%s", k->name);
		if (find_known(k, a->lib, sizeof(a->lib)) < 0) {
			cli_error("cannot find %s (%s) in the system's library directories (install the package %s, or give the library's path)",
				  k->name, k->files[0], k->package);
			return -1;
		}
		return 0;
	}
	if (strchr(spec, '/')) {
		if (!is_file(spec) || !realpath(spec, a->lib)) {
			cli_error("cannot use allocator '%s': %s", spec,
				  is_file(spec) ? strerror(errno) : "no such file");
			return -1;
		}
	} else if (find_in_dirs(spec, a->lib, sizeof(a->lib)) < 0) {
		cli_error("unknown allocator '%s' (use glibc, jemalloc, tcmalloc, mimalloc or a library path)",
			  spec);
		return -1;
	}
	if (strchr(a->lib, ' ') || strchr(a->lib, ':')) {
		cli_error("cannot preload '%s': LD_PRELOAD cannot hold a path with a space or colon",
			  a->lib);
		return -1;
	}
	base = strrchr(spec, '/') ? strrchr(spec, '/') + 1 : spec;
	snprintf(a->name, sizeof(a->name), "%s", base);
	return 0;
}

size_t replay_alloc_defaults(struct replay_alloc *a, size_t max)
{
	size_t n = 0, i;

	if (!max)
		return 0;
	memset(&a[n], 0, sizeof(a[n]));
	snprintf(a[n].name, sizeof(a[n].name), "glibc");
	n++;
	for (i = 0; i < NKNOWN && n < max; i++) {
		memset(&a[n], 0, sizeof(a[n]));
		if (find_known(&known[i], a[n].lib, sizeof(a[n].lib)) < 0)
			continue;
		snprintf(a[n].name, sizeof(a[n].name), "%s", known[i].name);
		n++;
	}
	return n;
}

int replay_child_find(char *out, size_t len)
{
	const char *env = getenv("HEAPTRAIL_REPLAY_CHILD");
	char self[PATH_MAX], cand[PATH_MAX + 64];
	ssize_t n;
	char *slash;

	if (env && *env) {
		if (!is_file(env) || access(env, X_OK) < 0 || !realpath(env, out)) {
			cli_error("cannot use HEAPTRAIL_REPLAY_CHILD='%s': %s", env,
				  is_file(env) ? strerror(errno ? errno : EACCES) : "no such file");
			return -1;
		}
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		cli_error("cannot find %s: /proc/self/exe is unreadable (set HEAPTRAIL_REPLAY_CHILD)",
			  CHILD_NAME);
		return -1;
	}
	self[n] = 0;
	slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	snprintf(cand, sizeof(cand), "%s/%s", self, CHILD_NAME);
	if (!is_file(cand))
		snprintf(cand, sizeof(cand), "%s/../lib/heaptrail/%s", self, CHILD_NAME);
	if (!is_file(cand) || !realpath(cand, out) || strlen(out) >= len) {
		cli_error("cannot find %s next to '%s' or in '%s/../lib/heaptrail' (build it with 'make', or set HEAPTRAIL_REPLAY_CHILD)",
			  CHILD_NAME, self, self);
		return -1;
	}
	return 0;
}

/* ---- running ---------------------------------------------------------- */

static void parse_line(struct replay_alloc *a, char *line)
{
	char *sp = strchr(line, ' ');

	if (!sp)
		return;
	*sp++ = 0;
	if (!strcmp(line, "malloc_from"))
		snprintf(a->malloc_from, sizeof(a->malloc_from), "%s", sp);
	else if (!strcmp(line, "baseline_rss"))
		a->baseline_rss = strtoull(sp, NULL, 10);
	else if (!strcmp(line, "peak_rss"))
		a->peak_rss = strtoull(sp, NULL, 10);
	else if (!strcmp(line, "final_rss"))
		a->final_rss = strtoull(sp, NULL, 10);
	else if (!strcmp(line, "ops"))
		a->ops = strtoull(sp, NULL, 10);
	else if (!strcmp(line, "failed"))
		a->failed = strtoull(sp, NULL, 10);
}

/* Did the library really replace malloc?  Compares files, not names. */
static int same_file(const char *x, const char *y)
{
	struct stat a, b;

	return stat(x, &a) == 0 && stat(y, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* The child's environment: no heaptrail shim, the allocator preloaded. */
static void child_env(const struct replay_alloc *a)
{
	extern char **environ;
	char **e;

	for (e = environ; *e;) {
		if (!strncmp(*e, "HEAPTRAIL_", 10) && strncmp(*e, "HEAPTRAIL_REPLAY", 16)) {
			char name[256];
			size_t n = strcspn(*e, "=");

			if (n >= sizeof(name))
				n = sizeof(name) - 1;
			memcpy(name, *e, n);
			name[n] = 0;
			unsetenv(name);
			continue;	/* the array shifted: look at the same index again */
		}
		e++;
	}
	if (a->lib[0])
		setenv("LD_PRELOAD", a->lib, 1);
	else
		unsetenv("LD_PRELOAD");
}

int replay_alloc_run(const char *child, const char *ops, struct replay_alloc *a)
{
	char out[8192], *line, *save;
	size_t got = 0;
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	a->ok = 0;
	a->error[0] = 0;
	if (pipe(fds) < 0) {
		cli_error("cannot replay on %s: pipe: %s", a->name, strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		cli_error("cannot replay on %s: fork: %s", a->name, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		char *argv[3];

		close(fds[0]);
		if (dup2(fds[1], 1) < 0)
			_exit(127);
		close(fds[1]);
		child_env(a);
		argv[0] = (char *)child;
		argv[1] = (char *)ops;
		argv[2] = NULL;
		execv(child, argv);
		fprintf(stderr, "heaptrail: cannot run '%s': %s\n", child, strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		n = read(fds[0], out + got, sizeof(out) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(out) - 1)
			break;
	}
	out[got] = 0;
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			cli_error("cannot replay on %s: waitpid: %s", a->name, strerror(errno));
			return -1;
		}
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		parse_line(a, line);
	if (WIFSIGNALED(status)) {
		snprintf(a->error, sizeof(a->error), "the replay was killed by %s%s",
			 cli_signame(WTERMSIG(status)),
			 WTERMSIG(status) == SIGKILL ? " (out of memory?)" : "");
		return 0;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !a->final_rss) {
		snprintf(a->error, sizeof(a->error), "the replay failed (exit status %d)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return 0;
	}
	if (a->lib[0] && !same_file(a->malloc_from, a->lib)) {
		snprintf(a->error, sizeof(a->error),
			 "'%.200s' did not replace malloc when preloaded (malloc came from %.200s)",
			 a->lib, a->malloc_from[0] ? a->malloc_from : "an unknown place");
		return 0;
	}
	a->ok = 1;
	return 0;
}
