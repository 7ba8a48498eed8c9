/* heaptrail.h - mark moments, client sessions and custom allocators for heaptrail */
#ifndef HEAPTRAIL_H
#define HEAPTRAIL_H

/*
 * Include this header and call these functions freely: when the program runs
 * under libheaptrail.so they write records into the dump; without it they do
 * nothing and cost one well-predicted branch.  No library needs to be linked.
 *
 * The first call of each looks the shim up with dlsym(); after that they
 * never allocate through malloc, never block for long and keep errno.  They
 * may be called from any thread.
 *
 * Client sessions (see docs/clients.md):
 *   heaptrail_client_begin(id, "10.0.0.7:5512");  a client connected
 *   heaptrail_client_enter(id);   this thread now works for client 'id'
 *   heaptrail_client_leave();     ... and no longer does
 *   heaptrail_client_end(id);     the client disconnected
 * Allocations a thread makes between enter and leave are attributed to the
 * client.  begin also enters the client on the calling thread.  Ids are the
 * program's own (non-zero); 0 means "no client".
 *
 * Custom allocators (see docs/fragmentation.md): report the blocks a pool or
 * arena hands out so that they are profiled like malloc's.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The entry points of libheaptrail.so are looked up once with dlsym() (not
 * weak references: those are resolved to NULL at link time in non-PIE
 * programs).  A missing shim leaves each pointer NULL and the call a no-op.
 */
void *dlsym(void *handle, const char *symbol);

/* Looks an entry point up once; NULL when the shim is not loaded. */
static inline void *heaptrail__lookup(void **slot, int *done, const char *name)
{
	if (!__atomic_load_n(done, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(slot, dlsym((void *)0, name), __ATOMIC_RELAXED);
		__atomic_store_n(done, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(slot, __ATOMIC_RELAXED);
}

/* 1 when the program is being recorded. */
static inline int heaptrail_active(void)
{
	typedef int (*fn_t)(void);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__active");

	return fn ? fn() : 0;
}

/* Write a named marker; analyses accept marker names where they take times. */
static inline void heaptrail_mark(const char *label)
{
	typedef void (*fn_t)(const char *label);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__mark");

	if (fn)
		fn(label);
}

static inline void heaptrail_client_begin(uint64_t id, const char *label)
{
	typedef void (*fn_t)(uint64_t id, const char *label);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__client_begin");

	if (fn)
		fn(id, label);
}

static inline void heaptrail_client_end(uint64_t id)
{
	typedef void (*fn_t)(uint64_t id);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__client_end");

	if (fn)
		fn(id);
}

static inline void heaptrail_client_enter(uint64_t id)
{
	typedef void (*fn_t)(uint64_t id);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__client_enter");

	if (fn)
		fn(id);
}

static inline void heaptrail_client_leave(void)
{
	typedef void (*fn_t)(void);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__client_leave");

	if (fn)
		fn();
}

static inline void heaptrail_pool_create(uint64_t pool, const char *label)
{
	typedef void (*fn_t)(uint64_t pool, const char *label);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__pool_create");

	if (fn)
		fn(pool, label);
}

static inline void heaptrail_pool_destroy(uint64_t pool)
{
	typedef void (*fn_t)(uint64_t pool);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__pool_destroy");

	if (fn)
		fn(pool);
}

static inline void heaptrail_pool_alloc(uint64_t pool, const void *ptr, size_t size)
{
	typedef void (*fn_t)(uint64_t pool, const void *ptr, size_t size);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__pool_alloc");

	if (fn)
		fn(pool, ptr, size);
}

static inline void heaptrail_pool_free(uint64_t pool, const void *ptr)
{
	typedef void (*fn_t)(uint64_t pool, const void *ptr);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__pool_free");

	if (fn)
		fn(pool, ptr);
}

/* Classify live blocks as reachable or lost now (HEAPTRAIL_REACH). */
static inline void heaptrail_reach_snapshot(void)
{
	typedef void (*fn_t)(void);
	static void *slot;
	static int done;
	fn_t fn = (fn_t)heaptrail__lookup(&slot, &done, "heaptrail__reach_snapshot");

	if (fn)
		fn();
}

#ifdef __cplusplus
}
#endif

#endif
