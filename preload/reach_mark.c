/* reach_mark.c - the conservative mark: live blocks by address, roots, memcheck's classes */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "reach.h"

/*
 * Every pointer-aligned word of a root or of a scanned block is a candidate
 * pointer; it points to a block when it falls in [start, start + size)
 * (a block of size 0 owns its start address).  The classes follow
 * valgrind's memcheck (its manual, "Memory leak detection"), because users
 * compare with it:
 *   - a start pointer from a root or from a reachable block makes a block
 *     reachable; a pointer to its inside only (C++ new[] cookies, a base
 *     class of multiple inheritance), or any pointer from a possibly lost
 *     block, makes it possibly lost, unless it is also reachable;
 *   - the blocks left are lost.  In address order, each lost block not yet
 *     taken is a clique leader: every lost block it reaches by any pointer,
 *     transitively, is indirectly lost, and so is an earlier leader it
 *     reaches.  The leaders left are definitely lost.
 * LeakSanitizer has no "possibly": it counts an interior pointer as a
 * pointer, i.e. our "possibly" is its "reachable" (docs/reachability.md).
 *
 * Unlike those two, we scan the heap of the real allocator.  glibc's
 * malloc keeps pointers to chunk headers (the top chunk, its bins), and the
 * header of the chunk after a block whose size is 1 to 8 modulo 16 lies in
 * that block's last bytes: such a pointer would make the block possibly
 * lost.  With glibc's malloc, a pointer to exactly that offset is not
 * counted (s->glibc_chunks).
 *
 * Memory is read only inside readable mappings of /proc/self/maps taken
 * with the world stopped; while a thread that could not be stopped runs on,
 * every read is a process_vm_readv copy, which fails instead of faulting.
 */

#define WORD sizeof(uintptr_t)
#define COPY_BYTES (64u << 10)

/* ---- sorting: LSD radix by address, 16 bits a pass, into a scratch copy ---- */

#define DIGIT_BITS 16
#define DIGITS (1u << DIGIT_BITS)

static int sort_blocks(struct reach_scan *s)
{
	struct reach_block *tmp, *from = s->b, *to;
	uint32_t *count;
	uintptr_t all_or = 0, all_and = ~(uintptr_t)0;
	unsigned shift;
	size_t i;

	if (s->n < 2)
		return 0;
	tmp = region_alloc(s->mem, s->n * sizeof(*tmp));
	count = region_alloc(s->mem, DIGITS * sizeof(*count));
	if (!tmp || !count)
		return -ENOMEM;
	to = tmp;
	for (i = 0; i < s->n; i++) {
		all_or |= s->b[i].ptr;
		all_and &= s->b[i].ptr;
	}
	for (shift = 0; shift < 64; shift += DIGIT_BITS) {
		uint32_t sum = 0;
		struct reach_block *t;

		/* a digit every address shares (the high bits, mostly) sorts nothing */
		if ((((all_or ^ all_and) >> shift) & (DIGITS - 1)) == 0)
			continue;
		memset(count, 0, DIGITS * sizeof(*count));
		for (i = 0; i < s->n; i++)
			count[(from[i].ptr >> shift) & (DIGITS - 1)]++;
		for (i = 0; i < DIGITS; i++) {
			uint32_t c = count[i];

			count[i] = sum;
			sum += c;
		}
		for (i = 0; i < s->n; i++)
			to[count[(from[i].ptr >> shift) & (DIGITS - 1)]++] = from[i];
		t = from;
		from = to;
		to = t;
	}
	if (from != s->b)
		memcpy(s->b, from, s->n * sizeof(*s->b));
	return 0;
}

static uint64_t extent(const struct reach_block *b)
{
	return b->size ? b->size : 1;
}

/*
 * A directory of the address range in pages of 2^dir_shift bytes: dir[k] is
 * the first block starting at or above lo + (k << dir_shift).  A lookup then
 * searches the few blocks of one page instead of all of them.
 */
#define DIR_MAX (4u << 20)

static int build_directory(struct reach_scan *s)
{
	uint64_t span = s->hi - s->lo, k, pages;
	size_t i = 0;

	s->dir_shift = 12;
	while ((span >> s->dir_shift) + 2 > DIR_MAX)
		s->dir_shift++;
	pages = (span >> s->dir_shift) + 2;
	s->dir = region_alloc(s->mem, pages * sizeof(*s->dir));
	if (!s->dir)
		return -ENOMEM;
	for (k = 0; k < pages; k++) {
		uintptr_t page = s->lo + (k << s->dir_shift);

		while (i < s->n && s->b[i].ptr < page)
			i++;
		s->dir[k] = (uint32_t)i;
	}
	return 0;
}

