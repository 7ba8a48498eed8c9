/* compact.c - byte buffers and key lists shared by the compact dump's writer and reader */
#include <stdlib.h>
#include <string.h>

#include "compact.h"
#include "htr_varint.h"

/* ---- byte buffers ---- */

int cbuf_room(struct cbuf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->cap - b->n >= n)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap - b->n < n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int cbuf_u(struct cbuf *b, uint64_t v)
{
	if (cbuf_room(b, HTR_VARINT_MAX))
		return -1;
	b->n = (size_t)(htr_put_u64(b->p + b->n, v) - b->p);
	return 0;
}

int cbuf_s(struct cbuf *b, int64_t v)
{
	return cbuf_u(b, htr_zigzag(v));
}

int cbuf_ptr(struct cbuf *b, int64_t delta)
{
	if (cbuf_room(b, HTR_VARINT_MAX))
		return -1;
	b->n = (size_t)(htr_put_ptr(b->p + b->n, delta) - b->p);
	return 0;
}

int cbuf_byte(struct cbuf *b, uint8_t v)
{
	if (cbuf_room(b, 1))
		return -1;
	b->p[b->n++] = v;
	return 0;
}

int cbuf_raw(struct cbuf *b, const void *p, size_t n)
{
	if (cbuf_room(b, n))
		return -1;
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

int cbuf_bytes(struct cbuf *b, const void *p, size_t n)
{
	return cbuf_u(b, n) || cbuf_raw(b, p, n) ? -1 : 0;
}

void cbuf_free(struct cbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

int cbytes_reach(uint8_t **p, size_t *cap, size_t idx)
{
	size_t old = *cap, n = old ? old : 4096;
	uint8_t *q;

	if (idx < old)
		return 0;
	while (n <= idx)
		n *= 2;
	q = realloc(*p, n);
	if (!q)
		return -1;
	memset(q + old, 0, n - old);
	*p = q;
	*cap = n;
	return 0;
}

/* ---- synthetic addresses ---- */

uint64_t csynth_take(struct csynth *s)
{
	return s->nfreed ? s->freed[--s->nfreed] : s->next++;
}

int csynth_give(struct csynth *s, uint64_t slot)
{
	if (s->nfreed == s->capfreed) {
		size_t cap = s->capfreed ? 2 * s->capfreed : 1024;
		uint64_t *f = realloc(s->freed, cap * sizeof(*f));

		if (!f)
			return -1;
		s->freed = f;
		s->capfreed = cap;
	}
	s->freed[s->nfreed++] = slot;
	return 0;
}

void csynth_free(struct csynth *s)
{
	free(s->freed);
	memset(s, 0, sizeof(*s));
}

/* ---- key lists ---- */

int clists_reserve(struct clists *l, uint32_t h)
{
	size_t cap;
	struct cnode *n;

	if (h < l->capnode)
		return 0;
	cap = l->capnode ? l->capnode : 1024;
	while (cap <= h)
		cap *= 2;
	n = realloc(l->node, cap * sizeof(*n));
	if (!n)
		return -1;
	memset(n + l->capnode, 0, (cap - l->capnode) * sizeof(*n));
	l->node = n;
	l->capnode = cap;
	return 0;
}

void clists_link(struct clists *l, uint32_t h, uint32_t k, uint64_t synth)
{
	struct cnode *n = &l->node[h];
	uint32_t old = l->key[k].head;

	n->synth = synth;
	n->key = k;
	n->prev = 0;
	n->next = old;
	n->live = 1;
	if (old)
		l->node[old].prev = h;
	else
		l->key[k].tail = h;
	l->key[k].head = h;
}

void clists_unlink(struct clists *l, uint32_t h)
{
	struct cnode *n = &l->node[h];

	if (n->prev)
		l->node[n->prev].next = n->next;
	else
		l->key[n->key].head = n->next;
	if (n->next)
		l->node[n->next].prev = n->prev;
	else
		l->key[n->key].tail = n->prev;
	n->live = 0;
	n->prev = n->next = 0;
}

void clists_replace(struct clists *l, uint32_t x, uint32_t y)
{
	struct cnode *nx, *ny;

	clists_unlink(l, y);
	nx = &l->node[x];
	ny = &l->node[y];
	ny->synth = nx->synth;
	ny->key = nx->key;
	ny->prev = nx->prev;
	ny->next = nx->next;
	ny->live = 1;
	if (ny->prev)
		l->node[ny->prev].next = y;
	else
		l->key[ny->key].head = y;
	if (ny->next)
		l->node[ny->next].prev = y;
	else
		l->key[ny->key].tail = y;
	nx->live = 0;
	nx->prev = nx->next = 0;
}

uint32_t clists_nth(const struct clists *l, uint32_t k, uint64_t rank)
{
	uint32_t h;
	uint64_t r = rank >> 1;

	if (k >= l->nkeys)
		return 0;
	if (rank & 1) {
		for (h = l->key[k].tail; h && r--;)
			h = l->node[h].prev;
	} else {
		for (h = l->key[k].head; h && r--;)
			h = l->node[h].next;
	}
	return h;
}

int64_t clists_rank(const struct clists *l, uint32_t h, unsigned max)
{
	const struct ckey *k = &l->key[l->node[h].key];
	uint32_t a = k->head, b = k->tail;
	int64_t r;

	for (r = 0; r <= (int64_t)max && a && b; r++) {
		if (a == h)
			return 2 * r;
		if (b == h)
			return 2 * r + 1;
		a = l->node[a].next;
		b = l->node[b].prev;
	}
	return -1;
}

static size_t key_hash(uint64_t size, uint64_t extra, uint32_t stack)
{
	uint64_t x = (size * 0x9e3779b97f4a7c15ull) ^ (extra << 40) ^
		     ((uint64_t)stack * 0xc2b2ae3d27d4eb4full);

	return (size_t)(x ^ (x >> 29));
}

int64_t clists_find(const struct clists *l, uint64_t size, uint64_t extra, uint32_t stack)
{
	size_t i;

	if (!l->nslots)
		return -1;
	for (i = key_hash(size, extra, stack) & (l->nslots - 1); l->slot[i];
	     i = (i + 1) & (l->nslots - 1)) {
		const struct ckey *k = &l->key[l->slot[i] - 1];

		if (k->size == size && k->extra == extra && k->stack == stack)
			return l->slot[i] - 1;
	}
	return -1;
}

static void slot_put(uint32_t *slot, size_t nslots, const struct ckey *k, uint32_t v)
{
	size_t i = key_hash(k->size, k->extra, k->stack) & (nslots - 1);

	while (slot[i])
		i = (i + 1) & (nslots - 1);
	slot[i] = v;
}

int64_t clists_add(struct clists *l, uint64_t size, uint64_t extra, uint32_t stack, int find)
{
	if (l->nkeys >= UINT32_MAX - 1)
		return -1;
	if (l->nkeys == l->capkeys) {
		size_t cap = l->capkeys ? 2 * l->capkeys : 1024;
		struct ckey *k = realloc(l->key, cap * sizeof(*k));

		if (!k)
			return -1;
		l->key = k;
		l->capkeys = cap;
	}
	if (find && 2 * (l->nkeys + 1) > l->nslots) {
		size_t n = l->nslots ? 2 * l->nslots : 2048, i;
		uint32_t *s = calloc(n, sizeof(*s));

		if (!s)
			return -1;
		for (i = 0; i < l->nkeys; i++)
			slot_put(s, n, &l->key[i], (uint32_t)i + 1);
		free(l->slot);
		l->slot = s;
		l->nslots = n;
	}
	l->key[l->nkeys] = (struct ckey){ size, extra, stack, 0, 0 };
	if (find)
		slot_put(l->slot, l->nslots, &l->key[l->nkeys], (uint32_t)l->nkeys + 1);
	return (int64_t)l->nkeys++;
}

void clists_free(struct clists *l)
{
	free(l->node);
	free(l->key);
	free(l->slot);
	memset(l, 0, sizeof(*l));
}
