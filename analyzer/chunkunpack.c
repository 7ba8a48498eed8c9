/* chunkunpack.c - rebuilds a chunk's events from the writer's columns (HTR_PF_PACKED) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunkunpack.h"
#include "htr_chunkpack.h"
#include "htr_format.h"
#include "htr_varint.h"

/*
 * The inverse of preload/chunkpack.c: walk the OPS stream and take each
 * event's fields from their streams, in the order the event has them.
 * Every read is checked against its stream's end and every write against
 * plain_len, so damaged input ends in an error, never past a buffer.
 */

struct unpacker {
	const uint8_t *r[HTR_PACK_NSTREAMS], *rend[HTR_PACK_NSTREAMS];
	uint8_t *w, *wend;
	uint64_t prev;			/* the chunk's previous pointer */
	uint64_t *aptr, *fptr;		/* pointers of its allocations, of its frees */
	uint32_t nalloc, nfree, max;
	int units, bad;
};

/*
 * One varint of stream s (its first byte from s, the rest from s's HI
 * stream when it is split) into b; returns its length, 0 when damaged.
 */
static size_t fetch(struct unpacker *k, int s, uint8_t *b, uint64_t *v)
{
	int hi = htr_pack_hi(s), from = s;
	uint64_t x = 0;
	size_t n = 0;

	for (;;) {
		uint8_t c;

		if (k->r[from] >= k->rend[from] || n == HTR_VARINT_MAX)
			return 0;
		c = *k->r[from]++;
		b[n] = c;
		x |= (uint64_t)(c & 0x7f) << (7 * n);
		n++;
		if (!(c & 0x80))
			break;
		if (hi >= 0)
			from = hi;
	}
	if (v)
		*v = x;
	return n;
}

static void take_slow(struct unpacker *k, int s, uint64_t *v)
{
	uint8_t b[HTR_VARINT_MAX];
	size_t n;

	if (k->bad)
		return;
	if ((size_t)(k->wend - k->w) >= HTR_VARINT_MAX) {
		/* room for any varint: fetched straight into the output */
		n = fetch(k, s, k->w, v);
		if (!n)
			k->bad = 1;
		k->w += n;
		return;
	}
	n = fetch(k, s, b, v);
	if (!n || (size_t)(k->wend - k->w) < n) {
		k->bad = 1;
		return;
	}
	memcpy(k->w, b, n);
	k->w += n;
}

/* Copy one varint of stream s to the output; its value in *v. */
static inline void take(struct unpacker *k, int s, uint64_t *v)
{
	/* most values take one byte */
	if (k->r[s] < k->rend[s] && k->wend - k->w >= 2) {
		uint8_t b = *k->r[s];
		int hi = htr_pack_hi(s);

		if (b < 0x80) {
			k->r[s]++;
			*k->w++ = b;
			if (v)
				*v = b;
			return;
		}
		/* two bytes, the second from the HI stream (sizes, reuse numbers) */
		if (hi >= 0 && k->r[hi] < k->rend[hi] && *k->r[hi] < 0x80) {
			uint8_t c = *k->r[hi]++;

			k->r[s]++;
			k->w[0] = b;
			k->w[1] = c;
			k->w += 2;
			if (v)
				*v = (uint64_t)(b & 0x7f) | (uint64_t)c << 7;
			return;
		}
	}
	take_slow(k, s, v);
}

static void take_bytes(struct unpacker *k, int s, uint64_t n)
{
	if (k->bad)
		return;
	if (n > (uint64_t)(k->rend[s] - k->r[s]) || n > (uint64_t)(k->wend - k->w)) {
		k->bad = 1;
		return;
	}
	memcpy(k->w, k->r[s], (size_t)n);
	k->w += n;
	k->r[s] += n;
}

static void take_extra(struct unpacker *k, uint64_t size)
{
	const uint8_t *q;
	uint64_t z, x;

	if (k->bad)
		return;
	q = htr_get_u64(k->r[HTR_PS_EXTRA], k->rend[HTR_PS_EXTRA], &z);	/* not split */
	if (!q || (size_t)(k->wend - k->w) < HTR_VARINT_MAX) {
		/* near the end: write through a bounce buffer */
		uint8_t tmp[HTR_VARINT_MAX], *e;

		if (!q) {
			k->bad = 1;
			return;
		}
		k->r[HTR_PS_EXTRA] = q;
		x = (uint64_t)htr_unzigzag(z) + htr_pack_glibc_extra(size);
		e = htr_put_u64(tmp, x);
		if ((size_t)(k->wend - k->w) < (size_t)(e - tmp)) {
			k->bad = 1;
			return;
		}
		memcpy(k->w, tmp, (size_t)(e - tmp));
		k->w += e - tmp;
		return;
	}
	k->r[HTR_PS_EXTRA] = q;
	x = (uint64_t)htr_unzigzag(z) + htr_pack_glibc_extra(size);
	k->w = htr_put_u64(k->w, x);
}

