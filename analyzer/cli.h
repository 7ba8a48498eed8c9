/* cli.h - option values, messages, number formatting and progress for the verbs */
#ifndef HT_CLI_H
#define HT_CLI_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "dump.h"
#include "replay.h"

#ifndef HEAPTRAIL_VERSION
#define HEAPTRAIL_VERSION "0.1.0"
#endif

/* Exit codes shared by every verb. */
#define CLI_OK 0
#define CLI_USAGE 2		/* bad arguments or unreadable input */

/* ---- messages --------------------------------------------------------- */

/* "heaptrail: <message>\n" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "heaptrail: warning: <message>\n" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A usage error of 'verb': the message, then a pointer to the verb's help.
 * Returns CLI_USAGE so that a verb can `return cli_usage(...)`.
 */
int cli_usage(const char *verb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * The getopt_long() error after it returned '?' or ':' (optstring must start
 * with ':' after any '+'), as a usage error.  Returns CLI_USAGE.
 */
int cli_bad_option(const char *verb, int c, char **argv);
/*
 * After getopt: checks that exactly one operand, the dump, is left
 * (argv[optind]).  0, or -1 after the usage error that names 'synopsis'
 * ("heaptrail report DUMP [--json]") or the operand too many.
 */
int cli_one_dump(const char *verb, int argc, char **argv, const char *synopsis);

/* ---- option values ---------------------------------------------------- */
/* Each returns 0, or -EINVAL for a malformed or out-of-range value. */

/* A plain decimal integer. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_int(const char *s, int min, int max, int *out);
/* --top N: N >= 0, 0 meaning "all". */
int cli_parse_top(const char *s, int *out);
/*
 * A size: "4096", "512B", "512K", "512KiB", "10MB", "1.5GiB", "2T".  K, M, G,
 * T and their -iB forms are powers of 1024; kB, MB, GB, TB (SI) of 1000.
 */
int cli_parse_size(const char *s, uint64_t *bytes);
/* A duration in seconds: "2.5", "2.5s", "500ms", "20us", "3m"/"3min", "1h". */
int cli_parse_seconds(const char *s, uint64_t *ns);

/*
 * A moment in a dump: seconds since the start ("2.5", "500ms"), "start",
 * "end", "peak" (when live heap peaked), or the name of a marker
 * (heaptrail_mark()); "NAME#3" is its third occurrence, "mark:NAME" forces a
 * marker name that looks like a number.
 */
enum cli_time_kind { CLI_TIME_AT, CLI_TIME_START, CLI_TIME_END, CLI_TIME_PEAK,
		     CLI_TIME_MARK };

struct cli_time {
	enum cli_time_kind kind;
	uint64_t ns;		/* CLI_TIME_AT, and every kind once resolved */
	char mark[128];		/* CLI_TIME_MARK */
	unsigned occurrence;	/* CLI_TIME_MARK, 1-based */
	int resolved;
};

int cli_parse_time(const char *s, struct cli_time *t);
/*
 * Turns 'peak', 'end' and marker names into dump times with one replay pass
 * of 'path' (skipped when every time is already a number).  Prints the error
 * and returns -1 for an unreadable dump or a marker that is not in it.
 */
int cli_resolve_times(const char *path, struct cli_time *t, size_t n);
/* "2.5 s", "peak (1.20 s)", "marker 'x' (3.00 s)" for messages. */
const char *cli_time_str(const struct cli_time *t);

/* ---- formatting ------------------------------------------------------- */
/*
 * Each returns one of 16 rotating static buffers, so up to 16 may appear in
 * one printf.  Not thread-safe (the CLI is single-threaded).
 */

/* "0 B", "512 B", "1.2 KiB", "45.3 MiB", "1.5 GiB" */
const char *cli_bytes(uint64_t bytes);
/* "1,234,567" */
const char *cli_count(uint64_t n);
/* "1 event was" or "N events were" (N with separators), for "... lost". */
const char *cli_events_were(uint64_t n);
/* A length of time: "0 s", "350 us", "12.3 ms", "2.50 s", "3 min 12 s", "2 h 05 min" */
const char *cli_duration(uint64_t ns);
/* A moment in dump time, "1.234 s" (seconds with millisecond precision). */
const char *cli_at(uint64_t ns);
/* n * 100 / total as "12.5%", "-" when total is 0. */
const char *cli_percent(uint64_t n, uint64_t total);
/* "SIGKILL" or "signal 40". */
const char *cli_signame(int sig);

/* ---- dumps and progress ----------------------------------------------- */

/* Opens a dump; prints "heaptrail: cannot read ..." and returns NULL on error. */
struct dump *cli_open_dump(const char *path);
/*
 * Whether output to path goes to it directly rather than to a temporary
 * renamed over it once complete: when it exists and is not a regular file
 * (/dev/null, a pipe, a terminal), which a rename would replace.
 */
int cli_output_direct(const char *path);
/* Prints the reader's warning (a truncated dump) once per dump, if any. */
void cli_dump_warning(struct dump *d);

/*
 * A progress line on stderr: only when stderr is a terminal and only once
 * the work took more than a second; erased at the end.
 */
struct cli_progress {
	const char *what;
	double start, last;
	int tty, shown;
};

void cli_progress_begin(struct cli_progress *p, const char *what);
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(struct cli_progress *p);

/*
 * Replays the whole dump with a progress line.  On a read error prints
 * "heaptrail: cannot read '<path>': <why>" and returns -1; afterwards prints
 * the reader's warning, if any.  0 on success.
 */
int cli_replay_run(struct replay *r);
/*
 * Opens 'path' and replays it to the end (cli_replay_run): 0 with *d and *r
 * set (the caller frees both), or -1 after printing why.
 */
int cli_replay_dump(const char *path, struct dump **d, struct replay **r);

/*
 * argv as one line for a human, arguments with spaces or shell
 * metacharacters in single quotes; malloc'd (NULL when out of memory).
 */
char *cli_join_argv(char *const *argv);

/*
 * The default output file of a verb that writes one: the dump's base name
 * with '.htr' replaced by (or, for another name, followed by) 'ext', in the
 * current folder.  malloc'd; NULL when out of memory.
 */
char *cli_output_name(const char *dump, const char *ext);

#endif
