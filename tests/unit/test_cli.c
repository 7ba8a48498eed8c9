/* test_cli.c - unit tests of the CLI helpers: option values, formatting, time resolution */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analyzer/cli.h"

/*
 * cli.o and replay.o are linked with a scripted reader: "marks.htr" holds
 * allocations making a peak at 3 s and markers "boot" (1 s), "tick" (2 s,
 * 4 s); any other name cannot be opened.
 */

struct dump {
	struct dump_event ev[8];
	size_t n, i;
};

/* A full (not sampled) dump, for the replay's estimates. */
const struct dump_process *dump_process(const struct dump *d)
{
	static const struct dump_process full;

	(void)d;
	return &full;
}

static struct dump scripted;

struct dump *dump_open(const char *path, char *err, size_t errlen)
{
	struct dump_event *e = scripted.ev;

	if (strcmp(path, "marks.htr")) {
		snprintf(err, errlen, "cannot read '%s': No such file or directory", path);
		return NULL;
	}
	memset(&scripted, 0, sizeof(scripted));
	e[0] = (struct dump_event){ .kind = DUMP_MARK, .time = 1000000000, .text = "boot" };
	e[1] = (struct dump_event){ .kind = DUMP_MARK, .time = 2000000000, .text = "tick" };
	e[2] = (struct dump_event){ .kind = DUMP_ALLOC, .time = 2500000000u, .ptr = 0x10,
				    .size = 100, .stack = 1, .api = HTR_API_MALLOC };
	e[3] = (struct dump_event){ .kind = DUMP_ALLOC, .time = 3000000000u, .ptr = 0x20,
				    .size = 100, .stack = 1, .api = HTR_API_MALLOC };
	e[4] = (struct dump_event){ .kind = DUMP_FREE, .time = 3500000000u, .ptr = 0x20,
				    .api = HTR_API_FREE };
	e[5] = (struct dump_event){ .kind = DUMP_MARK, .time = 4000000000u, .text = "tick" };
	e[6] = (struct dump_event){ .kind = DUMP_END, .time = 5000000000u, .end_how = HTR_END_EXIT };
	scripted.n = 7;
	return &scripted;
}

int dump_next(struct dump *d, struct dump_event *ev)
{
	if (d->i == d->n)
		return 0;
	*ev = d->ev[d->i++];
	return 1;
}

void dump_close(struct dump *d) { }
uint64_t dump_time(const struct dump *d) { return d->i ? d->ev[d->i - 1].time : 0; }
const char *dump_error(const struct dump *d) { return "scripted"; }
const char *dump_warning(const struct dump *d) { return NULL; }
const char *dump_path(const struct dump *d) { return "marks.htr"; }
uint64_t dump_offset(const struct dump *d) { return d->i; }
uint64_t dump_file_size(const struct dump *d) { return d->n; }

static int passed, failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			passed++;                                              \
		} else {                                                       \
			failed++;                                              \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int rc = cli_parse_size(s, &v);

	CHECK(rc == 0 && v == want, "'%s' -> rc %d, %" PRIu64 ", want %" PRIu64, s, rc, v, want);
}

static void size_bad(const char *s)
{
	uint64_t v;

	CHECK(cli_parse_size(s, &v) < 0, "'%s' should be refused", s);
}

static void secs_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int rc = cli_parse_seconds(s, &v);

	CHECK(rc == 0 && v == want, "'%s' -> rc %d, %" PRIu64 ", want %" PRIu64, s, rc, v, want);
}

static void str_is(const char *got, const char *want)
{
	CHECK(!strcmp(got, want), "got '%s', want '%s'", got, want);
}

static void test_parse(void)
{
	int n;

	size_ok("4096", 4096);
	size_ok("512B", 512);
	size_ok("512KiB", 512 * 1024);
	size_ok("512k", 512 * 1024);
	size_ok("10MB", 10000000);
	size_ok("10M", 10 * 1048576);
	size_ok("1.5GiB", 1610612736);
	size_ok("2T", UINT64_C(2) << 40);
	size_ok("1 MiB", 1048576);
	size_bad("");
	size_bad("-1");
	size_bad("12 parsecs");
	size_bad("MiB");
	size_bad("1e400");

	secs_ok("2.5", 2500000000u);
	secs_ok("2.5s", 2500000000u);
	secs_ok("500ms", 500000000);
	secs_ok("20us", 20000);
	secs_ok("3m", 180000000000ull);
	secs_ok("1h", 3600000000000ull);

	CHECK(cli_parse_top("0", &n) == 0 && n == 0, "top 0");
	CHECK(cli_parse_top("25", &n) == 0 && n == 25, "top 25");
	CHECK(cli_parse_top("-3", &n) < 0, "top -3");
	CHECK(cli_parse_top("x", &n) < 0, "top x");
	CHECK(cli_parse_top("5x", &n) < 0, "top 5x");
	CHECK(cli_parse_int("7", 1, 6, &n) < 0, "7 > 6");
}

