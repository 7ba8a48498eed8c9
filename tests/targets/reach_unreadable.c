/* reach_unreadable.c - memory the scan must not read: PROT_NONE pages, unmapped space */
#include <stdint.h>
#include <sys/mman.h>

#include "reach_truth.h"

/*
 * Proves: the scan never faults.  A block whose middle page the program
 * made PROT_NONE is read around that page (the pointer it holds there
 * cannot be seen: that block is lost, as memcheck says too); globals hold
 * pointers to a PROT_NONE mapping, to unmapped space and to the kernel's
 * half; the program's data has a PROT_NONE page of its own.  The block a
 * readable part points to stays reachable.
 */

static void *volatile wild[4];
static char guarded_data[3 * 4096] __attribute__((aligned(4096)));
static char *big;

static R_NOINLINE void make(void)
{
	long page = sysconf(_SC_PAGESIZE);
	void *none = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *gone = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (posix_memalign((void **)&big, (size_t)page, 3 * (size_t)page))
		abort();
	r_expect(__func__, __LINE__ - 2, "reachable", 3 * (size_t)page);
	memset(big, 0, 3 * (size_t)page);
	((void **)big)[0] = R_ALLOC(100, "reachable");
	((void **)(big + page))[0] = R_ALLOC(200, "lost");
	mprotect(big + page, (size_t)page, PROT_NONE);
	munmap(gone, (size_t)page);
	wild[0] = none;
	wild[1] = gone;
	wild[2] = (void *)(uintptr_t)0xffffffffff600000ull;
	wild[3] = (char *)none + 8;
	/* a hole in the program's own data */
	if (page == 4096)
		mprotect(guarded_data + 4096, 4096, PROT_NONE);
}

int main(void)
{
	make();
	reach_scrub();
	reach_write("reach_unreadable");
	return 0;
}
