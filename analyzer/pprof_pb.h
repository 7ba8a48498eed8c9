/* pprof_pb.h - a protocol buffers wire-format writer, just enough for profile.proto */
#ifndef HT_PPROF_PB_H
#define HT_PPROF_PB_H

#include <stdint.h>
#include <stddef.h>

/*
 * Appends fields to a growable byte buffer.  Nested messages and packed
 * repeated fields are written into a buffer of their own and added with
 * pb_bytes() (their length must precede them).  A failed allocation sets
 * 'err' (-ENOMEM) and makes every later call a no-op, so a writer checks
 * once at the end.
 */

struct pb {
	uint8_t *buf;
	size_t len, cap;
	int err;
};

enum pb_wire { PB_VARINT = 0, PB_LEN = 2 };

void pb_init(struct pb *p);
void pb_release(struct pb *p);
/* Empties the buffer, keeping its memory (and any error). */
void pb_reset(struct pb *p);

/* A bare varint (an element of a packed field). */
void pb_varint(struct pb *p, uint64_t v);
/* Field 'field' as a varint; int64 values go as their two's complement. */
void pb_uint(struct pb *p, unsigned field, uint64_t v);
void pb_int(struct pb *p, unsigned field, int64_t v);
/* Field 'field' as length-delimited bytes (strings, messages, packed fields). */
void pb_bytes(struct pb *p, unsigned field, const void *data, size_t len);
/* pb_bytes() of another buffer's contents; carries its error over. */
void pb_sub(struct pb *p, unsigned field, const struct pb *sub);

#endif