static void test_format(void)
{
	char *s;
	char *argv[] = { "./srv", "--name", "a b", "it's", "", NULL };

	str_is(cli_bytes(0), "0 B");
	str_is(cli_bytes(1023), "1023 B");
	str_is(cli_bytes(1024), "1.0 KiB");
	str_is(cli_bytes(1258291), "1.2 MiB");
	str_is(cli_bytes(1048575), "1.0 MiB");
	str_is(cli_bytes(UINT64_C(3) << 30), "3.0 GiB");
	str_is(cli_count(0), "0");
	str_is(cli_count(999), "999");
	str_is(cli_count(1000), "1,000");
	str_is(cli_count(1234567), "1,234,567");
	str_is(cli_duration(0), "0 s");
	str_is(cli_duration(350000), "350 us");
	str_is(cli_duration(12300000), "12.3 ms");
	str_is(cli_duration(2500000000u), "2.50 s");
	str_is(cli_duration(192000000000ull), "3 min 12 s");
	str_is(cli_duration(7500000000000ull), "2 h 05 min");
	str_is(cli_at(1234000000), "1.234 s");
	str_is(cli_percent(1, 8), "12.5%");
	str_is(cli_percent(1, 0), "-");
	str_is(cli_signame(9), "SIGKILL");
	s = cli_join_argv(argv);
	str_is(s, "./srv --name 'a b' 'it'\\''s' ''");
	free(s);
}

static void test_times(void)
{
	struct cli_time t[6];

	CHECK(cli_parse_time("2.5", &t[0]) == 0 && t[0].kind == CLI_TIME_AT &&
	      t[0].ns == 2500000000u && t[0].resolved, "2.5");
	CHECK(cli_parse_time("peak", &t[1]) == 0 && t[1].kind == CLI_TIME_PEAK, "peak");
	CHECK(cli_parse_time("end", &t[2]) == 0 && t[2].kind == CLI_TIME_END, "end");
	CHECK(cli_parse_time("boot", &t[3]) == 0 && t[3].kind == CLI_TIME_MARK &&
	      !strcmp(t[3].mark, "boot") && t[3].occurrence == 1, "boot");
	CHECK(cli_parse_time("tick#2", &t[4]) == 0 && t[4].kind == CLI_TIME_MARK &&
	      !strcmp(t[4].mark, "tick") && t[4].occurrence == 2, "tick#2");
	CHECK(cli_parse_time("mark:2.5", &t[5]) == 0 && t[5].kind == CLI_TIME_MARK &&
	      !strcmp(t[5].mark, "2.5"), "mark:2.5");
	CHECK(cli_parse_time("", &t[5]) < 0, "empty");

	CHECK(cli_resolve_times("marks.htr", t, 5) == 0, "resolve");
	CHECK(t[0].ns == 2500000000u, "2.5 stays");
	CHECK(t[1].ns == 3000000000u, "peak at %" PRIu64, t[1].ns);
	CHECK(t[2].ns == 5000000000u, "end at %" PRIu64, t[2].ns);
	CHECK(t[3].ns == 1000000000u, "boot at %" PRIu64, t[3].ns);
	CHECK(t[4].ns == 4000000000u, "tick#2 at %" PRIu64, t[4].ns);
	str_is(cli_time_str(&t[4]), "marker 'tick' (4.000 s)");

	cli_parse_time("tick#3", &t[0]);
	CHECK(cli_resolve_times("marks.htr", t, 1) < 0, "no third tick");
	cli_parse_time("nope", &t[0]);
	CHECK(cli_resolve_times("marks.htr", t, 1) < 0, "no such marker");
	cli_parse_time("peak", &t[0]);
	CHECK(cli_resolve_times("other.htr", t, 1) < 0, "unreadable dump");
}

int main(void)
{
	test_parse();
	test_format();
	test_times();
	printf("test_cli: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
