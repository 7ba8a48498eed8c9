/* fence.c - the writer's fence for all the program's threads: membarrier, or a TLB shootdown */
#include <errno.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/*
 * thread.c lets a thread mark its buffer BUSY with a plain store when the
 * writer can make every running thread of the process execute a full
 * memory barrier (see there).  Two ways to do that, the first that works:
 *
 * - membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), registered at start (and
 *   again in a forked child).  Not used when a seccomp filter is already
 *   in force at start: a sandbox that kills on an unlisted system call
 *   would kill the program.
 * - Revoking access to a page of our own that this thread just wrote: the
 *   kernel must then flush it from the TLB of every CPU running one of
 *   the process's threads, by interrupting each, and an interrupt orders
 *   what the interrupted thread stored before it.  (Linux on x86, where
 *   the shootdown is done by interrupts; the .NET runtime falls back on
 *   the same.)  glibc grows its thread arenas with mprotect(), so a
 *   sandbox that lets threads allocate lets this through.
 *
 * If membarrier() fails later (a filter installed since, ENOMEM), the page
 * takes over for the rest of the run.  If both fail, fence_all_threads()
 * says so and thread.c goes back to compare-and-swap.
 */

static int use_membarrier;
static void *page;
static size_t page_size;

/* Is a seccomp filter in force ("Seccomp:\t2" in /proc/self/status)? */
static int seccomp_filtered(void)
{
	char buf[4096];
	ssize_t n = ht_read_file("/proc/self/status", buf, sizeof(buf) - 1);
	const char *s;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	s = ht_status_field(buf, "Seccomp");
	return s && *s == '2';
}

static int register_membarrier(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

int fence_init(void)
{
	const char *how = getenv("HEAPTRAIL__FENCE");

	if (how && !strcmp(how, "none"))
		return 0;	/* tests: the compare-and-swap protocol */
	page_size = (size_t)sysconf(_SC_PAGESIZE);
#if defined(__x86_64__) || defined(__i386__)
	page = mmap(NULL, page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		page = NULL;
#else
	page = NULL;	/* elsewhere the TLB may be flushed without interrupts */
#endif
	use_membarrier = !(how && !strcmp(how, "page")) && !seccomp_filtered() &&
			 register_membarrier();
	return use_membarrier || page != NULL;
}

int fence_after_fork(void)
{
	/* the child is a new process: register it too (harmless if inherited) */
	if (use_membarrier)
		use_membarrier = register_membarrier();
	return use_membarrier || page != NULL;
}

static int page_fence(void)
{
	if (!page || mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0)
		return -1;
	/* present in this CPU's TLB, so revoking it must reach the others too */
	*(volatile uint64_t *)page += 1;
	return mprotect(page, page_size, PROT_NONE) == 0 ? 0 : -1;
}

int fence_all_threads(void)
{
	if (use_membarrier) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
			return 0;
		use_membarrier = 0;
	}
	return page_fence();
}
