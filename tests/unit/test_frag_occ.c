/* test_frag_occ.c - unit tests of the occupancy sweep, heap ranges, size classes and the u64 map */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analyzer/frag_internal.h"
#include "../../analyzer/frag_map.h"

/*
 * Layouts drawn by hand, with the answers worked out by hand from the
 * definitions in frag.h: spans, occupied bytes, pages holding live bytes,
 * free pages, pinned bytes and each site's share of them, holes.
 */

#define PS 4096ull

static int passed, failed;

#define CHECK_EQ(name, got, want) check_eq(name, (uint64_t)(got), (uint64_t)(want), __LINE__)

static void check_eq(const char *name, uint64_t got, uint64_t want, int line)
{
	if (got == want) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL line %d: %s: got %llu, want %llu\n", line, name,
	       (unsigned long long)got, (unsigned long long)want);
}

static const struct frag_pinner *pinner_of(const struct frag_occ *o, uint32_t stack)
{
	size_t i;

	for (i = 0; i < o->npinners; i++)
		if (o->pinners[i].stack == stack)
			return &o->pinners[i];
	return NULL;
}

static uint64_t pinned_of(const struct frag_occ *o, uint32_t stack)
{
	const struct frag_pinner *p = pinner_of(o, stack);

	return p ? p->pinned_bytes : UINT64_MAX;
}

static void blk(struct occ_block *b, uint64_t lo, uint64_t hi, uint32_t stack)
{
	memset(b, 0, sizeof(*b));
	b->lo = lo;
	b->hi = hi;
	b->size = hi - lo;
	b->stack = stack;
}

/* Three blocks, two free pages between the first two, one straddling a page end. */
static void test_basic_layout(void)
{
	struct fregions g = { 0 };
	struct occ_block b[3];
	struct frag_occ o;
	uint64_t sum = 0;
	size_t i;

	fregions_add(&g, 0x10000, 0x14100);
	/* given out of order: the sweep sorts */
	blk(&b[0], 0x13f00, 0x14100, 3);
	blk(&b[1], 0x10000, 0x10050, 1);
	blk(&b[2], 0x13000, 0x13050, 2);
	CHECK_EQ("compute", frag_occ_compute(&o, b, 3, &g, PS), 0);
	CHECK_EQ("heaps", o.heaps, 1);
	CHECK_EQ("span: pages 0x10 to 0x14", o.span_bytes, 5 * PS);
	CHECK_EQ("occupied", o.occupied_bytes, 0x50 + 0x50 + 0x200);
	CHECK_EQ("pages holding live bytes: 0x10, 0x13, 0x14", o.live_page_bytes, 3 * PS);
	CHECK_EQ("free pages 0x11, 0x12", o.free_page_bytes, 2 * PS);
	CHECK_EQ("releasable = free pages", o.releasable_bytes, 2 * PS);
	CHECK_EQ("pinned = span - occupied", o.pinned_bytes, 5 * PS - 0x2a0);
	CHECK_EQ("pinned on live pages", o.pinned_page_bytes, 3 * PS - 0x2a0);
	/* page 0x10 is A's; B gets the free pages below it and half of page 0x13 */
	CHECK_EQ("site 1 pinned", pinned_of(&o, 1), PS - 0x50);
	CHECK_EQ("site 2 pinned", pinned_of(&o, 2), 2 * PS + (PS - 0x150) / 2);
	CHECK_EQ("site 3 pinned", pinned_of(&o, 3), (PS - 0x150) / 2 + (PS - 0x100));
	CHECK_EQ("site 2 releasable", pinner_of(&o, 2)->releasable_bytes, 2 * PS);
	CHECK_EQ("site 2 pinned on pages", pinner_of(&o, 2)->pinned_page_bytes, (PS - 0x150) / 2);
	CHECK_EQ("ranked: site 2 first", o.pinners[0].stack, 2);
	CHECK_EQ("ranked: site 3 second", o.pinners[1].stack, 3);
	for (i = 0; i < o.npinners; i++)
		sum += o.pinners[i].pinned_bytes;
	CHECK_EQ("sites sum to pinned", sum, o.pinned_bytes);
	CHECK_EQ("holes", o.holes, 2);
	CHECK_EQ("hole of 0x2fb0 bytes", o.hole_count[frag_log2_of(0x2fb0)], 1);
	CHECK_EQ("hole of 0xeb0 bytes", o.hole_bytes[frag_log2_of(0xeb0)], 0xeb0);
	CHECK_EQ("live blocks", o.live_blocks, 3);
	frag_occ_release(&o);
	fregions_release(&g);
}

