/* region.c - the shim's own memory: reserved mmap ranges with bump allocation */
#include <errno.h>
#include <sys/mman.h>

#include "shim.h"

/*
 * Each subsystem reserves address space once (MAP_NORESERVE, so untouched
 * pages cost nothing) and allocates from it by bumping an atomic offset.
 * Nothing is freed piecemeal: subsystems recycle their own objects.  The
 * reservation bounds the shim's memory whatever the program does.
 */

#define MAX_REGIONS 16
static struct ht_region *all_regions[MAX_REGIONS];
static _Atomic int nregions;

int region_reserve(struct ht_region *r, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	int i;

	if (p == MAP_FAILED)
		return -errno;
	r->base = p;
	r->reserved = bytes;
	atomic_store(&r->used, 0);
	i = atomic_fetch_add(&nregions, 1);
	if (i < MAX_REGIONS)
		all_regions[i] = r;
	return 0;
}

void *region_alloc(struct ht_region *r, size_t bytes)
{
	size_t sz = (bytes + 15) & ~(size_t)15;
	size_t off = atomic_fetch_add(&r->used, sz);

	if (!r->base || off + sz > r->reserved || off + sz < off)
		return NULL;
	return r->base + off;
}

void region_reset(struct ht_region *r)
{
	if (r->base)
		madvise(r->base, r->reserved, MADV_DONTNEED);
	atomic_store(&r->used, 0);
}

/*
 * Give every reservation back: the shim could not start (a low RLIMIT_AS),
 * and the address space it had taken must not be missing to the program.
 */
void region_release_all(void)
{
	int i, n = atomic_load(&nregions);

	for (i = 0; i < n && i < MAX_REGIONS; i++) {
		struct ht_region *r = all_regions[i];

		if (r->base)
			munmap(r->base, r->reserved);
		r->base = NULL;
		r->reserved = 0;
		atomic_store(&r->used, 0);
	}
	atomic_store(&nregions, 0);
}

uint64_t region_total_used(void)
{
	uint64_t total = 0;
	int i, n = atomic_load(&nregions);

	for (i = 0; i < n && i < MAX_REGIONS; i++) {
		size_t u = atomic_load(&all_regions[i]->used);

		total += u < all_regions[i]->reserved ? u : all_regions[i]->reserved;
	}
	return total;
}
