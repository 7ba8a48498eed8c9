/* frag_usable.c - live blocks of every C allocation function, small to mapped */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: the usable size the shim records for each block is what glibc's
 * malloc_usable_size() says (the shim reads glibc's chunk header instead of
 * calling it), for blocks from the heap, aligned blocks and blocks with a
 * mapping of their own (glibc's chunk size is 16 bytes over their usable
 * size, 8 for the others): 'heaptrail frag' at the mark "held" gives the
 * same requested and usable bytes, and counts the mapped blocks as
 * mallinfo2() does.  A thousand blocks allocated and freed first: the shim
 * checks its reading against malloc_usable_size() on a program's first few
 * hundred blocks, and reads the header alone only after them.
 *
 * Truth facts: requested_bytes, usable_bytes (sums over the live blocks),
 * hblkhd and mapped_blocks (mallinfo2 at the mark).  Nothing allocates
 * between the mark and mallinfo2.
 */

#define noinline __attribute__((noinline))
#define NBLOCKS 64

static void *held[NBLOCKS];
static size_t held_size[NBLOCKS];
static int nheld;

static void keep(void *p, size_t size)
{
	if (!p || nheld == NBLOCKS)
		abort();
	held[nheld] = p;
	held_size[nheld++] = size;
}

static noinline void plain_sizes(void)
{
	static const size_t sizes[] = { 1, 8, 24, 25, 100, 1000, 4000, 70000, 140000, 3000000 };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		keep(T_MALLOC(sizes[i]), sizes[i]);
	keep(T_CALLOC(3, 333), 999);
	keep(T_CALLOC(1, 500000), 500000);
}

static noinline void aligned_sizes(void)
{
	void *p = NULL;

	keep(T_TRACK(memalign(64, 100), 100), 100);
	keep(T_TRACK(memalign(4096, 200000), 200000), 200000);
	keep(T_TRACK(aligned_alloc(256, 2048), 2048), 2048);
	keep(T_TRACK(valloc(3000), 3000), 3000);
	if (posix_memalign(&p, 128, 1 << 20) != 0)
		abort();
	keep(T_TRACK(p, 1 << 20), 1 << 20);
}

static noinline void realloc_sizes(void)
{
	char *a = T_MALLOC(50);
	char *b = T_MALLOC(5000);

	memset(a, 1, 50);
	a = T_REALLOC(a, 300000);	/* heap to a mapping of its own */
	b = T_REALLOC(b, 40);		/* shrunk in place */
	keep(a, 300000);
	keep(b, 40);
}

static noinline void warm_up(void)
{
	int i;

	for (i = 0; i < 1000; i++)
		T_FREE(T_MALLOC(16 + (size_t)i % 200));
}

int main(void)
{
	long long requested = 0, usable = 0;
	struct mallinfo2 mi;
	int i;

	warm_up();
	plain_sizes();
	aligned_sizes();
	realloc_sizes();
	for (i = 0; i < nheld; i++) {
		requested += (long long)held_size[i];
		usable += (long long)malloc_usable_size(held[i]);
	}
	heaptrail_mark("held");
	mi = mallinfo2();
	truth_fact("requested_bytes", requested);
	truth_fact("usable_bytes", usable);
	truth_fact("hblkhd", (long long)mi.hblkhd);
	truth_fact("mapped_blocks", (long long)mi.hblks);
	truth_write();
	for (i = 0; i < nheld; i++)
		T_FREE(held[i]);
	return 0;
}
