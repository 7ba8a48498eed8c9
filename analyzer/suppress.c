/* suppress.c - leak suppressions: LeakSanitizer's format, the target's own, built-in */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "suppress.h"

/* ---- LeakSanitizer's template match ----------------------------------- */

/*
 * Full-string glob match of p[0..plen) against s: '*' is any run of
 * characters, everything else literal.  Iterative with one backtrack point,
 * so it is linear-ish and never recurses.
 */
static int glob_full(const char *p, size_t plen, const char *s)
{
	size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
	size_t slen = strlen(s);

	while (si < slen) {
		if (pi < plen && p[pi] == '*') {
			star = pi++;
			mark = si;
		} else if (pi < plen && p[pi] == s[si]) {
			pi++;
			si++;
		} else if (star != (size_t)-1) {
			pi = star + 1;
			si = ++mark;
		} else {
			return 0;
		}
	}
	while (pi < plen && p[pi] == '*')
		pi++;
	return pi == plen;
}

/*
 * As LeakSanitizer's TemplateMatch: without '^' the pattern may start
 * anywhere, without a trailing '$' it may end anywhere.  An empty name never
 * matches.
 */
int supp_pattern_match(const char *pattern, const char *str)
{
	char buf[1024];
	size_t len, o = 0;
	int start = 0, end = 0;

	if (!str || !*str || !pattern)
		return 0;
	if (*pattern == '^') {
		start = 1;
		pattern++;
	}
	len = strlen(pattern);
	if (len && pattern[len - 1] == '$') {
		end = 1;
		len--;
	}
	if (len + 3 > sizeof(buf))
		return 0;
	if (!start)
		buf[o++] = '*';
	memcpy(buf + o, pattern, len);
	o += len;
	if (!end)
		buf[o++] = '*';
	return glob_full(buf, o, str);
}

/* ---- the rule list ---------------------------------------------------- */

static struct supp_rule *add_rule(struct suppress *s)
{
	struct supp_rule *r;

	if (s->n == s->cap) {
		size_t n = s->cap ? s->cap * 2 : 16;
		struct supp_rule *nr = realloc(s->rules, n * sizeof(*nr));

		if (!nr)
			return NULL;
		s->rules = nr;
		s->cap = n;
	}
	r = &s->rules[s->n++];
	memset(r, 0, sizeof(*r));
	return r;
}

static const struct {
	enum supp_builtin kind;
	const char *what;
} builtins[] = {
	{ SUPP_BUILTIN_LOADER,
	  "allocated by the dynamic loader (ld.so): link maps of loaded libraries, thread-local storage (the DTV and TLS blocks of dlopen'd modules)" },
	{ SUPP_BUILTIN_RUNTIME_INIT,
	  "allocated by a C/C++ runtime library's constructor while the loader ran it, e.g. libstdc++'s emergency exception pool (eh_alloc.cc, 72,704 bytes with gcc 12)" },
	{ SUPP_BUILTIN_STD_STREAM,
	  "stdio buffer of stdin, stdout or stderr (a buffer of a FILE the program opened itself is not hidden)" },
	{ SUPP_BUILTIN_LIBC_CACHE,
	  "the runtime's lifelong caches: time zone data (localtime, mktime), static result buffers (getpwnam, gethostbyname), locale and message catalogs (setlocale, gettext), the atexit table, the buffers of std::cout and friends after sync_with_stdio(false)" },
};

void supp_init(struct suppress *s, int with_builtins)
{
	size_t i;

	memset(s, 0, sizeof(*s));
	if (!with_builtins)
		return;
	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		struct supp_rule *r = add_rule(s);

		if (!r)
			return;
		r->kind = builtins[i].kind;
		r->what = builtins[i].what;
		r->origin = strdup("built-in");
	}
}

