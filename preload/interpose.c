/* interpose.c - the C allocation functions: malloc, free, calloc, realloc, ... */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

/*
 * Every entry point has the same shape: an untraced fast exit (re-entry,
 * not tracing, bootstrap), the real call, then the event with the caller's
 * stack.  The guard ht_in_shim is held across the whole event so that
 * anything our own dependencies allocate goes straight through.  errno is
 * what the real allocator left.
 */

#define CAPTURE(c) struct ht_capture c; stacks_capture(&c)

static void *untraced_alloc(size_t size, size_t align)
{
	if (!ht_real.malloc && real_resolve() != 0)
		return bootstrap_alloc(size, align);
	return NULL;
}

/*
 * With sampling, most calls are passed over.  Their path is the exported
 * function itself, kept without a frame or saved registers (HT_FAST); all
 * the rest is a slow path reached by a tail call, so that a frame-pointer
 * walk from there still finds the program's caller.
 */
#if defined(__clang__)
#define HT_FAST
#else
#define HT_FAST __attribute__((optimize("omit-frame-pointer")))
#endif

static __attribute__((noinline)) void *malloc_slow(size_t size)
{
	void *p;
	int saved;

	if (HT_UNLIKELY(!ht_tracing())) {
		p = untraced_alloc(size, 16);
		return p ? p : ht_real.malloc(size);
	}
	if (HT_UNLIKELY(!ht_keep_alloc(size)))
		return ht_real.malloc(size);	/* sampling passed it over */
	ht_in_shim = HT_GUARD_REAL;
	p = ht_real.malloc(size);
	if (HT_LIKELY(p != NULL)) {
		ht_in_shim = HT_GUARD_SHIM;
		saved = errno;	/* before unwinding: libunwind may set it */
		CAPTURE(c);
		ev_alloc(ht_api_for(HTR_API_MALLOC, size), p, size, &c);
		errno = saved;
	}
	ht_in_shim = 0;
	return p;
}

HT_EXPORT HT_FAST void *malloc(size_t size)
{
	if (ht_sample_pass_alloc(size))
		return ht_real.malloc(size);
	return malloc_slow(size);
}

static __attribute__((noinline)) void free_slow(void *ptr)
{
	int saved;

	if (!ptr || HT_UNLIKELY(ht_boot_owns(ptr)))
		return;
	if (!ht_may_keep_free(ptr)) {
		ht_real.free(ptr);	/* sampling never recorded it (the summary said maybe) */
		return;
	}
	if (HT_UNLIKELY(!ht_tracing())) {
		if (ht_real.free || real_resolve() == 0)
			ht_real.free(ptr);
		return;
	}
	ht_in_shim = HT_GUARD_SHIM;
	if (ht_keep_free(ptr)) {
		saved = errno;
		ev_free(HTR_API_FREE, ptr);
		errno = saved;
	}
	ht_in_shim = HT_GUARD_REAL;
	ht_real.free(ptr);
	ht_in_shim = 0;
}

HT_EXPORT HT_FAST void free(void *ptr)
{
	if (ht_sample_pass_free(ptr)) {
		ht_real.free(ptr);
		return;
	}
	free_slow(ptr);
}

/* calloc's fast path did not pass it over, the countdown untouched */
static __attribute__((noinline)) void *calloc_slow(size_t n, size_t size)
{
	void *p;
	int saved;

	if (HT_UNLIKELY(!ht_tracing())) {
		size_t total;

		if (__builtin_mul_overflow(n, size, &total))
			total = SIZE_MAX;
		p = untraced_alloc(total, 16);
		return p ? p : ht_real.calloc(n, size);
	}
	ht_in_shim = HT_GUARD_REAL;
	p = ht_real.calloc(n, size);
	if (HT_LIKELY(p != NULL) && ht_keep_alloc(n * size)) {
		ht_in_shim = HT_GUARD_SHIM;
		saved = errno;	/* before unwinding: libunwind may set it */
		CAPTURE(c);
		ev_alloc(HTR_API_CALLOC, p, n * size, &c);
		errno = saved;
	}
	ht_in_shim = 0;
	return p;
}

HT_EXPORT HT_FAST void *calloc(size_t n, size_t size)
{
	size_t total;

	/* an overflow is never passed over: the slow path's real calloc fails it */
	if (__builtin_mul_overflow(n, size, &total))
		total = SIZE_MAX;
	if (ht_sample_pass_alloc(total))
		return ht_real.calloc(n, size);
	return calloc_slow(n, size);
}

/* A block from the bootstrap pool moves to the real allocator. */
static void *realloc_bootstrap(void *old, size_t size)
{
	size_t room = bootstrap_room(old);
	void *p = malloc(size);

	if (p && old)
		memcpy(p, old, size < room ? size : room);
	return p;
}

/*
 * Sampling: the old block's free is recorded if it was sampled, the new
 * block is a fresh sampling decision.  The free is written before the call
 * (the address may be reused at once); a failed realloc, rare, then shows
 * the old block freed early.
 */
static void *realloc_sampled(unsigned api, void *old, size_t size,
			     void *(*real)(void *, size_t, size_t), size_t n)
{
	size_t total = api == HTR_API_REALLOCARRAY ? n * size : size;
	int saved;
	void *p;

	if (old && sample_forget(old))
		ev_free(api, old);
	ht_in_shim = HT_GUARD_REAL;
	p = real(old, n, size);
	ht_in_shim = HT_GUARD_SHIM;
	if (p && ht_keep_alloc(total)) {
		saved = errno;	/* before unwinding: libunwind may set it */
		CAPTURE(c);
		ev_alloc(api, p, total, &c);
		errno = saved;
	}
	return p;
}

