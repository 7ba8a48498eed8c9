/* json.h - a small streaming JSON writer with correct escaping */
#ifndef HT_JSON_H
#define HT_JSON_H

#include <stdint.h>
#include <stdio.h>

/*
 * Writes compact, valid JSON to a FILE.  Commas and nesting are tracked by
 * the writer; callers only say what comes next.  Strings are escaped as
 * RFC 8259 requires; invalid UTF-8 bytes are written as U+FFFD.
 *
 *   json_obj_begin(j); json_key(j, "x"); json_u64(j, 1); json_obj_end(j);
 */

#define JSON_MAX_DEPTH 64

struct json {
	FILE *out;
	int depth;
	int need_comma[JSON_MAX_DEPTH];
	int after_key;
	int pretty;
};

void json_init(struct json *j, FILE *out, int pretty);
void json_obj_begin(struct json *j);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j);
void json_arr_end(struct json *j);
void json_key(struct json *j, const char *key);
void json_str(struct json *j, const char *s);	/* NULL writes null */
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_double(struct json *j, double v);	/* non-finite writes null */
void json_bool(struct json *j, int v);
void json_null(struct json *j);
/* Ends the document with a newline. */
void json_finish(struct json *j);

/* Shorthands: key plus value. */
void json_kv_str(struct json *j, const char *key, const char *s);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_i64(struct json *j, const char *key, int64_t v);
void json_kv_double(struct json *j, const char *key, double v);

#endif