/* glibc's neighbours share 8 bytes (the next chunk's prev_size); a big block's inside pages. */
static void test_overlap_and_interior(void)
{
	struct fregions g = { 0 };
	struct occ_block b[3];
	struct frag_occ o;

	fregions_add(&g, 0x20000, 0x26010);
	blk(&b[0], 0x20000, 0x20050, 1);
	blk(&b[1], 0x20048, 0x20100, 1);
	blk(&b[2], 0x21000, 0x26010, 2);	/* pages 0x21..0x26, 4 inside */
	CHECK_EQ("compute", frag_occ_compute(&o, b, 3, &g, PS), 0);
	CHECK_EQ("occupied: the shared 8 bytes once", o.occupied_bytes, 0x100 + 0x5010);
	CHECK_EQ("span 0x20..0x26", o.span_bytes, 7 * PS);
	CHECK_EQ("every page holds live bytes", o.live_page_bytes, 7 * PS);
	CHECK_EQ("no free page", o.free_page_bytes, 0);
	CHECK_EQ("pinned", o.pinned_bytes, 7 * PS - 0x5110);
	CHECK_EQ("site 1: its page's free bytes", pinned_of(&o, 1), PS - 0x100);
	CHECK_EQ("site 2: its last page's free bytes", pinned_of(&o, 2), PS - 0x10);
	CHECK_EQ("one hole", o.holes, 1);
	frag_occ_release(&o);
	fregions_release(&g);
}

/* Three blocks on one page: shares of 4096 - 3 * 100 = 3796 split 1266, 1265, 1265. */
static void test_shares(void)
{
	struct fregions g = { 0 };
	struct occ_block b[3];
	struct frag_occ o;

	fregions_add(&g, 0x40000, 0x40300);
	blk(&b[0], 0x40000, 0x40064, 7);
	blk(&b[1], 0x40100, 0x40164, 8);
	blk(&b[2], 0x40200, 0x40264, 9);
	CHECK_EQ("compute", frag_occ_compute(&o, b, 3, &g, PS), 0);
	CHECK_EQ("pinned", o.pinned_bytes, PS - 300);
	CHECK_EQ("first block takes the remainder", pinned_of(&o, 7), 1266);
	CHECK_EQ("second", pinned_of(&o, 8), 1265);
	CHECK_EQ("third", pinned_of(&o, 9), 1265);
	frag_occ_release(&o);
	fregions_release(&g);
}

/* Two heaps: each has its own span; the range's start counts, not the first live block. */
static void test_two_heaps(void)
{
	struct fregions g = { 0 };
	struct occ_block b[2];
	struct frag_occ o;

	fregions_add(&g, 0x100000, 0x104000);
	fregions_add(&g, 0x7f0000000000ull, 0x7f0000002000ull);
	CHECK_EQ("two ranges", g.n, 2);
	blk(&b[0], 0x103000, 0x103010, 1);	/* 3 free pages below it */
	blk(&b[1], 0x7f0000000000ull, 0x7f0000000010ull, 2);
	CHECK_EQ("compute", frag_occ_compute(&o, b, 2, &g, PS), 0);
	CHECK_EQ("heaps", o.heaps, 2);
	CHECK_EQ("spans", o.span_bytes, 4 * PS + PS);
	CHECK_EQ("free pages below the first heap's block", o.free_page_bytes, 3 * PS);
	CHECK_EQ("site 1", pinned_of(&o, 1), 3 * PS + PS - 0x10);
	CHECK_EQ("hole from the heap's start", o.holes, 1);
	frag_occ_release(&o);
	fregions_release(&g);
}

