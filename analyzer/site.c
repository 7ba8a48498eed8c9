/* site.c - prints an allocation site (a symbolized stack) as text or JSON */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "site.h"

/*
 * Tables print the same sites over and over (every report row, every diff
 * line), so each stack's top frame and label are worked out once and kept
 * in the symbolizer's per-stack memo; later calls are one hash lookup.
 */

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

/* The C/C++ runtime: frames there are how, not where, memory was asked for. */
static int is_runtime(const char *module)
{
	static const char *const prefixes[] = {
		"libc.so", "libc-", "libstdc++.so", "libgcc_s", "ld-linux",
	};
	const char *b = base_name(module);

	if (!b)
		return 0;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(b, prefixes[i], strlen(prefixes[i])) == 0)
			return 1;
	return 0;
}

/*
 * "function (file:line)", "function (module+0xoff)", "module+0xoff" or the
 * bare address.  Text shows the source file's base name (as valgrind does);
 * JSON carries the full path.
 */
static void format_frame(char *buf, size_t len, const struct sym_frame *f)
{
	if (f->function && f->file && f->line > 0)
		snprintf(buf, len, "%s (%s:%d)", f->function, base_name(f->file),
			 f->line);
	else if (f->function && f->file)
		snprintf(buf, len, "%s (%s)", f->function, base_name(f->file));
	else if (f->function && f->module)
		snprintf(buf, len, "%s (%s+0x%" PRIx64 ")", f->function,
			 f->module, f->offset);
	else if (f->function)
		snprintf(buf, len, "%s", f->function);
	else if (f->module)
		snprintf(buf, len, "%s+0x%" PRIx64, f->module, f->offset);
	else
		snprintf(buf, len, "0x%" PRIx64, f->ip);
}

/* Applies the top-frame rule of site.h to one stack. */
static void find_top(struct site_ctx *c, const struct dump_stack *st,
		     struct sym_memo *m)
{
	const struct sym_frame *fr;
	size_t n;

	m->top = NULL;
	if (!st || st->depth == 0)
		return;
	for (uint32_t i = 0; i < st->depth; i++) {
		n = sym_resolve(c->sym, &st->frames[i], &fr);
		for (size_t k = 0; k < n; k++) {
			/* heaptrail.h's inline wrappers are not where either */
			if (!is_runtime(fr[k].module) &&
			    !(fr[k].file && !strcmp(base_name(fr[k].file), "heaptrail.h"))) {
				m->top = &fr[k];
				m->top_index = i;
				m->top_sub = (uint32_t)k;
				return;
			}
		}
	}
	/* All of it is runtime: the innermost frame is the best we have. */
	sym_resolve(c->sym, &st->frames[0], &fr);
	m->top = &fr[0];
	m->top_index = 0;
	m->top_sub = 0;
}

static void make_label(const struct sym_memo *m, char *buf, size_t len)
{
	if (m->top)
		format_frame(buf, len, m->top);
	else
		snprintf(buf, len, "(no stack)");
}

/*
 * The memo for a stack, filled on first use.  When memory for the memo
 * cannot be had, 'spare' is filled instead (uncached, still correct).
 */
static const struct sym_memo *site_memo(struct site_ctx *c, uint32_t stack,
					struct sym_memo *spare)
{
	struct sym_memo *m = sym_memo(c->sym, stack);
	char buf[1024];

	if (m && m->done)
		return m;
	if (!m) {
		memset(spare, 0, sizeof(*spare));
		m = spare;
	}
	find_top(c, dump_stack(c->dump, stack), m);
	if (m != spare) {
		make_label(m, buf, sizeof(buf));
		m->label = strdup(buf);
	}
	m->done = 1;
	return m;
}

const struct sym_frame *site_top_frame(struct site_ctx *c, uint32_t stack)
{
	struct sym_memo spare;

	return site_memo(c, stack, &spare)->top;
}

const char *site_label(struct site_ctx *c, uint32_t stack, char *buf,
		       size_t len)
{
	struct sym_memo spare;
	const struct sym_memo *m = site_memo(c, stack, &spare);

	if (len == 0)
		return buf;
	if (m->label)
		snprintf(buf, len, "%s", m->label);
	else
		make_label(m, buf, len);
	return buf;
}

/*
 * The top frame is written where the cursor stands and ends the line; the
 * callers after it follow one per line.  frames < 0 prints all of them.
 */
void site_print(FILE *out, struct site_ctx *c, uint32_t stack, int indent,
		int frames)
{
	struct sym_memo spare;
	const struct sym_memo *m = site_memo(c, stack, &spare);
	const struct dump_stack *st;
	char buf[1024];
	int printed = 0;

	site_label(c, stack, buf, sizeof(buf));
	fprintf(out, "%s\n", buf);
	if (!m->top || frames == 0)
		return;
	st = dump_stack(c->dump, stack);
	if (!st)
		return;
	for (uint32_t i = m->top_index; i < st->depth; i++) {
		const struct sym_frame *fr;
		size_t n = sym_resolve(c->sym, &st->frames[i], &fr);
		size_t k = i == m->top_index ? m->top_sub + 1 : 0;

		for (; k < n; k++) {
			if (frames > 0 && printed >= frames)
				return;
			format_frame(buf, sizeof(buf), &fr[k]);
			fprintf(out, "%*s%s\n", indent > 0 ? indent : 0, "", buf);
			printed++;
		}
	}
}

static void json_line(struct json *j, const char *key, int line)
{
	json_key(j, key);
	if (line > 0)
		json_i64(j, line);
	else
		json_null(j);
}

static void json_hex(struct json *j, const char *key, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	json_kv_str(j, key, buf);
}

void site_json_top(struct json *j, const struct sym_frame *top)
{
	json_kv_str(j, "function", top ? top->function : NULL);
	json_kv_str(j, "file", top ? top->file : NULL);
	json_line(j, "line", top ? top->line : 0);
	json_kv_str(j, "module", top ? top->module : NULL);
}

void site_json_frame(struct json *j, const struct sym_frame *f)
{
	json_obj_begin(j);
	json_kv_str(j, "function", f->function);
	json_kv_str(j, "file", f->file);
	json_line(j, "line", f->line);
	json_kv_str(j, "module", f->module);
	json_hex(j, "address", f->ip);
	json_hex(j, "offset", f->offset);
	json_key(j, "inlined");
	json_bool(j, f->inlined);
	json_obj_end(j);
}

void site_json_fields(struct json *j, struct site_ctx *c, uint32_t stack)
{
	const struct dump_stack *st = dump_stack(c->dump, stack);

	site_json_top(j, site_top_frame(c, stack));
	json_key(j, "stack");
	json_arr_begin(j);
	for (uint32_t i = 0; st && i < st->depth; i++) {
		const struct sym_frame *fr;
		size_t n = sym_resolve(c->sym, &st->frames[i], &fr);

		for (size_t k = 0; k < n; k++)
			site_json_frame(j, &fr[k]);
	}
	json_arr_end(j);
}
