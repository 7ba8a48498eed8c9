/* libdlf_outer.c - a library with RUNPATH $ORIGIN that dlopens its sibling by bare name */
/* test-ldflags: -Wl,--enable-new-dtags,-rpath,$ORIGIN -ldl */
#include <dlfcn.h>
#include <stddef.h>

/*
 * glibc finds "libdlf_sib.so" through the RUNPATH of the object that
 * called dlopen, which it learns from dlopen's return address: a dlopen
 * wrapper in the shim would make that libheaptrail.so, and this fail.
 */
void *outer_open_sibling(void)
{
	void *h = dlopen("libdlf_sib.so", RTLD_NOW | RTLD_LOCAL);

	__asm__ volatile("" ::: "memory");	/* no tail call */
	return h;
}
