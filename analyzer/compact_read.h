/* compact_read.h - the dump reader's decoder of compact windows (htr_compact.h) */
#ifndef HT_COMPACT_READ_H
#define HT_COMPACT_READ_H

#include <stddef.h>
#include <stdint.h>

#include "compact.h"

/* One thread's events of a window, in the plain encoding, at buf + off. */
struct compact_chunk {
	uint32_t tid;
	uint64_t base;
	size_t off, len;
	size_t rec_off;			/* where its window's record is in the frame */
};

/* The chunks decoded from one frame's windows. */
struct compact_out {
	struct cbuf buf;
	struct compact_chunk *ch;
	size_t nch, capch;
};

struct compact_reader;

struct compact_reader *compact_reader_new(void);
void compact_reader_free(struct compact_reader *c);
void compact_out_reset(struct compact_out *o);
void compact_out_free(struct compact_out *o);

/*
 * Decodes the body [p, end) of an HTR_REC_COMPACT record at rec_off in its
 * frame, appending its chunks to o; *next is where the record ends.
 * Returns 0, -1 for malformed input (*why says what), -ENOMEM.  Windows
 * must be decoded in the order of the dump: each changes the block lists.
 */
int compact_decode(struct compact_reader *c, const uint8_t *p, const uint8_t *end,
		   size_t rec_off, struct compact_out *o, const uint8_t **next, const char **why);
/*
 * At the end of a compact dump cut short: the realloc free halves whose
 * allocation halves were lost with the cut, as plain frees (o reset
 * first); -1 when out of memory.
 */
int compact_carried_out(struct compact_reader *c, struct compact_out *o);
/* Where the body at p ends, NULL when malformed (no decoding). */
const uint8_t *compact_skip(const uint8_t *p, const uint8_t *end);

#endif
