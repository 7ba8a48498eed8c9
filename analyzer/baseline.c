/* baseline.c - the gate's baseline: figures of an earlier run, saved as JSON and read back */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gate.h"
#include "json.h"

/*
 * The file 'gate --save-baseline FILE' writes:
 *
 *   {"format":"heaptrail-baseline","version":1,
 *    "leaked_bytes":123,"peak_bytes":4567,"processes":2,
 *    "programs":[{"name":"test_a","runs":1,"leaked_bytes":123,"peak_bytes":4000},...]}
 *
 * Leaked bytes are after suppressions, as the gate judged them.  The reader
 * below is a small JSON parser for this shape; unknown keys are skipped, so
 * later versions may add some.
 */

#define FORMAT_NAME "heaptrail-baseline"

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

void baseline_add(struct baseline *b, const struct gate_proc *p)
{
	const char *name = p->exe && *p->exe ? base_name(p->exe) : "?";
	struct baseline_prog *g = NULL, *nv;
	size_t i;

	b->leaked_bytes += p->leaked_bytes;
	b->peak_bytes += p->peak_bytes;
	b->processes++;
	for (i = 0; i < b->nprogs; i++)
		if (!strcmp(b->progs[i].name, name))
			g = &b->progs[i];
	if (!g) {
		nv = realloc(b->progs, (b->nprogs + 1) * sizeof(*nv));
		if (!nv)
			return;
		b->progs = nv;
		g = &b->progs[b->nprogs];
		memset(g, 0, sizeof(*g));
		g->name = strdup(name);
		if (!g->name)
			return;
		b->nprogs++;
	}
	g->runs++;
	g->leaked_bytes += p->leaked_bytes;
	g->peak_bytes += p->peak_bytes;
}

void baseline_release(struct baseline *b)
{
	size_t i;

	for (i = 0; i < b->nprogs; i++)
		free(b->progs[i].name);
	free(b->progs);
	free(b->source);
	memset(b, 0, sizeof(*b));
}

int baseline_save(const struct baseline *b, const char *path)
{
	FILE *f = fopen(path, "w");
	struct json j;
	size_t i;

	if (!f) {
		cli_error("cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	json_init(&j, f, 1);
	json_obj_begin(&j);
	json_kv_str(&j, "format", FORMAT_NAME);
	json_kv_u64(&j, "version", 1);
	json_kv_u64(&j, "leaked_bytes", b->leaked_bytes);
	json_kv_u64(&j, "peak_bytes", b->peak_bytes);
	json_kv_u64(&j, "processes", b->processes);
	json_key(&j, "programs");
	json_arr_begin(&j);
	for (i = 0; i < b->nprogs; i++) {
		json_obj_begin(&j);
		json_kv_str(&j, "name", b->progs[i].name);
		json_kv_u64(&j, "runs", b->progs[i].runs);
		json_kv_u64(&j, "leaked_bytes", b->progs[i].leaked_bytes);
		json_kv_u64(&j, "peak_bytes", b->progs[i].peak_bytes);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	if (ferror(f) | (fclose(f) != 0)) {
		cli_error("cannot write '%s': %s", path, strerror(errno ? errno : EIO));
		return -1;
	}
	return 0;
}

int baseline_is_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[8];
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	/* a dump starts with its magic; anything else is taken for JSON */
	return !(n == 8 && !memcmp(buf, "HTRDUMP\n", 8));
}

/* ---- a small JSON reader ------------------------------------------------ */

struct jr {
	const char *s, *end;
	const char *err;
};

static void ws(struct jr *p)
{
	while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' ||
				 *p->s == '\r'))
		p->s++;
}

static int expect(struct jr *p, char c)
{
	ws(p);
	if (p->s < p->end && *p->s == c) {
		p->s++;
		return 0;
	}
	p->err = "malformed JSON";
	return -1;
}

/* A string into buf (escapes other than \" \\ \/ kept verbatim). */
static int str(struct jr *p, char *buf, size_t len)
{
	size_t o = 0;

	if (expect(p, '"') < 0)
		return -1;
	while (p->s < p->end && *p->s != '"') {
		char c = *p->s++;

		if (c == '\\' && p->s < p->end) {
			c = *p->s++;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'u') {
				p->s += 4;	/* names here are plain ASCII */
				c = '?';
			}
		}
		if (o + 1 < len)
			buf[o++] = c;
	}
	if (p->s >= p->end) {
		p->err = "unterminated string";
		return -1;
	}
	p->s++;
	buf[o] = 0;
	return 0;
}

static int u64(struct jr *p, uint64_t *v)
{
	char *e;

	ws(p);
	if (p->s >= p->end || *p->s < '0' || *p->s > '9') {
		p->err = "a byte count is not a non-negative integer";
		return -1;
	}
	errno = 0;
	*v = strtoull(p->s, &e, 10);
	if (errno || e > p->end) {
		p->err = "a number is out of range";
		return -1;
	}
	p->s = e;
	return 0;
}

static int skip(struct jr *p, int depth);

