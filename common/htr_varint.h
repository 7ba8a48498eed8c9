/* htr_varint.h - LEB128 varints and zigzag deltas shared by shim and analyzer */
#ifndef HTR_VARINT_H
#define HTR_VARINT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Encoders write into a buffer the caller sized with HTR_VARINT_MAX bytes of
 * room per value and return the new write position.  Decoders never read past
 * 'end': on a truncated or over-long varint they return NULL, which callers
 * turn into a "corrupt record" error.
 */
#define HTR_VARINT_MAX 10

static inline uint8_t *htr_put_u64(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint64_t htr_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t htr_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline uint8_t *htr_put_s64(uint8_t *p, int64_t v)
{
	return htr_put_u64(p, htr_zigzag(v));
}

static inline const uint8_t *htr_get_u64(const uint8_t *p, const uint8_t *end,
					 uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (p < end && shift < 64) {
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return p;
		}
		shift += 7;
	}
	return NULL;
}

static inline const uint8_t *htr_get_s64(const uint8_t *p, const uint8_t *end,
					 int64_t *out)
{
	uint64_t v;

	p = htr_get_u64(p, end, &v);
	if (p)
		*out = htr_unzigzag(v);
	return p;
}

/*
 * Pointer deltas under HTR_PF_PTR_UNITS: allocators hand out 16-byte aligned
 * blocks, so most deltas are multiples of 16; those are written in units of
 * 16 (low bit 0), the rest in bytes (low bit 1).
 */
static inline uint8_t *htr_put_ptr(uint8_t *p, int64_t delta)
{
	if (!(delta & 15))
		return htr_put_u64(p, htr_zigzag(delta / 16) << 1);
	return htr_put_u64(p, htr_zigzag(delta) << 1 | 1);
}

static inline int64_t htr_ptr_delta(uint64_t v)
{
	if (v & 1)
		return htr_unzigzag(v >> 1);
	return (int64_t)((uint64_t)htr_unzigzag(v >> 1) << 4);
}

#endif
