/* real.c - finds the real allocator under the shim; bootstrap pool for dlsym */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "shim.h"

/*
 * What the fast paths of malloc and free read on every call, together: the
 * real functions' addresses and sampling's summary (shim.h), on adjacent
 * lines of one page.  The summary starts all set: every free takes the
 * slow path until sampling is on (bytesample.c).
 */
#define HOT __attribute__((section(".data.ht_hot"), aligned(HT_CACHELINE)))
struct ht_real ht_real HOT;
_Atomic uint64_t ht_sampled_summary[HT_SUMMARY_WORDS] HOT = {
	[0 ... HT_SUMMARY_WORDS - 1] = ~0ull
};

/*
 * dlsym() itself may call calloc/malloc (for its error state) before we know
 * where the real ones are.  Those few requests are served from this static
 * pool and never returned; free() recognises pool pointers and ignores them.
 */
uint8_t ht_boot_pool[HT_BOOT_POOL_BYTES] __attribute__((aligned(64)));	/* shim.h */
static _Atomic size_t pool_used;

void *bootstrap_alloc(size_t size, size_t align)
{
	size_t off, start;

	if (align < 16)
		align = 16;
	do {
		off = atomic_load(&pool_used);
		start = (off + align - 1) & ~(align - 1);
		if (start + size > sizeof(ht_boot_pool) || start + size < start)
			return NULL;
	} while (!atomic_compare_exchange_weak(&pool_used, &off, start + size));
	memset(ht_boot_pool + start, 0, size);
	/* after the bump: bootstrap_pin_all() pins what it sees, this block itself */
	sample_pin(ht_boot_pool + start, size);
	return ht_boot_pool + start;
}

/* Sampling cleared the summary: every pool block handed out so far needs its bits again. */
void bootstrap_pin_all(void)
{
	size_t used = atomic_load(&pool_used);

	if (used)
		sample_pin(ht_boot_pool, used);
}

size_t bootstrap_room(const void *p)
{
	return (size_t)(ht_boot_pool + sizeof(ht_boot_pool) - (const uint8_t *)p);
}

int bootstrap_owns(const void *p)
{
	return (const uint8_t *)p >= ht_boot_pool &&
	       (const uint8_t *)p < ht_boot_pool + sizeof(ht_boot_pool);
}

int real_resolve(void)
{
	static _Atomic int state;	/* 0 unresolved, 1 resolving, 2 done */
	int expected = 0;

	if (atomic_load_explicit(&state, memory_order_acquire) == 2)
		return 0;
	if (!atomic_compare_exchange_strong(&state, &expected, 1)) {
		/* Another thread is resolving; the caller uses the pool meanwhile. */
		return atomic_load(&state) == 2 ? 0 : -1;
	}
#define RESOLVE(name) \
	*(void **)&ht_real.name = dlsym(RTLD_NEXT, #name)
	RESOLVE(malloc);
	RESOLVE(free);
	RESOLVE(calloc);
	RESOLVE(realloc);
	RESOLVE(reallocarray);
	RESOLVE(posix_memalign);
	RESOLVE(aligned_alloc);
	RESOLVE(memalign);
	RESOLVE(valloc);
	RESOLVE(pvalloc);
	RESOLVE(malloc_usable_size);
#undef RESOLVE
	atomic_store_explicit(&state, 2, memory_order_release);
	return ht_real.malloc && ht_real.free && ht_real.calloc &&
	       ht_real.realloc ? 0 : -1;
}

_Atomic int ht_glibc_chunks;
static _Atomic int verify_left;

/* The two addresses asked about, and which of them lie in libc.so.6's code. */
struct in_libc {
	uintptr_t addr[2];
	int found[2];
};

static int find_in_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct in_libc *q = arg;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	size_t n = strlen(name), k = sizeof("libc.so.6") - 1;
	int i, j;

	(void)size;
	if (n < k || strcmp(name + n - k, "libc.so.6") || (n > k && name[n - k - 1] != '/'))
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		for (j = 0; j < 2; j++)
			if (q->addr[j] >= lo && q->addr[j] - lo < ph->p_memsz)
				q->found[j] = 1;
	}
	return 1;
}

/*
 * Are malloc and malloc_usable_size, as the shim found them, the C
 * library's own?  Their addresses against libc.so.6's code, from the
 * loader's list of objects: no symbol search (dladdr() searched every
 * symbol of the object, 3% of a short process's start), and no dlopen(),
 * which a library loaded ahead of the shim may wrap under a lock it holds
 * while it allocates (heaptrack's preload library: a deadlock).
 */
static int from_libc(void)
{
	struct in_libc q = { { (uintptr_t)ht_real.malloc, (uintptr_t)ht_real.malloc_usable_size },
			     { 0, 0 } };

	dl_iterate_phdr(find_in_libc, &q);
	return q.found[0] && q.found[1];
}

/*
 * Every allocation records its usable size, and malloc_usable_size() is a
 * call that checks what the shim already knows (a block just allocated is
 * in use), 2-3% of a traced malloc-heavy run.  glibc keeps the chunk's size
 * in the word before the block, with flag bits in its low three (IS_MMAPPED
 * is 2): usable = size - 8, or size - 16 for a chunk of its own mapping.
 * The header is read only when malloc and malloc_usable_size are both
 * libc.so.6's (not jemalloc, tcmalloc, libc_malloc_debug or a program's
 * own), and only after the program's first CHUNK_CHECKS blocks each gave
 * the same answer both ways (real_usable()).  The shim allocates nothing
 * of its own to check: even a few blocks left in glibc's caches would show
 * in the program's mallinfo2().
 */
#define CHUNK_CHECKS 256
#if defined(__x86_64__)
#define HT_X86_64 1
#else
#define HT_X86_64 0
#endif

void real_check_chunks(void)
{
	atomic_store(&verify_left, CHUNK_CHECKS);
	/* x86-64 only: elsewhere a tagged pointer (aarch64 MTE) may not read below the block */
	atomic_store(&ht_glibc_chunks,
		     HT_X86_64 && ht_real.malloc && ht_real.malloc_usable_size && from_libc() ?
		     HT_CHUNKS_CHECKING : HT_CHUNKS_CALL);
}

size_t real_usable(void *ptr, size_t size)
{
	size_t u;

	if (!ht_real.malloc_usable_size)
		return size;
	u = ht_real.malloc_usable_size(ptr);
	if (atomic_load_explicit(&ht_glibc_chunks, memory_order_relaxed) == HT_CHUNKS_CHECKING) {
		int checking = HT_CHUNKS_CHECKING;

		/* a mismatch on any thread wins: only CHECKING may become READ */
		if (real_chunk_usable(ptr) != u)
			atomic_store(&ht_glibc_chunks, HT_CHUNKS_CALL);
		else if (atomic_fetch_sub(&verify_left, 1) == 1)
			atomic_compare_exchange_strong(&ht_glibc_chunks, &checking, HT_CHUNKS_READ);
	}
	return u;
}
