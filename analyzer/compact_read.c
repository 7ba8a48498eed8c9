/* compact_read.c - a compact dump's windows back into plain thread chunks (htr_compact.h) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compact.h"
#include "compact_read.h"
#include "dump_internal.h"
#include "htr_compact.h"
#include "htr_format.h"

/*
 * Each window is decoded whole: its runs merged by time give the order of
 * its ops, which are applied to the key lists the writer kept alike, and
 * every event is written in the plain encoding (HTR_PF_PTR_UNITS, times in
 * ns) to its thread's chunk.  The dump reader then queues those chunks as
 * if they had been in the file.
 */

#define MAX_RUNS (1u << 16)
#define MAX_WINDOW_EVENTS (1u << 22)

struct crun {
	uint32_t tid;
	uint64_t base, left;
	uint64_t cbase;			/* its chunk's base: base, or a carried free half's time */
	const uint8_t *tp, *tend;	/* its times in HTR_CS_TIME */
	uint64_t next;			/* the time of its next event */
	uint64_t last, prev_ptr;	/* what the plain encoding's deltas are taken from */
	struct cbuf out;
	int pend;			/* a realloc's free half, waiting for its allocation half */
	uint8_t pend_api;
	uint64_t pend_time, pend_ptr;
};

struct compact_reader {
	struct clists l;
	struct csynth syn;		/* block h is slot h - 1 */
	uint8_t *stack_done;
	size_t capstack;
	struct crun *runs;
	size_t capruns;
	uint32_t *heap;			/* runs with events left, by their next time */
	struct cbuf late;		/* late stacks for the next timed op's chunk */
	uint64_t pool_ptr;		/* the latest pool block's address */
	/* realloc free halves whose allocation half comes in a later window */
	struct carried {
		uint32_t tid;
		uint8_t api;
		uint64_t time, ptr;
	} *carried;
	size_t ncarried, capcarried;
};

struct compact_reader *compact_reader_new(void)
{
	struct compact_reader *c = calloc(1, sizeof(*c));

	return c;
}

void compact_reader_free(struct compact_reader *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->capruns; i++)
		cbuf_free(&c->runs[i].out);
	free(c->runs);
	free(c->heap);
	free(c->carried);
	cbuf_free(&c->late);
	free(c->stack_done);
	clists_free(&c->l);
	csynth_free(&c->syn);
	free(c);
}

void compact_out_reset(struct compact_out *o)
{
	o->buf.n = 0;
	o->nch = 0;
}

void compact_out_free(struct compact_out *o)
{
	cbuf_free(&o->buf);
	free(o->ch);
	memset(o, 0, sizeof(*o));
}

/* ---- the window being decoded ---- */

struct win {
	struct compact_reader *c;
	struct rd s[HTR_CS_COUNT];
	size_t nruns, nheap;
	const char *why;
	int nomem;
};

static int bad(struct win *w, const char *why)
{
	if (!w->why)
		w->why = why;
	return -1;
}

static int run_next_time(struct win *w, struct crun *r)
{
	struct rd t = { r->tp, r->tend, 0 };
	uint64_t dt = rd_u(&t);

	if (t.bad || dt > UINT64_MAX - r->next)
		return bad(w, "a time runs off its stream");
	r->tp = t.p;
	r->next += dt;
	r->left--;
	return 0;
}

static int heap_less(const struct compact_reader *c, uint32_t a, uint32_t b)
{
	return c->runs[a].next < c->runs[b].next ||
	       (c->runs[a].next == c->runs[b].next && a < b);
}

static void heap_down(struct win *w, size_t i)
{
	uint32_t *h = w->c->heap;

	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < w->nheap && heap_less(w->c, h[l], h[m]))
			m = l;
		if (l + 1 < w->nheap && heap_less(w->c, h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		uint32_t x = h[i];

		h[i] = h[m];
		h[m] = x;
		i = m;
	}
}

