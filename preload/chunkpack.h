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

/* The writer's scratch: streams of 'cap' bytes and the map (taken once). */
struct chunkpack {
	uint8_t *s[HTR_PACK_NSTREAMS];
	size_t cap;
	struct chunkpack_map map;
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
