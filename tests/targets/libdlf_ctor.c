/* libdlf_ctor.c - a library whose constructor leaks a block (its module must be known before) */
#include <stdlib.h>
#include <string.h>

static void *volatile keep;

__attribute__((noinline)) static void ctor_leak(void)
{
	void *p = malloc(777);

	if (p)
		memset(p, 'C', 777);
	keep = p;
	__asm__ volatile("" ::: "memory");
}

__attribute__((constructor)) static void dlf_ctor_init(void)
{
	ctor_leak();
	__asm__ volatile("" ::: "memory");
}

int ctor_loaded(void)
{
	return keep != NULL;
}
