/* json.c - a small streaming JSON writer with correct escaping */
#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/*
 * The writer keeps two bits per open container in need_comma[]: whether it
 * already holds an element (so the next one needs a comma, and a pretty
 * close needs a newline), and whether it is an array (so json_finish() can
 * close what a caller left open).  Containers nested deeper than JSON_MAX_DEPTH are still written
 * correctly as far as brackets go; only their comma bookkeeping shares the
 * deepest slot, which no caller of ours comes near.
 */

enum { HAS_ITEMS = 1, IS_ARRAY = 2 };

static int slot(int depth)
{
	if (depth < 0)
		return 0;
	return depth < JSON_MAX_DEPTH ? depth : JSON_MAX_DEPTH - 1;
}

static void newline_indent(struct json *j, int depth)
{
	fputc('\n', j->out);
	for (int i = 0; i < depth; i++)
		fputs("  ", j->out);
}

/* Comma, newline and indent before a key or a value that is not after a key. */
static void before_item(struct json *j)
{
	if (j->after_key) {
		j->after_key = 0;
		return;
	}
	if (j->depth > 0) {
		int s = slot(j->depth);

		if (j->need_comma[s] & HAS_ITEMS)
			fputc(',', j->out);
		if (j->pretty)
			newline_indent(j, j->depth);
		j->need_comma[s] |= HAS_ITEMS;
	}
}

void json_init(struct json *j, FILE *out, int pretty)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
	j->pretty = pretty ? 1 : 0;
}

static void open_container(struct json *j, int c)
{
	before_item(j);
	fputc(c, j->out);
	j->depth++;
	j->need_comma[slot(j->depth)] = c == '[' ? IS_ARRAY : 0;
}

static void close_container(struct json *j, int c)
{
	int had_items;

	if (j->depth <= 0)
		return;
	had_items = j->need_comma[slot(j->depth)] & HAS_ITEMS;
	j->depth--;
	if (j->pretty && had_items)
		newline_indent(j, j->depth);
	fputc(c, j->out);
	j->after_key = 0;
}

void json_obj_begin(struct json *j)
{
	open_container(j, '{');
}

void json_obj_end(struct json *j)
{
	close_container(j, '}');
}

void json_arr_begin(struct json *j)
{
	open_container(j, '[');
}

void json_arr_end(struct json *j)
{
	close_container(j, ']');
}

/*
 * Length of the well-formed UTF-8 sequence at s (1..4), or 0 when the bytes
 * at s do not start one.  '*bad' is then the length of the maximal ill-formed
 * subpart to replace by one U+FFFD (Unicode 15, section 3.9, the practice
 * Python's decoder follows too).
 */
static size_t utf8_seq(const unsigned char *s, size_t avail, size_t *bad)
{
	unsigned char c = s[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;	/* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f;	/* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;	/* nothing above U+10FFFF */
	} else {
		*bad = 1;
		return 0;
	}
	for (size_t i = 1; i < need; i++) {
		unsigned char b = i < avail ? s[i] : 0;
		unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xbf;

		if (i >= avail || b < l || b > h) {
			*bad = i;
			return 0;
		}
	}
	return need;
}

static void write_string(struct json *j, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), i = 0, run = 0;
	FILE *o = j->out;

	fputc('"', o);
	while (i < n) {
		unsigned char c = s[i];
		size_t len, bad = 0;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			i++;
			continue;
		}
		len = c < 0x80 ? 1 : utf8_seq(s + i, n - i, &bad);
		if (len > 1) {
			i += len;	/* well-formed: copied verbatim */
			continue;
		}
		/* Flush the clean run before the byte that needs rewriting. */
		fwrite(s + run, 1, i - run, o);
		if (c == '"') {
			fputs("\\\"", o);
		} else if (c == '\\') {
			fputs("\\\\", o);
		} else if (c < 0x20) {
			fprintf(o, "\\u%04x", c);
		} else {
			fputs("\xef\xbf\xbd", o);	/* U+FFFD */
			i += bad;
			run = i;
			continue;
		}
		i++;
		run = i;
	}
	fwrite(s + run, 1, i - run, o);
	fputc('"', o);
}

void json_key(struct json *j, const char *key)
{
	before_item(j);
	write_string(j, key ? key : "");
	fputs(j->pretty ? ": " : ":", j->out);
	j->after_key = 1;
}

void json_str(struct json *j, const char *s)
{
	if (!s) {
		json_null(j);
		return;
	}
	before_item(j);
	write_string(j, s);
}

void json_u64(struct json *j, uint64_t v)
{
	before_item(j);
	fprintf(j->out, "%" PRIu64, v);
}

void json_i64(struct json *j, int64_t v)
{
	before_item(j);
	fprintf(j->out, "%" PRId64, v);
}

void json_double(struct json *j, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		json_null(j);
		return;
	}
	before_item(j);
	/* The shortest of %.15g / %.17g that reads back as the same double. */
	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	fputs(buf, j->out);
}

void json_bool(struct json *j, int v)
{
	before_item(j);
	fputs(v ? "true" : "false", j->out);
}

void json_null(struct json *j)
{
	before_item(j);
	fputs("null", j->out);
}

void json_finish(struct json *j)
{
	if (j->after_key)
		json_null(j);
	while (j->depth > 0) {
		/* An unbalanced caller still gets a parseable document. */
		int s = slot(j->depth);

		close_container(j, j->need_comma[s] & IS_ARRAY ? ']' : '}');
	}
	fputc('\n', j->out);
	fflush(j->out);
}

void json_kv_str(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	json_str(j, s);
}

void json_kv_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	json_u64(j, v);
}

void json_kv_i64(struct json *j, const char *key, int64_t v)
{
	json_key(j, key);
	json_i64(j, v);
}

void json_kv_double(struct json *j, const char *key, double v)
{
	json_key(j, key);
	json_double(j, v);
}
