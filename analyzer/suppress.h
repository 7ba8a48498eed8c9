/* suppress.h - leak suppressions: LeakSanitizer's format, the target's own, built-in */
#ifndef HT_SUPPRESS_H
#define HT_SUPPRESS_H

#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "replay.h"
#include "site.h"

/*
 * A suppression hides the leaked blocks of a site from the gate's limits.
 * Three sources, checked in this order for each leaking site:
 *
 * 1. Built-in rules for blocks the C/C++ runtime allocates once for itself
 *    (SUPP_BUILTIN_*, below).  Each is a condition on the shape of the
 *    stack, not a name pattern, so that nothing the program allocates for
 *    its own use is hidden: a block from strdup() called by the program is
 *    the program's, and stays visible.
 * 2. Patterns in LeakSanitizer's format, one per line:
 *
 *        # comment
 *        leak:PATTERN
 *
 *    PATTERN is matched against the function (demangled), the source file
 *    and the module path of every frame of the stack, inline frames
 *    included, as LeakSanitizer does.  '*' matches any run of characters;
 *    without anchors the pattern may match anywhere in the name ("leak:foo"
 *    matches "my_foo_bar"), '^' anchors it at the start and '$' at the end.
 *    From --suppressions FILE, or from the target's own
 *    __lsan_default_suppressions() (supp_load_target()), which applies to
 *    the dumps of that executable only.
 *
 * Every rule counts what it matched (sites, blocks, bytes and the first few
 * sites by name) for --print-suppressions.
 */

enum supp_builtin {
	SUPP_PATTERN = 0,	/* a leak:PATTERN line */
	/* allocated by the dynamic loader itself (LeakSanitizer's rule) */
	SUPP_BUILTIN_LOADER,
	/* by a runtime library's constructor run by the loader */
	SUPP_BUILTIN_RUNTIME_INIT,
	/* the stdio buffer of stdin, stdout or stderr */
	SUPP_BUILTIN_STD_STREAM,
	/* lifelong caches: time zone data, static result buffers, stream buffers */
	SUPP_BUILTIN_LIBC_CACHE,
};

#define SUPP_EXAMPLES 5

struct supp_rule {
	enum supp_builtin kind;
	char *pattern;		/* SUPP_PATTERN: the text after "leak:" */
	char *origin;		/* "FILE:LINE", "__lsan_default_suppressions() of 'EXE'", "built-in" */
	char *exe;		/* only for dumps of this executable; NULL: all */
	const char *what;	/* built-in: what it absorbs, for humans */
	/* matched so far, summed over every dump judged */
	uint64_t sites, blocks, bytes;
	char *examples[SUPP_EXAMPLES];	/* labels of the first sites matched */
	size_t nexamples;
};

struct suppress {
	struct supp_rule *rules;
	size_t n, cap;
	char **probed;		/* executables already asked (supp_load_target) */
	size_t nprobed;
};

/* With builtins = 1 the built-in rules come first. */
void supp_init(struct suppress *s, int builtins);
void supp_release(struct suppress *s);

/*
 * Adds the rules of a suppressions file.  0, or -1 after printing
 * "heaptrail: cannot read 'FILE': ..." or the bad line ("FILE:3: ...").
 */
int supp_load_file(struct suppress *s, const char *path);

/*
 * Adds the rules in 'text' (the LeakSanitizer format), naming 'origin' in
 * messages, valid for dumps of 'exe' only (NULL: every dump).  Lines of other
 * types (LeakSanitizer knows only leak:) are an error when 'strict', else
 * skipped with a warning.  0 or -1 (message printed).
 */
int supp_load_text(struct suppress *s, const char *text, const char *origin,
		   const char *exe, int strict);

/*
 * Adds the suppressions the executable 'exe' returns from its own
 * __lsan_default_suppressions(), once per executable.  The function is
 * found in the ELF symbol table and called in a child process stopped at
 * the program's entry point (see supp_target.c): the program's main() and
 * its own constructors never run.  0 when done or when the executable has
 * no such function; -1 when it has one that could not be called (a
 * warning was printed: the gate goes on without those suppressions).
 */
int supp_load_target(struct suppress *s, const char *exe);

/*
 * supp_target.c: the string __lsan_default_suppressions() of 'exe' returns,
 * malloc'd in *text.  1 when read, 0 when 'exe' has no such function, -1
 * with 'err' filled when it has one that could not be called.
 */
int supp_target_text(const char *exe, char **text, char *err, size_t errlen);

/*
 * Matching, per dump: a scope knows the dump's executable (for the rules of
 * its own __lsan_default_suppressions) and facts the built-in rules need
 * about the whole process (whether it left a FILE of its own open).  It
 * caches the answer per stack.  NULL when out of memory.
 */
struct supp_scope;

struct supp_scope *supp_scope_new(struct suppress *s, struct site_ctx *c,
				  struct replay *r);
void supp_scope_free(struct supp_scope *sc);
/* The rule that suppresses the leaks of 'stack', or NULL. */
struct supp_rule *supp_scope_match(struct supp_scope *sc, uint32_t stack);

/* Counts a suppressed site against its rule ('label' is copied). */
void supp_count(struct supp_rule *r, const char *label, uint64_t blocks,
		uint64_t bytes);

/* Forgets what the rules matched so far (after reading a baseline's dumps). */
void supp_reset_counts(struct suppress *s);

/* --print-suppressions: every rule, where it came from and what it matched. */
void supp_print(const struct suppress *s, FILE *out);
/* The same as a JSON array of rule objects. */
void supp_json(const struct suppress *s, struct json *j);

/* LeakSanitizer's template match ('*', '^', '$'); exposed for tests. */
int supp_pattern_match(const char *pattern, const char *str);

#endif
