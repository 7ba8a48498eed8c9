/* librel_plug.c - the library rel_dlloop loads and unloads over and over */
#include <stdlib.h>
#include <string.h>

/*
 * Allocates in its constructor and frees in its destructor, has a TLS
 * variable (each load grows the threads' TLS vectors), hands blocks to the
 * program that outlive the library, and leaks one block per call of
 * plug_keep.  Not linked with truth.c: rel_dlloop counts.
 */

#define noinline __attribute__((noinline))

static __thread char tls_scratch[256];
static char *ctor_block;

__attribute__((constructor)) static void plug_init(void)
{
	ctor_block = malloc(300);
	if (ctor_block)
		memset(ctor_block, 1, 300);
}

__attribute__((destructor)) static void plug_fini(void)
{
	free(ctor_block);
	ctor_block = NULL;
}

/* The first touch of the TLS block in a thread allocates it (in ld.so). */
static noinline void plug_touch(size_t n, char c)
{
	tls_scratch[n % sizeof(tls_scratch)] = c;
	__asm__ volatile("" ::: "memory");
}

noinline void *plug_make(size_t n)
{
	char *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	if (p) {
		memset(p, 'P', n);
		plug_touch(n, p[0]);
	}
	return p;
}

void *plug_keep(void);
noinline void *plug_keep(void)
{
	void *p = malloc(24);

	__asm__ volatile("" ::: "memory");
	return p;
}
