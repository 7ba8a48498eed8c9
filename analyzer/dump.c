/* dump.c - reads a .htr dump: frames, records, and the time-ordered merge of thread chunks */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "dump.h"
#include "dump_internal.h"
#include "../common/htr_varint.h"

/*
 * Shape of the reader.
 *
 * Frames are read whole, checked (header check, zstd checksum, sizes), then
 * their records are walked twice: once to validate the top-level structure
 * (a bad frame is dropped as a whole), once to queue them.  Chunks are not
 * copied: a thread's queue points into the decompressed frame, which is
 * reference counted and recycled when its last chunk and record are spent.
 *
 * Each thread is a cursor that has decoded its next deliverable event (the
 * "head") ahead of time; a binary heap orders the cursors and the queued
 * top-level records by (time, class, tie).  The heap top is delivered when
 * its time lies below the last watermark, or once nothing more will be read
 * (end record, end of file, bad frame).  Stack definitions carry no time:
 * they are applied when the event that follows them is delivered, so that
 * their addresses meet the modules loaded at that moment.
 *
 * Chunk contents are validated lazily, as they are decoded; corruption there
 * stops the reader with a warning like a bad frame does.
 */

/* Simultaneous events: new modules first, then frees, then the rest, then
 * module unloads and the end (an event at time t may use code unloaded at t). */
enum { CLS_LOAD = 0, CLS_FREE = 1, CLS_ALLOC = 2, CLS_LAST = 3 };

#define DEFAULT_HOLD_LIMIT (512ull << 20)
#define ENTRY_COST 64u			/* bytes charged per queued chunk or record */
#define MAX_THREADS (1u << 20)		/* live threads; beyond that the dump is corrupt */
#define MAX_SEGS 4096u			/* PT_LOAD segments of one module */
#define MAX_HEADER 65536u		/* largest file header a later version may write */
#define STACK_ID_SLACK 65536u		/* how far ids may run ahead of definitions */
#define FRAME_ARENA 4096u		/* dump_frame entries per arena block */
#define FREE_FRAMES 4			/* decompressed buffers kept for reuse */
#define ORD_CURSOR (1ull << 48)

struct frame {
	struct frame *next;		/* free list */
	uint8_t *raw;
	size_t size, cap;
	uint64_t off;			/* file offset of its header */
	uint32_t refs;
};

struct chunk {
	struct frame *f;
	const uint8_t *p, *end;
	uint64_t base_time;
};

/* A decoded event waiting for its turn. */
struct head {
	uint64_t time, ptr, old_ptr, size, usable, id, client;
	const uint8_t *text;
	size_t textlen;
	uint32_t stack;
	uint8_t kind, api, cls;
};

struct cursor {
	uint32_t tid, idx;
	uint64_t client;		/* CLIENT_SET state */
	struct frame *f;		/* frame of the current chunk */
	const uint8_t *p, *end;		/* rest of the current chunk */
	const uint8_t *span, *span_end;	/* stack definitions before the head */
	uint64_t time, prev_ptr;	/* delta bases */
	struct head h;
	struct head r;			/* realloc: the allocation half */
	int realloc_pending;
	int in_heap;
	struct chunk *q;		/* ring of queued chunks */
	size_t qhead, qlen, qcap;
};

/* A queued top-level record; body is right after its type byte. */
struct tlrec {
	struct frame *f;
	const uint8_t *body, *end;
	uint8_t type;
};

struct hitem {
	uint64_t time, order;
	void *obj;			/* struct cursor or struct tlrec, see ORD_CURSOR */
};

/* Open-addressing map uint64 -> nonzero uint64 (0 marks an empty slot). */
struct umap {
	uint64_t *keys, *vals;
	size_t cap, n;
};

struct seg {
	uint64_t start, end;
	uint32_t mod;
};

struct arena_block {
	struct arena_block *next;
	size_t used;
	struct dump_frame f[FRAME_ARENA];
};

enum { WARN_NONE, WARN_TRUNC, WARN_CORRUPT, WARN_ORDER };

struct dump {
	char *path;
	int fd;
	uint64_t off, fsize;
	uint64_t bad_off;		/* the frame read_frame() looked at last */
	int follow, final, flush, stopped, failed, have_process;
	uint64_t wm, now, seq;
	uint64_t hold, hold_peak, hold_limit;
	uint64_t disorder;
	ZSTD_DCtx *zd;
	uint8_t *zbuf;
	size_t zcap;
	struct frame *free_frames;
	int nfree;

	struct hitem *heap;
	size_t nheap, capheap;
	struct umap tids;
	uint32_t ncursors, next_idx;

	struct dump_module *mods;
	size_t nmods, capmods;
	struct umap modids;		/* dump module id -> index + 1 */
	struct seg *act;		/* segments of loaded modules, sorted */
	size_t nact, capact;

	struct dump_stack *stacks;	/* by id */
	size_t capstacks;
	uint32_t stack_max, nstacks;
	struct arena_block *arena;

	struct dump_process proc;
	char *text;
	size_t textcap;
	struct dump_reach_entry *reach;
	size_t capreach;

	char why[256];			/* what was wrong with the last bad frame */
	int warn_kind;
	uint64_t warn_off;
	char warn_why[256];
	char warn[512];
	char err[1024];
};

static struct dump_frame empty_stack_frames[1];