int mark_prepare(struct reach_scan *s)
{
	size_t i;

	if (s->n >= UINT32_MAX || sort_blocks(s))
		return -ENOMEM;
	/*
	 * Overlaps mean a stale entry (a block freed where the shim could not
	 * see it, e.g. from a signal handler while the thread was inside the
	 * shim): the later block wins the overlapping bytes.
	 */
	for (i = 1; i < s->n; i++)
		if (s->b[i - 1].ptr + extent(&s->b[i - 1]) > s->b[i].ptr)
			s->b[i - 1].size = s->b[i].ptr - s->b[i - 1].ptr;
	s->lo = s->n ? s->b[0].ptr : 0;
	s->hi = s->n ? s->b[s->n - 1].ptr + extent(&s->b[s->n - 1]) : 0;
	if (build_directory(s))
		return -ENOMEM;
	s->state = region_alloc(s->mem, s->n + 16);
	s->capstack = 2 * s->n + 16;
	s->stack = region_alloc(s->mem, s->capstack * sizeof(*s->stack));
	s->copy = region_alloc(s->mem, COPY_BYTES);
	if (!s->state || !s->stack || !s->copy)
		return -ENOMEM;
	memset(s->state, RS_UNREACHED, s->n);
	s->nstack = 0;
	return 0;
}

int64_t mark_find(const struct reach_scan *s, uintptr_t w)
{
	size_t lo, hi, k;

	if (w < s->lo || w >= s->hi)
		return -1;
	/* a block holding w starts in w's page or is the last one before it */
	k = (w - s->lo) >> s->dir_shift;
	lo = s->dir[k] ? s->dir[k] - 1 : 0;
	hi = s->dir[k + 1];
	/* the last block starting at or below w */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->b[mid].ptr <= w)
			lo = mid;
		else
			hi = mid;
	}
	if (s->b[lo].ptr <= w && w - s->b[lo].ptr < extent(&s->b[lo]))
		return (int64_t)lo;
	return -1;
}

const struct reach_map *mark_map_at(const struct reach_scan *s, uintptr_t a)
{
	size_t lo = 0, hi = s->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->maps[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < s->nmaps && s->maps[lo].lo <= a && !(s->maps[lo].flags & REACH_MAP_GUARD))
		return &s->maps[lo];
	return NULL;
}

/* ---- the mark ---- */

enum { M_DEFINITE, M_POSSIBLE, M_CLIQUE };

/* Offset in a block of 'size' bytes of the next chunk's header (glibc). */
static inline uint64_t next_chunk_header(uint64_t size)
{
	uint64_t chunk = (size + 8 + 15) & ~(uint64_t)15;

	return (chunk < 32 ? 32 : chunk) - 16;
}

static void push(struct reach_scan *s, size_t i)
{
	if (s->nstack < s->capstack)
		s->stack[s->nstack++] = (uint32_t)i;
}

static inline void visit(struct reach_scan *s, uintptr_t w, int mode, size_t leader)
{
	int64_t i;
	uint8_t st;

	if (w < s->lo || w >= s->hi)
		return;
	i = mark_find(s, w);
	if (i < 0)
		return;
	if (s->glibc_chunks && w - s->b[i].ptr == next_chunk_header(s->b[i].size) &&
	    w != s->b[i].ptr)
		return;	/* the allocator's pointer to the next chunk */
	st = s->state[i];
	if (mode == M_CLIQUE) {
		if (st == RS_UNREACHED && (size_t)i != leader) {
			s->state[i] = RS_INDIRECT;
			push(s, (size_t)i);
		}
		return;
	}
	if (st == RS_REACHED)
		return;
	if (w == s->b[i].ptr && mode == M_DEFINITE) {
		s->state[i] = RS_REACHED;
		push(s, (size_t)i);
	} else if (st == RS_UNREACHED) {
		s->state[i] = RS_POSSIBLE;
		push(s, (size_t)i);
	}
}

static void scan_words(struct reach_scan *s, const uintptr_t *p, const uintptr_t *end,
		       int mode, size_t leader)
{
	for (; p < end; p++)
		visit(s, *p, mode, leader);
}

