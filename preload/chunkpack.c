/* chunkpack.c - the writer's reversible columnar packing of a chunk's events */
#include <string.h>

#include "chunkpack.h"
#include "htr_format.h"
#include "htr_varint.h"

/*
 * The writer thread packs each chunk just before its frame is compressed
 * (the program's threads write events as before and pay nothing): the
 * event bytes, time deltas, pointers, sizes, ... of the chunk each go to
 * a stream of their own (htr_chunkpack.h), which zstd compresses much
 * better than the interleaved events.  Values are moved, not decoded,
 * except where the layout needs them (depths, subs, string lengths),
 * usable_extra (written relative to glibc's slack) and the pointers of
 * allocations and frees, which are looked up among the chunk's latest
 * frees and allocations: a hit is written as how far back it was.
 */

struct packer {
	const uint8_t *p, *end;
	uint8_t *w[HTR_PACK_NSTREAMS], *lim[HTR_PACK_NSTREAMS];
	struct chunkpack *cp;
	uint64_t prev;			/* the chunk's previous pointer */
	uint32_t nalloc, nfree;		/* slots handed out so far */
	int units, bad;
};

#define MAP_MASK (CHUNKPACK_MAP_SLOTS - 1)
#define MAP_FREED (1u << 16)
/* Pointers the map can hold: 16-byte aligned, below 2^51; slots below 2^16. */
#define MAP_OK(ptr, slot) (!((ptr) & 15) && (ptr) && (ptr) < (1ull << 51) && \
			   (slot) < 0x10000u)

size_t chunkpack_size(size_t cap)
{
	return HTR_PACK_NSTREAMS * cap + CHUNKPACK_MAP_SLOTS * (8 + 2);
}

void chunkpack_init(struct chunkpack *cp, uint8_t *mem, size_t cap)
{
	int i;

	for (i = 0; i < HTR_PACK_NSTREAMS; i++)
		cp->s[i] = mem + (size_t)i * cap;
	cp->cap = cap;
	mem += HTR_PACK_NSTREAMS * cap;
	cp->map.e = (uint64_t *)(void *)mem;
	cp->map.used = (uint16_t *)(void *)(mem + CHUNKPACK_MAP_SLOTS * 8);
	cp->map.n = 0;
}

static void map_clear(struct chunkpack_map *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		m->e[m->used[i]] = 0;
	m->n = 0;
}

/*
 * The entry of ptr, or the empty one where it would go (*e == 0), or NULL
 * when the map cannot hold it (or is full for this chunk).
 */
static inline uint64_t *map_at(struct chunkpack_map *m, uint64_t ptr)
{
	uint64_t key = ptr >> 4, h = key * 0x9e3779b97f4a7c15ull;
	size_t i = (size_t)(h >> 40) & MAP_MASK;

	if (!MAP_OK(ptr, 0))
		return NULL;
	while (m->e[i]) {
		if (m->e[i] >> 17 == key)
			return &m->e[i];
		i = (i + 1) & MAP_MASK;
	}
	if (m->n >= CHUNKPACK_MAP_SLOTS / 2)
		return NULL;	/* full for this chunk: later pointers are not looked up */
	return &m->e[i];
}

/* What the chunk did with ptr last: allocated (freed 0) or freed it, as slot. */
static inline void map_set(struct chunkpack_map *m, uint64_t *e, uint64_t ptr,
			   unsigned freed, uint32_t slot)
{
	if (!e || !MAP_OK(ptr, slot))
		return;
	if (!*e)
		m->used[m->n++] = (uint16_t)(e - m->e);
	*e = (ptr >> 4) << 17 | (freed ? MAP_FREED : 0) | slot;
}

static inline void map_note(struct chunkpack_map *m, uint64_t ptr, unsigned freed,
			    uint32_t slot)
{
	map_set(m, map_at(m, ptr), ptr, freed, slot);
}

/* The n bytes of one varint to stream s (and its bytes after the first to s's HI). */
static void emit(struct packer *k, int s, const uint8_t *b, size_t n)
{
	int hi = htr_pack_hi(s);
	size_t i;

	if (hi >= 0 && n > 1) {
		if (k->w[s] == k->lim[s] || (size_t)(k->lim[hi] - k->w[hi]) < n - 1) {
			k->bad = 1;
			return;
		}
		*k->w[s]++ = b[0];
		for (i = 1; i < n; i++)
			*k->w[hi]++ = b[i];
		return;
	}
	if ((size_t)(k->lim[s] - k->w[s]) < n) {
		k->bad = 1;
		return;
	}
	for (i = 0; i < n; i++)
		*k->w[s]++ = b[i];
}

