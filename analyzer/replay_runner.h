/* replay_runner.h - finds allocator libraries and runs heaptrail-replay-child on each */
#ifndef HT_REPLAY_RUNNER_H
#define HT_REPLAY_RUNNER_H

#include <limits.h>
#include <stdint.h>
#include <stddef.h>

/*
 * An allocator to replay on: glibc's malloc (no library), or a library that
 * replaces malloc when preloaded.  Known names: glibc (also libc, system,
 * ptmalloc), jemalloc, tcmalloc, mimalloc; anything else is a path or a
 * file name looked up in the system's library directories.
 */
struct replay_alloc {
	char name[64];		/* "glibc", "jemalloc", or the library's file name */
	char lib[PATH_MAX];	/* absolute path, "" for glibc */
	/* results of replay_alloc_run() */
	int ok;			/* 1 when the replay ran to the end on this allocator */
	char error[512];	/* why not */
	char malloc_from[PATH_MAX];
	uint64_t baseline_rss, peak_rss, final_rss, ops, failed;
};

/* Fills 'a' for 'spec': 0, or -1 after printing why (unknown name, missing file). */
int replay_alloc_resolve(const char *spec, struct replay_alloc *a);
/*
 * glibc, then each known allocator installed on this machine; returns how
 * many were filled in (at most 'max').
 */
size_t replay_alloc_defaults(struct replay_alloc *a, size_t max);

/*
 * heaptrail-replay-child: $HEAPTRAIL_REPLAY_CHILD, next to the heaptrail
 * executable, or in ../lib/heaptrail/.  0, or -1 after printing why.
 */
int replay_child_find(char *out, size_t len);

/*
 * Runs 'child' on 'ops' with a's library preloaded (and no heaptrail shim),
 * and reads its figures into 'a'.  0 when it ran (a->ok says whether it
 * succeeded, a->error why not), -1 when it could not be started (printed).
 */
int replay_alloc_run(const char *child, const char *ops, struct replay_alloc *a);

#endif
