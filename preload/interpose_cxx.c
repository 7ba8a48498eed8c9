/* interpose_cxx.c - every C++ operator new and delete, recorded with its family */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "shim.h"

/*
 * Written in C with the Itanium C++ ABI names.  The allocation itself is the
 * real malloc (as libstdc++ does); only when it fails do we hand over to the
 * real operator, which runs the new_handler loop and throws std::bad_alloc
 * (or returns NULL for nothrow).  Its retries call malloc (or aligned_alloc)
 * through us: ht_new_pending makes the one that succeeds an event of the
 * operator, so that its delete matches.
 */

__thread struct ht_new_pending ht_new_pending __attribute__((tls_model("initial-exec")));

/*
 * The outermost operator wins: libstdc++'s new[] calls new, which comes
 * back through us.  Returns 1 when this call set the note (and must clear it).
 */
static int pending_begin(unsigned api, size_t size, size_t align)
{
	if (ht_new_pending.api)
		return 0;
	ht_new_pending.api = api;
	ht_new_pending.size = size ? size : 1;
	ht_new_pending.slack = align;	/* aligned_alloc rounds up to the alignment */
	return 1;
}

static void pending_end(int mine)
{
	if (mine)
		ht_new_pending.api = 0;
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_align_fn)(size_t, size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_align_nothrow_fn)(size_t, size_t, const void *);

static void *real_op(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	return f;
}

static void *record(unsigned api, void *p, size_t size)
{
	ht_in_shim = HT_GUARD_SHIM;
	if (p) {
		int saved = errno;
		struct ht_capture c;

		stacks_capture(&c);
		ev_alloc(api, p, size, &c);
		errno = saved;
	}
	ht_in_shim = 0;
	return p;
}

/*
 * Untraced calls (re-entry, not tracing) take the same real allocation but
 * leave the guard as it was.  Returns the block, or NULL after the fallback
 * was asked to deal with the failure (its result is then in *out).
 */
static int begin(void)
{
	int tr = ht_tracing();

	if (!ht_real.malloc)
		real_resolve();
	if (tr)
		ht_in_shim = HT_GUARD_REAL;
	return tr;
}

static void *finish(int tr, unsigned api, void *p, size_t size)
{
	if (!tr)
		return p;
	if (!ht_keep_alloc(size)) {
		ht_in_shim = 0;
		return p;
	}
	return record(api, p, size);
}

/*
 * Sampling's fast path, as in malloc: a call the countdown passes over goes
 * straight to the real allocator.  NULL when the call must take the full
 * path (sampled, or the allocation failed), with the countdown as it was
 * before the call, since that path takes it again.
 */
static inline void *sample_pass_new(size_t size)
{
	void *p;

	if (!ht_sample_pass_alloc(size))
		return NULL;	/* the countdown untouched */
	p = ht_real.malloc(size ? size : 1);
	if (HT_UNLIKELY(!p))
		ht_sample_left += (int64_t)size;	/* back to what it was: size was below it */
	return p;
}

static void *plain_new(unsigned api, size_t size, const char *fallback)
{
	void *p = sample_pass_new(size);
	int tr, mine;
	new_fn f;

	if (p)
		return p;
	tr = begin();
	p = ht_real.malloc(size ? size : 1);

	if (HT_LIKELY(p != NULL))
		return finish(tr, api, p, size);
	if (tr)
		ht_in_shim = 0;
	f = (new_fn)real_op(fallback);
	if (!f)
		return NULL;
	mine = pending_begin(api, size, 0);
	p = f(size);	/* may throw: the pending note then dies with its size */
	pending_end(mine);
	return p;
}

static void *aligned_new(unsigned api, size_t size, size_t align, const char *fallback)
{
	int tr = begin();
	void *p = NULL;
	new_align_fn f;
	int mine;

	if (HT_LIKELY(ht_real.posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
					     size ? size : 1) == 0))
		return finish(tr, api, p, size);
	if (tr)
		ht_in_shim = 0;
	f = (new_align_fn)real_op(fallback);
	if (!f)
		return NULL;
	mine = pending_begin(api, size, align);
	p = f(size, align);
	pending_end(mine);
	return p;
}

static void *nothrow_new(unsigned api, size_t size, const void *tag, const char *fallback)
{
	void *p = sample_pass_new(size);
	int tr, mine;
	new_nothrow_fn f;

	if (p)
		return p;
	tr = begin();
	p = ht_real.malloc(size ? size : 1);

	if (HT_LIKELY(p != NULL))
		return finish(tr, api, p, size);
	if (tr)
		ht_in_shim = 0;
	f = (new_nothrow_fn)real_op(fallback);
	if (!f)
		return NULL;
	mine = pending_begin(api, size, 0);
	p = f(size, tag);
	pending_end(mine);
	return p;
}

