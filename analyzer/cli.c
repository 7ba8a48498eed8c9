/* cli.c - option values, messages, number formatting and progress for the verbs */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- messages --------------------------------------------------------- */

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char buf[2048];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	/* one write per message: lines from concurrent processes stay whole */
	fprintf(stderr, "heaptrail: %s%s\n", prefix, buf);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

int cli_usage(const char *verb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	if (verb)
		fprintf(stderr, "Run 'heaptrail help %s' for its usage.\n", verb);
	else
		fprintf(stderr, "Run 'heaptrail help' for the list of verbs.\n");
	return CLI_USAGE;
}

int cli_bad_option(const char *verb, int c, char **argv)
{
	extern int optind, optopt;
	const char *arg = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		return cli_usage(verb, "option '%s' needs a value", arg);
	if (optopt && optopt != '?')
		return cli_usage(verb, "unknown option '-%c'", optopt);
	return cli_usage(verb, "unknown option '%s'", arg);
}

int cli_one_dump(const char *verb, int argc, char **argv, const char *synopsis)
{
	extern int optind;

	if (optind >= argc) {
		cli_usage(verb, "which dump? usage: %s", synopsis);
		return -1;
	}
	if (optind + 1 < argc) {
		cli_usage(verb, "one dump at a time, not %d ('%s' ...)",
			  argc - optind, argv[optind + 1]);
		return -1;
	}
	return 0;
}

/* ---- option values ---------------------------------------------------- */

int cli_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int cli_parse_top(const char *s, int *out)
{
	return cli_parse_int(s, 0, 1000000000, out);
}

/* A non-negative decimal number with an optional fraction; *rest is the unit. */
static int parse_number(const char *s, double *v, const char **rest)
{
	char *end;

	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	*v = strtod(s, &end);
	if (errno || end == s || !isfinite(*v) || *v < 0)
		return -EINVAL;
	while (*end == ' ')
		end++;
	*rest = end;
	return 0;
}

struct unit {
	const char *name;
	double mult;
};

/*
 * A number and one of 'units' after it, rounded to a whole count of the
 * smallest unit.  With 'any_case' (sizes: "KiB") the unit matches in any
 * case; otherwise only as the table spells it (durations).
 */
static int parse_with_unit(const char *s, const struct unit *units, size_t n,
			   int any_case, uint64_t *out)
{
	const char *rest;
	double v;
	size_t i;

	if (parse_number(s, &v, &rest) < 0)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (any_case ? strcasecmp(rest, units[i].name) : strcmp(rest, units[i].name))
			continue;
		v *= units[i].mult;
		if (v >= 18446744073709551615.0)
			return -EINVAL;
		*out = (uint64_t)(v + 0.5);
		return 0;
	}
	return -EINVAL;
}

int cli_parse_size(const char *s, uint64_t *bytes)
{
	static const struct unit units[] = {
		{ "", 1 }, { "b", 1 }, { "byte", 1 }, { "bytes", 1 },
		{ "k", 1024.0 }, { "kib", 1024.0 }, { "kb", 1e3 },
		{ "m", 1048576.0 }, { "mib", 1048576.0 }, { "mb", 1e6 },
		{ "g", 1073741824.0 }, { "gib", 1073741824.0 }, { "gb", 1e9 },
		{ "t", 1099511627776.0 }, { "tib", 1099511627776.0 }, { "tb", 1e12 },
	};

	return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), 1, bytes);
}

int cli_parse_seconds(const char *s, uint64_t *ns)
{
	static const struct unit units[] = {
		{ "", 1e9 }, { "s", 1e9 }, { "sec", 1e9 }, { "ms", 1e6 },
		{ "us", 1e3 }, { "ns", 1 }, { "m", 60e9 }, { "min", 60e9 },
		{ "h", 3600e9 },
	};

	return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), 0, ns);
}

int cli_parse_time(const char *s, struct cli_time *t)
{
	const char *name = s;
	const char *hash;
	size_t len;

	memset(t, 0, sizeof(*t));
	if (!s || !*s)
		return -EINVAL;
	if (!strcmp(s, "start")) {
		t->kind = CLI_TIME_START;
		t->resolved = 1;
		return 0;
	}
	if (!strcmp(s, "end")) {
		t->kind = CLI_TIME_END;
		return 0;
	}
	if (!strcmp(s, "peak")) {
		t->kind = CLI_TIME_PEAK;
		return 0;
	}
	if (strncmp(s, "mark:", 5) && cli_parse_seconds(s, &t->ns) == 0) {
		t->kind = CLI_TIME_AT;
		t->resolved = 1;
		return 0;
	}
	if (!strncmp(s, "mark:", 5))
		name = s + 5;
	t->kind = CLI_TIME_MARK;
	t->occurrence = 1;
	len = strlen(name);
	hash = strrchr(name, '#');
	if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) {
		int k;

		if (cli_parse_int(hash + 1, 1, 1000000000, &k) < 0)
			return -EINVAL;
		t->occurrence = (unsigned)k;
		len = (size_t)(hash - name);
	}
	if (len == 0 || len >= sizeof(t->mark))
		return -EINVAL;
	memcpy(t->mark, name, len);
	t->mark[len] = 0;
	return 0;
}