static void move_slow(struct packer *k, int s, uint64_t *v)
{
	const uint8_t *q;
	uint64_t x = 0;

	q = htr_get_u64(k->p, k->end, &x);
	if (!q) {
		k->bad = 1;
		return;
	}
	emit(k, s, k->p, (size_t)(q - k->p));
	k->p = q;
	if (v)
		*v = x;
}

/* Copy one varint from the events to stream s; its value in *v. */
static inline void move(struct packer *k, int s, uint64_t *v)
{
	if (k->bad)
		return;
	/* most values take one byte, many two */
	if (k->end - k->p >= 2 && k->w[s] < k->lim[s]) {
		uint8_t b = k->p[0], c = k->p[1];
		int hi;

		if (b < 0x80) {
			if (v)
				*v = b;
			*k->w[s]++ = b;
			k->p++;
			return;
		}
		hi = htr_pack_hi(s);
		if (c < 0x80 && (hi < 0 ? k->lim[s] - k->w[s] >= 2 : k->w[hi] < k->lim[hi])) {
			if (v)
				*v = (uint64_t)(b & 0x7f) | (uint64_t)c << 7;
			*k->w[s]++ = b;
			*k->w[hi >= 0 ? hi : s]++ = c;
			k->p += 2;
			return;
		}
	}
	move_slow(k, s, v);
}

static void put(struct packer *k, int s, uint64_t v)
{
	uint8_t b[HTR_VARINT_MAX];

	emit(k, s, b, (size_t)(htr_put_u64(b, v) - b));
}

/* n raw bytes (a string) to stream s */
static void bytes(struct packer *k, int s, uint64_t n)
{
	if (k->bad)
		return;
	if (n > (uint64_t)(k->end - k->p) || n > (uint64_t)(k->lim[s] - k->w[s])) {
		k->bad = 1;
		return;
	}
	memcpy(k->w[s], k->p, (size_t)n);
	k->w[s] += n;
	k->p += n;
}

static void extra(struct packer *k, uint64_t size)
{
	uint64_t x;
	const uint8_t *q;

	if (k->bad)
		return;
	q = htr_get_u64(k->p, k->end, &x);
	if (!q) {
		k->bad = 1;
		return;
	}
	k->p = q;
	put(k, HTR_PS_EXTRA, htr_zigzag((int64_t)(x - htr_pack_glibc_extra(size))));
}

static int same(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

static uint8_t *enc_ptr(uint8_t *o, int units, int64_t delta)
{
	return units ? htr_put_ptr(o, delta) : htr_put_s64(o, delta);
}

/* A pointer field copied to PTR; the absolute pointer it names. */
static uint64_t plain_ptr(struct packer *k)
{
	uint64_t v = 0;

	move(k, HTR_PS_PTR, &v);
	k->prev += (uint64_t)(k->units ? htr_ptr_delta(v) : htr_unzigzag(v));
	return k->prev;
}

/*
 * The pointer of an ALLOC (look among the chunk's frees) or a FREE (among
 * its allocations): in REUSE with bit 7 on the event byte when found and
 * the delta is written the way the reader will write it back, else in PTR.
 * Either way the map then says what this event did with the pointer.
 */
static void model_ptr(struct packer *k, uint8_t *op, unsigned is_free)
{
	struct chunkpack_map *m = &k->cp->map;
	const uint8_t *q;
	uint8_t enc[HTR_VARINT_MAX], *e;
	uint64_t v, abs, *ent;
	uint32_t count = is_free ? k->nalloc : k->nfree;

	if (k->bad)
		return;
	q = htr_get_u64(k->p, k->end, &v);
	if (!q) {
		k->bad = 1;
		return;
	}
	abs = k->prev + (uint64_t)(k->units ? htr_ptr_delta(v) : htr_unzigzag(v));
	ent = map_at(m, abs);
	/* found, and last allocated (for a free) or freed (for an allocation) */
	if (ent && *ent && !(*ent & MAP_FREED) == !!is_free &&
	    (e = enc_ptr(enc, k->units, (int64_t)(abs - k->prev)),
	     same(enc, (size_t)(e - enc), k->p, (size_t)(q - k->p)))) {
		put(k, HTR_PS_REUSE, count - (uint32_t)(*ent & 0xffff) - 1);
		*op |= 0x80;
		k->p = q;
		k->prev = abs;
	} else {
		plain_ptr(k);
	}
	map_set(m, ent, abs, is_free, is_free ? k->nfree++ : k->nalloc++);
}

static void control(struct packer *k)
{
	const uint8_t *f;
	uint64_t sub = 0, n = 0;

	move(k, HTR_PS_TIME, NULL);
	move(k, HTR_PS_OTHER, &sub);
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
			move(k, HTR_PS_OTHER, NULL);
			break;
		case HTR_CF_STR:
			move(k, HTR_PS_OTHER, &n);
			bytes(k, HTR_PS_OTHER, n);
			break;
		case HTR_CF_PTR:
			plain_ptr(k);
			break;
		case HTR_CF_SIZE:
			move(k, HTR_PS_SIZE, NULL);
			break;
		case HTR_CF_STACK:
			move(k, HTR_PS_STACKID, NULL);
			break;
		}
	}
}

