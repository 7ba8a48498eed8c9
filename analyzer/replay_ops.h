/* replay_ops.h - the operation stream 'heaptrail replay' feeds to heaptrail-replay-child */
#ifndef HT_REPLAY_OPS_H
#define HT_REPLAY_OPS_H

#include <stdint.h>
#include <stdio.h>

/*
 * The recorded allocation sequence, reduced to what an allocator sees:
 * sizes, order and lifetimes.  Blocks are named by slots, small integers
 * reused once freed, so the child keeps a flat table of pointers as large as
 * the most blocks ever live at once.
 *
 *   header  struct replay_ops_header (little endian, 64 bytes)
 *   ops     one byte (enum replay_op), then LEB128 varints (htr_varint.h):
 *             MALLOC slot size | CALLOC slot size | FREE slot |
 *             REALLOC slot size | MEMALIGN slot align size
 *
 * Both sides are built from this tree, so there is no versioning beyond the
 * magic.  The child trusts the stream only as far as a bad one cannot make
 * it write outside its table.
 */

#define REPLAY_OPS_MAGIC "HTROPS1\n"

struct replay_ops_header {
	char magic[8];
	uint64_t ops;		/* operations that follow */
	uint64_t slots;		/* highest slot + 1 */
	uint64_t allocations;	/* MALLOC, CALLOC, MEMALIGN and REALLOC ops */
	uint64_t peak_live_bytes;	/* requested bytes live at most, as replayed */
	uint64_t final_live_bytes;	/* ... at the end */
	uint64_t reserved[2];
};

enum replay_op {
	REPLAY_OP_MALLOC = 1,
	REPLAY_OP_CALLOC = 2,
	REPLAY_OP_FREE = 3,
	REPLAY_OP_REALLOC = 4,
	REPLAY_OP_MEMALIGN = 5,
};

#ifndef HT_REPLAY_CHILD
struct replay;
struct replay_ops;

/*
 * Follows 'r' (registers an observer) and writes the operations to 'out',
 * a file the caller opened for writing and reading.  NULL with errno set.
 */
struct replay_ops *replay_ops_new(struct replay *r, FILE *out);
/*
 * After the replay reached the end: ends blocks still pending, writes the
 * header at the start of the file and flushes.  0, or -errno (write error,
 * out of memory during the replay).
 */
int replay_ops_finish(struct replay_ops *o, struct replay_ops_header *h);
void replay_ops_free(struct replay_ops *o);
#endif

#endif
