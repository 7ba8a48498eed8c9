/* cxx_new.cc - C++ new/delete in every form, and blocks freed through the wrong family */
#include <cstdlib>
#include <cstring>
#include <new>

#include "truth.h"

/*
 * Proves: operator new, new[], nothrow, aligned (C++17) and the sized and
 * aligned deletes are recorded once each (no double count through malloc);
 * new[] of a type with a destructor asks for 8 bytes more (the array
 * cookie) and its block starts 8 bytes before the pointer the program sees;
 * a static object's constructor allocates before main; qualified C++ names
 * are demangled; new[] released with free() and malloc() released with
 * operator delete are freed blocks (and mismatches), not leaks.
 * libstdc++'s own emergency pool is the runtime's, not the program's.
 */

#define noinline __attribute__((noinline))

/* Counts a block and hands back the typed pointer. */
template <class T> static T *track(T *p, size_t n, const char *fn, int line)
{
	truth_track_in((void *)p, n, fn, __FILE__, line);
	return p;
}
#define TRACK(p, n, fn) track((p), (n), (fn), __LINE__)

namespace cxxt {

struct Widget {
	long id;
	char name[40];
};

struct Counted {
	int v;
	Counted() : v(1) {}
	~Counted() { v = 0; }	/* non-trivial: new[] stores a cookie */
};

struct alignas(64) Line {
	char bytes[192];
};

class Registry {
public:
	noinline Registry()
	{
		/* Runs before main, from the static initializer below. */
		table_ = TRACK(new Widget[3], 3 * sizeof(Widget), "cxxt::Registry::Registry");
	}
	noinline void grow(size_t n)
	{
		extra_ = TRACK(new char[n], n, "cxxt::Registry::grow");
	}

private:
	Widget *table_;
	char *extra_;
};

}  // namespace cxxt

static cxxt::Registry registry;

static noinline void leak_widget()
{
	truth_sink = TRACK(new cxxt::Widget, sizeof(cxxt::Widget), __func__);
}

static noinline void leak_ints()
{
	truth_sink = TRACK(new int[250], 250 * sizeof(int), __func__);
}

static noinline void leak_counted()
{
	/* Itanium C++ ABI: the element count is stored in 8 bytes before the array. */
	cxxt::Counted *c = new cxxt::Counted[10]; TRACK((char *)c - sizeof(size_t), 10 * sizeof(cxxt::Counted) + sizeof(size_t), __func__);

	truth_sink = c;
}

static noinline void leak_nothrow()
{
	truth_sink = TRACK(new (std::nothrow) cxxt::Widget, sizeof(cxxt::Widget), __func__);
}

static noinline void leak_aligned()
{
	truth_sink = TRACK(new cxxt::Line, sizeof(cxxt::Line), __func__);
}

static noinline void freed_properly()
{
	cxxt::Widget *w = TRACK(new cxxt::Widget, sizeof(cxxt::Widget), __func__);
	int *v = TRACK(new int[1000], 1000 * sizeof(int), __func__);
	cxxt::Counted *c = new cxxt::Counted[4]; TRACK((char *)c - sizeof(size_t), 4 * sizeof(cxxt::Counted) + sizeof(size_t), __func__);
	cxxt::Line *l = TRACK(new cxxt::Line, sizeof(cxxt::Line), __func__);
	cxxt::Widget *n = TRACK(new (std::nothrow) cxxt::Widget, sizeof(cxxt::Widget), __func__);

	truth_untrack(w);
	delete w;		/* sized delete */
	truth_untrack(v);
	delete[] v;
	truth_untrack((char *)c - sizeof(size_t));
	delete[] c;		/* sized array delete, cookie included */
	truth_untrack(l);
	delete l;		/* aligned sized delete */
	truth_untrack(n);
	operator delete(n, std::nothrow);
}

/* Works with glibc: operator new and new[] are malloc, delete is free. */
static noinline void mismatched()
{
	char *a = TRACK(new char[300], 300, __func__);
	void *b = TRACK(malloc(400), 400, __func__);

	memset(a, 1, 300);
	truth_untrack(a);
	free(a);		/* new[] freed with free */
	truth_untrack(b);
	operator delete(b);	/* malloc freed with delete */
}

int main()
{
	registry.grow(4444);
	leak_widget();
	leak_ints();
	leak_counted();
	leak_nothrow();
	leak_aligned();
	freed_properly();
	mismatched();
	truth_fact("mismatches", 2);
	/* libstdc++ allocates its emergency exception pool for itself. */
	truth_set_exact(0, 1);
	truth_write();
	return 0;
}
