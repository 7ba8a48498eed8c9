/* test_suppress.c - unit tests of the gate's pieces: suppression patterns and files, baselines, JUnit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../analyzer/gate.h"
#include "../../analyzer/junit.h"
#include "../../analyzer/suppress.h"

static int passed, failed;

#define CHECK(cond) check((cond), #cond, __LINE__)

static void check(int ok, const char *what, int line)
{
	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL line %d: %s\n", line, what);
}

/* LeakSanitizer's TemplateMatch semantics. */
static void test_patterns(void)
{
	CHECK(supp_pattern_match("foo", "my_foo_bar"));		/* anywhere */
	CHECK(!supp_pattern_match("^foo", "my_foo"));
	CHECK(supp_pattern_match("^foo", "foo_bar"));
	CHECK(supp_pattern_match("foo$", "my_foo"));
	CHECK(!supp_pattern_match("foo$", "foo_bar"));
	CHECK(supp_pattern_match("^foo$", "foo"));
	CHECK(!supp_pattern_match("^foo$", "foox"));
	CHECK(supp_pattern_match("a*c", "xxabbbcyy"));
	CHECK(!supp_pattern_match("a*c", "xxcba"));
	CHECK(supp_pattern_match("^a*c$", "abcabc"));	/* backtracks to the last c */
	CHECK(supp_pattern_match("*", "x"));
	CHECK(!supp_pattern_match("*", ""));			/* an empty name never */
	CHECK(!supp_pattern_match("foo", NULL));
	CHECK(supp_pattern_match("libfoo*.so", "/usr/lib/libfoo-2.1.so.3"));
	CHECK(supp_pattern_match("Cache::get", "Cache::get(int) const"));
	CHECK(supp_pattern_match("^ns::*::run$", "ns::Worker::run"));
	CHECK(!supp_pattern_match("^ns::*::run$", "ns::Worker::run2"));
	CHECK(supp_pattern_match("**a**", "a"));
}

static const char *tmp(const char *name)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) & 3;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 name);
	return buf[i];
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_files(void)
{
	struct suppress s;
	const char *p = tmp("ht-test-supp.txt");
	size_t i, pat = 0;

	supp_init(&s, 1);
	CHECK(s.n == 4);				/* the built-in rules */
	write_file(p, "# comment\n\n  leak:foo  \nleak:^bar$\r\n");
	CHECK(supp_load_file(&s, p) == 0);
	for (i = 0; i < s.n; i++)
		pat += s.rules[i].kind == SUPP_PATTERN;
	CHECK(pat == 2);
	CHECK(s.n == 6 && !strcmp(s.rules[4].pattern, "foo") &&
	      !strcmp(s.rules[5].pattern, "^bar$"));
	CHECK(s.n == 6 && strstr(s.rules[5].origin, ":4"));	/* file:line */
	write_file(p, "leak:ok\nrace:foo\n");
	CHECK(supp_load_file(&s, p) < 0);		/* only leak: in a file */
	write_file(p, "leak:\n");
	CHECK(supp_load_file(&s, p) < 0);		/* a pattern is wanted */
	write_file(p, "just text\n");
	CHECK(supp_load_file(&s, p) < 0);
	CHECK(supp_load_file(&s, tmp("ht-no-such-file")) < 0);
	/* the program's own: lenient, and bound to its executable */
	i = s.n;
	CHECK(supp_load_text(&s, "leak:a\nrace:b\nnonsense\nleak:c\n", "prog", "/bin/prog", 0) == 0);
	CHECK(s.n == i + 2 && !strcmp(s.rules[i].exe, "/bin/prog"));
	supp_count(&s.rules[4], "foo x.c:1", 2, 100);
	supp_count(&s.rules[4], "foo x.c:1", 1, 50);
	CHECK(s.rules[4].sites == 2 && s.rules[4].blocks == 3 && s.rules[4].bytes == 150 &&
	      s.rules[4].nexamples == 1);
	supp_reset_counts(&s);
	CHECK(s.rules[4].sites == 0 && s.rules[4].nexamples == 0);
	supp_release(&s);
	unlink(p);
}

