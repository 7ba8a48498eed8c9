/* compact.h - what the compact dump's writer and reader share (htr_compact.h) */
#ifndef HT_COMPACT_H
#define HT_COMPACT_H

#include <stdint.h>
#include <stddef.h>

/* A growing byte buffer; every put returns -1 when out of memory. */
struct cbuf {
	uint8_t *p;
	size_t n, cap;
};

int cbuf_room(struct cbuf *b, size_t n);
int cbuf_u(struct cbuf *b, uint64_t v);
int cbuf_s(struct cbuf *b, int64_t v);
int cbuf_ptr(struct cbuf *b, int64_t delta);	/* htr_put_ptr() */
int cbuf_byte(struct cbuf *b, uint8_t v);
int cbuf_bytes(struct cbuf *b, const void *p, size_t n);	/* length, then the bytes */
int cbuf_raw(struct cbuf *b, const void *p, size_t n);
void cbuf_free(struct cbuf *b);

/* Byte *p[idx] made to exist, new bytes 0 (*cap grows by doubling); -1 when out of memory. */
int cbytes_reach(uint8_t **p, size_t *cap, size_t idx);

/*
 * Synthetic addresses, as the reader gives them and the writer foresees
 * them: slot n is address HTR_COMPACT_SYNTH_BASE + 16 n; an allocation
 * takes the slot freed last, else a new one (so that the reader's handle
 * map meets the same few addresses again, as with a real allocator).
 */
struct csynth {
	uint64_t *freed;
	size_t nfreed, capfreed;
	uint64_t next;			/* slots ever given */
};

uint64_t csynth_take(struct csynth *s);
int csynth_give(struct csynth *s, uint64_t slot);	/* -1 when out of memory */
void csynth_free(struct csynth *s);

/*
 * The live blocks of each allocation key, newest first, which the writer
 * and the reader keep alike (htr_compact.h).  Blocks are numbered by the
 * caller from 1 (a handle); 0 ends a list.  Keys are numbered from 0 in
 * the order they are added.
 */
struct cnode {
	uint64_t synth;			/* the block's synthetic address */
	uint32_t key, prev, next;	/* prev: newer, next: older */
	uint32_t live;
};

struct ckey {
	uint64_t size, extra;
	uint32_t stack, head, tail;	/* head: the newest block, tail: the oldest */
};

struct clists {
	struct cnode *node;
	size_t capnode;
	struct ckey *key;
	size_t nkeys, capkeys;
	uint32_t *slot;			/* key hash: key number + 1, 0 empty */
	size_t nslots;
};

/* Room for block h; -1 when out of memory. */
int clists_reserve(struct clists *l, uint32_t h);
/* Block h (reserved, not live) becomes the newest of key k. */
void clists_link(struct clists *l, uint32_t h, uint32_t k, uint64_t synth);
void clists_unlink(struct clists *l, uint32_t h);
/*
 * Ranks name a block within its key's list from either end: 2 r for the
 * block r places behind the newest, 2 r + 1 for the one r places before
 * the oldest.
 */
/* Block y leaves its place in the list and takes x's place and address; x is gone. */
void clists_replace(struct clists *l, uint32_t x, uint32_t y);
/* The block of key k at 'rank'; 0 when there is none. */
uint32_t clists_nth(const struct clists *l, uint32_t k, uint64_t rank);
/* Block h's rank, counting at most max places from either end; -1 when deeper. */
int64_t clists_rank(const struct clists *l, uint32_t h, unsigned max);
/* The key's number, -1 when it has none yet. */
int64_t clists_find(const struct clists *l, uint64_t size, uint64_t extra, uint32_t stack);
/* A new key's number, found by clists_find() when 'find'; -1 when out of memory. */
int64_t clists_add(struct clists *l, uint64_t size, uint64_t extra, uint32_t stack, int find);
void clists_free(struct clists *l);

#endif
