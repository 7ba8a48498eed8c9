/* chunkpack.h - the writer's columnar packing of chunks (HTR_PF_PACKED, htr_chunkpack.h) */
#ifndef HT_CHUNKPACK_H
#define HT_CHUNKPACK_H

#include <stddef.h>
#include <stdint.h>

#include "htr_chunkpack.h"

/* Room a packed chunk may need beyond its plain length: mode, lengths. */
#define CHUNKPACK_SLACK (2 + (HTR_PACK_NSTREAMS + 1) * 10)

/*
 * Pointer -> what the chunk did with it last: allocated (slot among its
 * allocations) or freed (slot among its frees).  Open addressing over
 * 8-byte entries, (pointer / 16) << 17 | freed << 16 | slot, 0 = empty;
 * emptied after each chunk through the list of entries it filled.  One
 * probe per allocation or free, in a table that stays in cache.
 */
#define CHUNKPACK_MAP_SLOTS 16384u

struct chunkpack_map {
	uint64_t *e;
	uint16_t *used;		/* entries filled by this chunk */
	size_t n;
};

/*
 * Which of the chunk's first CHUNKPACK_LIVE_SLOTS allocations ([0]) and
 * frees ([1]) are gone (named by a REUSE number, htr_chunkpack.h): a bit
 * each, and a Fenwick tree of the counts for "how many gone past slot s".
 * Only slots the map can hold are ever named (slot < 2^16), so later ones
 * stay live.  Emptied after each chunk through the list of slots it ended.
 */
#define CHUNKPACK_LIVE_SLOTS 0x10000u

struct chunkpack_live {
	uint32_t *fen[2];	/* 1-based, CHUNKPACK_LIVE_SLOTS + 1 entries */
	uint64_t *gone[2];	/* bitmaps */
	uint32_t *ended;	/* kind << 16 | slot of each ending in this chunk */
	size_t n;
};

/* The writer's scratch: streams of 'cap' bytes, the map, the live slots (taken once). */
struct chunkpack {
	uint8_t *s[HTR_PACK_NSTREAMS];
	size_t cap;
	struct chunkpack_map map;
	struct chunkpack_live live;
};

/* Bytes of memory chunkpack_init() needs for streams of 'cap' bytes. */
size_t chunkpack_size(size_t cap);
/* Lays the scratch out in 'mem' (chunkpack_size(cap) bytes, zeroed). */
void chunkpack_init(struct chunkpack *cp, uint8_t *mem, size_t cap);

/*
 * Packs 'len' bytes of one chunk's events (in the shim's encoding; units:
 * HTR_PF_PTR_UNITS) into 'out', which has room for len + CHUNKPACK_SLACK
 * bytes; returns the packed length.  Events it cannot parse, or a chunk
 * its streams cannot hold, are written as they are (HTR_PACK_RAW):
 * packing never fails.
 */
size_t chunkpack(struct chunkpack *cp, uint8_t *out, const uint8_t *in, size_t len,
		 int units);

#endif
