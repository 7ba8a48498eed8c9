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

/* One buffer being added to the chunk (chunkpack_add). */
struct packer {
	const uint8_t *p, *end;
	uint8_t **w, *lim[HTR_PACK_NSTREAMS];
	struct chunkpack *cp;
	uint64_t seg_tick;		/* the buffer's base time, in ticks */
	int64_t grow;			/* what rebasing added to its plain length */
	int rebase_time, rebase_ptr;	/* its first time, first pointer still to come */
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

/* The length of a varint of value v. */
static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/*
 * A time delta to TIME.  The buffer's first one counts from its base time
 * (the shim starts each buffer afresh): it is written again to count from
 * the chunk's latest event, which chunkpack_add() made sure is not later.
 */
static void time_field(struct packer *k)
{
	struct chunkpack *cp = k->cp;
	const uint8_t *q;
	uint64_t v = 0, d;

	if (!k->rebase_time) {
		move(k, HTR_PS_TIME, &v);
		cp->tick += v;
		return;
	}
	if (k->bad)
		return;
	q = htr_get_u64(k->p, k->end, &v);
	if (!q) {
		k->bad = 1;
		return;
	}
	d = k->seg_tick + v - cp->tick;
	put(k, HTR_PS_TIME, d);
	k->grow += (int64_t)varint_len(d) - (q - k->p);
	k->p = q;
	cp->tick += d;
	k->rebase_time = 0;
}

/*
 * The pointer a pointer field names, and where its bytes end (*q).  The
 * buffer's first one is absolute; the others count from the previous one.
 */
static int read_ptr(struct packer *k, const uint8_t **q, uint64_t *abs)
{
	uint64_t v = 0;

	if (k->bad)
		return -1;
	*q = htr_get_u64(k->p, k->end, &v);
	if (!*q) {
		k->bad = 1;
		return -1;
	}
	*abs = (k->rebase_ptr ? 0 : k->cp->prev) +
	       (uint64_t)(k->units ? htr_ptr_delta(v) : htr_unzigzag(v));
	return 0;
}

/* A rebased pointer field: written as the delta from the chunk's previous pointer. */
static void put_rebased(struct packer *k, int s, const uint8_t *q, uint64_t abs)
{
	uint8_t enc[HTR_VARINT_MAX], *e = enc_ptr(enc, k->units, (int64_t)(abs - k->cp->prev));

	if (s >= 0)
		emit(k, s, enc, (size_t)(e - enc));
	k->grow += (e - enc) - (q - k->p);
	k->p = q;
	k->cp->prev = abs;
	k->rebase_ptr = 0;
}

/* A pointer field copied to PTR; the absolute pointer it names. */
static uint64_t plain_ptr(struct packer *k)
{
	const uint8_t *q;
	uint64_t v = 0, abs;

	if (k->rebase_ptr) {
		if (read_ptr(k, &q, &abs) != 0)
			return 0;
		put_rebased(k, HTR_PS_PTR, q, abs);
		return abs;
	}
	move(k, HTR_PS_PTR, &v);
	k->cp->prev += (uint64_t)(k->units ? htr_ptr_delta(v) : htr_unzigzag(v));
	return k->cp->prev;
}

/*
 * The pointer of an ALLOC (look among the chunk's frees) or a FREE (among
 * its allocations): in REUSE with bit 7 on the event byte when found and
 * the delta is written the way the reader will write it back, else in PTR.
 * Either way the map then says what this event did with the pointer.
 */
static void model_ptr(struct packer *k, uint8_t *op, unsigned is_free)
{
	struct chunkpack *cp = k->cp;
	struct chunkpack_map *m = &cp->map;
	const uint8_t *q;
	uint8_t enc[HTR_VARINT_MAX], *e;
	uint64_t abs, *ent;
	uint32_t count = is_free ? cp->nalloc : cp->nfree;
	int hit;

	if (read_ptr(k, &q, &abs) != 0)
		return;
	ent = map_at(m, abs);
	/* found, and last allocated (for a free) or freed (for an allocation) */
	hit = ent && *ent && !(*ent & MAP_FREED) == !!is_free;
	if (hit && !k->rebase_ptr) {
		/* and the reader writes back the bytes the shim wrote */
		e = enc_ptr(enc, k->units, (int64_t)(abs - cp->prev));
		hit = same(enc, (size_t)(e - enc), k->p, (size_t)(q - k->p));
	}
	if (hit) {
		put(k, HTR_PS_REUSE, count - (uint32_t)(*ent & 0xffff) - 1);
		*op |= 0x80;
		if (k->rebase_ptr) {
			put_rebased(k, -1, q, abs);
		} else {
			k->p = q;
			cp->prev = abs;
		}
	} else if (k->rebase_ptr) {
		put_rebased(k, HTR_PS_PTR, q, abs);
	} else {
		plain_ptr(k);
	}
	map_set(m, ent, abs, is_free, is_free ? cp->nfree++ : cp->nalloc++);
}

static void control(struct packer *k)
{
	const uint8_t *f;
	uint64_t sub = 0, n = 0;

	time_field(k);
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
		time_field(k);
		model_ptr(k, op, 0);
		move(k, HTR_PS_SIZE, &size);
		extra(k, size);
		move(k, HTR_PS_STACKID, NULL);
		break;
	case HTR_EV_FREE:
		time_field(k);
		model_ptr(k, op, 1);
		break;
	case HTR_EV_REALLOC:
		time_field(k);
		time_field(k);
		old = plain_ptr(k);
		ptr = plain_ptr(k);
		if (ptr != old)
			map_note(&cp->map, old, 1, cp->nfree++);
		map_note(&cp->map, ptr, 0, cp->nalloc++);
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

void chunkpack_begin(struct chunkpack *cp, int units, unsigned shift)
{
	int i;

	map_clear(&cp->map);
	for (i = 0; i < HTR_PACK_NSTREAMS; i++)
		cp->w[i] = cp->s[i];
	cp->plain_len = 0;
	cp->prev = 0;
	cp->tick = 0;
	cp->nalloc = cp->nfree = 0;
	cp->units = units;
	cp->shift = shift;
	cp->nbufs = 0;
	cp->closed = 0;
}

int chunkpack_add(struct chunkpack *cp, const uint8_t *in, size_t len, uint64_t base_time)
{
	struct packer k;
	uint8_t *saved[HTR_PACK_NSTREAMS];
	uint64_t prev = cp->prev, tick = cp->tick;
	uint32_t nalloc = cp->nalloc, nfree = cp->nfree;
	int i;

	if (cp->closed)
		return -1;
	memset(&k, 0, sizeof(k));
	k.seg_tick = base_time >> cp->shift;
	if (cp->nbufs) {
		/* joined: its first time and pointer count from the chunk's last */
		if (k.seg_tick < cp->tick) {
			cp->closed = 1;
			return -1;
		}
		k.rebase_time = k.rebase_ptr = 1;
	} else {
		cp->tick = k.seg_tick;
	}
	k.p = in;
	k.end = in + len;
	k.cp = cp;
	k.w = cp->w;
	k.units = cp->units;
	for (i = 0; i < HTR_PACK_NSTREAMS; i++) {
		saved[i] = cp->w[i];
		k.lim[i] = cp->s[i] + cp->cap;
	}
	while (k.p < k.end && !k.bad)
		event(&k);
	if (k.bad) {
		/* as before the call; the map is only ever read by this chunk's next events */
		for (i = 0; i < HTR_PACK_NSTREAMS; i++)
			cp->w[i] = saved[i];
		cp->prev = prev;
		cp->tick = tick;
		cp->nalloc = nalloc;
		cp->nfree = nfree;
		cp->closed = 1;
		return -1;
	}
	cp->plain_len += (uint64_t)((int64_t)len + k.grow);
	cp->nbufs++;
	return 0;
}

size_t chunkpack_finish(struct chunkpack *cp, uint8_t *out)
{
	uint8_t *o = out;
	size_t total = 0;
	int i;

	map_clear(&cp->map);
	cp->closed = 1;
	for (i = 0; i < HTR_PACK_NSTREAMS; i++)
		total += (size_t)(cp->w[i] - cp->s[i]);
	if (!cp->nbufs || total > cp->plain_len)
		return 0;
	*o++ = HTR_PACK_COLUMNS;
	o = htr_put_u64(o, cp->plain_len);
	for (i = 0; i < HTR_PACK_NSTREAMS - 1; i++)
		o = htr_put_u64(o, (uint64_t)(cp->w[i] - cp->s[i]));
	for (i = 0; i < HTR_PACK_NSTREAMS; i++) {
		size_t n = (size_t)(cp->w[i] - cp->s[i]);

		memcpy(o, cp->s[i], n);
		o += n;
	}
	return (size_t)(o - out);
}
