/* libdlf_static.c - a library whose exit-time destructors free what its constructor made */
#include <stdlib.h>
#include <string.h>

/*
 * As g++ does for a static object: the constructor registers the
 * destructor with __cxa_atexit and this library's __dso_handle; and an ELF
 * destructor (fini_array) frees a second block.  Both run at exit, after
 * main returned: the shim must still see the frees (review finding 5).
 */

extern void *__dso_handle;
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void *by_atexit, *by_fini;

__attribute__((noinline)) static void static_release(void *p)
{
	free(p);
}

__attribute__((noinline)) static void *static_make(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 'T', n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((constructor)) static void dlf_static_init(void)
{
	by_atexit = static_make(3001);
	__cxa_atexit(static_release, by_atexit, &__dso_handle);
	by_fini = static_make(3002);
}

__attribute__((destructor)) static void dlf_static_fini(void)
{
	free(by_fini);
}

int static_ready(void)
{
	return by_atexit && by_fini;
}
