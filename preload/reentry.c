/* reentry.c - counts the program's allocations made while the shim was busy on the same thread */
#include <link.h>
#include <string.h>

#include "shim.h"

/*
 * An allocation that arrives while the shim keeps its books on the same
 * thread (guard SHIM) passes through unrecorded.  Most such calls are not
 * the program's: the C library and the loader allocate for us (a thread's
 * TLS, libunwind's dynamic TLS after a dlopen, pthread keys).  Only a call
 * from anywhere else, a signal handler of the program, is a lost event; the
 * caller's address tells them apart.  The ranges are read once at start.
 */

#define MAX_RANGES 16

static struct range {
	uintptr_t lo, hi;
} ranges[MAX_RANGES];
static unsigned nranges;

static int ours(const char *name)
{
	static const char *const libs[] = { "/libc.so", "/ld-linux", "/libunwind", "/libheaptrail",
					    "/libpthread.so", "/libdl.so" };
	size_t i;

	for (i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (strstr(name, libs[i]))
			return 1;
	return 0;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned i;

	(void)size;
	(void)arg;
	if (!info->dlpi_name || !ours(info->dlpi_name))
		return 0;
	for (i = 0; i < info->dlpi_phnum && nranges < MAX_RANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
			ranges[nranges].hi = ranges[nranges].lo + ph->p_memsz;
			nranges++;
		}
	}
	return 0;
}

void reentry_init(void)
{
	nranges = 0;
	dl_iterate_phdr(add_module, NULL);
}

void ht_note_reentry(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;
	unsigned i;

	if (atomic_load_explicit(&ht_phase, memory_order_relaxed) != HT_ON)
		return;
	for (i = 0; i < nranges; i++)
		if (a >= ranges[i].lo && a < ranges[i].hi)
			return;
	atomic_fetch_add_explicit(&ht_lost[HTR_LOST_REENTRANT], 1, memory_order_relaxed);
}
