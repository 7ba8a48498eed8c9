/* dump_thread.c - decodes thread chunks: cursors, events, stacks and the module map */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunkunpack.h"
#include "dump.h"
#include "dump_internal.h"

static struct dump_frame empty_stack_frames[1];

/* ---- map ---- */

static size_t umap_home(const struct umap *m, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 29) & (m->cap - 1);
}

static uint64_t umap_get(const struct umap *m, uint64_t key)
{
	size_t i;

	if (!m->cap)
		return 0;
	for (i = umap_home(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return 0;
		if (m->keys[i] == key)
			return m->vals[i];
	}
}

static int umap_put(struct umap *m, uint64_t key, uint64_t val);

static int umap_rehash(struct umap *m, size_t cap)
{
	struct umap n = { calloc(cap, 8), calloc(cap, 8), cap, 0 };
	size_t i;

	if (!n.keys || !n.vals) {
		free(n.keys);
		free(n.vals);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++)
		if (m->vals[i])
			umap_put(&n, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

static int umap_put(struct umap *m, uint64_t key, uint64_t val)
{
	size_t i;

	if ((m->n + 1) * 4 > m->cap * 3 &&
	    umap_rehash(m, m->cap ? m->cap * 2 : 64))
		return -ENOMEM;
	for (i = umap_home(m, key); m->vals[i] && m->keys[i] != key;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!m->vals[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

/* Linear probing deletion by backward shift: no tombstones to pile up. */
static void umap_del(struct umap *m, uint64_t key)
{
	size_t mask = m->cap - 1, i, j, k;

	if (!m->cap)
		return;
	for (i = umap_home(m, key); m->vals[i]; i = (i + 1) & mask)
		if (m->keys[i] == key)
			break;
	if (!m->vals[i])
		return;
	for (j = i;;) {
		j = (j + 1) & mask;
		if (!m->vals[j])
			break;
		k = umap_home(m, m->keys[j]);
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->vals[i] = 0;
	m->n--;
}

/* ---- modules and stacks ---- */

/* Index of the module whose segment holds ip, or -1. */
static int module_at(const struct dump *d, uint64_t ip)
{
	size_t lo = 0, hi = d->nact;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (d->act[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && ip < d->act[lo - 1].end)
		return (int)d->act[lo - 1].mod;
	return -1;
}

/* A new mapping replaces whatever it overlaps, as mmap does. */
static int act_insert(struct dump *d, uint64_t start, uint64_t end, uint32_t mod)
{
	size_t i, j = 0;

	for (i = 0; i < d->nact; i++)
		if (d->act[i].end <= start || d->act[i].start >= end)
			d->act[j++] = d->act[i];
	d->nact = j;
	/*
	 * Inserting costs O(segments); a bound keeps a hostile dump's module
	 * churn linear.  Real processes map a few thousand segments at most;
	 * beyond the bound addresses simply stay unresolved.
	 */
	if (d->nact >= MAX_ACTIVE_SEGS)
		return 0;
	if (dump_grow((void **)&d->act, &d->capact, d->nact + 1, sizeof *d->act))
		return -ENOMEM;
	for (i = d->nact; i && d->act[i - 1].start > start; i--)
		d->act[i] = d->act[i - 1];
	d->act[i] = (struct seg){ start, end, mod };
	d->nact++;
	return 0;
}

static void act_remove(struct dump *d, uint32_t mod)
{
	size_t i, j = 0;

	for (i = 0; i < d->nact; i++)
		if (d->act[i].mod != mod)
			d->act[j++] = d->act[i];
	d->nact = j;
}

static struct dump_frame *arena_alloc(struct dump *d, size_t n)
{
	struct arena_block *b = d->arena;

	if (!b || b->used + n > FRAME_ARENA) {
		b = malloc(sizeof *b);
		if (!b)
			return NULL;
		b->next = d->arena;
		b->used = 0;
		d->arena = b;
	}
	b->used += n;
	return b->f + b->used - n;
}

/* Defines a stack from an HTR_EV_STACK body; a second definition is ignored. */
static int define_stack(struct dump *d, struct rd *r)
{
	uint64_t id = rd_u(r), depth = rd_u(r), ip = 0;
	struct dump_frame *fr;
	struct bev *e;
	uint64_t i;

	if (r->bad || id == HTR_STACK_NONE || id > UINT32_MAX ||
	    depth > HTR_MAX_DEPTH)
		return dump_bad(d, "bad stack definition");
	if (id >= d->capstacks) {
		size_t old = d->capstacks;

		if (id > 2 * (uint64_t)d->nstacks + STACK_ID_SLACK)
			return dump_bad(d, "stack id %llu far beyond the %u stacks defined",
					(unsigned long long)id, d->nstacks);
		if (dump_grow((void **)&d->stacks, &d->capstacks, id + 1, sizeof *d->stacks))
			return -ENOMEM;
		memset(d->stacks + old, 0, (d->capstacks - old) * sizeof *d->stacks);
	}
	if (d->stacks[id].frames) {
		for (i = 0; i < depth; i++)
			rd_u(r);
		return 0;
	}
	fr = depth ? arena_alloc(d, depth) : empty_stack_frames;
	if (!fr)
		return -ENOMEM;
	for (i = 0; i < depth; i++) {
		uint64_t v = rd_u(r);
		int m;

		ip = i ? ip + (uint64_t)htr_unzigzag(v) : v;
		/* return addresses: the call is the byte before, which may be
		 * the last one of its module */
		m = module_at(d, ip ? ip - 1 : 0);
		fr[i].ip = ip;
		fr[i].module = m;
		fr[i].offset = m >= 0 ? ip - d->mods[m].load_bias : ip;
	}
	d->stacks[id].depth = (uint32_t)depth;
	d->stacks[id].frames = fr;
	d->nstacks++;
	if (id > d->stack_max)
		d->stack_max = (uint32_t)id;
	/* the consumer's table learns it at this point of the stream */
	e = dump_bev_add(d);
	if (!e)
		return -ENOMEM;
	e->kind = BEV_STACK;
	e->handle = HANDLE_NONE;	/* read by the replay's read-ahead */
	e->aux = id;
	e->size = depth;
	e->ptr = (uintptr_t)fr;
	return 0;
}

/* ---- thread cursors ---- */

static void stop(struct dump *d, struct cursor *c, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof msg, "thread %u: %.200s", c->tid, why);
	d->stopped = 1;
	dump_warn(d, WARN_CORRUPT, c->f ? c->f->off : 0, msg);
}

/*
 * Applies the stack definitions queued before the head (c->span up to
 * 'stop').  A CLIENT_SET among them was applied when it was decoded.
 * Returns 0, -1 for corrupt input (d->why), -ENOMEM.
 */
static int apply_span(struct dump *d, struct cursor *c, const uint8_t *end)
{
	struct rd r = { c->span, end, 0 };

	c->span = NULL;
	while (r.p < r.end) {
		uint8_t b = *r.p++;
		int ret;

		if (HTR_EV_TYPE(b) == HTR_EV_STACK) {
			ret = define_stack(d, &r);
			if (ret)
				return ret;
		} else {
			rd_u(&r);	/* dt, sub, client */
			rd_u(&r);
			rd_u(&r);
		}
	}
	return 0;
}

/*
 * htr_get_u64() unrolled for the hot path: same result, same rejection of
 * a tenth byte with its continuation bit, but no loop and no bounds test
 * per byte when ten bytes are left.
 */
static inline const uint8_t *get_u_room(const uint8_t *p, uint64_t *out)
{
	uint64_t r, b;
	int i;

	b = p[0];
	if (b < 0x80) {
		*out = b;
		return p + 1;
	}
	r = b & 0x7f;
	b = p[1];
	r |= (b & 0x7f) << 7;
	if (b < 0x80) {
		*out = r;
		return p + 2;
	}
	b = p[2];
	r |= (b & 0x7f) << 14;
	if (b < 0x80) {
		*out = r;
		return p + 3;
	}
	for (i = 3; i < HTR_VARINT_MAX; i++) {
		b = p[i];
		r |= (b & 0x7f) << (7 * i);
		if (b < 0x80) {
			*out = r;
			return p + i + 1;
		}
	}
	return NULL;
}

static inline const uint8_t *get_u(const uint8_t *p, const uint8_t *end,
				   uint64_t *out)
{
	if (__builtin_expect(end - p < HTR_VARINT_MAX, 0))
		return htr_get_u64(p, end, out);
	return get_u_room(p, out);
}

#define GETU(v) do {							\
	if (!(p = get_u(p, end, &(v))))					\
		goto runs_off;						\
} while (0)

/* GETU when the event's fields cannot run off the chunk (checked once) */
#define GETU_ROOM(v) do {						\
	if (!(p = get_u_room(p, &(v))))					\
		goto runs_off;						\
} while (0)

#define GETSTR(s, n) do {						\
	uint64_t len_;							\
	GETU(len_);							\
	if (len_ > (uint64_t)(end - p))					\
		goto runs_off;						\
	(s) = p;							\
	(n) = (size_t)len_;						\
	p += len_;							\
} while (0)

#define PTR_DELTA(v) (units ? htr_ptr_delta(v) : htr_unzigzag(v))

static inline int api_ok(unsigned api)
{
	return api >= 1 && api < HTR_API_COUNT;
}

/*
 * Decodes the thread's next deliverable event into c->h, moving on to its
 * next queued chunk as needed.  Returns 1 with a head, 0 when the thread's
 * queue is empty, -1 on corrupt data (the reader is stopped) or -ENOMEM
 * (d->failed).
 */
static inline __attribute__((always_inline)) int cursor_advance(struct dump *d, struct cursor *c)
{
	const uint8_t *p = c->p, *end = c->end, *ev0 = NULL;
	uint64_t t = c->time, prev = c->prev_ptr, dt, v, v2, size, extra, stack, sub;
	/* the compact encodings the shim announces in the process record */
	unsigned tshift = d->tshift;
	int units = d->units;
	struct head *h = &c->h;
	struct bev *hb = &c->h.b;
	const char *what = "an event runs off the end of its chunk";
	int ret;

	for (;;) {
		if (p >= end) {
			if (c->span) {
				ret = apply_span(d, c, p);
				if (ret == -ENOMEM)
					goto nomem;
				if (ret) {
					what = d->why;
					goto corrupt;
				}
			}
			if (c->f) {
				dump_frame_unref(d, c->f);
				c->f = NULL;
			}
			if (!c->qlen) {
				c->p = c->end = NULL;
				c->time = t;
				c->prev_ptr = prev;
				return 0;
			}
			{
				struct chunk *ch = &c->q[c->qhead];

				c->qhead = (c->qhead + 1) & (c->qcap - 1);
				c->qlen--;
				d->hold -= ENTRY_COST;
				c->f = ch->f;
				p = ch->p;
				end = ch->end;
				/* the writer's columns back into events (HTR_PF_PACKED) */
				if ((d->proc.flags & HTR_PF_PACKED) && !ch->plain) {
					ret = chunk_unpack(&c->unpacked, &p, &end, units, &what);
					if (ret == -ENOMEM)
						goto nomem;
					if (ret)
						goto corrupt;
				}
				t = ch->base_time;
				prev = 0;
			}
			continue;
		}
		ev0 = p;
		uint8_t b = *p++;
		unsigned api = HTR_EV_API(b);

		switch (HTR_EV_TYPE(b)) {
		case HTR_EV_ALLOC:
			if (__builtin_expect(end - p >= 5 * HTR_VARINT_MAX, 1)) {
				GETU_ROOM(dt);
				GETU_ROOM(v);
				GETU_ROOM(size);
				GETU_ROOM(extra);
				GETU_ROOM(stack);
			} else {
				GETU(dt);
				GETU(v);
				GETU(size);
				GETU(extra);
				GETU(stack);
			}
			if (!api_ok(api) || stack > UINT32_MAX)
				goto bad_field;
			t += dt << tshift;
			prev += (uint64_t)PTR_DELTA(v);
			hb->kind = DUMP_ALLOC;
			h->cls = CLS_ALLOC;
			hb->api = (uint8_t)api;
			hb->time = t;
			hb->ptr = prev;
			hb->aux = 0;		/* old_ptr */
			hb->size = size;
			hb->usable = size + extra;
			hb->stack = (uint32_t)stack;
			hb->client = c->client;
			h->text = NULL;
			goto ready;
		case HTR_EV_FREE:
			if (__builtin_expect(end - p >= 2 * HTR_VARINT_MAX, 1)) {
				GETU_ROOM(dt);
				GETU_ROOM(v);
			} else {
				GETU(dt);
				GETU(v);
			}
			if (!api_ok(api))
				goto bad_field;
			t += dt << tshift;
			prev += (uint64_t)PTR_DELTA(v);
			hb->kind = DUMP_FREE;
			h->cls = CLS_FREE;
			hb->api = (uint8_t)api;
			hb->time = t;
			hb->ptr = prev;
			hb->aux = 0;
			hb->size = hb->usable = 0;
			hb->stack = 0;
			hb->client = c->client;
			h->text = NULL;
			goto ready;
		case HTR_EV_REALLOC: {
			uint64_t dt2, t1;

			GETU(dt);
			GETU(dt2);
			GETU(v);
			GETU(v2);
			GETU(size);
			GETU(extra);
			GETU(stack);
			if (!api_ok(api) || stack > UINT32_MAX)
				goto bad_field;
			t1 = t + (dt << tshift);
			t = t1 + (dt2 << tshift);
			hb->kind = DUMP_FREE;
			h->cls = CLS_FREE;
			hb->api = (uint8_t)api;
			hb->time = t1;
			hb->ptr = prev + (uint64_t)PTR_DELTA(v);
			hb->aux = 0;
			hb->size = hb->usable = 0;
			hb->stack = 0;
			hb->client = c->client;
			h->text = NULL;
			prev = hb->ptr + (uint64_t)PTR_DELTA(v2);
			hb->flags = BEV_PAIR;	/* the head's flags are 0 but here */
			c->r = *h;
			c->r.b.flags = 0;
			c->r.b.kind = DUMP_ALLOC;
			c->r.cls = CLS_ALLOC;
			c->r.b.time = t;
			c->r.b.ptr = prev;
			c->r.b.aux = hb->ptr;	/* old_ptr */
			c->r.b.size = size;
			c->r.b.usable = size + extra;
			c->r.b.stack = (uint32_t)stack;
			c->realloc_pending = 1;
			goto ready;
		}
		case HTR_EV_STACK: {
			uint64_t id, depth, i;

			GETU(id);
			GETU(depth);
			if (id == HTR_STACK_NONE || id > UINT32_MAX ||
			    depth > HTR_MAX_DEPTH) {
				what = "bad stack definition";
				goto corrupt;
			}
			for (i = 0; i < depth; i++)
				GETU(v);
			if (!c->span)
				c->span = ev0;
			continue;
		}
		case HTR_EV_CONTROL:
			GETU(dt);
			GETU(sub);
			t += dt << tshift;
			hb->time = t;
			h->cls = CLS_ALLOC;
			hb->api = 0;
			hb->ptr = hb->size = hb->usable = hb->aux = 0;
			hb->stack = 0;
			hb->client = c->client;
			h->text = NULL;
			switch (sub) {
			case HTR_SUB_THREAD_START:
				GETU(hb->aux);
				hb->kind = DUMP_THREAD_START;
				goto ready;
			case HTR_SUB_THREAD_EXIT:
				hb->kind = DUMP_THREAD_EXIT;
				goto ready;
			case HTR_SUB_THREAD_NAME:
				GETSTR(h->text, h->textlen);
				hb->kind = DUMP_THREAD_NAME;
				goto ready;
			case HTR_SUB_CLIENT_BEGIN:
				GETU(hb->aux);
				GETSTR(h->text, h->textlen);
				hb->kind = DUMP_CLIENT_BEGIN;
				goto ready;
			case HTR_SUB_CLIENT_END:
				GETU(hb->aux);
				hb->kind = DUMP_CLIENT_END;
				goto ready;
			case HTR_SUB_CLIENT_SET:
				GETU(v);
				c->client = v;
				continue;
			case HTR_SUB_POOL_CREATE:
				GETU(hb->aux);
				GETSTR(h->text, h->textlen);
				hb->kind = DUMP_POOL_CREATE;
				goto ready;
			case HTR_SUB_POOL_DESTROY:
				GETU(hb->aux);
				hb->kind = DUMP_POOL_DESTROY;
				goto ready;
			case HTR_SUB_POOL_ALLOC:
				GETU(hb->aux);
				GETU(v);
				GETU(size);
				GETU(stack);
				if (stack > UINT32_MAX)
					goto bad_field;
				prev += (uint64_t)PTR_DELTA(v);
				hb->ptr = prev;
				hb->size = hb->usable = size;
				hb->stack = (uint32_t)stack;
				hb->kind = DUMP_POOL_ALLOC;
				goto ready;
			case HTR_SUB_POOL_FREE:
				GETU(hb->aux);
				GETU(v);
				prev += (uint64_t)PTR_DELTA(v);
				hb->ptr = prev;
				h->cls = CLS_FREE;
				hb->kind = DUMP_POOL_FREE;
				goto ready;
			default:
				what = "unknown control event";
				goto corrupt;
			}
		default:
			what = "unknown event type";
			goto corrupt;
		}
	}
ready:
	/* the handle map is probed when this head is delivered: fetch its slot now */
	if ((hb->kind == DUMP_ALLOC || hb->kind == DUMP_FREE) && d->hm.s)
		__builtin_prefetch(&d->hm.s[hmap_home(&d->hm, hb->ptr)]);
	c->p = p;
	c->end = end;
	c->time = t;
	c->prev_ptr = prev;
	c->span_end = ev0;
	return 1;
bad_field:
	what = "bad api or stack id in an event";
	goto corrupt;
runs_off:
	what = "an event runs off the end of its chunk";
corrupt:
	{
		char why[256];

		snprintf(why, sizeof why, "%s", what);
		stop(d, c, why);
	}
	c->p = c->end = NULL;
	c->span = NULL;
	return -1;
nomem:
	d->failed = 1;
	dump_set_err(d, "out of memory");
	return -ENOMEM;
}

static struct cursor *cursor_get(struct dump *d, uint32_t tid)
{
	struct cursor *c = (struct cursor *)(uintptr_t)umap_get(&d->tids, tid);

	if (c)
		return c;
	if (d->ncursors >= MAX_THREADS) {
		dump_bad(d, "more than %u threads alive", MAX_THREADS);
		return NULL;
	}
	c = calloc(1, sizeof *c);
	if (!c || umap_put(&d->tids, tid, (uintptr_t)c)) {
		free(c);
		dump_bad(d, "out of memory");
		return NULL;
	}
	c->tid = tid;
	c->h.b.tid = tid;		/* the head's batch entry carries it */
	c->idx = d->next_idx++;
	c->order = ORD_CURSOR | c->idx;
	d->ncursors++;
	return c;
}

void dump_cursor_free(struct dump *d, struct cursor *c)
{
	while (c->qlen) {
		dump_frame_unref(d, c->q[c->qhead].f);
		c->qhead = (c->qhead + 1) & (c->qcap - 1);
		c->qlen--;
	}
	if (c->f)
		dump_frame_unref(d, c->f);
	chunkunpack_free(&c->unpacked);
	free(c->q);
	free(c);
}

/* A thread that exited and has nothing queued is forgotten: tids get reused. */
static void cursor_retire(struct dump *d, struct cursor *c)
{
	umap_del(&d->tids, c->tid);
	d->ncursors--;
	dump_cursor_free(d, c);
}

int dump_enqueue_chunk(struct dump *d, struct frame *f, uint32_t tid,
		       uint64_t base, const uint8_t *p, const uint8_t *end)
{
	struct cursor *c = cursor_get(d, tid);
	int ret;

	if (!c)
		return -1;
	if (c->qlen == c->qcap) {
		size_t ncap = c->qcap ? c->qcap * 2 : 8, i;
		struct chunk *q = malloc(ncap * sizeof *q);

		if (!q)
			return dump_bad(d, "out of memory");
		for (i = 0; i < c->qlen; i++)
			q[i] = c->q[(c->qhead + i) & (c->qcap - 1)];
		free(c->q);
		c->q = q;
		c->qcap = ncap;
		c->qhead = 0;
	}
	c->q[(c->qhead + c->qlen) & (c->qcap - 1)] = (struct chunk){ f, p, end, base, 0 };
	/* the reader thread may have unpacked it already (chunks come in frame order) */
	while (f->prei < f->npre && f->pre[f->prei].off < (size_t)(p - f->raw))
		f->prei++;
	if (f->prei < f->npre && f->pre[f->prei].off == (size_t)(p - f->raw) &&
	    f->pre[f->prei].len == (size_t)(end - p)) {
		const struct preunpacked *u = &f->pre[f->prei];
		struct chunk *ch = &c->q[(c->qhead + c->qlen) & (c->qcap - 1)];

		ch->p = (u->in_raw ? f->raw : f->ubuf) + u->uoff;
		ch->end = ch->p + u->plen;
		ch->plain = 1;
	}
	c->qlen++;
	f->refs++;
	hold_add(d, ENTRY_COST);
	if (c->in_heap || c->realloc_pending)
		return 0;
	ret = cursor_advance(d, c);
	if (ret == 1) {
		if (dump_heap_push(d, c->h.b.time, cursor_order(c), c))
			return dump_bad(d, "out of memory");
		c->in_heap = 1;
	}
	return ret < 0 && d->failed ? dump_bad(d, "out of memory") : 0;
}

/* Delivers MODULE_LOAD: the module joins dump_modules() and the address map. */
int dump_module_load(struct dump *d, struct rd *r, struct dump_event *ev)
{
	struct dump_module *m;
	uint64_t id = rd_u(r), bias = rd_u(r), n, i;
	size_t plen, blen;
	const uint8_t *path = rd_bytes(r, &plen), *bid = rd_bytes(r, &blen);
	uint32_t idx = (uint32_t)d->nmods;
	uint64_t *segs;

	if (dump_grow((void **)&d->mods, &d->capmods, d->nmods + 1, sizeof *d->mods))
		return -ENOMEM;
	m = &d->mods[d->nmods];
	memset(m, 0, sizeof *m);
	m->id = (uint32_t)id;
	m->load_bias = bias;
	m->path = strndup((const char *)path, plen);
	if (!m->path)
		return -ENOMEM;
	memcpy(m->build_id, bid, blen);
	m->build_id_len = blen;
	m->lo = UINT64_MAX;
	m->loaded_at = ev->time;
	m->unloaded_at = UINT64_MAX;
	d->nmods++;
	n = rd_u(r);
	segs = n ? malloc(2 * n * sizeof(*segs)) : NULL;
	if (n && !segs)
		return -ENOMEM;
	m->segs = segs;
	for (i = 0; i < n; i++) {
		uint64_t s = rd_u(r), e = rd_u(r);

		segs[2 * i] = s;
		segs[2 * i + 1] = e;
		m->nsegs++;
		if (s >= e)
			continue;
		if (s < m->lo)
			m->lo = s;
		if (e > m->hi)
			m->hi = e;
		if (act_insert(d, s, e, idx))
			return -ENOMEM;
	}
	if (m->lo == UINT64_MAX)
		m->lo = 0;
	if (umap_put(&d->modids, id, (uint64_t)idx + 1))
		return -ENOMEM;
	ev->kind = DUMP_MODULE_LOAD;
	ev->id = idx;
	return 1;
}

/* Delivers MODULE_UNLOAD: 1, or 0 for an id never loaded (nothing to tell). */
int dump_module_unload(struct dump *d, struct rd *r, struct dump_event *ev)
{
	uint64_t idx = umap_get(&d->modids, rd_u(r));

	if (!idx)
		return 0;
	idx--;
	d->mods[idx].unloaded_at = ev->time;
	act_remove(d, (uint32_t)idx);
	umap_del(&d->modids, d->mods[idx].id);
	ev->kind = DUMP_MODULE_UNLOAD;
	ev->id = idx;
	return 1;
}

/*
 * The hot path: hands out the head of the cursor at the heap top into the
 * producer's batch, decodes its next event and lets the heap settle,
 * without leaving this file.
 */
int dump_emit_cursor(struct dump *d, struct cursor *c, uint64_t *time)
{
	const struct head *h = &c->h;
	const struct hitem *ru = NULL;
	struct bev *e;
	int ret, exiting;

	/*
	 * The runner-up: the lesser child of the top, which the rest of the
	 * heap cannot overtake while this cursor leads.  As long as its next
	 * event still sorts before it, the top's key changes and the heap
	 * stays a heap without a sift.
	 */
	if (d->nheap > 1)
		ru = d->nheap > 2 && hless(&d->heap[2], &d->heap[1]) ? &d->heap[2] : &d->heap[1];
again:
	if (c->span) {
		ret = apply_span(d, c, c->span_end);
		if (ret == -ENOMEM)
			goto nomem;
		if (ret) {
			stop(d, c, d->why);
			return -1;
		}
	}
	e = dump_bev_add(d);
	if (!e)
		goto nomem;
	*e = h->b;			/* handle HANDLE_NONE, flags 0 */
	if (h->b.ptr && (h->b.kind == DUMP_ALLOC || h->b.kind == DUMP_FREE)) {
		e->handle = h->b.kind == DUMP_ALLOC ? hmap_alloc(&d->hm, h->b.ptr) :
			    hmap_free(&d->hm, h->b.ptr);
		if (e->handle == HANDLE_NONE)
			goto nomem;
	}
	if (h->text) {
		int64_t off = dump_text_add(d, h->text, h->textlen);

		if (off < 0)
			goto nomem;
		e->flags = BEV_TEXT;
		e->usable = (uint64_t)off;
	}
	*time = h->b.time;
	exiting = h->b.kind == DUMP_THREAD_EXIT;
	if (exiting)
		c->client = 0;
	if (c->realloc_pending) {
		c->h = c->r;
		c->realloc_pending = 0;
		ret = 1;
	} else {
		ret = cursor_advance(d, c);
	}
	if (ret == 1) {
		d->heap[0].time = c->h.b.time;
		d->heap[0].order = cursor_order(c);
		if (ru && !hless(&d->heap[0], ru)) {
			sift_down(d->heap, d->nheap, 0);
			return 1;
		}
		/*
		 * Still on top and due (produce()'s test): the next one goes
		 * out from here.  One thread leads the merge for a run of
		 * events about half the time; the merge loop is skipped for
		 * them, its bookkeeping of the time done here.
		 */
		if (d->pb->n < BATCH_EVENTS &&
		    (c->h.b.time < d->wm || d->flush || d->hold > d->hold_limit) &&
		    !d->stopped && !d->failed) {
			if (*time < d->now) {
				if (!d->disorder++ && d->warn_kind == WARN_NONE)
					d->warn_kind = WARN_ORDER;
			} else {
				d->now = *time;
			}
			goto again;
		}
		return 1;
	}
	dump_heap_pop(d);
	c->in_heap = 0;
	if (ret == 0 && exiting)
		cursor_retire(d, c);
	return d->failed ? -1 : 1;
nomem:
	d->failed = 1;
	dump_set_err(d, "out of memory");
	return -1;
}