/* ---- small helpers ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static void hold_add(struct dump *d, uint64_t n)
{
	d->hold += n;
	if (d->hold > d->hold_peak)
		d->hold_peak = d->hold;
}

/* strerror, lowercased for a user line */
static const char *errstr(int err, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

__attribute__((format(printf, 2, 3)))
static void set_err(struct dump *d, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(d->err, sizeof d->err, "heaptrail: cannot read '%s': %s",
		 d->path, msg);
}

__attribute__((format(printf, 2, 3)))
static int bad(struct dump *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->why, sizeof d->why, fmt, ap);
	va_end(ap);
	return -1;
}

static void format_warning(struct dump *d)
{
	double s = (double)d->now / 1e9;

	switch (d->warn_kind) {
	case WARN_TRUNC:
		snprintf(d->warn, sizeof d->warn,
			 "truncated frame at byte %llu (the dump ends early; the first %.1f s were read)",
			 (unsigned long long)d->warn_off, s);
		break;
	case WARN_CORRUPT:
		snprintf(d->warn, sizeof d->warn,
			 "corrupt frame at byte %llu (%s; reading stopped there, the first %.1f s were read)",
			 (unsigned long long)d->warn_off, d->warn_why, s);
		break;
	case WARN_ORDER:
		snprintf(d->warn, sizeof d->warn,
			 "%llu events came after later ones (the dump's watermarks are missing or wrong)",
			 (unsigned long long)d->disorder);
		break;
	}
}

static void warn(struct dump *d, int kind, uint64_t off, const char *why)
{
	if (d->warn_kind != WARN_NONE && d->warn_kind != WARN_ORDER)
		return;
	d->warn_kind = kind;
	d->warn_off = off;
	snprintf(d->warn_why, sizeof d->warn_why, "%s", why ? why : "");
	format_warning(d);
}

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

/* ---- record field reader (top-level records, cold paths) ---- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_u(struct rd *r)
{
	uint64_t v = 0;
	const uint8_t *q = r->bad ? NULL : htr_get_u64(r->p, r->end, &v);

	if (!q) {
		r->bad = 1;
		r->p = r->end;
		return 0;
	}
	r->p = q;
	return v;
}

static uint64_t rd_u32(struct rd *r)
{
	uint64_t v = rd_u(r);

	if (v > UINT32_MAX)
		r->bad = 1;
	return v;
}

static int64_t rd_s(struct rd *r)
{
	return htr_unzigzag(rd_u(r));
}

static const uint8_t *rd_bytes(struct rd *r, size_t *len)
{
	uint64_t n = rd_u(r);
	const uint8_t *s = r->p;

	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		r->p = r->end;
		*len = 0;
		return r->end;
	}
	r->p += n;
	*len = (size_t)n;
	return s;
}

/* ---- frames ---- */

static struct frame *frame_get(struct dump *d, size_t size)
{
	struct frame *f = d->free_frames;
	size_t cap = size < 65536 ? 65536 : size;

	if (f) {
		d->free_frames = f->next;
		d->nfree--;
	} else {
		f = calloc(1, sizeof *f);
		if (!f)
			return NULL;
	}
	if (f->cap < cap) {
		free(f->raw);
		f->raw = malloc(cap);
		f->cap = f->raw ? cap : 0;
		if (!f->raw) {
			free(f);
			return NULL;
		}
	}
	f->size = size;
	f->refs = 1;
	f->next = NULL;
	return f;
}

static void frame_unref(struct dump *d, struct frame *f)
{
	if (--f->refs)
		return;
	d->hold -= f->size;
	if (d->nfree < FREE_FRAMES) {
		f->next = d->free_frames;
		d->free_frames = f;
		d->nfree++;
		return;
	}
	free(f->raw);
	free(f);
}

/* ---- heap ---- */

/* Branch-free: the merge of interleaved threads defeats branch prediction. */
static inline int hless(const struct hitem *a, const struct hitem *b)
{
	return (a->time < b->time) | ((a->time == b->time) & (a->order < b->order));
}