/* The run of the window's next timed event, its time in r->next; NULL at the end. */
static struct crun *take_run(struct win *w)
{
	return w->nheap ? &w->c->runs[w->c->heap[0]] : NULL;
}

/* After the event: the run's next time, or the run leaves the heap. */
static int advance_run(struct win *w, struct crun *r)
{
	if (r->left) {
		if (run_next_time(w, r))
			return -1;
	} else {
		w->c->heap[0] = w->c->heap[--w->nheap];
		r->next = UINT64_MAX;
	}
	if (w->nheap)
		heap_down(w, 0);
	return 0;
}

static uint64_t get(struct win *w, int s)
{
	uint64_t v = rd_u(&w->s[s]);

	if (w->s[s].bad)
		bad(w, "a stream of a compact window runs short");
	return v;
}

/* ---- plain output ---- */

#define PUT(x) do { if (x) goto nomem; } while (0)

static int put_dt(struct crun *r, uint64_t t)
{
	uint64_t dt = t - r->last;

	r->last = t;
	return cbuf_u(&r->out, dt);
}

static int put_ptr(struct crun *r, uint64_t ptr)
{
	int64_t d = (int64_t)(ptr - r->prev_ptr);

	r->prev_ptr = ptr;
	return cbuf_ptr(&r->out, d);
}

/* A realloc's free half that found no allocation half: a plain free. */
static int flush_pend(struct crun *r)
{
	if (!r->pend)
		return 0;
	r->pend = 0;
	return cbuf_byte(&r->out, HTR_EV_BYTE(HTR_EV_FREE, r->pend_api)) ||
	       put_dt(r, r->pend_time) || put_ptr(r, r->pend_ptr) ? -1 : 0;
}

/* Room in stack_done for id; -1 when out of memory. */
static int stack_room(struct win *w, uint64_t id)
{
	if (cbytes_reach(&w->c->stack_done, &w->c->capstack, id)) {
		w->nomem = 1;
		return -1;
	}
	return 0;
}

/*
 * A stack's definition from DEF (depth + 1 and its frames, or 0 when the
 * writer did not have it yet) as an HTR_EV_STACK to out; *defined says
 * which.
 */
static int read_stack(struct win *w, struct cbuf *out, uint64_t id, int *defined)
{
	uint64_t n = get(w, HTR_CS_DEF), i, v;

	*defined = 0;
	if (w->why)
		return -1;
	if (!n)
		return 0;
	if (--n > HTR_MAX_DEPTH)
		return bad(w, "a stack deeper than a dump holds");
	PUT(cbuf_byte(out, HTR_EV_BYTE(HTR_EV_STACK, 0)) || cbuf_u(out, id) || cbuf_u(out, n));
	for (i = 0; i < n; i++) {
		v = get(w, HTR_CS_DEF);
		PUT(cbuf_u(out, v));
	}
	if (w->why)
		return -1;
	w->c->stack_done[id] = 1;
	*defined = 1;
	return 0;
nomem:
	w->nomem = 1;
	return -1;
}

/* A stack id used by a key or a pool allocation: defined here the first time. */
static int take_stack(struct win *w, struct crun *r, uint64_t id)
{
	int defined;

	if (id == HTR_STACK_NONE)
		return 0;
	if (id > UINT32_MAX)
		return bad(w, "a stack id out of range");
	if (stack_room(w, id))
		return -1;
	if (w->c->stack_done[id])
		return 0;
	return read_stack(w, &r->out, id, &defined);
}

/* HTR_COP_STACK: a stack the writer learned late, for the next timed op's chunk. */
static int late_stack(struct win *w)
{
	uint64_t id = get(w, HTR_CS_DEF);
	int defined;

	if (w->why)
		return -1;
	if (id == HTR_STACK_NONE || id > UINT32_MAX)
		return bad(w, "a stack id out of range");
	if (stack_room(w, id))
		return -1;
	if (w->c->stack_done[id])
		return bad(w, "a stack defined twice");
	if (read_stack(w, &w->c->late, id, &defined))
		return -1;
	return defined ? 0 : bad(w, "an empty late stack");
}

