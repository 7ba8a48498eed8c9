/* junit.c - writes JUnit XML reports (one suite per process, one case per check) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "junit.h"

/*
 * Everything is kept until junit_write(), because a suite's counts are
 * attributes of its opening tag and are known only once all its cases are.
 */

struct jcase {
	char *name, *classname;
	double seconds;
	int state;		/* 0 passed, 1 failed, 2 skipped */
	char *type, *message, *details;
};

struct jprop {
	char *name, *value;
};

struct jsuite {
	char *name, *package, *out;
	double seconds;
	struct jcase *cases;
	size_t ncases;
	struct jprop *props;
	size_t nprops;
};

struct junit {
	char *name;
	struct jsuite *suites;
	size_t nsuites;
	char timestamp[32];
	char hostname[256];
};

static char *dup0(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct junit *junit_new(const char *name)
{
	struct junit *j = calloc(1, sizeof(*j));
	time_t now = time(NULL);
	struct tm tm;

	if (!j)
		return NULL;
	j->name = dup0(name);
	/* xs:dateTime without a zone, as Ant and Surefire write it */
	if (localtime_r(&now, &tm))
		strftime(j->timestamp, sizeof(j->timestamp), "%Y-%m-%dT%H:%M:%S", &tm);
	if (gethostname(j->hostname, sizeof(j->hostname) - 1) < 0)
		snprintf(j->hostname, sizeof(j->hostname), "localhost");
	return j;
}

void junit_free(struct junit *j)
{
	size_t i, k;

	if (!j)
		return;
	for (i = 0; i < j->nsuites; i++) {
		struct jsuite *s = &j->suites[i];

		for (k = 0; k < s->ncases; k++) {
			free(s->cases[k].name);
			free(s->cases[k].classname);
			free(s->cases[k].type);
			free(s->cases[k].message);
			free(s->cases[k].details);
		}
		for (k = 0; k < s->nprops; k++) {
			free(s->props[k].name);
			free(s->props[k].value);
		}
		free(s->cases);
		free(s->props);
		free(s->name);
		free(s->package);
		free(s->out);
	}
	free(j->suites);
	free(j->name);
	free(j);
}

int junit_suite(struct junit *j, const char *name, const char *package,
		double seconds, const char *system_out)
{
	struct jsuite *nv = realloc(j->suites, (j->nsuites + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	j->suites = nv;
	memset(&nv[j->nsuites], 0, sizeof(*nv));
	nv[j->nsuites].name = dup0(name);
	nv[j->nsuites].package = dup0(package);
	nv[j->nsuites].out = dup0(system_out);
	nv[j->nsuites].seconds = seconds;
	return (int)j->nsuites++;
}

void junit_property(struct junit *j, int suite, const char *name,
		    const char *value)
{
	struct jsuite *s = &j->suites[suite];
	struct jprop *nv = realloc(s->props, (s->nprops + 1) * sizeof(*nv));

	if (!nv)
		return;
	s->props = nv;
	nv[s->nprops].name = dup0(name);
	nv[s->nprops].value = dup0(value ? value : "");
	s->nprops++;
}

int junit_case(struct junit *j, int suite, const char *name,
	       const char *classname, double seconds)
{
	struct jsuite *s = &j->suites[suite];
	struct jcase *nv = realloc(s->cases, (s->ncases + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	s->cases = nv;
	memset(&nv[s->ncases], 0, sizeof(*nv));
	nv[s->ncases].name = dup0(name);
	nv[s->ncases].classname = dup0(classname);
	nv[s->ncases].seconds = seconds;
	return (int)s->ncases++;
}

void junit_fail(struct junit *j, int suite, int tcase, const char *type,
		const char *message, const char *details)
{
	struct jcase *c = &j->suites[suite].cases[tcase];

	c->state = 1;
	c->type = dup0(type);
	c->message = dup0(message);
	c->details = dup0(details);
}

void junit_skip(struct junit *j, int suite, int tcase, const char *message)
{
	struct jcase *c = &j->suites[suite].cases[tcase];

	c->state = 2;
	c->message = dup0(message);
}

/* ---- writing ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))
			return 0;	/* overlong, surrogate */
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

static void esc(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	while (*p) {
		size_t n;

		switch (*p) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		case '\n':
			fputs("&#10;", f);
			break;
		case '\t':
			fputs("&#9;", f);
			break;
		case '\r':
			fputs("&#13;", f);
			break;
		default:
			if (*p < 0x20) {
				fputc('?', f);	/* XML 1.0 cannot carry it at all */
				break;
			}
			n = utf8_len(p);
			if (!n) {
				fputs("\xef\xbf\xbd", f);
				break;
			}
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		p++;
	}
}

/* Element text: the same, but newlines stay newlines. */
static void esc_text(FILE *f, const char *s)
{
	const char *nl;

	while (s && (nl = strchr(s, '\n'))) {
		char *line = strndup(s, (size_t)(nl - s));

		esc(f, line ? line : "");
		fputc('\n', f);
		free(line);
		s = nl + 1;
	}
	esc(f, s);
}

static void attr(FILE *f, const char *name, const char *value)
{
	fprintf(f, " %s=\"", name);
	esc(f, value);
	fputc('"', f);
}

static void attr_n(FILE *f, const char *name, size_t v)
{
	fprintf(f, " %s=\"%zu\"", name, v);
}

/* Surefire's time: digits, a point, digits, never an exponent. */
static void attr_time(FILE *f, double s)
{
	fprintf(f, " time=\"%.3f\"", s >= 0 && s < 1e12 ? s : 0.0);
}

int junit_write(const struct junit *j, const char *path)
{
	FILE *f = fopen(path, "w");
	size_t i, k, tests = 0, failures = 0;
	double total = 0;

	if (!f) {
		cli_error("cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	for (i = 0; i < j->nsuites; i++) {
		total += j->suites[i].seconds;
		tests += j->suites[i].ncases;
		for (k = 0; k < j->suites[i].ncases; k++)
			failures += j->suites[i].cases[k].state == 1;
	}
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", f);
	attr(f, "name", j->name);
	attr_n(f, "tests", tests);
	attr_n(f, "failures", failures);
	attr_n(f, "errors", 0);
	attr_time(f, total);
	fputs(">\n", f);
	for (i = 0; i < j->nsuites; i++) {
		const struct jsuite *s = &j->suites[i];
		size_t fails = 0, skips = 0;

		for (k = 0; k < s->ncases; k++) {
			fails += s->cases[k].state == 1;
			skips += s->cases[k].state == 2;
		}
		fputs("  <testsuite", f);
		attr(f, "name", s->name);
		attr_n(f, "tests", s->ncases);
		attr_n(f, "failures", fails);
		attr_n(f, "errors", 0);
		attr_n(f, "skipped", skips);
		attr_time(f, s->seconds);
		attr(f, "timestamp", j->timestamp);
		attr(f, "hostname", j->hostname);
		attr_n(f, "id", i);
		attr(f, "package", s->package ? s->package : "heaptrail");
		fputs(">\n", f);
		fputs("    <properties>\n", f);
		for (k = 0; k < s->nprops; k++) {
			fputs("      <property", f);
			attr(f, "name", s->props[k].name);
			attr(f, "value", s->props[k].value);
			fputs("/>\n", f);
		}
		fputs("    </properties>\n", f);
		for (k = 0; k < s->ncases; k++) {
			const struct jcase *c = &s->cases[k];

			fputs("    <testcase", f);
			attr(f, "name", c->name);
			attr(f, "classname", c->classname);
			attr_time(f, c->seconds);
			if (c->state == 0) {
				fputs("/>\n", f);
				continue;
			}
			fputs(">\n", f);
			if (c->state == 1) {
				fputs("      <failure", f);
				attr(f, "type", c->type);
				attr(f, "message", c->message);
				fputs(">", f);
				esc_text(f, c->details);
				fputs("</failure>\n", f);
			} else {
				fputs("      <skipped", f);
				attr(f, "message", c->message);
				fputs("/>\n", f);
			}
			fputs("    </testcase>\n", f);
		}
		fputs("    <system-out>", f);
		esc_text(f, s->out);
		fputs("</system-out>\n", f);
		fputs("    <system-err></system-err>\n", f);
		fputs("  </testsuite>\n", f);
	}
	fputs("</testsuites>\n", f);
	if (ferror(f) | (fclose(f) != 0)) {
		cli_error("cannot write '%s': %s", path, strerror(errno ? errno : EIO));
		return -1;
	}
	return 0;
}