static void test_regions(void)
{
	struct fregions g = { 0 };

	fregions_add(&g, 0x1000000, 0x1001000);
	fregions_add(&g, 0x3000000, 0x3001000);
	fregions_add(&g, 0x2000000, 0x2001000);
	CHECK_EQ("three apart", g.n, 3);
	CHECK_EQ("sorted", g.lo[1], 0x2000000);
	/* growth within 1 MiB joins, and can bridge two */
	fregions_add(&g, 0x1001000, 0x10f0000);
	CHECK_EQ("joined", g.n, 3);
	CHECK_EQ("extended", g.hi[0], 0x10f0000);
	fregions_add(&g, 0x10f0000, 0x1f80000);
	CHECK_EQ("bridged", g.n, 2);
	CHECK_EQ("bridged range", g.hi[0], 0x2001000);
	fregions_add(&g, 0x1500000, 0x1500100);	/* inside: nothing changes */
	CHECK_EQ("inside", g.n, 2);
	fregions_release(&g);
}

static void test_classes(void)
{
	uint64_t s;
	unsigned i;

	CHECK_EQ("8 in class 0", frag_class_of(8), 0);
	CHECK_EQ("16 in class 1", frag_class_of(16), 1);
	CHECK_EQ("17 in class 2", frag_class_of(17), 2);
	CHECK_EQ("bound 2 = 20", frag_class_bound(2), 20);
	CHECK_EQ("1025..1280 one class", frag_class_of(1025), frag_class_of(1280));
	CHECK_EQ("1281 the next", frag_class_of(1281), frag_class_of(1280) + 1);
	/* every size lies in its class: above the previous bound, at most its own */
	for (s = 1; s < (1u << 20); s = s * 3 / 2 + 1) {
		i = frag_class_of(s);
		if (!(s <= frag_class_bound(i) && (i == 0 || s > frag_class_bound(i - 1)))) {
			CHECK_EQ("size within its class", s, frag_class_bound(i));
			break;
		}
	}
	passed++;
	CHECK_EQ("log2 of 4096", frag_log2_of(4096), 12);
	CHECK_EQ("log2 of 4095", frag_log2_of(4095), 11);
	CHECK_EQ("huge size has a class", frag_class_of(UINT64_MAX / 2) < FRAG_NCLASS, 1);
}

/* The map against a plain array, through growth and backward-shift deletes. */
static void test_map(void)
{
	enum { N = 20000 };
	static uint64_t ref[N];
	struct fmap m;
	unsigned s = 12345, i, bad = 0;
	int found;

	fmap_init(&m, 4);
	for (i = 0; i < 200000; i++) {
		unsigned k = (s = s * 1103515245u + 12345u) % N;
		uint64_t key = (uint64_t)k * 4096 + 1;

		if (s & 0x10000) {
			uint64_t *v = fmap_put(&m, key, &found);

			if ((found != 0) != (ref[k] != 0))
				bad++;
			*v = i + 1;
			ref[k] = i + 1;
		} else {
			if (fmap_del(&m, key) != (ref[k] != 0))
				bad++;
			ref[k] = 0;
		}
	}
	for (i = 0; i < N; i++) {
		uint64_t *v = fmap_get(&m, (uint64_t)i * 4096 + 1);

		if ((v ? *v : 0) != ref[i])
			bad++;
	}
	CHECK_EQ("map agrees with the reference", bad, 0);
	fmap_release(&m);
}

int main(void)
{
	test_basic_layout();
	test_overlap_and_interior();
	test_shares();
	test_two_heaps();
	test_regions();
	test_classes();
	test_map();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
