/* compact_write.c - a dump written again in the compact encoding (heaptrail pack --compact) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "compact.h"
#include "dump_internal.h"
#include "frameout.h"
#include "htr_compact.h"
#include "htr_format.h"

/*
 * Reads the dump through the ordinary reader (threads merged, realloc
 * halves, handles) and writes its events again, window after window, in
 * the encoding of htr_compact.h.  The writer keeps the key lists the reader
 * will keep, so that a free is written as its block's key and rank, and
 * gives each block the synthetic address the reader will give it.
 */

#define WINDOW_EVENTS (1u << 18)	/* timed events of one HTR_REC_COMPACT, at most */
#define WINDOW_BYTES (2u << 20)		/* and its stream bytes, about */
#define WINDOW_THREADS 16384u		/* its runs, at most (a reader takes 65,536) */
#define FRAME_EVENTS (1u << 20)		/* events of one frame: what a reader decodes at once */
#define FRAME_BYTES (3u << 20)		/* and its raw bytes, about */
#define REACH_PER_RECORD 200000u	/* blocks of one HTR_REC_REACH */
/*
 * A free is named by its block's rank when the block is at most this far
 * from either end of its key's list (beyond it, a stand-in or the
 * address).  Deeper ranks cost more than they keep: 64 made cxxchurn's
 * compact dump 14% larger than 8, and python3's 4%.
 */
#define EXACT_RANK 8u
#define STACK_DONE 1
#define STACK_LATE 2
#define MAX_LATE_STACKS 256u	/* beyond: left undefined (a damaged input); each is looked at every op */

struct run {
	uint32_t tid;
	uint64_t base, last;
	uint64_t n;
	struct cbuf time;
};

struct thread {
	uint32_t tid;
	uint64_t client;		/* as the reader will have it */
	int run;			/* its run in the window, -1 none */
	uint64_t last_synth;		/* its last heap event's block if an allocation (the replay's
					 * 'temporary' test), else 0 */
	int realloc_open;		/* a realloc's free half written, its allocation to come */
	uint64_t open_time;		/* that half's time */
};

struct cw_block {
	uint64_t client;
	uint32_t tid;
	uint8_t api;
};

struct cw {
	struct dump *d;
	const char *inpath;
	struct frameout fo;
	struct cbuf frame;
	uint64_t frame_events, frames;
	/* the window */
	struct run *runs;
	size_t nruns, capruns;
	struct cbuf s[HTR_CS_COUNT];	/* HTR_CS_TIME unused: the runs hold it */
	uint64_t wevents, wbytes;	/* its timed events, its bytes in every stream */
	/* threads, by tid */
	struct thread *th;
	size_t nth, capth;
	uint32_t *thslot;
	size_t nthslots;
	int open_reallocs;		/* threads with a realloc open: the watermark waits */
	/* blocks: recorded address -> our handle; key lists as the reader keeps them */
	struct hmap hm;
	struct clists l;
	struct csynth syn;
	uint64_t pool_ptr;		/* the latest pool block's address */
	uint8_t *stack_done;		/* by stack id: STACK_DONE, STACK_LATE or 0 */
	size_t capstack;
	uint32_t *late;			/* stacks used before the reader had them */
	size_t nlate, caplate;
	uint64_t now;			/* the compact time of the latest event or record */
	int started;
	struct cw_block *blk;		/* by handle: who made each live block */
	size_t capblk;
	int nomem;
};

/* ---- output ---- */

static int flush_frame(struct cw *w)
{
	if (!w->frame.n)
		return 0;
	if (frameout_frame(&w->fo, w->frame.p, w->frame.n))
		return -1;
	w->frame.n = 0;
	w->frame_events = 0;
	w->frames++;
	return 0;
}

/* A record is about to be added (n bytes at most): a new frame when this one is full. */
static int frame_before(struct cw *w, size_t n)
{
	if (w->frame.n && (w->frame.n + n > FRAME_BYTES || w->frame_events >= FRAME_EVENTS))
		return flush_frame(w);
	return 0;
}

/* The compact time of an event or record recorded at t (htr_compact.h). */
static uint64_t compact_time(struct cw *w, uint64_t t)
{
	uint64_t c = t - t % HTR_COMPACT_TIME_NS;

	if (w->started && c <= w->now)
		c = w->now + 1;
	w->started = 1;
	w->now = c;
	return c;
}