/* A pointer field from PTR: copied, and followed. */
static uint64_t take_ptr(struct unpacker *k)
{
	uint64_t v = 0;

	take(k, HTR_PS_PTR, &v);
	k->prev += (uint64_t)(k->units ? htr_ptr_delta(v) : htr_unzigzag(v));
	return k->prev;
}

/* An ALLOC's or FREE's pointer: from PTR, or with bit 7 from REUSE and 'slots'. */
static uint64_t take_modelled(struct unpacker *k, int reused, const uint64_t *slots,
			      uint32_t count)
{
	uint64_t n = 0, abs;
	int64_t delta;
	uint8_t tmp[HTR_VARINT_MAX], *e;

	if (!reused)
		return take_ptr(k);
	if (k->bad)
		return 0;
	if (k->r[HTR_PS_REUSE] < k->rend[HTR_PS_REUSE] && *k->r[HTR_PS_REUSE] < 0x80)
		n = *k->r[HTR_PS_REUSE]++;
	else if (!fetch(k, HTR_PS_REUSE, tmp, &n))
		n = UINT64_MAX;
	if (n >= count) {
		k->bad = 1;
		return 0;
	}
	abs = slots[count - 1 - n];
	delta = (int64_t)(abs - k->prev);
	k->prev = abs;
	/* room for any varint: straight to the output, no copy of a few bytes */
	if ((size_t)(k->wend - k->w) >= HTR_VARINT_MAX) {
		k->w = k->units ? htr_put_ptr(k->w, delta) : htr_put_s64(k->w, delta);
		return abs;
	}
	e = k->units ? htr_put_ptr(tmp, delta) : htr_put_s64(tmp, delta);
	if ((size_t)(k->wend - k->w) < (size_t)(e - tmp)) {
		k->bad = 1;
		return 0;
	}
	memcpy(k->w, tmp, (size_t)(e - tmp));
	k->w += e - tmp;
	return abs;
}

static void add_slot(struct unpacker *k, uint64_t *slots, uint32_t *count, uint64_t ptr)
{
	if (*count >= k->max) {
		k->bad = 1;
		return;
	}
	slots[(*count)++] = ptr;
}

static void control(struct unpacker *k)
{
	const uint8_t *f;
	uint64_t sub = 0, n = 0;

	take(k, HTR_PS_TIME, NULL);
	take(k, HTR_PS_OTHER, &sub);
	if (k->bad)
		return;
	f = htr_control_fields(sub);
	if (!f) {
		k->bad = 1;
		return;
	}
	for (; *f != HTR_CF_END && !k->bad; f++) {
		switch (*f) {
		case HTR_CF_U:
			take(k, HTR_PS_OTHER, NULL);
			break;
		case HTR_CF_STR:
			take(k, HTR_PS_OTHER, &n);
			take_bytes(k, HTR_PS_OTHER, n);
			break;
		case HTR_CF_PTR:
			take_ptr(k);
			break;
		case HTR_CF_SIZE:
			take(k, HTR_PS_SIZE, NULL);
			break;
		case HTR_CF_STACK:
			take(k, HTR_PS_STACKID, NULL);
			break;
		}
	}
}

