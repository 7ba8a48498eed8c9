/* test_json.c - the JSON writer's escaping, commas, nesting and pretty layout */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../analyzer/json.h"

/*
 * Expected outputs are written out by hand from RFC 8259 and Unicode's
 * "maximal subpart" rule for U+FFFD; a larger document is also fed to
 * Python's json module, an independent parser.
 */

static int passed, failed, skipped;

static char *buf;
static size_t buflen;
static FILE *mem;
static struct json j;

static void start(int pretty)
{
	mem = open_memstream(&buf, &buflen);
	json_init(&j, mem, pretty);
}

static void expect(const char *want, const char *what, int line)
{
	fclose(mem);
	if (strcmp(buf, want) == 0) {
		passed++;
	} else {
		failed++;
		fprintf(stderr, "FAIL %s:%d: %s\n  got:  [%s]\n  want: [%s]\n",
			__FILE__, line, what, buf, want);
	}
	free(buf);
	buf = NULL;
}

#define EXPECT(want, what) expect(want, what, __LINE__)

static void one_string(const char *in, const char *want, int line)
{
	start(0);
	json_str(&j, in);
	expect(want, in ? in : "NULL", line);
}

#define STR(in, want) one_string(in, want, __LINE__)

static void test_strings(void)
{
	STR("plain", "\"plain\"");
	STR("", "\"\"");
	STR(NULL, "null");
	STR("a\"b", "\"a\\\"b\"");
	STR("a\\b", "\"a\\\\b\"");
	STR("/", "\"/\"");
	STR("\n\t\r\b\f", "\"\\u000a\\u0009\\u000d\\u0008\\u000c\"");
	STR("\x01\x1f", "\"\\u0001\\u001f\"");
	STR("\x7f", "\"\x7f\"");
	/* Well-formed UTF-8 passes through: 2, 3 and 4 byte forms. */
	STR("caf\xc3\xa9", "\"caf\xc3\xa9\"");
	STR("\xe2\x82\xac", "\"\xe2\x82\xac\"");
	STR("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"");
	STR("\xef\xbf\xbf", "\"\xef\xbf\xbf\"");
	STR("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");
	/* Ill-formed: one U+FFFD per maximal subpart. */
	STR("a\xff" "b", "\"a\xef\xbf\xbd" "b\"");
	STR("\x80", "\"\xef\xbf\xbd\"");
	STR("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"");	/* overlong */
	STR("\xc3", "\"\xef\xbf\xbd\"");			/* cut short at end */
	STR("\xe2\x82" "A", "\"\xef\xbf\xbd" "A\"");		/* cut short mid-string */
	STR("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");	/* surrogate */
	STR("\xe0\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");	/* overlong */
	STR("\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");	/* > U+10FFFF */
	STR("\xf0\x9f\x98", "\"\xef\xbf\xbd\"");
	STR("\xf5\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
	STR("x\"\xff\n", "\"x\\\"\xef\xbf\xbd\\u000a\"");
}

static void test_numbers(void)
{
	start(0);
	json_arr_begin(&j);
	json_u64(&j, 0);
	json_u64(&j, UINT64_MAX);
	json_i64(&j, INT64_MIN);
	json_i64(&j, -1);
	json_double(&j, 0.5);
	json_double(&j, 0.1);
	json_double(&j, 1e300);
	json_double(&j, -3.0);
	json_double(&j, NAN);
	json_double(&j, INFINITY);
	json_double(&j, 1.0 / 3.0);
	json_bool(&j, 1);
	json_bool(&j, 0);
	json_null(&j);
	json_arr_end(&j);
	EXPECT("[0,18446744073709551615,-9223372036854775808,-1,0.5,0.1,1e+300,-3,"
	       "null,null,0.33333333333333331,true,false,null]", "numbers");
}

static void test_structure(void)
{
	start(0);
	json_obj_begin(&j);
	json_obj_end(&j);
	EXPECT("{}", "empty object");

	start(0);
	json_arr_begin(&j);
	json_arr_end(&j);
	json_finish(&j);
	EXPECT("[]\n", "empty array, finished");

	start(0);
	json_obj_begin(&j);
	json_kv_u64(&j, "a", 1);
	json_kv_i64(&j, "b", -2);
	json_kv_str(&j, "c", "x");
	json_kv_str(&j, "d", NULL);
	json_kv_double(&j, "e", 2.5);
	json_key(&j, "f");
	json_arr_begin(&j);
	json_obj_begin(&j);
	json_obj_end(&j);
	json_arr_begin(&j);
	json_arr_end(&j);
	json_obj_begin(&j);
	json_kv_u64(&j, "g", 3);
	json_obj_end(&j);
	json_u64(&j, 4);
	json_arr_end(&j);
	json_key(&j, "h\"\n");
	json_obj_begin(&j);
	json_obj_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	EXPECT("{\"a\":1,\"b\":-2,\"c\":\"x\",\"d\":null,\"e\":2.5,"
	       "\"f\":[{},[],{\"g\":3},4],\"h\\\"\\u000a\":{}}\n", "nested compact");

	/* Pretty: 2-space indent, ": " after keys, empty containers stay {} []. */
	start(1);
	json_obj_begin(&j);
	json_kv_u64(&j, "a", 1);
	json_key(&j, "list");
	json_arr_begin(&j);
	json_u64(&j, 1);
	json_obj_begin(&j);
	json_kv_str(&j, "k", "v");
	json_key(&j, "empty");
	json_arr_begin(&j);
	json_arr_end(&j);
	json_obj_end(&j);
	json_arr_end(&j);
	json_key(&j, "o");
	json_obj_begin(&j);
	json_obj_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	EXPECT("{\n"
	       "  \"a\": 1,\n"
	       "  \"list\": [\n"
	       "    1,\n"
	       "    {\n"
	       "      \"k\": \"v\",\n"
	       "      \"empty\": []\n"
	       "    }\n"
	       "  ],\n"
	       "  \"o\": {}\n"
	       "}\n", "pretty");

	/* json_finish closes what was left open, and a dangling key gets null. */
	start(0);
	json_obj_begin(&j);
	json_key(&j, "a");
	json_arr_begin(&j);
	json_obj_begin(&j);
	json_key(&j, "b");
	json_finish(&j);
	EXPECT("{\"a\":[{\"b\":null}]}\n", "finish closes");

	/* Deeper than JSON_MAX_DEPTH: brackets still balance. */
	start(0);
	for (int i = 0; i < JSON_MAX_DEPTH + 6; i++)
		json_arr_begin(&j);
	for (int i = 0; i < JSON_MAX_DEPTH + 6; i++)
		json_arr_end(&j);
	fclose(mem);
	{
		size_t n = JSON_MAX_DEPTH + 6;
		int ok = strlen(buf) == 2 * n;

		for (size_t i = 0; ok && i < n; i++)
			ok = buf[i] == '[' && buf[n + i] == ']';
		if (ok) {
			passed++;
		} else {
			failed++;
			fprintf(stderr, "FAIL deep nesting: %s\n", buf);
		}
		free(buf);
		buf = NULL;
	}
}

/* Every byte value in keys and strings, in both modes, through Python. */
static void test_python(int pretty)
{
	char cmd[] = "python3 -c 'import json,sys; d=json.load(sys.stdin); "
		     "assert d[\"n\"]==18446744073709551615; "
		     "assert d[\"s\"][\"\\u0001\\\"\\\\\"]==\"caf\\u00e9\\ufffd\"; "
		     "assert len(d[\"all\"])==255; "
		     "assert d[\"all\"][9]==\"\\n\" and d[\"all\"][33]==\"\\\"\"; "
		     "assert d[\"all\"][199]==\"\\ufffd\"; "
		     "assert d[\"nest\"]==[[[]],{},[{\"x\":None}]]'";
	FILE *p;
	int st;

	if (system("python3 -c 'import json' 2>/dev/null") != 0) {
		skipped++;
		return;
	}
	p = popen(cmd, "w");
	if (!p) {
		failed++;
		return;
	}
	json_init(&j, p, pretty);
	json_obj_begin(&j);
	json_kv_u64(&j, "n", UINT64_MAX);
	json_key(&j, "s");
	json_obj_begin(&j);
	json_kv_str(&j, "\x01\"\\", "caf\xc3\xa9\xc3");
	json_obj_end(&j);
	json_key(&j, "all");
	json_arr_begin(&j);
	for (int c = 1; c < 256; c++) {
		char s[2] = { (char)c, 0 };

		json_str(&j, s);
	}
	json_arr_end(&j);
	json_key(&j, "nest");
	json_arr_begin(&j);
	json_arr_begin(&j);
	json_arr_begin(&j);
	json_arr_end(&j);
	json_arr_end(&j);
	json_obj_begin(&j);
	json_obj_end(&j);
	json_arr_begin(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "x", NULL);
	json_obj_end(&j);
	json_arr_end(&j);
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
	st = pclose(p);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		passed++;
	} else {
		failed++;
		fprintf(stderr, "FAIL python3 rejected the %s document\n",
			pretty ? "pretty" : "compact");
	}
}

int main(void)
{
	test_strings();
	test_numbers();
	test_structure();
	test_python(0);
	test_python(1);
	if (skipped)
		printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	else
		printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
