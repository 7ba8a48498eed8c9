/* reach.h - interfaces between the files of the reachability scan */
#ifndef HT_REACH_H
#define HT_REACH_H

/*
 * The scan (HEAPTRAIL_REACH, docs/reachability.md) is three steps, one file
 * each:
 *   reach.c        the live-block set kept on every heap event, the entry
 *                  points (exit, heaptrail_reach_snapshot, the marker
 *                  signal) and the REACH records written to the dump;
 *   reach_world.c  stopping the other threads, reading /proc/self/maps and
 *                  naming the roots (module data, stacks, registers, TLS);
 *   reach_mark.c   the blocks sorted by address, the conservative mark from
 *                  the roots and memcheck's classes.
 * Everything lives in one scratch region reset at each scan; nothing here
 * calls malloc, stdio or anything that may take a lock a stopped thread
 * could hold (the world is stopped inside dl_iterate_phdr, holding the
 * loader's lock, as LeakSanitizer does).
 */

#include <stddef.h>
#include <stdint.h>

#include "shim.h"

/* One readable mapping from /proc/self/maps. */
struct reach_map {
	uintptr_t lo, hi;
	unsigned flags;		/* REACH_MAP_* */
};

enum {
	REACH_MAP_W = 1,	/* writable */
	REACH_MAP_ANON = 2,	/* no file behind it */
	REACH_MAP_STACK = 4,	/* [stack]: the main thread's */
	REACH_MAP_GUARD = 8,	/* ---p: not readable (kept to spot thread stacks) */
};

/* A live block, sorted by address. */
struct reach_block {
	uintptr_t ptr;
	uint64_t size;
};

/* States during the mark (memcheck's); the REACH classes at the end. */
enum {
	RS_UNREACHED = 0,	/* -> HTR_REACH_LOST unless a clique takes it */
	RS_POSSIBLE = 1,	/* reached only through an interior pointer or a possible block */
	RS_REACHED = 2,		/* a start pointer from a root or a reached block */
	RS_INDIRECT = 3,	/* reached only from lost blocks */
};

struct reach_scan {
	struct ht_region *mem;	/* scratch, reset per scan */

	/* the memory map, taken with the world stopped */
	struct reach_map *maps;
	size_t nmaps;

	/* the blocks and their states */
	struct reach_block *b;
	uint8_t *state;
	size_t n, cap;
	uintptr_t lo, hi;	/* lowest start, highest end */
	uint32_t *dir;		/* page directory of the blocks (reach_mark.c) */
	unsigned dir_shift;

	uint32_t *stack;	/* the mark stack: block indexes */
	size_t nstack, capstack;

	int safe_reads;		/* a thread runs on: copy memory with process_vm_readv */
	int glibc_chunks;	/* the real allocator is glibc's (reach_mark.c) */
	uint8_t *copy;		/* the copy buffer for safe reads */
	uint64_t root_bytes;	/* figures for the message of HEAPTRAIL_REACH_DEBUG */
	uint64_t heap_bytes;
};

/* ---- reach_mark.c ---- */
/* Sort s->b by address, index it, map the state and stack arrays. */
int mark_prepare(struct reach_scan *s);
/* Index of the block holding address w, or -1. */
int64_t mark_find(const struct reach_scan *s, uintptr_t w);
/* The readable mapping holding address a, or NULL. */
const struct reach_map *mark_map_at(const struct reach_scan *s, uintptr_t a);
/*
 * A root range: its readable parts, less the blocks lying in it (a heap
 * block is never a root of its own), are scanned for pointers.
 */
void mark_root_range(struct reach_scan *s, uintptr_t lo, uintptr_t hi);
/* A root word (a register). */
void mark_root_word(struct reach_scan *s, uintptr_t w);
/* After every root: propagate, then sort the rest into lost and indirect. */
void mark_finish(struct reach_scan *s);
/* The HTR_REACH_* class of block i after mark_finish(). */
unsigned mark_class(const struct reach_scan *s, size_t i);

/* ---- reach_world.c ---- */
/* Once, at start: the real sigaction, the runtime's TLS sizes. */
void world_init(void);
/* The real malloc is glibc's (its chunk headers sit between blocks). */
int world_glibc_malloc(void);
/*
 * Stop every other thread of the process but the writer; 0 when every one
 * answered (else the ones that did not are scanned from outside, and
 * s->safe_reads is set).  Memory for the bookkeeping comes from s->mem.
 */
int world_stop(struct reach_scan *s);
/* Read /proc/self/maps into s->maps; 0 or negative errno. */
int world_read_maps(struct reach_scan *s);
/*
 * Feed every root to mark_root_range/mark_root_word: the writable segments
 * of loaded modules but the shim's, each thread's stack, registers and TLS
 * (own_uc: the scanning thread's context, taken at the entry point).
 */
void world_roots(struct reach_scan *s, const void *own_uc);
/* Let the stopped threads go. */
void world_resume(void);
/* A thread that took the stop signal inside a set operation parks now. */
void world_park_deferred(void);

/* Set around every live-set operation: the stop signal then waits for its end. */
extern __thread int reach_in_set_op;
extern __thread int reach_park_pending;	/* slot + 1 */

#endif