void supp_release(struct suppress *s)
{
	size_t i, k;

	for (i = 0; i < s->n; i++) {
		free(s->rules[i].pattern);
		free(s->rules[i].origin);
		free(s->rules[i].exe);
		for (k = 0; k < s->rules[i].nexamples; k++)
			free(s->rules[i].examples[k]);
	}
	for (i = 0; i < s->nprobed; i++)
		free(s->probed[i]);
	free(s->probed);
	free(s->rules);
	memset(s, 0, sizeof(*s));
}

/* ---- reading the format ----------------------------------------------- */

static char *trim(char *a)
{
	char *e;

	while (*a == ' ' || *a == '\t' || *a == '\r')
		a++;
	e = a + strlen(a);
	while (e > a && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = 0;
	return a;
}

int supp_load_text(struct suppress *s, const char *text, const char *origin,
		   const char *exe, int strict)
{
	char *copy = strdup(text), *line, *next;
	int lineno = 0, rc = 0;

	if (!copy) {
		cli_error("cannot read suppressions from %s: %s", origin, strerror(ENOMEM));
		return -1;
	}
	for (line = copy; line; line = next) {
		struct supp_rule *r;
		char *a, *colon, where[4096];

		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		a = trim(line);
		if (!*a || *a == '#')
			continue;
		snprintf(where, sizeof(where), "%s:%d", origin, lineno);
		colon = strchr(a, ':');
		if (!colon || colon == a) {
			if (strict) {
				cli_error("%s: '%s' is not a suppression (the format is 'leak:PATTERN', one per line)",
					  where, a);
				rc = -1;
				break;
			}
			cli_warn("%s: '%s' is not a suppression; skipped", where, a);
			continue;
		}
		*colon = 0;
		if (strcmp(trim(a), "leak")) {
			if (strict) {
				cli_error("%s: '%s' suppressions are not supported, only 'leak:PATTERN'",
					  where, trim(a));
				rc = -1;
				break;
			}
			continue;	/* LSan ignores other types in its own defaults too */
		}
		a = trim(colon + 1);
		if (!*a) {
			if (strict) {
				cli_error("%s: 'leak:' wants a pattern", where);
				rc = -1;
				break;
			}
			continue;
		}
		r = add_rule(s);
		if (!r || !(r->pattern = strdup(a)) || !(r->origin = strdup(where)) ||
		    (exe && !(r->exe = strdup(exe)))) {
			cli_error("cannot read suppressions from %s: %s", origin,
				  strerror(ENOMEM));
			rc = -1;
			break;
		}
		r->kind = SUPP_PATTERN;
	}
	free(copy);
	return rc;
}

int supp_load_file(struct suppress *s, const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t len = 0, cap = 0, n;
	int rc;

	if (!f) {
		cli_error("cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (cap - len < 4096) {
			char *nt = realloc(text, cap + 65536);

			if (!nt) {
				free(text);
				fclose(f);
				cli_error("cannot read '%s': %s", path, strerror(ENOMEM));
				return -1;
			}
			text = nt;
			cap += 65536;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		cli_error("cannot read '%s': %s", path, strerror(errno ? errno : EIO));
		fclose(f);
		free(text);
		return -1;
	}
	fclose(f);
	text[len] = 0;
	if (memchr(text, 0, len)) {
		cli_error("cannot read '%s': it is not a text file (a suppressions file holds lines 'leak:PATTERN')",
			  path);
		free(text);
		return -1;
	}
	rc = supp_load_text(s, text, path, NULL, 1);
	free(text);
	return rc;
}

int supp_load_target(struct suppress *s, const char *exe)
{
	char err[512], origin[4200];
	char *text = NULL, **np;
	size_t i;
	int rc;

	if (!exe || !*exe)
		return 0;
	for (i = 0; i < s->nprobed; i++)
		if (!strcmp(s->probed[i], exe))
			return 0;
	np = realloc(s->probed, (s->nprobed + 1) * sizeof(*np));
	if (!np)
		return -1;
	s->probed = np;
	s->probed[s->nprobed] = strdup(exe);
	if (s->probed[s->nprobed])
		s->nprobed++;
	rc = supp_target_text(exe, &text, err, sizeof(err));
	if (rc < 0) {
		cli_warn("cannot read the suppressions of '%s' (its __lsan_default_suppressions()): %s; pass them with --suppressions FILE",
			 exe, err);
		return -1;
	}
	if (rc == 0)
		return 0;
	snprintf(origin, sizeof(origin), "__lsan_default_suppressions() of '%s'", exe);
	rc = supp_load_text(s, text, origin, exe, 0);
	free(text);
	return rc;
}

/* ---- what a frame is -------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* The dynamic loader: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-2.31.so. */
static int is_loader(const char *module)
{
	const char *b = base_name(module);

	return b && (has_prefix(b, "ld-linux") ||
		     (has_prefix(b, "ld-") && strstr(b, ".so")) ||
		     has_prefix(b, "ld64.so"));
}

/* The C and C++ runtime libraries other than the loader. */
static int is_runtime_lib(const char *module)
{
	static const char *const prefixes[] = {
		"libc.so", "libc-", "libstdc++.so", "libgcc_s", "libm.so", "libm-",
		"libpthread.so", "libpthread-", "libdl.so", "libdl-", "librt.so",
		"libresolv.so", "libnss_",
	};
	const char *b = base_name(module);
	size_t i;

	if (!b)
		return 0;
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (has_prefix(b, prefixes[i]))
			return 1;
	return 0;
}

/*
 * A libc function's public name: the debug info and the dynamic symbol
 * table name the same code __GI__IO_puts, _IO_puts, __printf_chk or
 * __isoc99_scanf; all of them come down to puts, printf_chk, scanf.
 */
static const char *plain_name(const char *f, char *buf, size_t len)
{
	static const char *const prefixes[] = { "__GI_", "_IO_new_", "_IO_",
						"isoc99_", "__", "_" };
	size_t i;
	int again = 1;

	if (!f)
		return "";
	while (again) {
		again = 0;
		for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			if (has_prefix(f, prefixes[i]) && f[strlen(prefixes[i])]) {
				f += strlen(prefixes[i]);
				again = 1;
			}
		}
	}
	snprintf(buf, len, "%s", f);
	/* a parameter list (C++ names) is not part of the name */
	if (strchr(buf, '('))
		*strchr(buf, '(') = 0;
	return buf;
}

static int name_in(const char *f, const char *const *set)
{
	char buf[256];
	const char *p = plain_name(f, buf, sizeof(buf));

	for (; *set; set++)
		if (!strcmp(p, *set))
			return 1;
	return 0;
}

/* Functions that allocate a FILE the caller owns (and must fclose). */
static const char *const file_openers[] = {
	"fopen", "fopen64", "fopen_internal", "fopen_maybe_mmap", "fdopen",
	"fdopen64", "popen", "tmpfile", "tmpfile64", "fopencookie",
	"fmemopen", "open_memstream", "open_wmemstream", NULL,
};

/* Buffer allocation of a stdio stream. */
static const char *const stdio_alloc[] = {
	"file_doallocate", "wfile_doallocate", "doallocbuf", "wdoallocbuf", NULL,
};

/* Functions that only ever work on stdin, stdout or stderr. */
static const char *const std_stream_only[] = {
	"printf", "vprintf", "printf_chk", "vprintf_chk", "puts", "putchar",
	"putchar_unlocked", "getchar", "getchar_unlocked", "scanf", "vscanf",
	"gets", "perror", "psignal", "psiginfo", "wprintf", "vwprintf",
	"putwchar", "getwchar", "wscanf", "vwscanf", NULL,
};

/* libc keeps what these allocate for the life of the process. */
static const char *const libc_caches[] = {
	/* time zone data */
	"tzset", "tzset_internal", "tzfile_read", "tzfile_default",
	"tzstring", "tz_convert", "localtime", "localtime64", "localtime_r",
	"localtime64_r", "gmtime", "gmtime64", "gmtime_r", "gmtime64_r",
	"mktime", "mktime64", "timelocal", "timelocal64", "ctime", "ctime64",
	"ctime_r", "ctime64_r", "asctime",
	/* static result buffers and the NSS configuration */
	"getpwnam", "getpwuid", "getpwent", "getgrnam", "getgrgid", "getgrent",
	"getspnam", "getspent", "getpwnam_r", "getpwuid_r", "getgrnam_r",
	"getgrgid_r", "getgrouplist", "initgroups", "gethostbyname",
	"gethostbyname2", "gethostbyaddr", "gethostbyname_r",
	"gethostbyname2_r", "gethostbyaddr_r", "getservbyname",
	"getservbyport", "getprotobyname", "getprotobynumber", "getnetbyname",
	"getnetbyaddr", "getlogin",
	/* locale and message catalogs */
	"setlocale", "textdomain", "bindtextdomain", "bind_textdomain_codeset",
	"gettext", "dgettext", "dcgettext", "ngettext", "dngettext",
	"dcngettext", "dcigettext",
	/* the table of exit handlers beyond the first 32 */
	"new_exitfn", "cxa_atexit", "atexit", "on_exit",
	/* libstdc++'s own buffers of the standard streams, unsynchronized */
	"std::ios_base::sync_with_stdio", NULL,
};

/* ---- matching ---------------------------------------------------------- */

struct memo {
	uint32_t stack;
	struct supp_rule *rule;
	int done;
};

struct supp_scope {
	struct suppress *s;
	struct site_ctx *c;
	const char *exe;
	int own_file_open;	/* a FILE the program opened is still open */
	struct memo *m;		/* open addressing by stack id */
	size_t mask;
};

/*
 * The runtime part of a stack: the frames from the allocator's caller up to
 * the first frame outside the C/C++ runtime.  Calls fn(ctx, frame) for each;
 * returns what fn returned when it returned non-zero, else 0.
 */
static int each_runtime_frame(struct site_ctx *c, const struct dump_stack *st,
			      int (*fn)(void *ctx, const struct sym_frame *f),
			      void *ctx)
{
	uint32_t i;
	size_t n, k;
	int rc;

	for (i = 0; st && i < st->depth; i++) {
		const struct sym_frame *fr;

		n = sym_resolve(c->sym, &st->frames[i], &fr);
		if (!fr[0].module || (!is_runtime_lib(fr[0].module) &&
				      !is_loader(fr[0].module)))
			return 0;
		for (k = 0; k < n; k++) {
			rc = fn(ctx, &fr[k]);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int fn_opens_file(void *ctx, const struct sym_frame *f)
{
	return name_in(f->function, file_openers);
}

static int fn_stdio_alloc(void *ctx, const struct sym_frame *f)
{
	return name_in(f->function, stdio_alloc);
}

/* The buffer was allocated for a standard stream for sure. */
static int fn_std_only(void *ctx, const struct sym_frame *f)
{
	/* std::cout and friends write through stdio to stdout: only those */
	if (f->module && has_prefix(base_name(f->module), "libstdc++"))
		return 1;
	return name_in(f->function, std_stream_only);
}

static int fn_libc_cache(void *ctx, const struct sym_frame *f)
{
	return f->module && !is_loader(f->module) &&
	       name_in(f->function, libc_caches);
}

static const struct sym_frame *first_frame(struct site_ctx *c,
					   const struct dump_stack *st)
{
	const struct sym_frame *fr;

	if (!st || !st->depth)
		return NULL;
	sym_resolve(c->sym, &st->frames[0], &fr);
	return fr;
}

/*
 * Runtime frames, then a loader frame: a runtime library's constructor (or
 * code it called) run by _dl_init.  Frames beyond the loader (who called
 * dlopen) do not matter: the runtime allocates this once whoever loads it.
 */
static int runtime_init(struct site_ctx *c, const struct dump_stack *st)
{
	uint32_t i;

	for (i = 0; i < st->depth; i++) {
		const struct sym_frame *fr;

		sym_resolve(c->sym, &st->frames[i], &fr);
		if (!fr[0].module)
			return 0;
		if (is_loader(fr[0].module))
			return i > 0;
		if (!is_runtime_lib(fr[0].module))
			return 0;
	}
	return 0;
}

static int builtin_match(struct supp_scope *sc, enum supp_builtin kind,
			 const struct dump_stack *st)
{
	const struct sym_frame *f0 = first_frame(sc->c, st);

	if (!f0 || !f0->module)
		return 0;
	switch (kind) {
	case SUPP_BUILTIN_LOADER:
		return is_loader(f0->module);
	case SUPP_BUILTIN_RUNTIME_INIT:
		return runtime_init(sc->c, st);
	case SUPP_BUILTIN_STD_STREAM:
		/*
		 * A live stdio buffer belongs to a FILE still open at exit:
		 * a standard stream, or one the program opened and leaked.
		 * When the program leaked no FILE, it is a standard stream's;
		 * when it did, only buffers made by functions that work on
		 * standard streams alone are known to be theirs.
		 */
		if (!each_runtime_frame(sc->c, st, fn_stdio_alloc, NULL))
			return 0;
		return !sc->own_file_open ||
		       each_runtime_frame(sc->c, st, fn_std_only, NULL);
	case SUPP_BUILTIN_LIBC_CACHE:
		return each_runtime_frame(sc->c, st, fn_libc_cache, NULL);
	case SUPP_PATTERN:
		break;
	}
	return 0;
}

static int pattern_match(struct supp_scope *sc, const char *pattern,
			 const struct dump_stack *st)
{
	uint32_t i;
	size_t n, k;

	for (i = 0; i < st->depth; i++) {
		const struct sym_frame *fr;

		n = sym_resolve(sc->c->sym, &st->frames[i], &fr);
		for (k = 0; k < n; k++)
			if (supp_pattern_match(pattern, fr[k].function) ||
			    supp_pattern_match(pattern, fr[k].file) ||
			    supp_pattern_match(pattern, fr[k].module))
				return 1;
	}
	return 0;
}

static struct supp_rule *match_uncached(struct supp_scope *sc, uint32_t stack)
{
	const struct dump_stack *st = dump_stack(sc->c->dump, stack);
	size_t i;

	if (!st || !st->depth)
		return NULL;
	for (i = 0; i < sc->s->n; i++) {
		struct supp_rule *r = &sc->s->rules[i];

		if (r->exe && (!sc->exe || strcmp(r->exe, sc->exe)))
			continue;
		if (r->kind == SUPP_PATTERN ? pattern_match(sc, r->pattern, st)
					    : builtin_match(sc, r->kind, st))
			return r;
	}
	return NULL;
}

struct supp_scope *supp_scope_new(struct suppress *s, struct site_ctx *c,
				  struct replay *r)
{
	struct supp_scope *sc = calloc(1, sizeof(*sc));
	struct site_stats **sites;
	size_t n, i, want = 64;

	if (!sc)
		return NULL;
	sc->s = s;
	sc->c = c;
	sc->exe = dump_process(c->dump)->exe;
	sites = replay_sites(r, &n);
	while (want < 2 * n)
		want *= 2;
	sc->m = calloc(want, sizeof(*sc->m));
	if (!sc->m) {
		free(sc);
		return NULL;
	}
	sc->mask = want - 1;
	for (i = 0; i < n && !sc->own_file_open; i++)
		if (sites[i]->live_blocks)
			sc->own_file_open = each_runtime_frame(
				c, dump_stack(c->dump, sites[i]->stack),
				fn_opens_file, NULL);
	return sc;
}

void supp_scope_free(struct supp_scope *sc)
{
	if (!sc)
		return;
	free(sc->m);
	free(sc);
}

struct supp_rule *supp_scope_match(struct supp_scope *sc, uint32_t stack)
{
	size_t i, probes;

	for (i = stack & sc->mask, probes = 0; probes <= sc->mask;
	     i = (i + 1) & sc->mask, probes++) {
		if (sc->m[i].done && sc->m[i].stack == stack)
			return sc->m[i].rule;
		if (!sc->m[i].done) {
			sc->m[i].stack = stack;
			sc->m[i].rule = match_uncached(sc, stack);
			sc->m[i].done = 1;
			return sc->m[i].rule;
		}
	}
	/* the table is full (more stacks than sites were counted): no cache */
	return match_uncached(sc, stack);
}

void supp_count(struct supp_rule *r, const char *label, uint64_t blocks,
		uint64_t bytes)
{
	size_t k;

	r->sites++;
	r->blocks += blocks;
	r->bytes += bytes;
	for (k = 0; k < r->nexamples; k++)
		if (!strcmp(r->examples[k], label))
			return;
	if (r->nexamples < SUPP_EXAMPLES) {
		r->examples[r->nexamples] = strdup(label);
		if (r->examples[r->nexamples])
			r->nexamples++;
	}
}

void supp_reset_counts(struct suppress *s)
{
	size_t i, k;

	for (i = 0; i < s->n; i++) {
		struct supp_rule *r = &s->rules[i];

		for (k = 0; k < r->nexamples; k++)
			free(r->examples[k]);
		r->nexamples = 0;
		r->sites = r->blocks = r->bytes = 0;
	}
}

/* ---- printing ---------------------------------------------------------- */

static const char *rule_name(const struct supp_rule *r, char *buf, size_t len)
{
	static const char *const names[] = {
		[SUPP_BUILTIN_LOADER] = "dynamic loader",
		[SUPP_BUILTIN_RUNTIME_INIT] = "runtime library initialization",
		[SUPP_BUILTIN_STD_STREAM] = "standard stream buffers",
		[SUPP_BUILTIN_LIBC_CACHE] = "runtime caches",
	};

	if (r->kind == SUPP_PATTERN)
		snprintf(buf, len, "leak:%s", r->pattern);
	else
		snprintf(buf, len, "built-in: %s", names[r->kind]);
	return buf;
}

void supp_print(const struct suppress *s, FILE *out)
{
	char name[1100];
	size_t i, k;

	if (!s->n) {
		fprintf(out, "no suppressions\n");
		return;
	}
	fprintf(out, "suppressions:\n");
	for (i = 0; i < s->n; i++) {
		const struct supp_rule *r = &s->rules[i];

		fprintf(out, "  %s  (%s)\n", rule_name(r, name, sizeof(name)),
			r->origin);
		if (r->what)
			fprintf(out, "      %s\n", r->what);
		if (!r->sites) {
			fprintf(out, "      matched nothing\n");
			continue;
		}
		fprintf(out, "      matched %s in %s block%s from %s site%s:\n",
			cli_bytes(r->bytes), cli_count(r->blocks),
			r->blocks == 1 ? "" : "s", cli_count(r->sites),
			r->sites == 1 ? "" : "s");
		for (k = 0; k < r->nexamples; k++)
			fprintf(out, "        %s\n", r->examples[k]);
		if (r->sites > r->nexamples)
			fprintf(out, "        ... and %s more\n",
				cli_count(r->sites - r->nexamples));
	}
}

void supp_json(const struct suppress *s, struct json *j)
{
	char name[1100];
	size_t i, k;

	json_arr_begin(j);
	for (i = 0; i < s->n; i++) {
		const struct supp_rule *r = &s->rules[i];

		json_obj_begin(j);
		json_kv_str(j, "rule", rule_name(r, name, sizeof(name)));
		json_kv_str(j, "pattern", r->pattern);
		json_kv_str(j, "origin", r->origin);
		json_key(j, "builtin");
		json_bool(j, r->kind != SUPP_PATTERN);
		json_kv_u64(j, "sites", r->sites);
		json_kv_u64(j, "blocks", r->blocks);
		json_kv_u64(j, "suppressed_bytes", r->bytes);
		json_key(j, "examples");
		json_arr_begin(j);
		for (k = 0; k < r->nexamples; k++)
			json_str(j, r->examples[k]);
		json_arr_end(j);
		json_obj_end(j);
	}
	json_arr_end(j);
}