struct mark_scan {
	struct cli_time *t;
	size_t n;
	unsigned *seen;
};

static void mark_observer(void *ctx, struct replay *r,
			  const struct dump_event *ev,
			  const struct replay_block *freed)
{
	struct mark_scan *m = ctx;
	size_t i;

	if (ev->kind != DUMP_MARK || !ev->text)
		return;
	for (i = 0; i < m->n; i++) {
		struct cli_time *t = &m->t[i];

		if (t->kind != CLI_TIME_MARK || t->resolved ||
		    strcmp(t->mark, ev->text))
			continue;
		if (++m->seen[i] == t->occurrence) {
			t->ns = ev->time;
			t->resolved = 1;
		}
	}
}

int cli_resolve_times(const char *path, struct cli_time *t, size_t n)
{
	struct mark_scan m = { t, n, NULL };
	struct replay *r = NULL;
	struct dump *d;
	size_t i;
	int need = 0, rc = -1;

	for (i = 0; i < n; i++)
		if (!t[i].resolved)
			need = 1;
	if (!need)
		return 0;
	d = cli_open_dump(path);
	if (!d)
		return -1;
	m.seen = calloc(n, sizeof(*m.seen));
	r = replay_new(d);
	if (!m.seen || !r) {
		cli_error("out of memory");
		goto out;
	}
	replay_observe(r, mark_observer, &m);
	if (cli_replay_run(r) < 0)
		goto out;
	rc = 0;
	for (i = 0; i < n; i++) {
		if (t[i].kind == CLI_TIME_PEAK) {
			t[i].ns = replay_totals(r)->peak_time;
			t[i].resolved = 1;
		} else if (t[i].kind == CLI_TIME_END) {
			t[i].ns = replay_totals(r)->duration;
			t[i].resolved = 1;
		} else if (!t[i].resolved) {
			if (m.seen[i])
				cli_error("marker '%s' occurs %u time%s in '%s', not %u",
					  t[i].mark, m.seen[i],
					  m.seen[i] == 1 ? "" : "s", path,
					  t[i].occurrence);
			else
				cli_error("no marker '%s' in '%s' (times are seconds like 2.5, 'peak', 'end' or marker names)",
					  t[i].mark, path);
			rc = -1;
		}
	}
out:
	free(m.seen);
	replay_free(r);
	dump_close(d);
	return rc;
}

/* ---- formatting ------------------------------------------------------- */

#define NBUF 16
#define BUFLEN 96

static char *next_buf(void)
{
	static char bufs[NBUF][BUFLEN];
	static unsigned k;

	return bufs[k++ % NBUF];
}

const char *cli_time_str(const struct cli_time *t)
{
	char *b = next_buf();
	char at[32];

	/* cli_at() into a local: its buffer must not be snprintf's destination */
	snprintf(at, sizeof(at), "%.3f s", (double)t->ns / 1e9);
	switch (t->kind) {
	case CLI_TIME_PEAK:
		snprintf(b, BUFLEN, "peak (%s)", at);
		break;
	case CLI_TIME_END:
		snprintf(b, BUFLEN, "end (%s)", at);
		break;
	case CLI_TIME_START:
		snprintf(b, BUFLEN, "start");
		break;
	case CLI_TIME_MARK:
		snprintf(b, BUFLEN, "marker '%.30s' (%s)", t->mark, at);
		break;
	default:
		snprintf(b, BUFLEN, "%s", at);
	}
	return b;
}

