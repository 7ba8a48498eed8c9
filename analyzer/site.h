/* site.h - prints an allocation site (a symbolized stack) as text or JSON */
#ifndef HT_SITE_H
#define HT_SITE_H

#include <stdint.h>
#include <stdio.h>

#include "dump.h"
#include "json.h"
#include "symbolize.h"

/*
 * A site is a stack id.  Its "top frame" is the first frame, inline frames
 * expanded, that lies outside the C/C++ runtime (libc, libstdc++, libgcc_s,
 * the dynamic loader) and outside heaptrail.h's inline wrappers, or the
 * first frame when all of them do: for a block from strdup() that is
 * strdup's caller, for a pool block the caller of heaptrail_pool_alloc().
 *
 * JSON contract (docs/json.md): site_json_fields() writes, into the object
 * the caller opened, "function", "file", "line", "module" of the top frame
 * and "stack": an array of {"function","file","line","module","address"}
 * objects, innermost first.  Unknown values are null.
 */

struct site_ctx {
	const struct dump *dump;
	struct symbolizer *sym;
};

void site_json_fields(struct json *j, struct site_ctx *c, uint32_t stack);
/*
 * Its parts, for sites whose frames are kept elsewhere (gate.h): the top
 * frame's four fields (all null for no frame), and one object of "stack".
 */
void site_json_top(struct json *j, const struct sym_frame *top);
void site_json_frame(struct json *j, const struct sym_frame *f);

/*
 * Text: the top frame as "function (file:line)" or "module+0xoff", then up
 * to 'frames' further frames on their own lines, each indented by 'indent'
 * spaces (frames = 0: only the top frame).
 */
void site_print(FILE *out, struct site_ctx *c, uint32_t stack, int indent,
		int frames);

/* The top frame alone, e.g. for a one-line table row: "leak_here (t.c:12)". */
const char *site_label(struct site_ctx *c, uint32_t stack, char *buf,
		       size_t len);

/* The symbolized top frame, or NULL for an empty stack. */
const struct sym_frame *site_top_frame(struct site_ctx *c, uint32_t stack);

#endif
