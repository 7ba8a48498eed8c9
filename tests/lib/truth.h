/* truth.h - the ground truth a test target keeps about its own heap use */
#ifndef TRUTH_H
#define TRUTH_H

/*
 * A target program wraps each allocation it makes on purpose in T_MALLOC and
 * friends.  The wrappers count, per site (function and __LINE__ of the call),
 * the allocations, the live bytes and blocks, and for the whole program the
 * totals and the peak of live bytes.  truth_write() appends one JSON line
 * with all of it to the file named by $TRUTH_OUT (nothing when unset):
 *
 *   {"pid":12,"ppid":11,"image":"leak_depths","exact_totals":true,
 *    "peak_exact":true,"allocations":9,"frees":3,"reallocs":0,
 *    "allocated_bytes":..., "leaked_bytes":...,"leaked_blocks":...,
 *    "peak_live_bytes":...,"runtime_callers":["spawn"],
 *    "facts":{"unloaded":1},
 *    "sites":[{"function":"leak_three","file":"leak_depths.c","line":42,
 *              "allocations":1,"allocated_bytes":..,"leaked_bytes":..,
 *              "leaked_blocks":..}]}
 *
 * exact_totals: every heap event of the process is the program's own, so
 * the dump's totals must equal these.  Otherwise the C/C++ runtime allocated
 * too (libstdc++'s emergency pool, thread control blocks, dlopen): the test
 * subtracts the sites whose stacks lie wholly inside the runtime or pass
 * through one of the 'runtime_callers' (the program's functions that call
 * into the runtime, e.g. the one calling pthread_create).
 * peak_exact: the program is single-threaded, so the order in which it
 * counted is the order of the events and its peak is the true peak.  With
 * threads the count lags the events, so its peak is a lower bound.
 *
 * Bookkeeping never allocates (fixed static tables, write(2), snprintf into
 * a static buffer), so it adds no event of its own to the dump.  It is
 * thread-safe.  Track after the allocation returned and untrack before the
 * block is freed: then the counted live bytes never exceed the real ones.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Count block 'p' of 'size' bytes made at function:line; returns p. */
void *truth_track(void *p, size_t size, const char *function, int line);
/* Same, naming the source file (for code from another file or library). */
void *truth_track_in(void *p, size_t size, const char *function,
		     const char *file, int line);
/* Count the release of a tracked block (before it is freed); NULL ignored. */
void truth_untrack(void *p);
/* truth_untrack(p), then free(p). */
void truth_free(void *p);
/*
 * After r = realloc(old, size): count what realloc did; returns r.  'old'
 * is passed as an integer, taken before the call (the pointer itself must
 * not be used after realloc).
 */
void *truth_realloc_in(uintptr_t old, void *r, size_t size,
		       const char *function, const char *file, int line);

/* Totals are not exact (see above); name the program's runtime callers. */
void truth_runtime_caller(const char *function);
/* Defaults: exact_totals 1, peak_exact 1. */
void truth_set_exact(int exact_totals, int peak_exact);
/* An integer fact for the test ("unloaded", "depth", "children"). */
void truth_fact(const char *key, long long value);
/* Forget everything counted so far (a forked child starts its own truth). */
void truth_reset(void);
/* Live bytes counted now. */
size_t truth_live_bytes(void);

/* Append the JSON line to $TRUTH_OUT; 0 or -1 (errno set). */
int truth_write(void);

/* Each expands on one line, so __LINE__ is the line of the allocating call. */
#define T_MALLOC(n) truth_track_in(malloc(n), (n), __func__, __FILE__, __LINE__)
#define T_CALLOC(k, n) \
	truth_track_in(calloc((k), (n)), (size_t)(k) * (n), __func__, __FILE__, __LINE__)
#define T_REALLOC(p, n) ({ \
	uintptr_t t_old_ = (uintptr_t)(p); \
	truth_realloc_in(t_old_, realloc((p), (n)), (n), __func__, __FILE__, __LINE__); })
/* Any other allocator call: T_TRACK(aligned_alloc(64, n), n). */
#define T_TRACK(call, n) truth_track_in((call), (n), __func__, __FILE__, __LINE__)
/* free() after untracking ('p' evaluated once). */
#define T_FREE(p) truth_free(p)

/*
 * Stop the compiler from turning a call into a jump (which would drop the
 * caller's frame from the stack): put this right after the call.
 */
#define T_NO_TAILCALL() __asm__ volatile("" ::: "memory")

/* A place to store pointers so that the compiler cannot drop allocations. */
extern void *volatile truth_sink;

#ifdef __cplusplus
}
#endif

#endif