static inline void sift_down(struct hitem *h, size_t n, size_t i)
{
	struct hitem x = h[i];

	for (;;) {
		size_t l = 2 * i + 1, m = l;

		if (l >= n)
			break;
		if (l + 1 < n)
			m = l + (size_t)hless(&h[l + 1], &h[l]);
		if (!hless(&h[m], &x))
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

static int heap_push(struct dump *d, uint64_t time, uint64_t order, void *obj)
{
	struct hitem x = { time, order, obj };
	size_t i;

	if (grow((void **)&d->heap, &d->capheap, d->nheap + 1, sizeof *d->heap))
		return -ENOMEM;
	i = d->nheap++;
	while (i) {
		size_t up = (i - 1) / 2;

		if (!hless(&x, &d->heap[up]))
			break;
		d->heap[i] = d->heap[up];
		i = up;
	}
	d->heap[i] = x;
	return 0;
}

static void heap_pop(struct dump *d)
{
	d->heap[0] = d->heap[--d->nheap];
	if (d->nheap)
		sift_down(d->heap, d->nheap, 0);
}

static inline uint64_t cursor_order(const struct cursor *c)
{
	return ((uint64_t)c->h.cls << 56) | ORD_CURSOR | c->idx;
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
	if (grow((void **)&d->act, &d->capact, d->nact + 1, sizeof *d->act))
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
	uint64_t i;

	if (r->bad || id == HTR_STACK_NONE || id > UINT32_MAX ||
	    depth > HTR_MAX_DEPTH)
		return bad(d, "bad stack definition");
	if (id >= d->capstacks) {
		size_t old = d->capstacks;

		if (id > 2 * (uint64_t)d->nstacks + STACK_ID_SLACK)
			return bad(d, "stack id %llu far beyond the %u stacks defined",
				   (unsigned long long)id, d->nstacks);
		if (grow((void **)&d->stacks, &d->capstacks, id + 1, sizeof *d->stacks))
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
		m = module_at(d, ip);
		fr[i].ip = ip;
		fr[i].module = m;
		fr[i].offset = m >= 0 ? ip - d->mods[m].load_bias : ip;
	}
	d->stacks[id].depth = (uint32_t)depth;
	d->stacks[id].frames = fr;
	d->nstacks++;
	if (id > d->stack_max)
		d->stack_max = (uint32_t)id;
	return 0;
}

/* ---- thread cursors ---- */

static void stop(struct dump *d, struct cursor *c, const char *why)
{
	char msg[256];

	snprintf(msg, sizeof msg, "thread %u: %s", c->tid, why);
	d->stopped = 1;
	warn(d, WARN_CORRUPT, c->f ? c->f->off : 0, msg);
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
static inline const uint8_t *get_u(const uint8_t *p, const uint8_t *end,
				   uint64_t *out)
{
	uint64_t r, b;
	int i;

	if (__builtin_expect(end - p < HTR_VARINT_MAX, 0))
		return htr_get_u64(p, end, out);
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

#define GETU(v) do {							\
	if (!(p = get_u(p, end, &(v))))					\
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
static int cursor_advance(struct dump *d, struct cursor *c)
{
	const uint8_t *p = c->p, *end = c->end, *ev0 = NULL;
	uint64_t t = c->time, prev = c->prev_ptr, dt, v, v2, size, extra, stack, sub;
	struct head *h = &c->h;
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
				frame_unref(d, c->f);
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
			GETU(dt);
			GETU(v);
			GETU(size);
			GETU(extra);
			GETU(stack);
			if (!api_ok(api) || stack > UINT32_MAX)
				goto bad_field;
			t += dt;
			prev += (uint64_t)htr_unzigzag(v);
			h->kind = DUMP_ALLOC;
			h->cls = CLS_ALLOC;
			h->api = (uint8_t)api;
			h->time = t;
			h->ptr = prev;
			h->old_ptr = 0;
			h->size = size;
			h->usable = size + extra;
			h->stack = (uint32_t)stack;
			h->client = c->client;
			h->text = NULL;
			goto ready;
		case HTR_EV_FREE:
			GETU(dt);
			GETU(v);
			if (!api_ok(api))
				goto bad_field;
			t += dt;
			prev += (uint64_t)htr_unzigzag(v);
			h->kind = DUMP_FREE;
			h->cls = CLS_FREE;
			h->api = (uint8_t)api;
			h->time = t;
			h->ptr = prev;
			h->old_ptr = 0;
			h->size = h->usable = 0;
			h->stack = 0;
			h->client = c->client;
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
			t1 = t + dt;
			t = t1 + dt2;
			h->kind = DUMP_FREE;
			h->cls = CLS_FREE;
			h->api = (uint8_t)api;
			h->time = t1;
			h->ptr = prev + (uint64_t)htr_unzigzag(v);
			h->old_ptr = 0;
			h->size = h->usable = 0;
			h->stack = 0;
			h->client = c->client;
			h->text = NULL;
			prev = h->ptr + (uint64_t)htr_unzigzag(v2);
			c->r = *h;
			c->r.kind = DUMP_ALLOC;
			c->r.cls = CLS_ALLOC;
			c->r.time = t;
			c->r.ptr = prev;
			c->r.old_ptr = h->ptr;
			c->r.size = size;
			c->r.usable = size + extra;
			c->r.stack = (uint32_t)stack;
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
			t += dt;
			h->time = t;
			h->cls = CLS_ALLOC;
			h->api = 0;
			h->ptr = h->old_ptr = h->size = h->usable = h->id = 0;
			h->stack = 0;
			h->client = c->client;
			h->text = NULL;
			switch (sub) {
			case HTR_SUB_THREAD_START:
				GETU(h->id);
				h->kind = DUMP_THREAD_START;
				goto ready;
			case HTR_SUB_THREAD_EXIT:
				h->kind = DUMP_THREAD_EXIT;
				goto ready;
			case HTR_SUB_THREAD_NAME:
				GETSTR(h->text, h->textlen);
				h->kind = DUMP_THREAD_NAME;
				goto ready;
			case HTR_SUB_CLIENT_BEGIN:
				GETU(h->id);
				GETSTR(h->text, h->textlen);
				h->kind = DUMP_CLIENT_BEGIN;
				goto ready;
			case HTR_SUB_CLIENT_END:
				GETU(h->id);
				h->kind = DUMP_CLIENT_END;
				goto ready;
			case HTR_SUB_CLIENT_SET:
				GETU(v);
				c->client = v;
				continue;
			case HTR_SUB_POOL_CREATE:
				GETU(h->id);
				GETSTR(h->text, h->textlen);
				h->kind = DUMP_POOL_CREATE;
				goto ready;
			case HTR_SUB_POOL_DESTROY:
				GETU(h->id);
				h->kind = DUMP_POOL_DESTROY;
				goto ready;
			case HTR_SUB_POOL_ALLOC:
				GETU(h->id);
				GETU(v);
				GETU(size);
				GETU(stack);
				if (stack > UINT32_MAX)
					goto bad_field;
				prev += (uint64_t)htr_unzigzag(v);
				h->ptr = prev;
				h->size = h->usable = size;
				h->stack = (uint32_t)stack;
				h->kind = DUMP_POOL_ALLOC;
				goto ready;
			case HTR_SUB_POOL_FREE:
				GETU(h->id);
				GETU(v);
				prev += (uint64_t)htr_unzigzag(v);
				h->ptr = prev;
				h->cls = CLS_FREE;
				h->kind = DUMP_POOL_FREE;
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
	set_err(d, "out of memory");
	return -ENOMEM;
}

static struct cursor *cursor_get(struct dump *d, uint32_t tid)
{
	struct cursor *c = (struct cursor *)(uintptr_t)umap_get(&d->tids, tid);

	if (c)
		return c;
	if (d->ncursors >= MAX_THREADS) {
		bad(d, "more than %u threads alive", MAX_THREADS);
		return NULL;
	}
	c = calloc(1, sizeof *c);
	if (!c || umap_put(&d->tids, tid, (uintptr_t)c)) {
		free(c);
		bad(d, "out of memory");
		return NULL;
	}
	c->tid = tid;
	c->idx = d->next_idx++;
	d->ncursors++;
	return c;
}

static void cursor_free(struct dump *d, struct cursor *c)
{
	while (c->qlen) {
		frame_unref(d, c->q[c->qhead].f);
		c->qhead = (c->qhead + 1) & (c->qcap - 1);
		c->qlen--;
	}
	if (c->f)
		frame_unref(d, c->f);
	free(c->q);
	free(c);
}

/* A thread that exited and has nothing queued is forgotten: tids get reused. */
static void cursor_retire(struct dump *d, struct cursor *c)
{
	umap_del(&d->tids, c->tid);
	d->ncursors--;
	cursor_free(d, c);
}

static int enqueue_chunk(struct dump *d, struct frame *f, uint32_t tid,
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
			return bad(d, "out of memory");
		for (i = 0; i < c->qlen; i++)
			q[i] = c->q[(c->qhead + i) & (c->qcap - 1)];
		free(c->q);
		c->q = q;
		c->qcap = ncap;
		c->qhead = 0;
	}
	c->q[(c->qhead + c->qlen) & (c->qcap - 1)] = (struct chunk){ f, p, end, base };
	c->qlen++;
	f->refs++;
	hold_add(d, ENTRY_COST);
	if (c->in_heap || c->realloc_pending)
		return 0;
	ret = cursor_advance(d, c);
	if (ret == 1) {
		if (heap_push(d, c->h.time, cursor_order(c), c))
			return bad(d, "out of memory");
		c->in_heap = 1;
	}
	return ret < 0 && d->failed ? bad(d, "out of memory") : 0;
}

/* ---- top-level records ---- */

static int parse_process(struct dump *d, struct rd *r, int commit)
{
	struct dump_process *pr = &d->proc;
	uint64_t pid = rd_u32(r), ppid = rd_u32(r), mono = rd_u(r), real = rd_u(r);
	uint64_t page = rd_u(r), sample, unw, depth, flags, gen;
	size_t exelen, cmdlen, i, n, argc = 0;
	const uint8_t *exe = rd_bytes(r, &exelen), *cmd = rd_bytes(r, &cmdlen);

	sample = rd_u(r);
	unw = rd_u32(r);
	depth = rd_u32(r);
	flags = rd_u32(r);
	gen = rd_u32(r);
	if (r->bad || !commit)
		return r->bad ? -1 : 0;
	pr->pid = (uint32_t)pid;
	pr->ppid = (uint32_t)ppid;
	pr->start_mono_ns = mono;
	pr->start_realtime_ns = real;
	pr->page_size = page;
	pr->sample_bytes = sample;
	pr->unwinder = (int)unw;
	pr->max_depth = (unsigned)depth;
	pr->flags = (unsigned)flags;
	pr->fork_generation = (unsigned)gen;
	pr->exe = strndup((const char *)exe, exelen);
	for (i = 0; i < cmdlen; i = n + 1) {
		n = i;
		while (n < cmdlen && cmd[n])
			n++;
		argc++;
	}
	pr->argv = calloc(argc + 1, sizeof *pr->argv);
	if (!pr->exe || !pr->argv)
		return -ENOMEM;
	for (i = 0, argc = 0; i < cmdlen; i = n + 1) {
		n = i;
		while (n < cmdlen && cmd[n])
			n++;
		pr->argv[argc] = strndup((const char *)cmd + i, n - i);
		if (!pr->argv[argc++])
			return -ENOMEM;
	}
	pr->argc = (int)argc;
	d->have_process = 1;
	return 0;
}

static int queue_record(struct dump *d, struct frame *f, uint8_t type,
			const uint8_t *body, uint64_t time, int cls)
{
	struct tlrec *t = malloc(sizeof *t);

	if (!t || heap_push(d, time, ((uint64_t)cls << 56) | (d->seq++ & (ORD_CURSOR - 1)), t)) {
		free(t);
		return bad(d, "out of memory");
	}
	t->f = f;
	t->body = body;
	t->end = f->raw + f->size;
	t->type = type;
	f->refs++;
	hold_add(d, ENTRY_COST);
	return 0;
}

/*
 * Walks a frame's records: checks them (commit = 0) or queues them
 * (commit = 1).  Returns 0 or -1 with d->why set; -ENOMEM on commit.
 */
static int frame_records(struct dump *d, struct frame *f, int commit)
{
	struct rd r = { f->raw, f->raw + f->size, 0 };
	int ret;

	while (r.p < r.end) {
		const uint8_t *rec = r.p, *body;
		uint8_t type = *r.p++;
		uint64_t time = 0, n, i;
		size_t len;
		int cls = CLS_ALLOC;

		body = r.p;
		if (!d->have_process && rec == f->raw && type != HTR_REC_PROCESS)
			return bad(d, "the dump does not start with a process record");
		switch (type) {
		case HTR_REC_PROCESS:
			if (d->have_process || rec != f->raw)
				return bad(d, "a second process record at byte %zu of its data",
					   (size_t)(rec - f->raw));
			ret = parse_process(d, &r, commit);
			if (ret == -ENOMEM)
				return ret;
			break;
		case HTR_REC_MODULE_LOAD:
			time = rd_u(&r);
			rd_u32(&r);
			rd_u(&r);
			rd_bytes(&r, &len);
			rd_bytes(&r, &len);
			if (len > sizeof d->mods[0].build_id)
				r.bad = 1;
			n = rd_u(&r);
			if (n > MAX_SEGS || n > (uint64_t)(r.end - r.p) / 2)
				r.bad = 1;
			for (i = 0; !r.bad && i < n; i++) {
				rd_u(&r);
				rd_u(&r);
			}
			cls = CLS_LOAD;
			break;
		case HTR_REC_MODULE_UNLOAD:
			time = rd_u(&r);
			rd_u32(&r);
			cls = CLS_LAST;
			break;
		case HTR_REC_CHUNK: {
			uint64_t tid = rd_u32(&r), base = rd_u(&r);

			n = rd_u(&r);
			if (r.bad || n > (uint64_t)(r.end - r.p))
				return bad(d, "a chunk at byte %zu of its data runs off its end",
					   (size_t)(rec - f->raw));
			if (commit && enqueue_chunk(d, f, (uint32_t)tid, base, r.p, r.p + n))
				return d->failed ? -ENOMEM : -1;
			r.p += n;
			continue;
		}
		case HTR_REC_SAMPLE:
			time = rd_u(&r);
			for (i = 0; i < 7; i++)
				rd_u(&r);
			break;
		case HTR_REC_WATERMARK:
			time = rd_u(&r);
			if (commit && !r.bad && time > d->wm)
				d->wm = time;
			break;
		case HTR_REC_LOST:
			time = rd_u(&r);
			rd_u(&r);
			rd_u(&r);
			break;
		case HTR_REC_END:
			time = rd_u(&r);
			for (i = 0; i < 4; i++)
				rd_u(&r);
			cls = CLS_LAST;
			break;
		case HTR_REC_MARK:
			time = rd_u(&r);
			rd_bytes(&r, &len);
			break;
		case HTR_REC_REACH:
			time = rd_u(&r);
			rd_u(&r);
			n = rd_u(&r);
			if (n > (uint64_t)(r.end - r.p) / 2)
				r.bad = 1;
			for (i = 0; !r.bad && i < n; i++) {
				rd_u(&r);
				if (rd_u(&r) > HTR_REACH_LOST)
					r.bad = 1;
			}
			cls = CLS_LAST;
			break;
		default:
			return bad(d, "unknown record type %u at byte %zu of its data",
				   type, (size_t)(rec - f->raw));
		}
		if (r.bad)
			return bad(d, "record of type %u at byte %zu of its data is malformed",
				   type, (size_t)(rec - f->raw));
		if (!commit || type == HTR_REC_PROCESS || type == HTR_REC_WATERMARK)
			continue;
		if (type == HTR_REC_END)
			d->flush = 1;
		if (queue_record(d, f, type, body, time, cls))
			return -ENOMEM;
	}
	return 0;
}

/* ---- reading frames ---- */

enum { RF_OK, RF_EOF, RF_PARTIAL, RF_CORRUPT, RF_ERROR };

static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Are 'n' bytes available at 'off'?  Looks again at the file's size. */
static int have_bytes(struct dump *d, uint64_t off, uint64_t n)
{
	struct stat st;

	if (off + n <= d->fsize)
		return 1;
	if (fstat(d->fd, &st) == 0)
		d->fsize = (uint64_t)st.st_size;
	return off + n <= d->fsize;
}

static int io_error(struct dump *d, int err)
{
	char buf[128];

	set_err(d, "%s", errstr(err, buf, sizeof buf));
	return RF_ERROR;
}

static int read_frame(struct dump *d)
{
	struct htr_frame_header h;
	uint64_t off = d->off;
	struct frame *f;
	size_t n;
	ssize_t got;
	int ret;

	d->bad_off = off;
	if (!have_bytes(d, off, sizeof h))
		return off >= d->fsize ? RF_EOF : RF_PARTIAL;
	got = pread_full(d->fd, &h, sizeof h, off);
	if (got < 0)
		return io_error(d, (int)-got);
	if ((size_t)got < sizeof h)
		return RF_PARTIAL;
	h.magic = le32toh(h.magic);
	h.compressed_size = le32toh(h.compressed_size);
	h.raw_size = le32toh(h.raw_size);
	h.check = le32toh(h.check);
	if (h.magic != HTR_FRAME_MAGIC || htr_frame_check(&h) != h.check)
		return bad(d, "bad frame header"), RF_CORRUPT;
	if (h.raw_size > HTR_FRAME_RAW_MAX)
		return bad(d, "frame of %u bytes, more than the %u allowed",
			   h.raw_size, HTR_FRAME_RAW_MAX), RF_CORRUPT;
	if (h.compressed_size == 0 ||
	    h.compressed_size > ZSTD_compressBound(h.raw_size) + 1024)
		return bad(d, "impossible compressed size %u for %u bytes",
			   h.compressed_size, h.raw_size), RF_CORRUPT;
	if (!have_bytes(d, off + sizeof h, h.compressed_size))
		return RF_PARTIAL;
	if (grow((void **)&d->zbuf, &d->zcap, h.compressed_size, 1))
		return io_error(d, ENOMEM);
	got = pread_full(d->fd, d->zbuf, h.compressed_size, off + sizeof h);
	if (got < 0)
		return io_error(d, (int)-got);
	if ((size_t)got < h.compressed_size)
		return RF_PARTIAL;
	f = frame_get(d, h.raw_size);
	if (!f)
		return io_error(d, ENOMEM);
	f->off = off;
	n = ZSTD_decompressDCtx(d->zd, f->raw, f->cap, d->zbuf, h.compressed_size);
	if (ZSTD_isError(n)) {
		bad(d, "zstd: %s", ZSTD_getErrorName(n));
		ret = RF_CORRUPT;
	} else if (n != h.raw_size) {
		bad(d, "it holds %zu bytes, its header says %u", n, h.raw_size);
		ret = RF_CORRUPT;
	} else {
		ret = frame_records(d, f, 0) ? RF_CORRUPT : RF_OK;
	}
	hold_add(d, f->size);
	if (ret == RF_OK) {
		d->off = off + sizeof h + h.compressed_size;
		ret = frame_records(d, f, 1);
		if (ret == -ENOMEM) {
			frame_unref(d, f);
			return io_error(d, ENOMEM);
		}
		ret = ret ? RF_CORRUPT : RF_OK;
	}
	frame_unref(d, f);
	return ret;
}

/* ---- delivery ---- */

static int set_text(struct dump *d, struct dump_event *ev, const uint8_t *s, size_t n)
{
	if (grow((void **)&d->text, &d->textcap, n + 1, 1))
		return -ENOMEM;
	memcpy(d->text, s, n);
	d->text[n] = 0;
	ev->text = d->text;
	return 0;
}

static int module_load(struct dump *d, struct rd *r, struct dump_event *ev)
{
	struct dump_module *m;
	uint64_t id = rd_u(r), bias = rd_u(r), n, i;
	size_t plen, blen;
	const uint8_t *path = rd_bytes(r, &plen), *bid = rd_bytes(r, &blen);
	uint32_t idx = (uint32_t)d->nmods;

	if (grow((void **)&d->mods, &d->capmods, d->nmods + 1, sizeof *d->mods))
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
	for (i = 0; i < n; i++) {
		uint64_t s = rd_u(r), e = rd_u(r);

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

/* Delivers a top-level record: 1, 0 when it yields no event, -ENOMEM. */
static int emit_record(struct dump *d, struct tlrec *t, struct dump_event *ev)
{
	struct rd r = { t->body, t->end, 0 };
	uint64_t n, i, ptr = 0, idx;
	const uint8_t *s;
	size_t len;

	memset(ev, 0, sizeof *ev);
	ev->time = rd_u(&r);
	switch (t->type) {
	case HTR_REC_MODULE_LOAD:
		return module_load(d, &r, ev);
	case HTR_REC_MODULE_UNLOAD:
		idx = umap_get(&d->modids, rd_u(&r));
		if (!idx)
			return 0;	/* never loaded: nothing to tell */
		idx--;
		d->mods[idx].unloaded_at = ev->time;
		act_remove(d, (uint32_t)idx);
		umap_del(&d->modids, d->mods[idx].id);
		ev->kind = DUMP_MODULE_UNLOAD;
		ev->id = idx;
		return 1;
	case HTR_REC_SAMPLE:
		ev->kind = DUMP_SAMPLE;
		ev->sample.rss_bytes = rd_u(&r);
		ev->sample.arena_bytes = rd_u(&r);
		ev->sample.mmap_bytes = rd_u(&r);
		ev->sample.in_use_bytes = rd_u(&r);
		ev->sample.free_bytes = rd_u(&r);
		ev->sample.top_releasable_bytes = rd_u(&r);
		ev->sample.shim_bytes = rd_u(&r);
		return 1;
	case HTR_REC_LOST:
		ev->kind = DUMP_LOST;
		ev->lost_events = rd_u(&r);
		ev->lost_reason = (int)rd_u(&r);
		return 1;
	case HTR_REC_END:
		ev->kind = DUMP_END;
		ev->end_how = (int)rd_u(&r);
		ev->end_status = (int)rd_u(&r);
		ev->events_written = rd_u(&r);
		ev->lost_events = rd_u(&r);
		return 1;
	case HTR_REC_MARK:
		ev->kind = DUMP_MARK;
		s = rd_bytes(&r, &len);
		return set_text(d, ev, s, len) ? -ENOMEM : 1;
	case HTR_REC_REACH:
		ev->kind = DUMP_REACH;
		ev->reach_kind = (int)rd_u(&r);
		n = rd_u(&r);
		if (grow((void **)&d->reach, &d->capreach, n ? n : 1, sizeof *d->reach))
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			ptr += (uint64_t)rd_s(&r);
			d->reach[i].ptr = ptr;
			d->reach[i].cls = (uint8_t)rd_u(&r);
		}
		ev->reach = d->reach;
		ev->nreach = n;
		return 1;
	}
	return 0;
}

/* Delivers the head of the heap top's cursor: 1, or < 0 (stopped/failed). */
static inline int emit_cursor(struct dump *d, struct cursor *c, struct dump_event *ev)
{
	const struct head *h = &c->h;
	int ret, exiting;

	if (c->span) {
		ret = apply_span(d, c, c->span_end);
		if (ret == -ENOMEM) {
			d->failed = 1;
			set_err(d, "out of memory");
			return -1;
		}
		if (ret) {
			stop(d, c, d->why);
			return -1;
		}
	}
	ev->kind = (enum dump_kind)h->kind;
	ev->time = h->time;
	ev->tid = c->tid;
	ev->api = h->api;
	ev->ptr = h->ptr;
	ev->old_ptr = h->old_ptr;
	ev->size = h->size;
	ev->usable = h->usable;
	ev->stack = h->stack;
	ev->client = h->client;
	ev->id = h->id;
	ev->text = NULL;
	if (h->text && set_text(d, ev, h->text, h->textlen)) {
		d->failed = 1;
		set_err(d, "out of memory");
		return -1;
	}
	exiting = h->kind == DUMP_THREAD_EXIT;
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
		d->heap[0].time = c->h.time;
		d->heap[0].order = cursor_order(c);
		sift_down(d->heap, d->nheap, 0);
		return 1;
	}
	heap_pop(d);
	c->in_heap = 0;
	if (ret == 0 && exiting)
		cursor_retire(d, c);
	return d->failed ? -1 : 1;
}

int dump_next(struct dump *d, struct dump_event *ev)
{
	int ret;

	for (;;) {
		if (d->failed)
			return -1;
		if (d->stopped)
			break;
		if (d->nheap) {
			struct hitem *top = &d->heap[0];

			if (top->time < d->wm || d->flush || d->hold > d->hold_limit) {
				if (top->order & ORD_CURSOR) {
					ret = emit_cursor(d, top->obj, ev);
					if (ret < 0) {
						if (d->failed)
							return -1;
						continue;	/* stopped */
					}
				} else {
					struct tlrec *t = top->obj;

					heap_pop(d);
					ret = emit_record(d, t, ev);
					frame_unref(d, t->f);
					free(t);
					d->hold -= ENTRY_COST;
					if (ret < 0) {
						d->failed = 1;
						set_err(d, "out of memory");
						return -1;
					}
					if (!ret)
						continue;
				}
				if (ev->time < d->now) {
					if (!d->disorder++ && d->warn_kind == WARN_NONE)
						d->warn_kind = WARN_ORDER;
					if (d->warn_kind == WARN_ORDER)
						format_warning(d);
				} else {
					d->now = ev->time;
				}
				return 1;
			}
		}
		if (d->final) {
			if (!d->nheap)
				break;
			d->flush = 1;
			continue;
		}
		switch (read_frame(d)) {
		case RF_OK:
			continue;
		case RF_EOF:
			if (d->follow)
				return 0;
			d->final = 1;
			continue;
		case RF_PARTIAL:
			if (d->follow)
				return 0;
			warn(d, WARN_TRUNC, d->off, NULL);
			d->final = 1;
			continue;
		case RF_CORRUPT:
			warn(d, WARN_CORRUPT, d->bad_off, d->why);
			d->final = 1;
			continue;
		default:
			d->failed = 1;
			return -1;
		}
	}
	if (d->warn_kind != WARN_NONE)
		format_warning(d);
	return 0;
}

/* ---- open, close, accessors ---- */

static struct dump *open_fail(struct dump *d, char *err, size_t errlen, int e)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", d->err);
	dump_close(d);
	errno = e;
	return NULL;
}

struct dump *dump_open(const char *path, char *err, size_t errlen)
{
	struct htr_file_header h;
	struct dump *d = calloc(1, sizeof *d);
	struct stat st;
	char buf[128];
	ssize_t got;
	uint32_t version, hsize;

	if (!d || !(d->path = strdup(path))) {
		if (err && errlen)
			snprintf(err, errlen, "heaptrail: cannot read '%s': out of memory", path);
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->fd = -1;
	d->hold_limit = DEFAULT_HOLD_LIMIT;
	d->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0 || fstat(d->fd, &st) < 0) {
		int e = errno;

		set_err(d, "%s", errstr(e, buf, sizeof buf));
		return open_fail(d, err, errlen, e);
	}
	if (S_ISDIR(st.st_mode)) {
		set_err(d, "is a directory");
		return open_fail(d, err, errlen, EISDIR);
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(d, "not a regular file");
		return open_fail(d, err, errlen, EINVAL);
	}
	d->fsize = (uint64_t)st.st_size;
	memset(&h, 0, sizeof h);
	got = pread_full(d->fd, &h, sizeof h, 0);
	if (got < 0) {
		set_err(d, "%s", errstr((int)-got, buf, sizeof buf));
		return open_fail(d, err, errlen, (int)-got);
	}
	if (got == 0) {
		set_err(d, "empty file (not a heaptrail dump)");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (memcmp(h.magic, HTR_FILE_MAGIC, (size_t)got < 8 ? (size_t)got : 8)) {
		set_err(d, "not a heaptrail dump (bad magic)");
		return open_fail(d, err, errlen, EINVAL);
	}
	if ((size_t)got < sizeof h) {
		set_err(d, "truncated file header (the file holds only %zd bytes)", got);
		return open_fail(d, err, errlen, EINVAL);
	}
	version = le32toh(h.version);
	hsize = le32toh(h.header_size);
	if (version > HTR_FORMAT_VERSION) {
		set_err(d, "dump format version %u is newer than this heaptrail reads (%u); use a newer heaptrail",
			version, HTR_FORMAT_VERSION);
		return open_fail(d, err, errlen, EINVAL);
	}
	if (version == 0) {
		set_err(d, "unknown dump format version 0");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (hsize < sizeof h || hsize > MAX_HEADER) {
		set_err(d, "corrupt file header (header size %u)", hsize);
		return open_fail(d, err, errlen, EINVAL);
	}
	d->proc.start_realtime_ns = le64toh(h.start_realtime_ns);
	d->off = hsize;
	d->zd = ZSTD_createDCtx();
	if (!d->zd) {
		set_err(d, "out of memory");
		return open_fail(d, err, errlen, ENOMEM);
	}
	switch (read_frame(d)) {
	case RF_OK:
		break;
	case RF_EOF:
	case RF_PARTIAL:
		set_err(d, "no complete frame (the dump ends before its first frame was written)");
		return open_fail(d, err, errlen, EINVAL);
	case RF_CORRUPT:
		set_err(d, "corrupt frame at byte %llu (%s)",
			(unsigned long long)d->bad_off, d->why);
		return open_fail(d, err, errlen, EINVAL);
	default:
		return open_fail(d, err, errlen, EIO);
	}
	if (!d->have_process) {	/* an empty first frame */
		set_err(d, "no process record at the start of the dump");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (d->stopped) {	/* a corrupt chunk in the first frame */
		set_err(d, "corrupt frame at byte %llu (%s)",
			(unsigned long long)d->warn_off, d->warn_why);
		return open_fail(d, err, errlen, EINVAL);
	}
	return d;
}

void dump_close(struct dump *d)
{
	struct arena_block *b;
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->nheap; i++) {
		if (!(d->heap[i].order & ORD_CURSOR)) {
			struct tlrec *t = d->heap[i].obj;

			frame_unref(d, t->f);
			free(t);
		}
	}
	for (i = 0; i < d->tids.cap; i++)
		if (d->tids.vals[i])
			cursor_free(d, (struct cursor *)(uintptr_t)d->tids.vals[i]);
	while (d->free_frames) {
		struct frame *f = d->free_frames;

		d->free_frames = f->next;
		free(f->raw);
		free(f);
	}
	while ((b = d->arena)) {
		d->arena = b->next;
		free(b);
	}
	for (i = 0; i < d->nmods; i++)
		free(d->mods[i].path);
	if (d->proc.argv)
		for (i = 0; d->proc.argv[i]; i++)
			free(d->proc.argv[i]);
	free(d->proc.argv);
	free(d->proc.exe);
	free(d->mods);
	free(d->act);
	free(d->stacks);
	free(d->heap);
	free(d->tids.keys);
	free(d->tids.vals);
	free(d->modids.keys);
	free(d->modids.vals);
	free(d->text);
	free(d->reach);
	free(d->zbuf);
	ZSTD_freeDCtx(d->zd);
	if (d->fd >= 0)
		close(d->fd);
	free(d->path);
	free(d);
}

const char *dump_path(const struct dump *d)
{
	return d->path;
}

const char *dump_error(const struct dump *d)
{
	return d->err[0] ? d->err : NULL;
}

const char *dump_warning(const struct dump *d)
{
	return d->warn[0] ? d->warn : NULL;
}

const struct dump_process *dump_process(const struct dump *d)
{
	return &d->proc;
}

const struct dump_stack *dump_stack(const struct dump *d, uint32_t id)
{
	if (id == HTR_STACK_NONE || id >= d->capstacks || !d->stacks[id].frames)
		return NULL;
	return &d->stacks[id];
}

uint32_t dump_stack_count(const struct dump *d)
{
	return d->stack_max;
}

const struct dump_module *dump_modules(const struct dump *d, size_t *n)
{
	*n = d->nmods;
	return d->mods;
}

uint64_t dump_time(const struct dump *d)
{
	return d->now;
}

uint64_t dump_offset(const struct dump *d)
{
	return d->off;
}

uint64_t dump_file_size(const struct dump *d)
{
	return d->fsize;
}

void dump_set_follow(struct dump *d, int follow)
{
	d->follow = follow;
}

void dump_set_hold_limit(struct dump *d, uint64_t bytes)
{
	d->hold_limit = bytes;
}

uint64_t dump_hold_peak(const struct dump *d)
{
	return d->hold_peak;
}