/*
 * Every event before the next one written is in; but a realloc whose
 * allocation half is still to come is read again with it, in the next
 * window: the watermark stays at its free half's time.
 */
static int put_watermark(struct cw *w)
{
	uint64_t wm = w->now + 1;
	size_t i;

	for (i = 0; w->open_reallocs && i < w->nth; i++)
		if (w->th[i].realloc_open && w->th[i].open_time < wm)
			wm = w->th[i].open_time;
	return cbuf_byte(&w->frame, HTR_REC_WATERMARK) || cbuf_u(&w->frame, wm);
}

/* The window as one HTR_REC_COMPACT record, then a watermark. */
static int flush_window(struct cw *w)
{
	struct cbuf *f = &w->frame;
	size_t i, bytes = 0, tlen = 0;

	if (!w->wevents && !w->s[HTR_CS_OPS].n)
		return 0;
	for (i = 0; i < w->nruns; i++)
		tlen += w->runs[i].time.n;
	for (i = 1; i < HTR_CS_COUNT; i++)
		bytes += w->s[i].n;
	if (frame_before(w, bytes + tlen + 64 + 32 * w->nruns))
		return -1;
	if (cbuf_byte(f, HTR_REC_COMPACT) || cbuf_u(f, w->nruns))
		goto nomem;
	for (i = 0; i < w->nruns; i++)
		if (cbuf_u(f, w->runs[i].tid) || cbuf_u(f, w->runs[i].base) ||
		    cbuf_u(f, w->runs[i].n))
			goto nomem;
	if (cbuf_u(f, tlen))
		goto nomem;
	for (i = 1; i < HTR_CS_COUNT; i++)
		if (cbuf_u(f, w->s[i].n))
			goto nomem;
	for (i = 0; i < w->nruns; i++) {
		if (cbuf_raw(f, w->runs[i].time.p, w->runs[i].time.n))
			goto nomem;
		cbuf_free(&w->runs[i].time);
	}
	for (i = 1; i < HTR_CS_COUNT; i++) {
		if (cbuf_raw(f, w->s[i].p, w->s[i].n))
			goto nomem;
		w->s[i].n = 0;
	}
	for (i = 0; i < w->nth; i++)
		w->th[i].run = -1;
	w->frame_events += w->wevents;
	w->nruns = 0;
	w->wevents = w->wbytes = 0;
	if (put_watermark(w))
		goto nomem;
	return 0;
nomem:
	w->nomem = 1;
	return -1;
}

/* ---- threads ---- */

static size_t tid_hash(uint32_t tid)
{
	return (size_t)(((uint64_t)tid * 0x9e3779b97f4a7c15ull) >> 32);
}

static struct thread *thread_find(struct cw *w, uint32_t tid)
{
	size_t i, mask = w->nthslots - 1;

	if (w->nthslots)
		for (i = tid_hash(tid) & mask; w->thslot[i]; i = (i + 1) & mask)
			if (w->th[w->thslot[i] - 1].tid == tid)
				return &w->th[w->thslot[i] - 1];
	return NULL;
}

static struct thread *thread_of(struct cw *w, uint32_t tid)
{
	size_t i, mask = w->nthslots - 1;

	if (w->nthslots)
		for (i = tid_hash(tid) & mask; w->thslot[i]; i = (i + 1) & mask)
			if (w->th[w->thslot[i] - 1].tid == tid)
				return &w->th[w->thslot[i] - 1];
	if (dump_grow((void **)&w->th, &w->capth, w->nth + 1, sizeof(*w->th)))
		return NULL;
	if (2 * (w->nth + 1) > w->nthslots) {
		size_t n = w->nthslots ? 2 * w->nthslots : 256, j;
		uint32_t *s = calloc(n, sizeof(*s));

		if (!s)
			return NULL;
		for (j = 0; j < w->nth; j++) {
			for (i = tid_hash(w->th[j].tid) & (n - 1); s[i]; i = (i + 1) & (n - 1))
				;
			s[i] = (uint32_t)j + 1;
		}
		free(w->thslot);
		w->thslot = s;
		w->nthslots = n;
	}
	w->th[w->nth] = (struct thread){ tid, 0, -1, 0, 0, 0 };
	mask = w->nthslots - 1;
	for (i = tid_hash(tid) & mask; w->thslot[i]; i = (i + 1) & mask)
		;
	w->thslot[i] = (uint32_t)++w->nth;
	return &w->th[w->nth - 1];
}