static void *realloc_common(unsigned api, void *old, size_t size,
			    void *(*real)(void *, size_t, size_t), size_t n)
{
	struct ev_realloc_ctx x;
	void *p;
	int saved;

	if (HT_UNLIKELY(old && bootstrap_owns(old)))
		return realloc_bootstrap(old, api == HTR_API_REALLOCARRAY ? n * size : size);
	if (HT_UNLIKELY(!ht_tracing())) {
		if (!ht_real.realloc && real_resolve() != 0)
			return realloc_bootstrap(old, size);
		return real(old, n, size);
	}
	ht_in_shim = HT_GUARD_SHIM;
	if (ht_cfg.sample_bytes) {
		p = realloc_sampled(api, old, size, real, n);
		ht_in_shim = 0;
		return p;
	}
	if (HT_UNLIKELY(ht_reach_on))
		reach_realloc_begin(old);
	saved = errno;
	{
		CAPTURE(c);
		if (ev_realloc_begin(&x, &c) < 0) {
			errno = saved;
			ht_in_shim = HT_GUARD_REAL;
			p = real(old, n, size);
			ht_in_shim = HT_GUARD_SHIM;
			goto out;
		}
	}
	/* the program's errno for the real call: unwinding may have set it */
	errno = saved;
	ht_in_shim = HT_GUARD_REAL_BUSY;
	p = real(old, n, size);
	ht_in_shim = HT_GUARD_SHIM;
	saved = errno;
	ev_realloc_end(&x, api, old, p, api == HTR_API_REALLOCARRAY ? n * size : size);
	errno = saved;
out:
	if (HT_UNLIKELY(ht_reach_on)) {
		saved = errno;
		reach_realloc_end(old, p, api == HTR_API_REALLOCARRAY ? n * size : size);
		errno = saved;
	}
	ht_in_shim = 0;
	return p;
}

static void *call_realloc(void *old, size_t n, size_t size)
{
	(void)n;
	return ht_real.realloc(old, size);
}

static void *call_reallocarray(void *old, size_t n, size_t size)
{
	return ht_real.reallocarray(old, n, size);
}

static __attribute__((noinline)) void *realloc_slow(void *old, size_t size)
{
	return realloc_common(HTR_API_REALLOC, old, size, call_realloc, 1);
}

/*
 * Sampling passes it over: the old block never recorded, the new one not
 * picked (asked second: a call the slow path takes has the countdown as
 * it was).
 */
HT_EXPORT HT_FAST void *realloc(void *old, size_t size)
{
	if (ht_sample_pass_free(old) && ht_sample_pass_alloc(size))
		return ht_real.realloc(old, size);
	return realloc_slow(old, size);
}

HT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	if (!ht_real.reallocarray && real_resolve() != 0)
		return NULL;
	if (!ht_real.reallocarray) {
		size_t total;

		if (__builtin_mul_overflow(n, size, &total)) {
			errno = ENOMEM;
			return NULL;
		}
		return realloc(old, total);
	}
	if (n && size > SIZE_MAX / n) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_common(HTR_API_REALLOCARRAY, old, size, call_reallocarray, n);
}

/* The aligned family: same shape, different real calls. */
static void *aligned_common(unsigned api, size_t align, size_t size, void *p)
{
	ht_in_shim = HT_GUARD_SHIM;
	if (HT_LIKELY(p != NULL) && ht_keep_alloc(size)) {
		int saved = errno;	/* before unwinding */
		CAPTURE(c);

		(void)align;
		ev_alloc(ht_api_for(api, size), p, size, &c);
		errno = saved;
	}
	ht_in_shim = 0;
	return p;
}

HT_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	int ret;

	if (HT_UNLIKELY(!ht_tracing())) {
		void *p = untraced_alloc(size, align);

		if (p) {
			*out = p;
			return 0;
		}
		return ht_real.posix_memalign(out, align, size);
	}
	ht_in_shim = HT_GUARD_REAL;
	ret = ht_real.posix_memalign(out, align, size);
	aligned_common(HTR_API_POSIX_MEMALIGN, align, size, ret == 0 ? *out : NULL);
	return ret;
}

HT_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (HT_UNLIKELY(!ht_tracing())) {
		void *p = untraced_alloc(size, align);

		return p ? p : ht_real.aligned_alloc(align, size);
	}
	ht_in_shim = HT_GUARD_REAL;
	return aligned_common(HTR_API_ALIGNED_ALLOC, align, size,
			      ht_real.aligned_alloc(align, size));
}

HT_EXPORT void *memalign(size_t align, size_t size)
{
	if (HT_UNLIKELY(!ht_tracing())) {
		void *p = untraced_alloc(size, align);

		return p ? p : ht_real.memalign(align, size);
	}
	ht_in_shim = HT_GUARD_REAL;
	return aligned_common(HTR_API_MEMALIGN, align, size,
			      ht_real.memalign(align, size));
}

HT_EXPORT void *valloc(size_t size)
{
	if (HT_UNLIKELY(!ht_tracing())) {
		void *p = untraced_alloc(size, 4096);

		return p ? p : ht_real.valloc(size);
	}
	ht_in_shim = HT_GUARD_REAL;
	return aligned_common(HTR_API_VALLOC, 0, size, ht_real.valloc(size));
}

HT_EXPORT void *pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t rounded = size ? (size + page - 1) & ~(page - 1) : page;

	if (HT_UNLIKELY(!ht_tracing())) {
		void *p = untraced_alloc(rounded, page);

		return p ? p : ht_real.pvalloc(size);
	}
	ht_in_shim = HT_GUARD_REAL;
	return aligned_common(HTR_API_PVALLOC, 0, size, ht_real.pvalloc(size));
}