static void test_baseline(void)
{
	struct baseline b, r;
	struct gate_proc p1, p2;
	const char *path = tmp("ht-test-baseline.json");

	memset(&b, 0, sizeof(b));
	memset(&p1, 0, sizeof(p1));
	memset(&p2, 0, sizeof(p2));
	p1.exe = "/src/build/test \"quoted\"";
	p1.leaked_bytes = 100;
	p1.peak_bytes = 1000;
	p2.exe = "/src/build/test \"quoted\"";
	p2.leaked_bytes = 18446744073709551615ull - 100;	/* 64-bit survives */
	p2.peak_bytes = 2000;
	baseline_add(&b, &p1);
	baseline_add(&b, &p2);
	CHECK(b.processes == 2 && b.nprogs == 1 && b.progs[0].runs == 2);
	CHECK(baseline_save(&b, path) == 0);
	CHECK(baseline_is_file(path) == 1);
	CHECK(baseline_load(&r, path) == 0);
	CHECK(r.leaked_bytes == 18446744073709551615ull && r.peak_bytes == 3000 &&
	      r.processes == 2);
	CHECK(r.nprogs == 1 && r.progs[0].name && !strcmp(r.progs[0].name, "test \"quoted\""));
	baseline_release(&r);
	write_file(path, "{\"format\":\"heaptrail-baseline\",\"leaked_bytes\":-1,\"peak_bytes\":0}");
	CHECK(baseline_load(&r, path) < 0);
	write_file(path, "{\"format\":\"other\",\"leaked_bytes\":1,\"peak_bytes\":0}");
	CHECK(baseline_load(&r, path) < 0);
	write_file(path, "{\"extra\":[1,{\"a\":\"}\"}],\"format\":\"heaptrail-baseline\","
			 "\"leaked_bytes\":5,\"peak_bytes\":6,\"later\":null}");
	CHECK(baseline_load(&r, path) == 0 && r.leaked_bytes == 5 && r.peak_bytes == 6);
	baseline_release(&r);
	write_file(path, "{\"format\":\"heaptrail-baseline\",\"leaked_bytes\":5");
	CHECK(baseline_load(&r, path) < 0);
	baseline_release(&b);
	unlink(path);
}

static void test_junit(void)
{
	const char *path = tmp("ht-test-junit.xml");
	struct junit *j = junit_new("suite <&> \"x\"");
	char buf[4096];
	size_t n;
	FILE *f;
	int s, c;

	CHECK(j != NULL);
	if (!j)
		return;
	s = junit_suite(j, "p\x01q \xff", "pkg", 1.5, "out\nline");
	c = junit_case(j, s, "max-leaked", "cls", 0);
	junit_fail(j, s, c, "max-leaked", "a 'msg' <b>", "line1\nline2 & more");
	c = junit_case(j, s, "max-growth", "cls", 0);
	junit_skip(j, s, c, "too short");
	junit_case(j, s, "max-peak", "cls", 0);
	CHECK(junit_write(j, path) == 0);
	junit_free(j);
	f = fopen(path, "r");
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	CHECK(strstr(buf, "name=\"suite &lt;&amp;&gt; &quot;x&quot;\"") != NULL);
	CHECK(strstr(buf, "tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\"") != NULL);
	CHECK(strstr(buf, "name=\"p?q \xef\xbf\xbd\"") != NULL);	/* control char, bad UTF-8 */
	CHECK(strstr(buf, "message=\"a &apos;msg&apos; &lt;b&gt;\"") != NULL);
	CHECK(strstr(buf, ">line1\nline2 &amp; more</failure>") != NULL);
	CHECK(strstr(buf, "<skipped message=\"too short\"/>") != NULL);
	CHECK(strstr(buf, "time=\"1.500\"") != NULL);
	unlink(path);
}

int main(void)
{
	test_patterns();
	test_files();
	test_baseline();
	test_junit();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