static int put_late_stacks(struct cw *w);

/*
 * A timed op of thread t at (compact) time c: its time goes to the
 * thread's run in the window, its op byte to OPS.  Before it, a client op
 * when the thread works for another client than the reader would say.
 */
static int put_timed(struct cw *w, struct thread *t, uint64_t c, uint64_t client,
		     uint8_t op)
{
	struct run *r;

	if (w->nlate && put_late_stacks(w))
		return -1;
	if (client != t->client) {
		if (cbuf_byte(&w->s[HTR_CS_OPS], HTR_COP_CLIENT) ||
		    cbuf_u(&w->s[HTR_CS_DEF], client))
			return -1;
		t->client = client;
	}
	if (t->run < 0) {
		if (dump_grow((void **)&w->runs, &w->capruns, w->nruns + 1, sizeof(*w->runs)))
			return -1;
		t->run = (int)w->nruns;
		w->runs[w->nruns++] = (struct run){ t->tid, c, c, 0, { NULL, 0, 0 } };
	}
	r = &w->runs[t->run];
	w->wbytes -= r->time.n;
	if (cbuf_u(&r->time, c - r->last))
		return -1;
	w->wbytes += r->time.n;
	r->last = c;
	r->n++;
	w->wevents++;
	return cbuf_byte(&w->s[HTR_CS_OPS], op);
}

/* ---- keys and stacks ---- */

/* Stack st's definition into DEF: depth + 1, then as HTR_EV_STACK. */
static int put_frames(struct cw *w, const struct dump_stack *st)
{
	struct cbuf *def = &w->s[HTR_CS_DEF];
	uint64_t prev = 0;
	uint32_t i;

	if (cbuf_u(def, (uint64_t)st->depth + 1))
		return -1;
	for (i = 0; i < st->depth; i++) {
		uint64_t ip = st->frames[i].ip;

		if (i ? cbuf_s(def, (int64_t)(ip - prev)) : cbuf_u(def, ip))
			return -1;
		prev = ip;
	}
	return 0;
}

/*
 * A stack id used by a new key or a pool allocation: its definition the
 * first time.  The reader may not have handed it out yet (the thread that
 * defined it wrote its chunk later than another thread used it): 0 then,
 * and the definition follows as HTR_COP_STACK once the reader has it.
 */
static int put_stack(struct cw *w, uint32_t id)
{
	const struct dump_stack *st;

	if (id == HTR_STACK_NONE)
		return 0;
	if (cbytes_reach(&w->stack_done, &w->capstack, id))
		return -1;
	if (w->stack_done[id] == STACK_DONE)
		return 0;
	st = dump_stack(w->d, id);
	if (st) {
		w->stack_done[id] = STACK_DONE;
		return put_frames(w, st);
	}
	if (w->stack_done[id] != STACK_LATE && w->nlate < MAX_LATE_STACKS) {
		if (dump_grow((void **)&w->late, &w->caplate, w->nlate + 1, sizeof(*w->late)))
			return -1;
		w->late[w->nlate++] = id;
		w->stack_done[id] = STACK_LATE;
	}
	return cbuf_u(&w->s[HTR_CS_DEF], 0);
}

/* The late stacks the reader has handed out by now, as HTR_COP_STACK ops. */
static int put_late_stacks(struct cw *w)
{
	size_t i = 0;

	while (i < w->nlate) {
		uint32_t id = w->late[i];
		const struct dump_stack *st = dump_stack(w->d, id);

		if (!st) {
			i++;
			continue;
		}
		w->stack_done[id] = STACK_DONE;
		w->late[i] = w->late[--w->nlate];
		if (cbuf_byte(&w->s[HTR_CS_OPS], HTR_COP_STACK) || cbuf_u(&w->s[HTR_CS_DEF], id) ||
		    put_frames(w, st))
			return -1;
	}
	return 0;
}