const char *cli_bytes(uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	char *b = next_buf();
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(b, BUFLEN, "%" PRIu64 " B", bytes);
		return b;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": move up before rounding */
	while (v >= 1023.95 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(b, BUFLEN, "%.1f %s", v, units[u]);
	return b;
}

const char *cli_events_were(uint64_t n)
{
	char *b = next_buf();

	snprintf(b, BUFLEN, "%s %s", cli_count(n), n == 1 ? "event was" : "events were");
	return b;
}

const char *cli_count(uint64_t n)
{
	char *b = next_buf();
	char digits[32];
	int len, i, o = 0;

	len = snprintf(digits, sizeof(digits), "%" PRIu64, n);
	for (i = 0; i < len; i++) {
		if (i && (len - i) % 3 == 0)
			b[o++] = ',';
		b[o++] = digits[i];
	}
	b[o] = 0;
	return b;
}

const char *cli_duration(uint64_t ns)
{
	char *b = next_buf();
	double s = (double)ns / 1e9;

	if (ns == 0)
		snprintf(b, BUFLEN, "0 s");
	else if (ns < 1000)
		snprintf(b, BUFLEN, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(b, BUFLEN, "%.0f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(b, BUFLEN, "%.1f ms", (double)ns / 1e6);
	else if (s < 60)
		snprintf(b, BUFLEN, "%.2f s", s);
	else if (s < 3600)
		snprintf(b, BUFLEN, "%d min %02d s", (int)(s / 60),
			 (int)s % 60);
	else
		snprintf(b, BUFLEN, "%d h %02d min", (int)(s / 3600),
			 ((int)s % 3600) / 60);
	return b;
}

const char *cli_at(uint64_t ns)
{
	char *b = next_buf();

	snprintf(b, BUFLEN, "%.3f s", (double)ns / 1e9);
	return b;
}

const char *cli_percent(uint64_t n, uint64_t total)
{
	char *b = next_buf();

	if (!total)
		snprintf(b, BUFLEN, "-");
	else
		snprintf(b, BUFLEN, "%.1f%%", (double)n * 100.0 / (double)total);
	return b;
}

const char *cli_signame(int sig)
{
	char *b = next_buf();
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev)
		snprintf(b, BUFLEN, "SIG%s", abbrev);
	else
		snprintf(b, BUFLEN, "signal %d", sig);
	return b;
}

/* ---- dumps and progress ----------------------------------------------- */

int cli_output_direct(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISREG(st.st_mode);
}

struct dump *cli_open_dump(const char *path)
{
	char err[512] = "";
	struct dump *d = dump_open(path, err, sizeof(err));

	if (d)
		return d;
	if (!err[0])
		snprintf(err, sizeof(err), "cannot read '%s': %s", path,
			 strerror(errno ? errno : EINVAL));
	if (!strncmp(err, "heaptrail: ", 11))
		fprintf(stderr, "%s\n", err);
	else
		cli_error("%s", err);
	return NULL;
}

void cli_dump_warning(struct dump *d)
{
	const char *w = dump_warning(d);

	if (!w)
		return;
	if (!strncmp(w, "heaptrail: ", 11))
		fprintf(stderr, "%s\n", w);
	else
		cli_warn("%s", w);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_begin(struct cli_progress *p, const char *what)
{
	memset(p, 0, sizeof(*p));
	p->what = what;
	p->tty = isatty(STDERR_FILENO);
	p->start = p->last = now_s();
}

void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total)
{
	double t;

	if (!p->tty)
		return;
	t = now_s();
	if (t - p->start < 1.0 || t - p->last < 0.2)
		return;
	p->last = t;
	p->shown = 1;
	if (total)
		fprintf(stderr, "\rheaptrail: reading %s ... %3.0f%% ", p->what,
			(double)done * 100.0 / (double)total);
	else
		fprintf(stderr, "\rheaptrail: reading %s ... %s ", p->what,
			cli_bytes(done));
	fflush(stderr);
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->shown)
		fprintf(stderr, "\r\033[K");	/* erase the line */
	p->shown = 0;
}

int cli_replay_run(struct replay *r)
{
	struct dump *d = replay_dump(r);
	struct cli_progress p;
	uint64_t n = 0;
	int rc;

	cli_progress_begin(&p, dump_path(d));
	for (;;) {
		rc = replay_step(r, NULL);
		if (rc <= 0)
			break;
		/* a clock read per 64 Ki events keeps this off the profile */
		if ((++n & 0xffff) == 0 && p.tty)
			cli_progress_update(&p, dump_offset(d), dump_file_size(d));
	}
	cli_progress_end(&p);
	if (rc < 0) {
		const char *why = replay_error(r);

		cli_error("cannot read '%s': %s", dump_path(d),
			  why ? why : "read error");
		return -1;
	}
	cli_dump_warning(d);
	return 0;
}

int cli_replay_dump(const char *path, struct dump **d, struct replay **r)
{
	*r = NULL;
	*d = cli_open_dump(path);
	if (!*d)
		return -1;
	*r = replay_new(*d);
	if (!*r) {
		cli_error("out of memory");
	} else if (cli_replay_run(*r) == 0) {
		return 0;
	}
	replay_free(*r);
	dump_close(*d);
	*r = NULL;
	*d = NULL;
	return -1;
}

static int shell_plain(const char *a)
{
	if (!*a)
		return 0;
	for (; *a; a++)
		if (!isalnum((unsigned char)*a) && !strchr("_./:=,+-@%^", *a))
			return 0;
	return 1;
}

char *cli_join_argv(char *const *argv)
{
	size_t len = 1, i;
	char *out, *o;

	for (i = 0; argv && argv[i]; i++)
		len += strlen(argv[i]) * 4 + 3;
	out = malloc(len);
	if (!out)
		return NULL;
	o = out;
	for (i = 0; argv && argv[i]; i++) {
		const char *a = argv[i];

		if (i)
			*o++ = ' ';
		if (shell_plain(a)) {
			o = stpcpy(o, a);
			continue;
		}
		*o++ = '\'';
		for (; *a; a++) {
			if (*a == '\'')
				o = stpcpy(o, "'\\''");
			else
				*o++ = *a;
		}
		*o++ = '\'';
	}
	*o = 0;
	return out;
}

char *cli_output_name(const char *dump, const char *ext)
{
	const char *b = strrchr(dump, '/');
	size_t n;
	char *s;

	b = b ? b + 1 : dump;
	n = strlen(b);
	if (n > 4 && !strcmp(b + n - 4, ".htr"))
		n -= 4;
	s = malloc(n + strlen(ext) + 1);
	if (s) {
		memcpy(s, b, n);
		strcpy(s + n, ext);
	}
	return s;
}