static void event(struct unpacker *k)
{
	uint8_t b = *k->r[HTR_PS_OPS]++;
	int reused = b >> 7;
	uint64_t size = 0, depth = 0, i, ptr, old;

	if (k->w == k->wend) {
		k->bad = 1;
		return;
	}
	b &= 0x7f;
	if (reused && HTR_EV_TYPE(b) != HTR_EV_ALLOC && HTR_EV_TYPE(b) != HTR_EV_FREE) {
		k->bad = 1;
		return;
	}
	*k->w++ = b;
	switch (HTR_EV_TYPE(b)) {
	case HTR_EV_ALLOC:
		take(k, HTR_PS_TIME, NULL);
		ptr = take_modelled(k, reused, k->fptr, k->nfree);
		add_slot(k, k->aptr, &k->nalloc, ptr);
		take(k, HTR_PS_SIZE, &size);
		take_extra(k, size);
		take(k, HTR_PS_STACKID, NULL);
		break;
	case HTR_EV_FREE:
		take(k, HTR_PS_TIME, NULL);
		ptr = take_modelled(k, reused, k->aptr, k->nalloc);
		add_slot(k, k->fptr, &k->nfree, ptr);
		break;
	case HTR_EV_REALLOC:
		take(k, HTR_PS_TIME, NULL);
		take(k, HTR_PS_TIME, NULL);
		old = take_ptr(k);
		ptr = take_ptr(k);
		if (ptr != old)
			add_slot(k, k->fptr, &k->nfree, old);
		add_slot(k, k->aptr, &k->nalloc, ptr);
		take(k, HTR_PS_SIZE, &size);
		take_extra(k, size);
		take(k, HTR_PS_STACKID, NULL);
		break;
	case HTR_EV_STACK:
		take(k, HTR_PS_OTHER, NULL);
		take(k, HTR_PS_OTHER, &depth);
		if (depth > HTR_MAX_DEPTH)
			k->bad = 1;
		for (i = 0; i < depth && !k->bad; i++)
			take(k, HTR_PS_IPS, NULL);
		break;
	case HTR_EV_CONTROL:
		control(k);
		break;
	default:
		k->bad = 1;
	}
}

int chunk_unpack(struct chunkunpack *u, const uint8_t **pp, const uint8_t **endp,
		 int units, const char **why)
{
	const uint8_t *p = *pp, *end = *endp;
	uint64_t plain, len[HTR_PACK_NSTREAMS], left;
	struct unpacker k;
	int i;

	*why = "a packed chunk does not add up";
	if (p >= end)
		return -EINVAL;
	if (*p == HTR_PACK_RAW) {
		*pp = p + 1;
		return 0;
	}
	if (*p != HTR_PACK_COLUMNS) {
		*why = "a packed chunk of an unknown kind";
		return -EINVAL;
	}
	p = htr_get_u64(p + 1, end, &plain);
	if (!p || plain > HTR_PACK_PLAIN_MAX)
		return -EINVAL;
	for (i = 0; i < HTR_PACK_NSTREAMS - 1; i++) {
		p = htr_get_u64(p, end, &len[i]);
		if (!p)
			return -EINVAL;
	}
	left = (uint64_t)(end - p);
	for (i = 0; i < HTR_PACK_NSTREAMS - 1; i++) {
		if (len[i] > left)
			return -EINVAL;
		k.r[i] = p;
		k.rend[i] = p + len[i];
		p += len[i];
		left -= len[i];
	}
	k.r[i] = p;
	k.rend[i] = end;
	if (u->cap < plain || !u->buf) {
		size_t cap = plain > 4096 ? (size_t)plain : 4096;
		uint8_t *nb = malloc(cap);

		if (!nb)
			return -ENOMEM;
		free(u->buf);
		u->buf = nb;
		u->cap = cap;
	}
	/* an event is at least one byte of OPS: as many slots of each kind */
	if (u->nslots < 2 * len[HTR_PS_OPS] + 2) {
		size_t n = 2 * (size_t)len[HTR_PS_OPS] + 2;
		uint64_t *ns = malloc(n * sizeof *ns);

		if (!ns)
			return -ENOMEM;
		free(u->slots);
		u->slots = ns;
		u->nslots = n;
	}
	k.w = u->buf;
	k.wend = u->buf + plain;
	k.prev = 0;
	k.max = (uint32_t)len[HTR_PS_OPS] + 1;
	k.aptr = u->slots;
	k.fptr = u->slots + k.max;
	k.nalloc = k.nfree = 0;
	k.units = units;
	k.bad = 0;
	while (!k.bad && k.r[HTR_PS_OPS] < k.rend[HTR_PS_OPS])
		event(&k);
	if (k.bad || k.w != k.wend)
		return -EINVAL;
	for (i = 0; i < HTR_PACK_NSTREAMS; i++)
		if (k.r[i] != k.rend[i])
			return -EINVAL;
	*pp = u->buf;
	*endp = u->buf + plain;
	return 0;
}

void chunkunpack_free(struct chunkunpack *u)
{
	free(u->buf);
	free(u->slots);
	u->buf = NULL;
	u->slots = NULL;
	u->cap = u->nslots = 0;
}