/* An allocation's key number to AKEY, defined in DEF the first time. */
static int64_t put_key(struct cw *w, const struct dump_event *ev)
{
	uint64_t extra = ev->usable - ev->size;
	int64_t k = clists_find(&w->l, ev->size, extra, ev->stack);

	if (k < 0) {
		/* size and stack as deltas from the key defined before */
		const struct ckey *prev = w->l.nkeys ? &w->l.key[w->l.nkeys - 1] : NULL;
		int64_t dsize = (int64_t)(ev->size - (prev ? prev->size : 0));
		int64_t dstack = (int64_t)ev->stack - (prev ? (int64_t)prev->stack : 0);

		k = clists_add(&w->l, ev->size, extra, ev->stack, 1);
		if (k < 0 || cbuf_s(&w->s[HTR_CS_DEF], dsize) ||
		    cbuf_u(&w->s[HTR_CS_DEF], extra) || cbuf_s(&w->s[HTR_CS_DEF], dstack) ||
		    put_stack(w, ev->stack))
			return -1;
	}
	return cbuf_u(&w->s[HTR_CS_AKEY], (uint64_t)k) ? -1 : k;
}

/*
 * Names live block h after its op: its key and rank (rank from
 * clists_rank()), or, when it lies deeper in its list than the rank limit
 * (rank -1), how many allocations ago it was made, in DEF.
 */
static int put_block(struct cw *w, uint32_t h, int64_t rank)
{
	if (rank < 0)
		return cbuf_u(&w->s[HTR_CS_DEF],
			      (w->l.node[h].synth - HTR_COMPACT_SYNTH_BASE) / 16);
	return cbuf_u(&w->s[HTR_CS_FKEY], w->l.node[h].key) ||
	       cbuf_u(&w->s[HTR_CS_RANK], (uint64_t)rank) ? -1 : 0;
}

/* ---- events ---- */

static int put_alloc(struct cw *w, struct thread *t, const struct dump_event *ev, uint64_t c,
		     int realloc_open)
{
	struct cbuf *def = &w->s[HTR_CS_DEF];
	uint8_t api = (uint8_t)(ev->api << 3);
	uint32_t h;
	int64_t k, rank;

	if (!ev->ptr) {		/* a null result */
		t->last_synth = 0;
		return put_timed(w, t, c, ev->client, api | HTR_COP_ALLOC_AT) ||
		       cbuf_u(def, 2 | (realloc_open && ev->old_ptr ? HTR_COMPACT_AT_REALLOC : 0)) ||
		       put_key(w, ev) < 0 ? -1 : 0;
	}
	h = hmap_alloc(&w->hm, ev->ptr);
	if (h == HANDLE_NONE || clists_reserve(&w->l, h))
		return -1;
	if (dump_grow((void **)&w->blk, &w->capblk, (size_t)h + 1, sizeof(*w->blk)))
		return -1;
	w->blk[h] = (struct cw_block){ ev->client, ev->tid, ev->api };
	if (w->l.node[h].live) {
		/* its free was never recorded: the block keeps its address, takes the new key */
		uint64_t synth = w->l.node[h].synth;

		rank = clists_rank(&w->l, h, HTR_COMPACT_RANK_MAX);
		if (put_timed(w, t, c, ev->client, api | HTR_COP_ALLOC_AT) ||
		    cbuf_u(def, (rank < 0) | (realloc_open && ev->old_ptr ? HTR_COMPACT_AT_REALLOC : 0)) ||
		    put_block(w, h, rank))
			return -1;
		clists_unlink(&w->l, h);
		k = put_key(w, ev);
		if (k < 0)
			return -1;
		clists_link(&w->l, h, (uint32_t)k, synth);
		t->last_synth = synth;
		return 0;
	}
	if (put_timed(w, t, c, ev->client,
		      api | (realloc_open && ev->old_ptr ? HTR_COP_REALLOC_NEW : HTR_COP_ALLOC)))
		return -1;
	k = put_key(w, ev);
	if (k < 0)
		return -1;
	t->last_synth = HTR_COMPACT_SYNTH_BASE + 16 * csynth_take(&w->syn);
	clists_link(&w->l, h, (uint32_t)k, t->last_synth);
	return 0;
}

