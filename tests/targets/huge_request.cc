/* huge_request.cc - requests too large to be met, then ordinary leaks that must all be seen */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "truth.h"

/*
 * Proves (review finding S1): a request for more than the address space,
 * which the allocator refuses (malloc(PTRDIFF_MAX), malloc(SIZE_MAX), an
 * overflowing calloc, realloc to SIZE_MAX, new[] of a huge count that
 * throws bad_alloc, and 200 requests of random sizes above 2^62 with a leak
 * after each), leaves the shim's per-thread byte countdown sane: every
 * ordinary allocation after it is still recorded, so the leaks below are
 * all found.  Without sampling the countdown once wrapped around to a large
 * positive value on such a request, and every later malloc and new of the
 * thread was passed over as if sampling had skipped it.
 */

#define noinline __attribute__((noinline))

static void *volatile sink;

/* volatile sizes: the compiler must not fold the calls away */
static volatile size_t huge = PTRDIFF_MAX, all = SIZE_MAX, half = SIZE_MAX / 2 + 2;

static noinline void refused_malloc(void)
{
	sink = malloc(huge);
}

/* A request of 2^62 bytes or more, different each time (a fixed sequence). */
static noinline void refused_random(uint64_t *rng)
{
	*rng ^= *rng << 13;
	*rng ^= *rng >> 7;
	*rng ^= *rng << 17;
	sink = malloc((size_t)(*rng | (1ull << 62)));
}

static noinline void leak_between(int i)
{
	sink = T_MALLOC(40 + (size_t)(i % 9));
}

static noinline void refused_new(void)
{
	try {
		sink = new char[huge];
	} catch (const std::bad_alloc &) {
	}
}

static noinline void refused_others(void)
{
	void *p = malloc(16), *q;

	sink = malloc(all);
	sink = calloc(half, 2);		/* n * size overflows */
	q = realloc(p, all);		/* fails: p stays ours */
	free(q ? q : p);
	sink = new (std::nothrow) char[all];
}

static noinline void leak_c(int i)
{
	sink = T_MALLOC(100 + (size_t)i);
}

static noinline void leak_cxx(int i)
{
	size_t n = 50 + (size_t)i;

	sink = T_TRACK(new char[n], n);
}

static noinline void leak_after_others(int i)
{
	sink = T_MALLOC(200 + (size_t)i);
}

int main()
{
	/* libstdc++'s emergency pool and the exception objects are the runtime's */
	truth_set_exact(0, 1);
	truth_runtime_caller("refused_new");
	truth_runtime_caller("refused_others");	/* a malloc(16) given back */
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	sink = T_MALLOC(24);	/* the countdown moved before the huge requests */
	/* whatever the countdown was, some of these made it wrap (before the fix) */
	for (int i = 0; i < 200; i++) {
		refused_random(&rng);
		leak_between(i);
	}
	refused_malloc();
	for (int i = 0; i < 1000; i++)
		leak_c(i % 7);
	refused_new();
	for (int i = 0; i < 1000; i++)
		leak_cxx(i % 5);
	refused_others();
	for (int i = 0; i < 1000; i++)
		leak_after_others(i % 3);
	truth_write();
	return 0;
}