/* An allocation's key from AKEY (defining it from DEF when new); -1 on error. */
static int64_t take_key(struct win *w, struct crun *r)
{
	struct clists *l = &w->c->l;
	uint64_t k = get(w, HTR_CS_AKEY), size, extra, stack;
	int64_t n;

	if (w->why)
		return -1;
	if (k < l->nkeys)
		return (int64_t)k;
	if (k != l->nkeys)
		return bad(w, "an allocation key not defined");
	/* size and stack as deltas from the key defined before */
	size = get(w, HTR_CS_DEF);
	extra = get(w, HTR_CS_DEF);
	stack = get(w, HTR_CS_DEF);
	size = (l->nkeys ? l->key[l->nkeys - 1].size : 0) + (uint64_t)htr_unzigzag(size);
	stack = (uint64_t)((l->nkeys ? (int64_t)l->key[l->nkeys - 1].stack : 0) +
			   htr_unzigzag(stack));
	if (w->why || take_stack(w, r, stack))
		return -1;
	n = clists_add(l, size, extra, (uint32_t)stack, 0);
	if (n < 0)
		w->nomem = 1;
	return n;
}

/* The live block a free names: by key and rank (by_addr 0) or by address; 0 when none. */
static uint32_t take_block(struct win *w, int by_addr)
{
	struct compact_reader *c = w->c;
	uint32_t h;

	if (by_addr) {
		uint64_t slot = get(w, HTR_CS_DEF);

		if (w->why)
			return 0;
		if (slot >= c->syn.next || slot + 1 >= c->l.capnode || !c->l.node[slot + 1].live)
			return bad(w, "a free names a block not live"), 0;
		return (uint32_t)(slot + 1);
	}
	{
		uint64_t k = get(w, HTR_CS_FKEY), rank = get(w, HTR_CS_RANK);

		if (w->why)
			return 0;
		if (rank > 2 * HTR_COMPACT_RANK_MAX + 1)
			return bad(w, "a free's rank beyond the format's limit"), 0;
		h = k < c->l.nkeys ? clists_nth(&c->l, (uint32_t)k, rank) : 0;
		if (!h)
			bad(w, "a free names a block not live");
		return h;
	}
}

/* A live block goes: out of its list, its slot free again. */
static uint64_t drop_block(struct win *w, uint32_t h)
{
	uint64_t synth = w->c->l.node[h].synth;

	clists_unlink(&w->c->l, h);
	if (csynth_give(&w->c->syn, h - 1))
		w->nomem = 1;
	return synth;
}

static int emit_alloc(struct win *w, struct crun *r, unsigned api, uint64_t t, uint64_t ptr,
		      const struct ckey *k)
{
	if (r->pend && r->pend_api == api) {
		uint64_t old = r->pend_ptr;

		r->pend = 0;
		PUT(cbuf_byte(&r->out, HTR_EV_BYTE(HTR_EV_REALLOC, api)) ||
		    put_dt(r, r->pend_time) || put_dt(r, t) ||
		    cbuf_ptr(&r->out, (int64_t)(old - r->prev_ptr)) ||
		    cbuf_ptr(&r->out, (int64_t)(ptr - old)));
		r->prev_ptr = ptr;
	} else {
		PUT(flush_pend(r) || cbuf_byte(&r->out, HTR_EV_BYTE(HTR_EV_ALLOC, api)) ||
		    put_dt(r, t) || put_ptr(r, ptr));
	}
	PUT(cbuf_u(&r->out, k->size) || cbuf_u(&r->out, k->extra) || cbuf_u(&r->out, k->stack));
	return 0;
nomem:
	w->nomem = 1;
	return -1;
}