/*
 * A free of block h deep in its key's list: a block at either end of the
 * list with the same thread, client and api may stand in for it, taking
 * its place (and its address, as the reader numbers them): the rank is
 * then 0 or 1, and the figures per site, thread and client stay the same;
 * only the two blocks' allocation times are exchanged.  0 when none does.
 */
static uint32_t stand_in(struct cw *w, const struct thread *t, uint32_t h, int64_t *rank)
{
	const struct ckey *k = &w->l.key[w->l.node[h].key];
	const struct cw_block *b = &w->blk[h];
	const struct thread *owner = thread_find(w, b->tid);
	uint32_t ends[2] = { k->head, k->tail };
	uint64_t last1 = t->last_synth, last2 = owner ? owner->last_synth : 0;
	int i;

	/* a thread's latest allocation keeps its own: the replay counts temporaries by it */
	if (w->l.node[h].synth == last1 || w->l.node[h].synth == last2)
		return 0;
	/*
	 * The newest first: it repeats (rank 0 after rank 0) and compresses
	 * best.  (The end allocated nearer in time to h made cxxchurn's dump
	 * 7% larger and the lifetimes no better.)
	 */
	for (i = 0; i < 2; i++) {
		const struct cw_block *e = &w->blk[ends[i]];
		uint64_t synth = w->l.node[ends[i]].synth;

		if (e->tid == b->tid && e->client == b->client && e->api == b->api &&
		    synth != last1 && synth != last2) {
			*rank = i;
			return ends[i];
		}
	}
	return 0;
}

static int put_free(struct cw *w, struct thread *t, const struct dump_event *ev, uint64_t c)
{
	struct cbuf *def = &w->s[HTR_CS_DEF];
	uint8_t api = (uint8_t)(ev->api << 3);
	uint32_t h = ev->ptr ? hmap_free(&w->hm, ev->ptr) : HANDLE_UNKNOWN, y = 0;
	int64_t rank;

	if (h == HANDLE_NONE)
		return -1;
	if (ev->realloc_pair) {
		t->realloc_open = 1;	/* its allocation half is the thread's next event */
		t->open_time = c;
		w->open_reallocs++;
		api |= HTR_COMPACT_PAIR << 3;
	}
	if (h == HANDLE_UNKNOWN || h >= w->l.capnode || !w->l.node[h].live) {
		t->last_synth = 0;
		return put_timed(w, t, c, ev->client, api | HTR_COP_FREE_ADDR) ||
		       cbuf_u(def, 0) || cbuf_u(def, ev->ptr) ? -1 : 0;
	}
	rank = clists_rank(&w->l, h, EXACT_RANK);
	if (rank < 0)
		y = stand_in(w, t, h, &rank);
	t->last_synth = 0;
	if (rank < 0 ? put_timed(w, t, c, ev->client, api | HTR_COP_FREE_ADDR) || cbuf_u(def, 1)
		     : put_timed(w, t, c, ev->client, api | HTR_COP_FREE))
		return -1;
	if (y) {
		/* the reader frees y's address; y lives on at h's */
		uint64_t gone = w->l.node[y].synth;

		if (cbuf_u(&w->s[HTR_CS_FKEY], w->l.node[h].key) ||
		    cbuf_u(&w->s[HTR_CS_RANK], (uint64_t)rank))
			return -1;
		clists_replace(&w->l, h, y);
		return csynth_give(&w->syn, (gone - HTR_COMPACT_SYNTH_BASE) / 16);
	}
	if (put_block(w, h, rank))
		return -1;
	clists_unlink(&w->l, h);
	return csynth_give(&w->syn, (w->l.node[h].synth - HTR_COMPACT_SYNTH_BASE) / 16);
}

/* A pool block's address, as recorded: a delta from the previous one. */
static int put_pool_ptr(struct cw *w, uint64_t ptr)
{
	int64_t d = (int64_t)(ptr - w->pool_ptr);

	w->pool_ptr = ptr;
	return cbuf_s(&w->s[HTR_CS_DEF], d);
}

