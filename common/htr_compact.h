/* htr_compact.h - the compact dump encoding ('heaptrail pack --compact') */
#ifndef HTR_COMPACT_H
#define HTR_COMPACT_H

/*
 * A compact dump (process flag HTR_PF_COMPACT) keeps what the site-level
 * analyses need and drops what only 'frag' uses:
 *
 *  - block addresses: each block gets a synthetic address from the reader,
 *    HTR_COMPACT_SYNTH_BASE + 16 n for slot n, an allocation taking the
 *    slot freed last, else a new one (n counts from 0); a free names its
 *    block by its allocation key and rank, or by slot, never by address;
 *  - time finer than HTR_COMPACT_TIME_NS: an event's time is the recorded
 *    one rounded down to that, raised where needed to 1 ns after the event
 *    before it in the dump's merged order (so the order of every event of
 *    every thread is kept exactly, and times never go back).
 *
 * Its heap events live in HTR_REC_COMPACT records (no HTR_REC_CHUNK), each
 * a window of consecutive events of the merged stream, all threads
 * together.  Every other record is as in htr_format.h, its times and (for
 * HTR_REC_REACH) its addresses already the compact ones, and written
 * ahead of the window that holds the events around it (the END record
 * after every window); a watermark after every window.  Chunk encodings
 * in the process flags: HTR_PF_PTR_UNITS only (times in ns).
 *
 * HTR_REC_COMPACT body:
 *   nruns, nruns x (tid, base_time, nevents): the window's timed events of
 *     each thread, in the order the threads first appear in the window;
 *   HTR_CS_COUNT x stream length, then the streams one after another.
 *
 * Streams:
 *   HTR_CS_TIME  per run, run after run: each timed event's time, as the
 *                delta from the run's previous one (the first from
 *                base_time).  Merging the runs by time gives the window's
 *                events in order; every other stream follows that order.
 *   HTR_CS_OPS   one byte per op: (api << 3) | HTR_COP_*.
 *   HTR_CS_AKEY  an allocation's key number; the next number not yet
 *                defined defines it (HTR_CS_DEF: size s and stack id s as
 *                deltas from the key defined before, usable_extra, and, until the stack is defined, depth + 1 and its
 *                frames as in HTR_EV_STACK, or 0 when the writer has no
 *                definition yet: HTR_COP_STACK brings it later).
 *   HTR_CS_FKEY  a free's key number: the key its block was allocated with.
 *   HTR_CS_RANK  a free's rank, where its block is in the live blocks of
 *                that key: 2 r when r of them were allocated after it (0:
 *                the newest), 2 r + 1 when r of them before it (1: the
 *                oldest).
 *   HTR_CS_DEF   everything else, in op order: key and stack definitions,
 *                control fields, far and foreign blocks.
 *
 * The live blocks of each key form a list, newest first, which the writer
 * and the reader keep alike: an allocation puts its block first in its
 * key's list, a free takes it out.
 */

/*
 * 64: flag 32 marked the first version of this encoding (never released;
 * a reader refuses those dumps as corrupt rather than misreading them).
 */
#define HTR_PF_COMPACT 64u
#define HTR_REC_COMPACT 11
#define HTR_COMPACT_TIME_NS 1000000ull
#define HTR_COMPACT_SYNTH_BASE (1ull << 56)
/* A free whose block lies deeper in its key's list (from either end) is named by address. */
#define HTR_COMPACT_RANK_MAX 64

enum htr_compact_stream {
	HTR_CS_TIME,
	HTR_CS_OPS,
	HTR_CS_AKEY,
	HTR_CS_FKEY,
	HTR_CS_RANK,
	HTR_CS_DEF,
	HTR_CS_COUNT
};

/*
 * In the api bits of a FREE or FREE_ADDR op: a realloc's free half, whose
 * allocation half (REALLOC_NEW, or ALLOC_AT with HTR_COMPACT_AT_REALLOC)
 * is the thread's next timed op, in this window or a later one.
 */
#define HTR_COMPACT_PAIR 16u
/* In ALLOC_AT's flag: the allocation half of a realloc. */
#define HTR_COMPACT_AT_REALLOC 4u

/* Ops (the low 3 bits of an HTR_CS_OPS byte; the api above them). */
enum htr_compact_op {
	/* timed: an allocation (AKEY) */
	HTR_COP_ALLOC = 0,
	/* timed: a free of a live block (FKEY, RANK) */
	HTR_COP_FREE = 1,
	/* timed: the allocation half of a realloc whose free half came just before (AKEY) */
	HTR_COP_REALLOC_NEW = 2,
	/*
	 * timed: a free by address (DEF: flag, value): flag 1, a live block
	 * deeper than the writer's rank limit in its list, value = its slot;
	 * flag 0, a pointer that is not live (value: the recorded address, 0
	 * for free(NULL))
	 */
	HTR_COP_FREE_ADDR = 3,
	/*
	 * timed: an allocation at the address of a live block whose free was
	 * never recorded: DEF flag 0, FKEY and RANK name that block, flag 1,
	 * DEF its slot; the block keeps its address and takes the new key
	 * (AKEY).  Flag 2: a null result (AKEY only).
	 */
	HTR_COP_ALLOC_AT = 4,
	/* timed: a control event (DEF: sub, then its fields as in HTR_EV_CONTROL) */
	HTR_COP_CONTROL = 5,
	/* not timed: the next timed op's thread works for client (DEF: client id) */
	HTR_COP_CLIENT = 6,
	/*
	 * not timed: a stack whose definition the writer did not have when a
	 * key first used it (DEF: stack id, depth + 1, frames); it goes to the
	 * next timed op's chunk
	 */
	HTR_COP_STACK = 7,
};

#endif