static int emit_free(struct win *w, struct crun *r, unsigned api, uint64_t t, uint64_t ptr,
		     int pair)
{
	PUT(flush_pend(r));
	if (pair) {
		r->pend = 1;
		r->pend_api = (uint8_t)api;
		r->pend_time = t;
		r->pend_ptr = ptr;
		return 0;
	}
	PUT(cbuf_byte(&r->out, HTR_EV_BYTE(HTR_EV_FREE, api)) || put_dt(r, t) || put_ptr(r, ptr));
	return 0;
nomem:
	w->nomem = 1;
	return -1;
}

static int new_block(struct win *w, uint32_t key, uint64_t *synth)
{
	struct compact_reader *c = w->c;
	uint64_t slot = csynth_take(&c->syn);

	if (slot >= UINT32_MAX - 1)
		return bad(w, "more live blocks than a reader holds");
	if (clists_reserve(&c->l, (uint32_t)slot + 1)) {
		w->nomem = 1;
		return -1;
	}
	if (c->l.node[slot + 1].live)
		return bad(w, "a synthetic address given twice");
	*synth = HTR_COMPACT_SYNTH_BASE + 16 * slot;
	clists_link(&c->l, (uint32_t)slot + 1, key, *synth);
	return 0;
}

static int control(struct win *w, struct crun *r, uint64_t t)
{
	struct compact_reader *c = w->c;
	struct cbuf *o = &r->out;
	uint64_t sub = get(w, HTR_CS_DEF), v, ptr;
	size_t len;
	const uint8_t *s;

	if (w->why)
		return -1;
	PUT(flush_pend(r));
	switch (sub) {
	case HTR_SUB_POOL_ALLOC:
		v = get(w, HTR_CS_DEF);
		ptr = c->pool_ptr += (uint64_t)htr_unzigzag(get(w, HTR_CS_DEF));
		{
			uint64_t size = get(w, HTR_CS_DEF), stack = get(w, HTR_CS_DEF);

			if (w->why || take_stack(w, r, stack))
				return -1;
			PUT(cbuf_byte(o, HTR_EV_BYTE(HTR_EV_CONTROL, 0)) || put_dt(r, t) ||
			    cbuf_u(o, sub) || cbuf_u(o, v) || put_ptr(r, ptr) || cbuf_u(o, size) ||
			    cbuf_u(o, stack));
		}
		return 0;
	case HTR_SUB_POOL_FREE:
		v = get(w, HTR_CS_DEF);
		ptr = c->pool_ptr += (uint64_t)htr_unzigzag(get(w, HTR_CS_DEF));
		if (w->why)
			return -1;
		PUT(cbuf_byte(o, HTR_EV_BYTE(HTR_EV_CONTROL, 0)) || put_dt(r, t) ||
		    cbuf_u(o, sub) || cbuf_u(o, v) || put_ptr(r, ptr));
		return 0;
	case HTR_SUB_THREAD_START:
	case HTR_SUB_THREAD_EXIT:
	case HTR_SUB_THREAD_NAME:
	case HTR_SUB_CLIENT_BEGIN:
	case HTR_SUB_CLIENT_END:
	case HTR_SUB_POOL_CREATE:
	case HTR_SUB_POOL_DESTROY:
		break;
	default:
		return bad(w, "an unknown control event");
	}
	PUT(cbuf_byte(o, HTR_EV_BYTE(HTR_EV_CONTROL, 0)) || put_dt(r, t) || cbuf_u(o, sub));
	if (sub != HTR_SUB_THREAD_EXIT && sub != HTR_SUB_THREAD_NAME) {
		v = get(w, HTR_CS_DEF);
		PUT(cbuf_u(o, v));
	}
	if (sub == HTR_SUB_THREAD_NAME || sub == HTR_SUB_CLIENT_BEGIN ||
	    sub == HTR_SUB_POOL_CREATE) {
		s = rd_bytes(&w->s[HTR_CS_DEF], &len);
		if (w->s[HTR_CS_DEF].bad)
			return bad(w, "a stream of a compact window runs short");
		PUT(cbuf_bytes(o, s, len));
	}
	return w->why ? -1 : 0;
nomem:
	w->nomem = 1;
	return -1;
}