static int put_control(struct cw *w, struct thread *t, const struct dump_event *ev, uint64_t c)
{
	struct cbuf *def = &w->s[HTR_CS_DEF];
	const char *text = ev->text ? ev->text : "";
	unsigned sub;

	switch (ev->kind) {
	case DUMP_THREAD_START: sub = HTR_SUB_THREAD_START; break;
	case DUMP_THREAD_EXIT: sub = HTR_SUB_THREAD_EXIT; break;
	case DUMP_THREAD_NAME: sub = HTR_SUB_THREAD_NAME; break;
	case DUMP_CLIENT_BEGIN: sub = HTR_SUB_CLIENT_BEGIN; break;
	case DUMP_CLIENT_END: sub = HTR_SUB_CLIENT_END; break;
	case DUMP_POOL_CREATE: sub = HTR_SUB_POOL_CREATE; break;
	case DUMP_POOL_DESTROY: sub = HTR_SUB_POOL_DESTROY; break;
	case DUMP_POOL_ALLOC: sub = HTR_SUB_POOL_ALLOC; break;
	default: sub = HTR_SUB_POOL_FREE; break;
	}
	if (put_timed(w, t, c, ev->client, HTR_COP_CONTROL) || cbuf_u(def, sub))
		return -1;
	switch (sub) {
	case HTR_SUB_THREAD_START:
		return cbuf_u(def, ev->id);
	case HTR_SUB_THREAD_EXIT:
		t->client = 0;		/* the reader forgets the thread's client */
		t->last_synth = 0;
		return 0;
	case HTR_SUB_THREAD_NAME:
		return cbuf_bytes(def, text, strlen(text));
	case HTR_SUB_CLIENT_BEGIN:
	case HTR_SUB_POOL_CREATE:
		return cbuf_u(def, ev->id) || cbuf_bytes(def, text, strlen(text)) ? -1 : 0;
	case HTR_SUB_CLIENT_END:
	case HTR_SUB_POOL_DESTROY:
		return cbuf_u(def, ev->id);
	case HTR_SUB_POOL_ALLOC:
		return cbuf_u(def, ev->id) || put_pool_ptr(w, ev->ptr) || cbuf_u(def, ev->size) ||
		       cbuf_u(def, ev->stack) || put_stack(w, ev->stack) ? -1 : 0;
	default:
		return cbuf_u(def, ev->id) || put_pool_ptr(w, ev->ptr) ? -1 : 0;
	}
}

/* ---- top-level records ---- */

static int put_module_load(struct cw *w, const struct dump_event *ev, uint64_t c)
{
	size_t n, i;
	const struct dump_module *m = &dump_modules(w->d, &n)[ev->id];
	struct cbuf *f = &w->frame;

	if (cbuf_byte(f, HTR_REC_MODULE_LOAD) || cbuf_u(f, c) || cbuf_u(f, m->id) ||
	    cbuf_u(f, m->load_bias) || cbuf_bytes(f, m->path, strlen(m->path)) ||
	    cbuf_bytes(f, m->build_id, m->build_id_len) || cbuf_u(f, m->nsegs))
		return -1;
	for (i = 0; i < m->nsegs; i++)
		if (cbuf_u(f, m->segs[2 * i]) || cbuf_u(f, m->segs[2 * i + 1]))
			return -1;
	return 0;
}

/* A scan's blocks at their synthetic addresses (a block not live keeps its own). */
static int put_reach(struct cw *w, const struct dump_event *ev, uint64_t c)
{
	struct cbuf *f = &w->frame;
	size_t i = 0, j, n;

	do {
		uint64_t prev = 0;

		n = ev->nreach - i < REACH_PER_RECORD ? ev->nreach - i : REACH_PER_RECORD;
		if (frame_before(w, 32 + 12 * n) || cbuf_byte(f, HTR_REC_REACH) ||
		    cbuf_u(f, c) || cbuf_u(f, (uint64_t)ev->reach_kind) || cbuf_u(f, n))
			return -1;
		for (j = i; j < i + n; j++) {
			uint32_t h = hmap_get(&w->hm, ev->reach[j].ptr);
			uint64_t p = h != HANDLE_UNKNOWN && h < w->l.capnode && w->l.node[h].live ?
				     w->l.node[h].synth : ev->reach[j].ptr;

			if (cbuf_s(f, (int64_t)(p - prev)) || cbuf_u(f, ev->reach[j].cls))
				return -1;
			prev = p;
		}
		i += n;
	} while (i < ev->nreach);
	return 0;
}

