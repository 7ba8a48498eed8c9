/* htr_chunkpack.h - the packed layout of a chunk's events (HTR_PF_PACKED), shared by shim and analyzer */
#ifndef HTR_CHUNKPACK_H
#define HTR_CHUNKPACK_H

#include <stddef.h>
#include <stdint.h>

#include "htr_format.h"

/*
 * Under HTR_PF_PACKED the nbytes of a CHUNK record are not its events but a
 * reversible rearrangement of them, made by the writer thread just before
 * the frame is compressed (preload/chunkpack.c) and undone by the reader
 * (analyzer/chunkunpack.c, scripts/htrdump.py).  Nothing is dropped: the
 * events come back byte for byte.  zstd compresses far better when like
 * goes with like: all the event bytes of the chunk together, all the time
 * deltas together, all the sizes, ...
 *
 *   mode byte   HTR_PACK_RAW: the events follow as they are (the writer
 *               chose not to pack the chunk, HEAPTRAIL_PACK=auto with no
 *               CPU to spare (preload/packpolicy.c), or could not parse
 *               them, e.g. an event type it does not know)
 *               HTR_PACK_COLUMNS: the layout below
 *   plain_len u the length of the events once unpacked
 *   HTR_PACK_NSTREAMS - 1 stream lengths u (the last stream takes the rest)
 *   the streams, one after the other
 *
 * Stream by stream, in the order of the events:
 *   OPS     each event's first byte ((api << 3) | type), with bit 7 set on
 *           an ALLOC or FREE whose pointer is in REUSE rather than PTR
 *   TIME    dt of every timed event, and a REALLOC's dt2
 *   PTR     every other pointer delta (ALLOC, FREE, REALLOC old and new,
 *           pool events), as written in the chunk
 *   REUSE   for a FREE with bit 7: u = n - 1 when its pointer is that of
 *           the n-th latest allocation of the chunk (ALLOC, or a
 *           REALLOC's new pointer); for an ALLOC with bit 7: u = n - 1
 *           when its pointer is that of the n-th latest free of the chunk
 *           (FREE, or the old pointer of a REALLOC that moved).  Most
 *           frees are of blocks allocated shortly before, and allocators
 *           hand out the blocks freed last: small numbers instead of
 *           pointer deltas.  The delta is written back as the chunk
 *           encoding of (pointer - previous pointer).
 *   SIZE    the size of ALLOC, REALLOC, POOL_ALLOC
 *   EXTRA   usable_extra of ALLOC and REALLOC, as u = zigzag(extra -
 *           glibc's, the slack glibc malloc would give 'size': max(size +
 *           8 rounded up to 16, 32) - 8 - size): 0 under glibc's malloc
 *   STACKID the stack_id of ALLOC, REALLOC, POOL_ALLOC
 *   IPS     the addresses of STACK definitions (depth values each)
 *   OTHER   everything else, in order: STACK's id and depth, CONTROL's sub
 *           and its fields but dt and the pointer
 *
 * PTR, REUSE and SIZE are split: the first byte of each varint goes to
 * the stream, the bytes after it (those of large values) to PTR_HI,
 * REUSE_HI, SIZE_HI.  Each value keeps its chunk encoding (varint,
 * zigzag, ticks, pointer units); only EXTRA is re-encoded, as said.  A reader refuses a packed
 * chunk whose streams do not add up exactly (lengths, plain_len, every
 * stream used to its end).
 */

enum htr_pack_mode { HTR_PACK_RAW = 0, HTR_PACK_COLUMNS = 1 };

enum htr_pack_stream {
	HTR_PS_OPS, HTR_PS_TIME, HTR_PS_PTR, HTR_PS_PTR_HI, HTR_PS_REUSE,
	HTR_PS_REUSE_HI, HTR_PS_SIZE, HTR_PS_SIZE_HI, HTR_PS_EXTRA,
	HTR_PS_STACKID, HTR_PS_IPS, HTR_PS_OTHER,
	HTR_PACK_NSTREAMS
};

/* The stream that takes the bytes after the first of stream s's varints, or -1. */
static inline int htr_pack_hi(int s)
{
	return s == HTR_PS_PTR || s == HTR_PS_REUSE || s == HTR_PS_SIZE ? s + 1 : -1;
}

/*
 * The fields of a CONTROL event after its time and sub (htr_format.h), in
 * order, as the packer and the unpacker walk them: a plain number (to the
 * OTHER stream), a string (its length, then its bytes, both to OTHER), a
 * pointer delta, a size, a stack id.  NULL for an unknown sub.
 */
enum htr_cf { HTR_CF_END = 0, HTR_CF_U, HTR_CF_STR, HTR_CF_PTR, HTR_CF_SIZE, HTR_CF_STACK };

static inline const uint8_t *htr_control_fields(uint64_t sub)
{
	static const uint8_t fields[][5] = {
		[HTR_SUB_THREAD_START] = { HTR_CF_U },
		[HTR_SUB_THREAD_EXIT] = { HTR_CF_END },
		[HTR_SUB_THREAD_NAME] = { HTR_CF_STR },
		[HTR_SUB_CLIENT_BEGIN] = { HTR_CF_U, HTR_CF_STR },
		[HTR_SUB_CLIENT_END] = { HTR_CF_U },
		[HTR_SUB_CLIENT_SET] = { HTR_CF_U },
		[HTR_SUB_POOL_CREATE] = { HTR_CF_U, HTR_CF_STR },
		[HTR_SUB_POOL_DESTROY] = { HTR_CF_U },
		[HTR_SUB_POOL_ALLOC] = { HTR_CF_U, HTR_CF_PTR, HTR_CF_SIZE, HTR_CF_STACK },
		[HTR_SUB_POOL_FREE] = { HTR_CF_U, HTR_CF_PTR },
	};

	if (sub < HTR_SUB_THREAD_START || sub > HTR_SUB_POOL_FREE)
		return NULL;
	return fields[sub];
}

/* Largest plain_len a reader accepts (a chunk is never larger than a frame). */
#define HTR_PACK_PLAIN_MAX (4u << 20)

/* The slack glibc's malloc gives a request of 'size' bytes (non-mmapped). */
static inline uint64_t htr_pack_glibc_extra(uint64_t size)
{
	uint64_t chunk = (size + 8 + 15) & ~(uint64_t)15;

	if (size > (UINT64_MAX >> 2))
		return 0;
	if (chunk < 32)
		chunk = 32;
	return chunk - 8 - size;
}

#endif