/* One timed op of run r at time t. */
static int timed_op(struct win *w, struct crun *r, unsigned type, unsigned api, uint64_t t)
{
	struct compact_reader *c = w->c;
	uint64_t synth, flag;
	int64_t k;
	uint32_t h;

	int pair = (type == HTR_COP_FREE || type == HTR_COP_FREE_ADDR) &&
		   (api & HTR_COMPACT_PAIR);

	if (pair)
		api &= ~HTR_COMPACT_PAIR;
	if (type != HTR_COP_CONTROL && (api < 1 || api >= HTR_API_COUNT))
		return bad(w, "bad api in a compact op");
	switch (type) {
	case HTR_COP_ALLOC:
	case HTR_COP_REALLOC_NEW:
		k = take_key(w, r);
		if (k < 0 || new_block(w, (uint32_t)k, &synth))
			return -1;
		if (type == HTR_COP_ALLOC && flush_pend(r))
			goto nomem;
		return emit_alloc(w, r, api, t, synth, &c->l.key[k]);
	case HTR_COP_FREE:
		h = take_block(w, 0);
		if (!h)
			return -1;
		synth = drop_block(w, h);
		return w->nomem ? -1 : emit_free(w, r, api, t, synth, pair);
	case HTR_COP_FREE_ADDR:
		flag = get(w, HTR_CS_DEF);
		if (w->why)
			return -1;
		if (flag == 0) {
			uint64_t ptr = get(w, HTR_CS_DEF);

			return w->why ? -1 : emit_free(w, r, api, t, ptr, pair);
		}
		h = take_block(w, 1);
		if (!h)
			return -1;
		synth = drop_block(w, h);
		return w->nomem ? -1 : emit_free(w, r, api, t, synth, pair);
	case HTR_COP_ALLOC_AT:
		flag = get(w, HTR_CS_DEF);
		if (w->why || (flag & ~(uint64_t)HTR_COMPACT_AT_REALLOC) > 2)
			return bad(w, "bad allocation in a compact op");
		/* a realloc's allocation half joins its free half (emit_alloc) */
		if (!(flag & HTR_COMPACT_AT_REALLOC) && flush_pend(r))
			goto nomem;
		flag &= ~(uint64_t)HTR_COMPACT_AT_REALLOC;
		if (flag == 2) {
			k = take_key(w, r);
			return k < 0 ? -1 : emit_alloc(w, r, api, t, 0, &c->l.key[k]);
		}
		h = take_block(w, (int)flag);
		if (!h)
			return -1;
		synth = c->l.node[h].synth;
		clists_unlink(&c->l, h);
		k = take_key(w, r);
		if (k < 0)
			return -1;
		clists_link(&c->l, h, (uint32_t)k, synth);
		return emit_alloc(w, r, api, t, synth, &c->l.key[k]);
	case HTR_COP_CONTROL:
		return control(w, r, t);
	default:
		return bad(w, "an unknown compact op");
	}
nomem:
	w->nomem = 1;
	return -1;
}

/* ---- the window ---- */