static int put_top(struct cw *w, const struct dump_event *ev, uint64_t c)
{
	struct cbuf *f = &w->frame;
	const struct dump_sample *s = &ev->sample;
	size_t n;

	/*
	 * Written ahead of the window that holds the events around it: the
	 * reader queues it by its time, and no watermark passes it before
	 * that window is read (so a sample between a realloc's two halves
	 * does not split them).  The end comes after every event.
	 */
	if ((ev->kind == DUMP_END && flush_window(w)) || frame_before(w, 8192))
		return -1;
	switch (ev->kind) {
	case DUMP_MODULE_LOAD:
		if (put_module_load(w, ev, c))
			return -1;
		break;
	case DUMP_MODULE_UNLOAD:
		if (cbuf_byte(f, HTR_REC_MODULE_UNLOAD) || cbuf_u(f, c) ||
		    cbuf_u(f, dump_modules(w->d, &n)[ev->id].id))
			return -1;
		break;
	case DUMP_SAMPLE:
		if (cbuf_byte(f, HTR_REC_SAMPLE) || cbuf_u(f, c) || cbuf_u(f, s->rss_bytes) ||
		    cbuf_u(f, s->arena_bytes) || cbuf_u(f, s->mmap_bytes) ||
		    cbuf_u(f, s->in_use_bytes) || cbuf_u(f, s->free_bytes) ||
		    cbuf_u(f, s->top_releasable_bytes) || cbuf_u(f, s->shim_bytes))
			return -1;
		break;
	case DUMP_MARK:
		if (cbuf_byte(f, HTR_REC_MARK) || cbuf_u(f, c) ||
		    cbuf_bytes(f, ev->text ? ev->text : "", ev->text ? strlen(ev->text) : 0))
			return -1;
		break;
	case DUMP_LOST:
		if (cbuf_byte(f, HTR_REC_LOST) || cbuf_u(f, c) || cbuf_u(f, ev->lost_events) ||
		    cbuf_u(f, (uint64_t)ev->lost_reason))
			return -1;
		break;
	case DUMP_END:
		if (cbuf_byte(f, HTR_REC_END) || cbuf_u(f, c) || cbuf_u(f, (uint64_t)ev->end_how) ||
		    cbuf_u(f, (uint64_t)ev->end_status) || cbuf_u(f, ev->events_written) ||
		    cbuf_u(f, ev->lost_events))
			return -1;
		break;
	default:		/* DUMP_REACH */
		if (put_reach(w, ev, c))
			return -1;
		break;
	}
	return ev->kind == DUMP_END ? put_watermark(w) : 0;
}

static int put_event(struct cw *w, const struct dump_event *ev)
{
	uint64_t c = compact_time(w, ev->time);
	struct thread *t;
	size_t bytes, i;
	int open;

	switch (ev->kind) {
	case DUMP_ALLOC:
	case DUMP_FREE:
	case DUMP_THREAD_START:
	case DUMP_THREAD_EXIT:
	case DUMP_THREAD_NAME:
	case DUMP_CLIENT_BEGIN:
	case DUMP_CLIENT_END:
	case DUMP_POOL_CREATE:
	case DUMP_POOL_DESTROY:
	case DUMP_POOL_ALLOC:
	case DUMP_POOL_FREE:
		break;
	default:
		return put_top(w, ev, c);
	}
	t = thread_of(w, ev->tid);
	if (!t)
		return -1;
	open = t->realloc_open;
	if (open) {		/* this event of the thread closes it, whatever it is */
		t->realloc_open = 0;
		w->open_reallocs--;
	}
	if (ev->kind == DUMP_ALLOC ? put_alloc(w, t, ev, c, open) :
	    ev->kind == DUMP_FREE ? put_free(w, t, ev, c) : put_control(w, t, ev, c))
		return -1;
	/* a window may split a realloc: the reader joins its halves again */
	bytes = w->wbytes;
	for (i = 1; i < HTR_CS_COUNT; i++)
		bytes += w->s[i].n;
	if (w->wevents >= WINDOW_EVENTS || bytes >= WINDOW_BYTES || w->nruns >= WINDOW_THREADS)
		return flush_window(w);
	return 0;
}