/* [lo, hi), aligned, inside one readable mapping. */
static void scan_readable(struct reach_scan *s, uintptr_t lo, uintptr_t hi, int mode,
			  size_t leader)
{
	if (!s->safe_reads) {
		scan_words(s, (const uintptr_t *)lo, (const uintptr_t *)hi, mode, leader);
		return;
	}
	while (lo < hi) {
		size_t len = hi - lo < COPY_BYTES ? hi - lo : COPY_BYTES;
		struct iovec local = { s->copy, len }, remote = { (void *)lo, len };
		ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

		if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
			/* no such call here: the map taken at the stop is all we have */
			s->safe_reads = 0;
			scan_words(s, (const uintptr_t *)lo, (const uintptr_t *)hi, mode, leader);
			return;
		}
		if (got <= 0)
			return;	/* unmapped since: nothing to read */
		got &= ~(ssize_t)(WORD - 1);
		scan_words(s, (const uintptr_t *)s->copy,
			   (const uintptr_t *)(s->copy + got), mode, leader);
		if ((size_t)got < len)
			return;
		lo += len;
	}
}

/* Any range: its readable parts, word by word. */
static void scan_range(struct reach_scan *s, uintptr_t lo, uintptr_t hi, int mode,
		       size_t leader)
{
	size_t a = 0, b = s->nmaps;

	lo = (lo + WORD - 1) & ~(uintptr_t)(WORD - 1);
	hi &= ~(uintptr_t)(WORD - 1);
	if (lo >= hi)
		return;
	/* the first mapping ending above lo */
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (s->maps[mid].hi <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < s->nmaps && s->maps[a].lo < hi; a++) {
		uintptr_t l = lo > s->maps[a].lo ? lo : s->maps[a].lo;
		uintptr_t h = hi < s->maps[a].hi ? hi : s->maps[a].hi;

		if (s->maps[a].flags & REACH_MAP_GUARD)
			continue;
		if (l < h)
			scan_readable(s, l, h, mode, leader);
	}
}

static void drain(struct reach_scan *s, int clique, size_t leader)
{
	while (s->nstack) {
		size_t i = s->stack[--s->nstack];
		int mode = clique ? M_CLIQUE :
			   s->state[i] == RS_REACHED ? M_DEFINITE : M_POSSIBLE;

		s->heap_bytes += s->b[i].size;
		scan_range(s, s->b[i].ptr, s->b[i].ptr + s->b[i].size, mode, leader);
	}
}

void mark_root_range(struct reach_scan *s, uintptr_t lo, uintptr_t hi)
{
	int64_t i;
	size_t k;

	if (lo >= hi)
		return;
	s->root_bytes += hi - lo;
	/* the blocks inside the range are cut out of it */
	i = mark_find(s, lo);
	if (i >= 0) {
		lo = s->b[i].ptr + extent(&s->b[i]);
		k = (size_t)i + 1;
	} else {
		size_t a = 0, b = s->n;

		while (a < b) {
			size_t mid = a + (b - a) / 2;

			if (s->b[mid].ptr < lo)
				a = mid + 1;
			else
				b = mid;
		}
		k = a;
	}
	for (; lo < hi && k < s->n && s->b[k].ptr < hi; k++) {
		scan_range(s, lo, s->b[k].ptr, M_DEFINITE, 0);
		lo = s->b[k].ptr + extent(&s->b[k]);
	}
	if (lo < hi)
		scan_range(s, lo, hi, M_DEFINITE, 0);
	drain(s, 0, 0);
}

void mark_root_word(struct reach_scan *s, uintptr_t w)
{
	visit(s, w, M_DEFINITE, 0);
	drain(s, 0, 0);
}

void mark_finish(struct reach_scan *s)
{
	size_t i;

	drain(s, 0, 0);
	for (i = 0; i < s->n; i++) {
		if (s->state[i] != RS_UNREACHED)
			continue;
		/* a leader: it stays unreached (lost) unless a later clique takes it */
		s->heap_bytes += s->b[i].size;
		scan_range(s, s->b[i].ptr, s->b[i].ptr + s->b[i].size, M_CLIQUE, i);
		drain(s, 1, i);
	}
}

unsigned mark_class(const struct reach_scan *s, size_t i)
{
	switch (s->state[i]) {
	case RS_REACHED:
		return HTR_REACH_REACHABLE;
	case RS_POSSIBLE:
		return HTR_REACH_POSSIBLY;
	case RS_INDIRECT:
		return HTR_REACH_INDIRECT;
	default:
		return HTR_REACH_LOST;
	}
}
