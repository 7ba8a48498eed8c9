/* libonecall.c - a library with one function, which allocates: churn_lib calls it */
#include <stdlib.h>

/*
 * One frame of this library in each stack: when the analyzer resolved that
 * frame ahead (while still reading the dump), the report's frames in the
 * library are all answered from its cache, and nothing else asks for the
 * module.  test_report.py checks that a changed library is still said.
 */
void *one_alloc(size_t n)
{
	void *p = malloc(n);

	__asm__ volatile("" ::: "memory");	/* keep this frame: no tail call */
	return p;
}