static int read_header(struct win *w, struct rd *b, uint64_t *total)
{
	struct compact_reader *c = w->c;
	uint64_t nruns = rd_u(b), len[HTR_CS_COUNT], i;

	if (b->bad || nruns > MAX_RUNS || nruns > (uint64_t)(b->end - b->p) / 3)
		return bad(w, "a compact window with too many threads");
	if (nruns > c->capruns) {
		size_t cap = c->capruns ? c->capruns : 16;
		struct crun *rs;
		uint32_t *hp;

		while (cap < nruns)
			cap *= 2;
		rs = realloc(c->runs, cap * sizeof(*rs));
		if (!rs)
			goto nomem;
		memset(rs + c->capruns, 0, (cap - c->capruns) * sizeof(*rs));
		c->runs = rs;
		c->capruns = cap;
		hp = realloc(c->heap, cap * sizeof(*hp));
		if (!hp)
			goto nomem;
		c->heap = hp;
	}
	*total = 0;
	for (i = 0; i < nruns; i++) {
		struct crun *r = &c->runs[i];

		r->tid = (uint32_t)rd_u32(b);
		r->base = rd_u(b);
		r->left = rd_u(b);
		if (b->bad || !r->left || r->left > MAX_WINDOW_EVENTS - *total)
			return bad(w, "a compact window's thread runs are malformed");
		*total += r->left;
	}
	w->nruns = (size_t)nruns;
	for (i = 0; i < HTR_CS_COUNT; i++)
		len[i] = rd_u(b);
	if (b->bad)
		return bad(w, "a compact window is cut short");
	for (i = 0; i < HTR_CS_COUNT; i++) {
		if (len[i] > (uint64_t)(b->end - b->p))
			return bad(w, "a compact window's stream runs off its end");
		w->s[i] = (struct rd){ b->p, b->p + len[i], 0 };
		b->p += len[i];
	}
	return 0;
nomem:
	w->nomem = 1;
	return -1;
}

const uint8_t *compact_skip(const uint8_t *p, const uint8_t *end)
{
	struct rd b = { p, end, 0 };
	uint64_t nruns = rd_u(&b), i, n;

	for (i = 0; i < nruns && !b.bad; i++) {
		rd_u(&b);
		rd_u(&b);
		rd_u(&b);
	}
	for (i = 0, n = 0; i < HTR_CS_COUNT && !b.bad; i++) {
		uint64_t len = rd_u(&b);

		if (len > (uint64_t)(b.end - b.p) || n + len > (uint64_t)(b.end - b.p))
			return NULL;
		n += len;
	}
	return b.bad ? NULL : b.p + n;
}

static int window_ops(struct win *w)
{
	struct compact_reader *c = w->c;
	struct rd *ops = &w->s[HTR_CS_OPS];
	uint64_t client = 0;
	int have_client = 0;

	while (ops->p < ops->end) {
		uint8_t op = *ops->p++;
		unsigned type = op & 7, api = op >> 3;
		struct crun *r;

		if (type == HTR_COP_CLIENT) {
			client = get(w, HTR_CS_DEF);
			if (w->why)
				return -1;
			have_client = 1;
			continue;
		}
		if (type == HTR_COP_STACK) {
			if (late_stack(w))
				return -1;
			continue;
		}
		r = take_run(w);
		if (!r)
			return bad(w, "a compact window holds more ops than times");
		if (c->late.n) {
			if (cbuf_raw(&r->out, c->late.p, c->late.n)) {
				w->nomem = 1;
				return -1;
			}
			c->late.n = 0;
		}
		if (have_client) {
			have_client = 0;
			if (flush_pend(r) || cbuf_byte(&r->out, HTR_EV_BYTE(HTR_EV_CONTROL, 0)) ||
			    put_dt(r, r->last) || cbuf_u(&r->out, HTR_SUB_CLIENT_SET) ||
			    cbuf_u(&r->out, client)) {
				w->nomem = 1;
				return -1;
			}
		}
		if (timed_op(w, r, type, api, r->next) || advance_run(w, r))
			return -1;
	}
	if (w->nheap || have_client || c->late.n)
		return bad(w, "a compact window holds more times than ops");
	return 0;
}

/*
 * A realloc's free half at the end of a window, its allocation half in a
 * later one: kept until its thread's next run, whose chunk then starts at
 * its time (the writer's watermark waited for it).
 */
static int carry(struct compact_reader *c, struct crun *r)
{
	if (dump_grow((void **)&c->carried, &c->capcarried, c->ncarried + 1,
		      sizeof(*c->carried)))
		return -1;
	c->carried[c->ncarried++] = (struct carried){ r->tid, r->pend_api, r->pend_time,
						      r->pend_ptr };
	r->pend = 0;
	return 0;
}