/* ---- the process record ---- */

static int put_process(struct cw *w)
{
	const struct dump_process *p = dump_process(w->d);
	struct cbuf *f = &w->frame, cmd = { NULL, 0, 0 };
	int i, ret;

	for (i = 0; i < p->argc; i++)
		if (cbuf_raw(&cmd, p->argv[i], strlen(p->argv[i]) + 1)) {
			cbuf_free(&cmd);
			return -1;
		}
	ret = cbuf_byte(f, HTR_REC_PROCESS) || cbuf_u(f, p->pid) || cbuf_u(f, p->ppid) ||
	      cbuf_u(f, p->start_mono_ns) || cbuf_u(f, p->start_realtime_ns) ||
	      cbuf_u(f, p->page_size) || cbuf_bytes(f, p->exe ? p->exe : "", p->exe ? strlen(p->exe) : 0) ||
	      cbuf_bytes(f, cmd.p, cmd.n ? cmd.n - 1 : 0) || cbuf_u(f, p->sample_bytes) ||
	      cbuf_u(f, (uint64_t)p->unwinder) || cbuf_u(f, p->max_depth) ||
	      cbuf_u(f, (p->flags & (HTR_PF_FOLLOWED_FORK | HTR_PF_AFTER_EXEC)) |
			HTR_PF_PTR_UNITS | HTR_PF_COMPACT) ||
	      cbuf_u(f, p->fork_generation);
	cbuf_free(&cmd);
	return ret ? -1 : 0;
}

static void cw_free(struct cw *w)
{
	size_t i;

	for (i = 0; i < w->nruns; i++)
		cbuf_free(&w->runs[i].time);
	for (i = 0; i < HTR_CS_COUNT; i++)
		cbuf_free(&w->s[i]);
	cbuf_free(&w->frame);
	free(w->runs);
	free(w->th);
	free(w->thslot);
	free(w->stack_done);
	free(w->late);
	free(w->blk);
	hmap_release(&w->hm);
	csynth_free(&w->syn);
	clists_free(&w->l);
	frameout_free(&w->fo);
	if (w->d)
		dump_close(w->d);
}

int compact_dump(const char *inpath, FILE *out, int level, uint64_t *frames, uint64_t *bytes_out)
{
	struct cw w;
	struct htr_file_header h;
	struct dump_event ev;
	FILE *in;
	int ret = 0, r;

	memset(&w, 0, sizeof(w));
	w.inpath = inpath;
	in = fopen(inpath, "rb");
	if (!in || fread(&h, 1, sizeof(h), in) != sizeof(h)) {
		if (in)
			fclose(in);
		cli_error("cannot read '%s': not a heaptrail dump", inpath);
		return -1;
	}
	fclose(in);
	w.d = cli_open_dump(inpath);
	if (!w.d)
		return -1;
	if (frameout_init(&w.fo, level, HTR_FRAME_RAW_MAX, "the compact dump"))
		goto nomem;
	w.fo.out = out;
	/* the header as it was (writer's pid, start time); the header_size ours */
	h.header_size = sizeof(h);
	if (frameout_raw(&w.fo, &h, sizeof(h)))
		goto fail;
	if (put_process(&w))
		goto nomem;
	while ((r = dump_next(w.d, &ev)) == 1)
		if (put_event(&w, &ev)) {
			if (w.nomem || errno == ENOMEM)
				goto nomem;
			goto fail;
		}
	if (r < 0) {
		cli_error("cannot read '%s': %s", inpath, dump_error(w.d));
		goto fail;
	}
	if (flush_window(&w) || flush_frame(&w))
		goto fail;
	if (dump_warning(w.d)) {
		cli_warn("'%s': %s: compacted what came before", inpath, dump_warning(w.d));
		ret = 1;
	}
	*frames = w.frames;
	*bytes_out = w.fo.bytes;
	cw_free(&w);
	return ret;
nomem:
	cli_error("out of memory");
fail:
	cw_free(&w);
	return -1;
}