static int skip_container(struct jr *p, char close, int depth)
{
	char key[8];

	p->s++;
	ws(p);
	if (p->s < p->end && *p->s == close) {
		p->s++;
		return 0;
	}
	for (;;) {
		if (close == '}' && (str(p, key, sizeof(key)) < 0 || expect(p, ':') < 0))
			return -1;
		if (skip(p, depth + 1) < 0)
			return -1;
		ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		return expect(p, close);
	}
}

static int skip(struct jr *p, int depth)
{
	char tmp[8];

	ws(p);
	if (depth > 64 || p->s >= p->end) {
		p->err = "malformed JSON";
		return -1;
	}
	switch (*p->s) {
	case '{':
		return skip_container(p, '}', depth);
	case '[':
		return skip_container(p, ']', depth);
	case '"':
		return str(p, tmp, sizeof(tmp));
	default:
		while (p->s < p->end && !strchr(",}] \t\r\n", *p->s))
			p->s++;
		return 0;
	}
}

/* Walks an object, calling fn for each key with the cursor on its value. */
static int object(struct jr *p, int (*fn)(struct jr *p, const char *key, void *ctx),
		  void *ctx)
{
	char key[64];

	if (expect(p, '{') < 0)
		return -1;
	ws(p);
	if (p->s < p->end && *p->s == '}') {
		p->s++;
		return 0;
	}
	for (;;) {
		if (str(p, key, sizeof(key)) < 0 || expect(p, ':') < 0 ||
		    fn(p, key, ctx) < 0)
			return -1;
		ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		return expect(p, '}');
	}
}

struct top_ctx {
	struct baseline *b;
	int format_ok;
	int have_leaked, have_peak;
};

static int prog_key(struct jr *p, const char *key, void *ctx)
{
	struct baseline_prog *g = ctx;
	char name[512];

	if (!strcmp(key, "name")) {
		if (str(p, name, sizeof(name)) < 0)
			return -1;
		free(g->name);
		g->name = strdup(name);
		return g->name ? 0 : -1;
	}
	if (!strcmp(key, "runs"))
		return u64(p, &g->runs);
	if (!strcmp(key, "leaked_bytes"))
		return u64(p, &g->leaked_bytes);
	if (!strcmp(key, "peak_bytes"))
		return u64(p, &g->peak_bytes);
	return skip(p, 1);
}

static int programs(struct jr *p, struct baseline *b)
{
	if (expect(p, '[') < 0)
		return -1;
	ws(p);
	if (p->s < p->end && *p->s == ']') {
		p->s++;
		return 0;
	}
	for (;;) {
		struct baseline_prog g, *nv;

		memset(&g, 0, sizeof(g));
		if (object(p, prog_key, &g) < 0) {
			free(g.name);
			return -1;
		}
		nv = realloc(b->progs, (b->nprogs + 1) * sizeof(*nv));
		if (!nv || !g.name) {
			free(g.name);
			p->err = g.name ? "out of memory" : "a program has no name";
			return -1;
		}
		b->progs = nv;
		b->progs[b->nprogs++] = g;
		ws(p);
		if (p->s < p->end && *p->s == ',') {
			p->s++;
			continue;
		}
		return expect(p, ']');
	}
}

static int top_key(struct jr *p, const char *key, void *ctx)
{
	struct top_ctx *t = ctx;
	char v[64];

	if (!strcmp(key, "format")) {
		if (str(p, v, sizeof(v)) < 0)
			return -1;
		t->format_ok = !strcmp(v, FORMAT_NAME);
		return 0;
	}
	if (!strcmp(key, "leaked_bytes")) {
		t->have_leaked = 1;
		return u64(p, &t->b->leaked_bytes);
	}
	if (!strcmp(key, "peak_bytes")) {
		t->have_peak = 1;
		return u64(p, &t->b->peak_bytes);
	}
	if (!strcmp(key, "processes"))
		return u64(p, &t->b->processes);
	if (!strcmp(key, "programs"))
		return programs(p, t->b);
	return skip(p, 1);
}

int baseline_load(struct baseline *b, const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long len = 0;
	struct jr p;
	struct top_ctx t;

	memset(b, 0, sizeof(*b));
	if (!f) {
		cli_error("cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    len > (64L << 20)) {
		cli_error("cannot read '%s': %s", path,
			  len > (64L << 20) ? "too large for a baseline" : strerror(errno));
		fclose(f);
		return -1;
	}
	text = malloc((size_t)len + 1);
	if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) {
		cli_error("cannot read '%s': %s", path, text ? strerror(errno ? errno : EIO) :
			  strerror(ENOMEM));
		free(text);
		fclose(f);
		return -1;
	}
	fclose(f);
	text[len] = 0;
	memset(&t, 0, sizeof(t));
	t.b = b;
	p.s = text;
	p.end = text + len;
	p.err = NULL;
	if (object(&p, top_key, &t) < 0 || !t.format_ok || !t.have_leaked ||
	    !t.have_peak) {
		cli_error("cannot read '%s': %s (a baseline is a dump or a file written by 'heaptrail gate --save-baseline')",
			  path, p.err ? p.err : "not a heaptrail baseline");
		free(text);
		baseline_release(b);
		return -1;
	}
	free(text);
	b->source = strdup(path);
	return 0;
}