static void take_carried(struct compact_reader *c, struct crun *r)
{
	size_t i;

	for (i = 0; i < c->ncarried; i++) {
		const struct carried *x = &c->carried[i];

		if (x->tid != r->tid)
			continue;
		r->pend = 1;
		r->pend_api = x->api;
		r->pend_time = x->time;
		r->pend_ptr = x->ptr;
		if (x->time < r->cbase)
			r->cbase = x->time;
		c->carried[i] = c->carried[--c->ncarried];
		return;
	}
}

int compact_carried_out(struct compact_reader *c, struct compact_out *o)
{
	size_t i;

	compact_out_reset(o);
	for (i = 0; i < c->ncarried; i++) {
		const struct carried *x = &c->carried[i];
		size_t off = o->buf.n;

		/* a plain free at the half's own time: base_time is that time */
		if (cbuf_byte(&o->buf, HTR_EV_BYTE(HTR_EV_FREE, x->api)) || cbuf_u(&o->buf, 0) ||
		    cbuf_ptr(&o->buf, (int64_t)x->ptr) ||
		    dump_grow((void **)&o->ch, &o->capch, o->nch + 1, sizeof(*o->ch)))
			return -1;
		o->ch[o->nch++] = (struct compact_chunk){ x->tid, x->time, off, o->buf.n - off, 0 };
	}
	c->ncarried = 0;
	return 0;
}

int compact_decode(struct compact_reader *c, const uint8_t *p, const uint8_t *end,
		   size_t rec_off, struct compact_out *o, const uint8_t **next, const char **why)
{
	struct win w;
	struct rd b = { p, end, 0 };
	uint64_t total;
	size_t i;
	const uint8_t *tp;

	memset(&w, 0, sizeof(w));
	w.c = c;
	c->late.n = 0;
	if (read_header(&w, &b, &total))
		goto fail;
	*next = b.p;
	/* each run's times: where they start in TIME, the first one read */
	tp = w.s[HTR_CS_TIME].p;
	for (i = 0; i < w.nruns; i++) {
		struct crun *r = &c->runs[i];
		uint64_t j, v;

		r->tp = tp;
		r->tend = w.s[HTR_CS_TIME].end;
		r->next = r->base;
		r->cbase = r->base;
		r->prev_ptr = 0;
		r->pend = 0;
		r->out.n = 0;
		take_carried(c, r);
		r->last = r->cbase;
		if (run_next_time(&w, r))
			goto fail;
		/* skip to the next run's */
		tp = r->tp;
		for (j = 0; j < r->left; j++) {
			tp = htr_get_u64(tp, r->tend, &v);
			if (!tp) {
				bad(&w, "a time runs off its stream");
				goto fail;
			}
		}
		c->heap[i] = (uint32_t)i;
	}
	if (tp != w.s[HTR_CS_TIME].end) {
		bad(&w, "a compact window's times and runs disagree");
		goto fail;
	}
	w.nheap = w.nruns;
	for (i = w.nheap / 2; i-- > 0;)
		heap_down(&w, i);
	if (window_ops(&w))
		goto fail;
	for (i = HTR_CS_AKEY; i < HTR_CS_COUNT; i++)
		if (w.s[i].p != w.s[i].end) {
			bad(&w, "a compact window's stream holds more than its ops use");
			goto fail;
		}
	/* the runs' chunks, in run order */
	for (i = 0; i < w.nruns; i++) {
		struct crun *r = &c->runs[i];

		if (r->pend && carry(c, r))
			goto nomem;
		if (dump_grow((void **)&o->ch, &o->capch, o->nch + 1, sizeof(*o->ch)))
			goto nomem;
		o->ch[o->nch++] = (struct compact_chunk){ r->tid, r->cbase, o->buf.n, r->out.n, rec_off };
		if (cbuf_raw(&o->buf, r->out.p, r->out.n))
			goto nomem;
	}
	return 0;
nomem:
	w.nomem = 1;
fail:
	if (w.nomem)
		return -ENOMEM;
	*why = w.why ? w.why : "a compact window is malformed";
	return -1;
}
