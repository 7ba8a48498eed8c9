/* reach_cxx.cc - C++ pointers into a block: new[] cookies and multiple inheritance */
#include <new>

#include "reach_truth.h"

/*
 * Proves: the pointer new[] returns for objects with a destructor lies past
 * the array cookie (8 bytes in), and a pointer to the second base of a
 * class with two bases lies inside the object: held only that way, the
 * blocks are possibly lost (memcheck without heuristics; LeakSanitizer
 * counts them reachable).  Through the first base (the start) a block is
 * reachable, and so is an array without a cookie.  A dropped object is lost.
 */

struct Obj {
	long v;
	~Obj() { v = 0; }	/* a destructor: new[] stores the count first */
};

struct A {
	long a = 1;
	virtual ~A() {}
};

struct B {
	long b = 2;
	virtual ~B() {}
};

struct C : A, B {
	long c = 3;
};

static Obj *array_inside;	/* 8 bytes into its block */
static B *second_base;		/* sizeof(A) bytes into its block */
static A *first_base;		/* the start of its block */
static long *plain;		/* new long[8]: no cookie, the start */

static R_NOINLINE void make_array(void)
{
	r_expect(__func__, __LINE__, "possibly", 4 * sizeof(Obj) + sizeof(size_t)); array_inside = new Obj[4];
	r_expect(__func__, __LINE__, "reachable", 8 * sizeof(long)); plain = new long[8]();
}

static R_NOINLINE void make_bases(void)
{
	r_expect(__func__, __LINE__, "possibly", sizeof(C)); second_base = new C;
	r_expect(__func__, __LINE__, "reachable", sizeof(C)); first_base = new C;
}

static R_NOINLINE void drop_one(void)
{
	C *volatile c;

	r_expect(__func__, __LINE__, "lost", sizeof(C)); c = new C;
	(void)c;
}

int main()
{
	make_array();
	make_bases();
	drop_one();
	reach_scrub();
	reach_write("reach_cxx");
	return 0;
}