static void event(struct packer *k)
{
	struct chunkpack *cp = k->cp;
	uint8_t b = *k->p++, *op;
	uint64_t size = 0, depth = 0, i, ptr, old;

	if (k->w[HTR_PS_OPS] == k->lim[HTR_PS_OPS] || (b & 0x80)) {
		k->bad = 1;	/* bit 7 is the reuse flag: an api this packer does not know */
		return;
	}
	op = k->w[HTR_PS_OPS]++;
	*op = b;
	switch (HTR_EV_TYPE(b)) {
	case HTR_EV_ALLOC:
		move(k, HTR_PS_TIME, NULL);
		model_ptr(k, op, 0);
		move(k, HTR_PS_SIZE, &size);
		extra(k, size);
		move(k, HTR_PS_STACKID, NULL);
		break;
	case HTR_EV_FREE:
		move(k, HTR_PS_TIME, NULL);
		model_ptr(k, op, 1);
		break;
	case HTR_EV_REALLOC:
		move(k, HTR_PS_TIME, NULL);
		move(k, HTR_PS_TIME, NULL);
		old = plain_ptr(k);
		ptr = plain_ptr(k);
		if (ptr != old)
			map_note(&cp->map, old, 1, k->nfree++);
		map_note(&cp->map, ptr, 0, k->nalloc++);
		move(k, HTR_PS_SIZE, &size);
		extra(k, size);
		move(k, HTR_PS_STACKID, NULL);
		break;
	case HTR_EV_STACK:
		move(k, HTR_PS_OTHER, NULL);
		move(k, HTR_PS_OTHER, &depth);
		if (depth > HTR_MAX_DEPTH)
			k->bad = 1;
		for (i = 0; i < depth && !k->bad; i++)
			move(k, HTR_PS_IPS, NULL);
		break;
	case HTR_EV_CONTROL:
		control(k);
		break;
	default:
		k->bad = 1;
	}
}

size_t chunkpack(struct chunkpack *cp, uint8_t *out, const uint8_t *in, size_t len,
		 int units)
{
	struct packer k;
	uint8_t *o = out;
	size_t total = 0;
	int i;

	memset(&k, 0, sizeof(k));
	k.p = in;
	k.end = in + len;
	k.cp = cp;
	k.units = units;
	for (i = 0; i < HTR_PACK_NSTREAMS; i++) {
		k.w[i] = cp->s[i];
		k.lim[i] = cp->s[i] + cp->cap;
	}
	while (k.p < k.end && !k.bad)
		event(&k);
	map_clear(&cp->map);
	for (i = 0; i < HTR_PACK_NSTREAMS; i++)
		total += (size_t)(k.w[i] - cp->s[i]);
	if (k.bad || total > len) {
		*o++ = HTR_PACK_RAW;
		memcpy(o, in, len);
		return 1 + len;
	}
	*o++ = HTR_PACK_COLUMNS;
	o = htr_put_u64(o, len);
	for (i = 0; i < HTR_PACK_NSTREAMS - 1; i++)
		o = htr_put_u64(o, (uint64_t)(k.w[i] - cp->s[i]));
	for (i = 0; i < HTR_PACK_NSTREAMS; i++) {
		size_t n = (size_t)(k.w[i] - cp->s[i]);

		memcpy(o, cp->s[i], n);
		o += n;
	}
	return (size_t)(o - out);
}
