/* chunkpack.h - the writer's columnar packing of chunks (HTR_PF_PACKED, htr_chunkpack.h) */
#ifndef HT_CHUNKPACK_H
#define HT_CHUNKPACK_H

#include <stddef.h>
#include <stdint.h>

#include "htr_chunkpack.h"

/* Room a packed chunk may need beyond its plain length: mode, lengths. */
#define CHUNKPACK_SLACK (2 + (HTR_PACK_NSTREAMS + 1) * 10)

/*
 * One packed chunk gathers consecutive buffers of one thread: at most this
 * many bytes of events (zstd finds more to share in a longer chunk: on a
 * two-thread malloc loop, chunks of 16 buffers make the dump a tenth
 * smaller than chunks of one) ...
 */
#define CHUNKPACK_MAX_BYTES (512u << 10)
/* ... and fewer events than this, so that every slot number fits the map. */
#define CHUNKPACK_MAX_EVENTS 65000u
/* Each buffer joined to a chunk may grow its plain length by this much. */
#define CHUNKPACK_JOIN_GROWTH (2 * 10)

/*
 * Pointer -> what the chunk did with it last: allocated (slot among its
 * allocations) or freed (slot among its frees).  Open addressing over
 * 8-byte entries, (pointer / 16) << 17 | freed << 16 | slot, 0 = empty;
 * emptied after each chunk through the list of entries it filled.  One
 * probe per allocation or free, in a table that stays in the cache.
 */
#define CHUNKPACK_MAP_SLOTS 65536u

struct chunkpack_map {
	uint64_t *e;
	uint16_t *used;		/* entries filled by this chunk */
	size_t n;
};

/* The writer's scratch (taken once) and the chunk being packed. */
struct chunkpack {
	uint8_t *s[HTR_PACK_NSTREAMS];
	size_t cap;
	struct chunkpack_map map;
	/* the chunk so far */
	uint8_t *w[HTR_PACK_NSTREAMS];	/* where each stream goes on */
	uint64_t plain_len;		/* its events' length once unpacked */
	uint64_t prev;			/* its previous pointer */
	uint64_t tick;			/* the time of its latest event, in ticks */
	uint32_t nalloc, nfree;		/* slots handed out so far */
	unsigned shift;			/* ns >> shift = ticks */
	int units, nbufs, closed;
};

/* Bytes of memory chunkpack_init() needs for streams of 'cap' bytes. */
size_t chunkpack_size(size_t cap);
/* Lays the scratch out in 'mem' (chunkpack_size(cap) bytes, zeroed). */
void chunkpack_init(struct chunkpack *cp, uint8_t *mem, size_t cap);

/*
 * A new chunk, of events in the shim's encoding (units:
 * HTR_PF_PTR_UNITS; shift: HTR_TICK_SHIFT under HTR_PF_TIME_TICKS, else 0).
 */
void chunkpack_begin(struct chunkpack *cp, int units, unsigned shift);

/*
 * Adds one buffer of the thread's events, 'len' bytes whose CHUNK record
 * would have had 'base_time' (ns), after those added before.  The shim
 * starts every buffer afresh (its first timed event has delta 0 from
 * base_time, its first pointer is absolute): the chunk continues from the
 * buffer before instead.  0 when added; -1 when it could not be (events
 * the packer cannot parse, streams full, a base time before the chunk's
 * last event): the chunk then holds what it held before the call, and
 * only chunkpack_finish() may follow.
 */
int chunkpack_add(struct chunkpack *cp, const uint8_t *in, size_t len, uint64_t base_time);

/*
 * Writes the chunk's record body (HTR_PACK_COLUMNS, lengths, streams) to
 * 'out', which has room for its plain length + CHUNKPACK_SLACK bytes, and
 * returns its length; 0 when the chunk is empty or would not be smaller
 * than its plain events: the caller then writes its buffers as they are.
 */
size_t chunkpack_finish(struct chunkpack *cp, uint8_t *out);

/* The plain length of the chunk so far (for the room chunkpack_finish needs). */
static inline uint64_t chunkpack_plain_len(const struct chunkpack *cp)
{
	return cp->plain_len;
}

#endif