static void *aligned_nothrow_new(unsigned api, size_t size, size_t align,
				 const void *tag, const char *fallback)
{
	int tr = begin();
	void *p = NULL;
	new_align_nothrow_fn f;
	int mine;

	if (HT_LIKELY(ht_real.posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
					     size ? size : 1) == 0))
		return finish(tr, api, p, size);
	if (tr)
		ht_in_shim = 0;
	f = (new_align_nothrow_fn)real_op(fallback);
	if (!f)
		return NULL;
	mine = pending_begin(api, size, align);
	p = f(size, align, tag);
	pending_end(mine);
	return p;
}

/* delete's slow path: sampling's fast path is in each operator (DELETE) */
static __attribute__((noinline)) void op_delete(unsigned api, void *ptr)
{
	int saved;

	if (!ptr || ht_boot_owns(ptr))
		return;
	if (!ht_may_keep_free(ptr)) {
		ht_real.free(ptr);	/* the summary said maybe, the bitmap says no */
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
		ev_free(api, ptr);
		errno = saved;
	}
	ht_in_shim = HT_GUARD_REAL;
	ht_real.free(ptr);
	ht_in_shim = 0;
}

/*
 * As malloc and free (interpose.c): the operators keep no frame of their
 * own, and reach their slow paths by tail calls (a frame-pointer walk from
 * there finds the program's caller).  A delete of a block sampling never
 * recorded is a test of sampling's summary and a jump to the real free.
 */
#if defined(__clang__)
#define HT_FAST
#else
#define HT_FAST __attribute__((optimize("omit-frame-pointer")))
#endif
#define DELETE(api, p)                                                  \
	do {                                                            \
		if (ht_sample_pass_free(p)) {                           \
			ht_real.free(p);                                \
			return;                                         \
		}                                                       \
		op_delete(api, p);                                      \
	} while (0)

/* operator new / new[] */
HT_EXPORT void *_Znwm(size_t n);
HT_EXPORT void *_Znam(size_t n);
HT_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *t);
HT_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *t);
HT_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a);
HT_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a);
HT_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t);
HT_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t);
/* operator delete / delete[] */
HT_EXPORT void _ZdlPv(void *p);
HT_EXPORT void _ZdaPv(void *p);
HT_EXPORT void _ZdlPvm(void *p, size_t n);
HT_EXPORT void _ZdaPvm(void *p, size_t n);
HT_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *t);
HT_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *t);
HT_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a);
HT_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a);
HT_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a);
HT_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a);
HT_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t);
HT_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t);

HT_FAST void *_Znwm(size_t n) { return plain_new(HTR_API_NEW, n, "_Znwm"); }
HT_FAST void *_Znam(size_t n) { return plain_new(HTR_API_NEW_ARRAY, n, "_Znam"); }
void *_ZnwmRKSt9nothrow_t(size_t n, const void *t)
{
	return nothrow_new(HTR_API_NEW, n, t, "_ZnwmRKSt9nothrow_t");
}
void *_ZnamRKSt9nothrow_t(size_t n, const void *t)
{
	return nothrow_new(HTR_API_NEW_ARRAY, n, t, "_ZnamRKSt9nothrow_t");
}
void *_ZnwmSt11align_val_t(size_t n, size_t a)
{
	return aligned_new(HTR_API_NEW, n, a, "_ZnwmSt11align_val_t");
}
void *_ZnamSt11align_val_t(size_t n, size_t a)
{
	return aligned_new(HTR_API_NEW_ARRAY, n, a, "_ZnamSt11align_val_t");
}
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t)
{
	return aligned_nothrow_new(HTR_API_NEW, n, a, t, "_ZnwmSt11align_val_tRKSt9nothrow_t");
}
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *t)
{
	return aligned_nothrow_new(HTR_API_NEW_ARRAY, n, a, t, "_ZnamSt11align_val_tRKSt9nothrow_t");
}

HT_FAST void _ZdlPv(void *p) { DELETE(HTR_API_DELETE, p); }
HT_FAST void _ZdaPv(void *p) { DELETE(HTR_API_DELETE_ARRAY, p); }
HT_FAST void _ZdlPvm(void *p, size_t n) { (void)n; DELETE(HTR_API_DELETE, p); }
HT_FAST void _ZdaPvm(void *p, size_t n) { (void)n; DELETE(HTR_API_DELETE_ARRAY, p); }
HT_FAST void _ZdlPvRKSt9nothrow_t(void *p, const void *t)
{
	(void)t;
	DELETE(HTR_API_DELETE, p);
}
HT_FAST void _ZdaPvRKSt9nothrow_t(void *p, const void *t)
{
	(void)t;
	DELETE(HTR_API_DELETE_ARRAY, p);
}
HT_FAST void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; DELETE(HTR_API_DELETE, p); }
HT_FAST void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; DELETE(HTR_API_DELETE_ARRAY, p); }
HT_FAST void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	(void)n;
	(void)a;
	DELETE(HTR_API_DELETE, p);
}
HT_FAST void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a)
{
	(void)n;
	(void)a;
	DELETE(HTR_API_DELETE_ARRAY, p);
}
HT_FAST void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t)
{
	(void)a;
	(void)t;
	DELETE(HTR_API_DELETE, p);
}
HT_FAST void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *t)
{
	(void)a;
	(void)t;
	DELETE(HTR_API_DELETE_ARRAY, p);
}
