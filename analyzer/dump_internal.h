/* dump_internal.h - the dump reader's private structures, shared by dump.c and dump_thread.c */
#ifndef HT_DUMP_INTERNAL_H
#define HT_DUMP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "chunkunpack.h"
#include "compact_read.h"
#include "dump.h"
#include "../common/htr_varint.h"

/*
 * dump.c reads the file: frames, top-level records, the merge loop of
 * dump_next() and the public accessors.  dump_thread.c decodes thread
 * chunks: per-thread cursors, events, stack definitions and the module map
 * stacks are resolved against.  Cross-file helpers carry the dump_ prefix
 * and are declared at the end, grouped by the file that defines them.
 */

/* Simultaneous events: new modules first, then frees, then the rest, then
 * module unloads and the end (an event at time t may use code unloaded at t). */
enum { CLS_LOAD = 0, CLS_FREE = 1, CLS_ALLOC = 2, CLS_LAST = 3 };

#define DEFAULT_HOLD_LIMIT (512ull << 20)
#define ENTRY_COST 64u			/* bytes charged per queued chunk or record */
#define MAX_THREADS (1u << 20)		/* live threads; beyond that the dump is corrupt */
#define MAX_SEGS 256u			/* PT_LOAD segments of one module */
#define MAX_ACTIVE_SEGS 16384u		/* segments of modules loaded at once */
#define MAX_PATH_LEN 4096u		/* a module's path */
#define MAX_HEADER 65536u		/* largest file header a later version may write */
#define STACK_ID_SLACK 65536u		/* how far ids may run ahead of definitions */
#define FRAME_ARENA 4096u		/* dump_frame entries per arena block */
/*
 * Decompressed buffers kept for reuse, at most: as many as a stretch between
 * two watermarks holds, so that reading on allocates no fresh pages (a page
 * fault each), within FREE_FRAME_BYTES.
 */
#define FREE_FRAMES 64
#define FREE_FRAME_BYTES (32u << 20)
#define ORD_CURSOR (1ull << 48)

/*
 * A packed chunk (HTR_PF_PACKED) unpacked by the reader thread ahead of
 * time: the payload at raw + off (len bytes) reads as 'plen' plain bytes at
 * ubuf + uoff (in_raw: at raw + uoff).  dump_enqueue_chunk() substitutes
 * them; a chunk without one is unpacked where a cursor takes it.
 */
struct preunpacked {
	size_t off, len, uoff, plen;
	int in_raw;
};

struct frame {
	struct frame *next;		/* free list */
	uint8_t *raw;
	size_t size, cap;
	uint64_t off;			/* file offset of its header */
	uint32_t refs;
	uint8_t *ubuf;			/* its chunks unpacked by the reader thread */
	size_t ulen, ucap;
	struct preunpacked *pre;
	size_t npre, cappre, prei;	/* prei: the next to match, in frame order */
};

struct chunk {
	struct frame *f;
	const uint8_t *p, *end;
	uint64_t base_time;
	int plain;			/* unpacked already (HTR_PF_PACKED) */
};

/*
 * One entry of a batch.  Heap and control events: the event, with 'aux'
 * its old_ptr (DUMP_ALLOC) or id (the rest).  BEV_STACK: stack 'aux' is
 * defined with 'size' frames at 'ptr' (in the producer's frame arena, kept
 * until dump_close()).  BEV_RARE: b->rare[aux] holds a whole event.
 */
struct bev {
	uint64_t time, ptr, size, usable, aux, client;
	uint32_t stack, tid;
	uint32_t handle;		/* DUMP_ALLOC, DUMP_FREE: see HANDLE_NONE */
	uint8_t kind, api, flags;
};

/*
 * A decoded event waiting for its turn, already in the shape of its batch
 * entry (its handle and flags left at 0, its tid set when the cursor was
 * made): delivering it is a copy.
 */
struct head {
	struct bev b;
	const uint8_t *text;
	size_t textlen;
	uint8_t cls;
};

struct cursor {
	uint32_t tid, idx;
	uint64_t order;			/* ORD_CURSOR | idx: cursor_order() without the class */
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
	struct chunkunpack unpacked;	/* the current chunk's events (HTR_PF_PACKED) */
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

/*
 * The reader is split in two.  The producer (everything above: frames,
 * cursors, the merge, the module map stacks are resolved against) writes the
 * merged stream into batches; the consumer (dump_next() and the public
 * accessors) hands the events out and keeps the state observers look at:
 * the stack table, the module list, the time.  On a large dump the producer
 * runs on a thread of its own, a few batches ahead; otherwise dump_next()
 * calls it when its batch runs dry.  Either way the two halves share nothing
 * but the batches, so the consumer sees the same stream and the same tables
 * in the same order.
 */
#define BATCH_EVENTS 2048u		/* a batch is handed over once this full */
/*
 * Batches in flight with a producer thread.  Free batches are reused
 * oldest first: one just read by the consumer sits in the other core's
 * cache, and writing its 64-byte entries again meant a cache line taken
 * back from that core per event (a LIFO of 8 batches: 40% of the
 * producer's time on mtmalloc's dump; a FIFO of 16, 2 MiB, reuses
 * batches read 8 batches ago, out of that core's L2: report 0.38 ->
 * 0.26 s, median of 9).
 */
#define NBATCHES 16
#define THREAD_MIN_BYTES (4ull << 20)	/* smaller dumps are read without a thread */
/*
 * Bytes of chunks unpacked ahead by the reader thread, at most.  They live
 * as long as their frame, the whole stretch between two watermarks, on top
 * of the frames: at 8 MiB a long mtmalloc dump, whose later chunks the
 * writer's auto policy packed (a short one's it left as they were), held
 * 6-7 MiB more than the short one (peak RSS 38.7 -> 48.7 MB) for no gain
 * in CPU or wall time.
 */
#define PREUNPACK_BUDGET (1u << 20)

/*
 * Handles.  The producer numbers the live heap blocks: an allocation gets a
 * small number (the last one freed, else a new one; a pointer already live
 * keeps its own), its free hands the number back.  The replay keeps its
 * blocks in an array indexed by handle, so it neither hashes nor probes:
 * that work is done on the producer's side of the pipeline.  Handles stay
 * below the highest number of blocks live at once.
 */
#define HANDLE_NONE 0u			/* the event has no handle (ptr 0, or no reader) */
#define HANDLE_UNKNOWN UINT32_MAX	/* a free of a pointer that is not live */

/*
 * Pointer -> handle map (open addressing, backward-shift deletion).  A
 * pointer and its handle share one 16-byte slot: a probe touches one cache
 * line, not one in a key array and another in a value array.
 */
struct hslot {
	uint64_t key;			/* 0 = empty */
	uint32_t val;
	uint32_t pad;
};

struct hmap {
	struct hslot *s;
	size_t mask, n;			/* capacity - 1, entries */
	size_t limit;			/* entries that fill it (hmap_full()); 0 with no table */
	unsigned shift;			/* 64 - log2(capacity) */
	uint32_t *spare;		/* freed handles, reused last in, first out */
	size_t nspare, capspare;
	uint32_t next;			/* the lowest handle never given (from 1) */
};

static inline size_t hmap_home(const struct hmap *m, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> m->shift);
}

static inline void hmap_release(struct hmap *m)
{
	free(m->s);
	free(m->spare);
	memset(m, 0, sizeof *m);
}

/* Sets ptr's handle (ptr not in the map); -1 when out of memory. */
static inline int hmap_put(struct hmap *m, uint64_t ptr, uint32_t h);

/*
 * Whether one more entry needs a larger table.  A free walks the rest of its
 * probe run (the backward shift), whose expected length grows steeply with
 * the load, and each step is a branch the CPU cannot predict: a table of up
 * to HMAP_SPARSE_MAX slots (16 MiB) is kept at most 1/8 full, 1/4 beyond,
 * where each probe is a cache miss anyway and memory counts more.
 */
#define HMAP_SPARSE_MAX (1u << 20)

static inline int hmap_full(const struct hmap *m)
{
	return m->n >= m->limit;
}

static inline int hmap_grow(struct hmap *m)
{
	struct hmap n = *m;
	size_t cap = m->s ? 2 * (m->mask + 1) : 1024, i;
	unsigned bits = 0;

	while ((1ull << bits) < cap)
		bits++;
	n.s = calloc(cap, sizeof *n.s);
	if (!n.s)
		return -1;
	n.mask = cap - 1;
	n.shift = 64 - bits;
	n.n = 0;
	n.limit = cap / (cap < HMAP_SPARSE_MAX ? 8 : 4);
	for (i = 0; m->s && i <= m->mask; i++)
		if (m->s[i].key)
			hmap_put(&n, m->s[i].key, m->s[i].val);
	free(m->s);
	*m = n;
	return 0;
}

static inline int hmap_put(struct hmap *m, uint64_t ptr, uint32_t h)
{
	size_t i;

	if (hmap_full(m) && hmap_grow(m))
		return -1;
	for (i = hmap_home(m, ptr); m->s[i].key; i = (i + 1) & m->mask)
		;
	m->s[i].key = ptr;
	m->s[i].val = h;
	m->n++;
	return 0;
}

/* ptr's handle, HANDLE_UNKNOWN when it is not in the map. */
static inline uint32_t hmap_get(const struct hmap *m, uint64_t ptr)
{
	size_t i;

	if (!m->s)
		return HANDLE_UNKNOWN;
	for (i = hmap_home(m, ptr); m->s[i].key; i = (i + 1) & m->mask)
		if (m->s[i].key == ptr)
			return m->s[i].val;
	return HANDLE_UNKNOWN;
}

/* An allocation at ptr (non-zero): its handle, HANDLE_NONE when out of memory. */
static inline uint32_t hmap_alloc(struct hmap *m, uint64_t ptr)
{
	size_t i;
	uint32_t h;

	if (__builtin_expect(hmap_full(m), 0) && hmap_grow(m))
		return HANDLE_NONE;
	for (i = hmap_home(m, ptr); m->s[i].key; i = (i + 1) & m->mask)
		if (m->s[i].key == ptr)
			return m->s[i].val;	/* its free was never seen */
	if (m->nspare) {
		h = m->spare[--m->nspare];
	} else {
		if (!m->next)
			m->next = 1;
		if (m->next == HANDLE_UNKNOWN)
			return HANDLE_NONE;
		h = m->next++;
	}
	m->s[i].key = ptr;
	m->s[i].val = h;
	m->n++;
	return h;
}

/*
 * A free of ptr (non-zero): its handle, which becomes free for reuse, or
 * HANDLE_UNKNOWN when ptr is not live; HANDLE_NONE when out of memory.
 */
static inline uint32_t hmap_free(struct hmap *m, uint64_t ptr)
{
	size_t i, j;
	uint32_t h;

	if (!m->s)
		return HANDLE_UNKNOWN;
	for (i = hmap_home(m, ptr);; i = (i + 1) & m->mask) {
		if (!m->s[i].key)
			return HANDLE_UNKNOWN;
		if (m->s[i].key == ptr)
			break;
	}
	if (__builtin_expect(m->nspare == m->capspare, 0)) {
		size_t cap = m->capspare ? 2 * m->capspare : 1024;
		uint32_t *sp = realloc(m->spare, cap * sizeof *sp);

		if (!sp)
			return HANDLE_NONE;
		m->spare = sp;
		m->capspare = cap;
	}
	h = m->s[i].val;
	m->spare[m->nspare++] = h;
	for (j = i;;) {
		size_t k;

		j = (j + 1) & m->mask;
		if (!m->s[j].key)
			break;
		k = hmap_home(m, m->s[j].key);
		/* j may move to i unless its home lies in the cyclic range (i, j] */
		if (((j - k) & m->mask) >= ((j - i) & m->mask)) {
			m->s[i] = m->s[j];
			i = j;
		}
	}
	m->s[i].key = 0;
	m->n--;
	return h;
}

/* Entry kinds beyond enum dump_kind: not events, consumer state changes. */
enum { BEV_STACK = 64, BEV_RARE };
#define BEV_TEXT 1			/* flags: text at b->text + usable */
#define BEV_PAIR 2			/* flags: a realloc's free half, its allocation next */

/* A top-level record's event; a module load carries the module itself. */
struct rare {
	struct dump_event ev;
	struct dump_module mod;		/* DUMP_MODULE_LOAD; path owned until taken */
	size_t off;			/* DUMP_MARK: text, DUMP_REACH: reach entries */
};

enum { BS_MORE, BS_END, BS_FAIL, BS_WAIT };

struct batch {
	struct bev *ev;
	size_t n, cap, pos;		/* pos: the consumer's next entry */
	char *text;
	size_t ntext, captext;
	struct rare *rare;
	size_t nrare, caprare;
	struct dump_reach_entry *reach;
	size_t nreach, capreach;
	int status;			/* BS_*: what follows the last entry */
	uint64_t off, fsize;		/* the producer's file position at hand-over */
};

struct dump {
	char *path;
	int fd;
	uint64_t off, fsize;
	uint64_t bad_off;		/* the frame read_frame() looked at last */
	int follow, final, flush, stopped, failed, have_process;
	int pfollow;			/* the producer's copy of 'follow' */
	uint64_t wm, now, seq;
	uint64_t hold, hold_peak, hold_limit;
	uint64_t disorder;
	ZSTD_DCtx *zd;
	uint8_t *zbuf;
	size_t zcap;
	struct frame *free_frames;
	int nfree;
	size_t free_bytes;		/* capacity of the buffers in free_frames */

	/* a compact dump (HTR_PF_COMPACT): its windows, decoded frame by frame */
	struct compact_reader *compact;
	struct compact_out cout;
	int compact_flag;		/* the process record says compact */

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
	unsigned tshift;		/* from proc.flags: HTR_PF_TIME_TICKS */
	int units;			/* HTR_PF_PTR_UNITS */
	struct hmap hm;			/* handles of the live heap blocks */
	uint64_t pfsize;		/* the file's size as the producer last heard */
	pthread_mutex_t *flock;		/* guards free_frames once a reader thread runs */
	size_t ubytes;			/* unpacked ahead by the reader (atomic) */
	struct batch *pb;		/* the batch the producer fills */
	char perr[1024];		/* the producer's hard error */

	char why[256];			/* what was wrong with the last bad frame */
	int warn_kind;
	uint64_t warn_off;
	char warn_why[256];

	/* ---- the consumer: dump_next() and the accessors ---- */
	struct batch *cb;		/* the batch being handed out */
	int cdone;			/* BS_END / BS_FAIL seen: the stream is over */
	uint64_t pub_now, pub_off, pub_fsize;
	struct dump_stack *pub_stacks;	/* by id */
	size_t pub_capstacks;
	uint32_t pub_stack_max;
	struct dump_module *pub_mods;
	size_t pub_nmods, pub_capmods;
	char warn[512];
	char err[1024];

	/* ---- the producer thread, when there is one ---- */
	struct dump_pipe *pipe;
	int thread_mode;		/* -1 auto, 0 never, 1 always (unless following) */
};

static inline void hold_add(struct dump *d, uint64_t n)
{
	d->hold += n;
	if (d->hold > d->hold_peak)
		d->hold_peak = d->hold;
}

/* ---- record field reader (top-level records, cold paths) ---- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static inline uint64_t rd_u(struct rd *r)
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

static inline uint64_t rd_u32(struct rd *r)
{
	uint64_t v = rd_u(r);

	if (v > UINT32_MAX)
		r->bad = 1;
	return v;
}

static inline int64_t rd_s(struct rd *r)
{
	return htr_unzigzag(rd_u(r));
}

static inline const uint8_t *rd_bytes(struct rd *r, size_t *len)
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

/* dump_bev_add() when the batch is full: grows it, NULL when out of memory. */
struct bev *dump_bev_grow(struct dump *d);

/* Room for one more entry in the producer's batch; NULL when out of memory. */
static inline struct bev *dump_bev_add(struct dump *d)
{
	struct batch *b = d->pb;

	if (__builtin_expect(b->n < b->cap, 1))
		return &b->ev[b->n++];
	return dump_bev_grow(d);
}

/* ---- the merge heap ---- */

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

static inline uint64_t cursor_order(const struct cursor *c)
{
	return ((uint64_t)c->h.cls << 56) | c->order;
}

/* dump.c */
int dump_grow(void **p, size_t *cap, size_t need, size_t elem);
__attribute__((format(printf, 2, 3)))
void dump_set_err(struct dump *d, const char *fmt, ...);
/* Sets d->why; returns -1 for "return dump_bad(...)". */
__attribute__((format(printf, 2, 3)))
int dump_bad(struct dump *d, const char *fmt, ...);
void dump_warn(struct dump *d, int kind, uint64_t off, const char *why);
void dump_frame_unref(struct dump *d, struct frame *f);
int dump_heap_push(struct dump *d, uint64_t time, uint64_t order, void *obj);
void dump_heap_pop(struct dump *d);
/* Copies text into the producer's batch: its offset, or -1 when out of memory. */
int64_t dump_text_add(struct dump *d, const uint8_t *s, size_t n);

/* dump_thread.c */
/* Queues a chunk on its thread: 0, or -1 (d->why; d->failed on ENOMEM). */
int dump_enqueue_chunk(struct dump *d, struct frame *f, uint32_t tid,
		       uint64_t base, const uint8_t *p, const uint8_t *end);
/* Delivers the head of the heap top's cursor into the producer's batch
 * (its time in *time): 1, or -1 (stopped or failed). */
int dump_emit_cursor(struct dump *d, struct cursor *c, uint64_t *time);
void dump_cursor_free(struct dump *d, struct cursor *c);
/* MODULE_LOAD / MODULE_UNLOAD delivery: 1, 0 for nothing to tell, -ENOMEM. */
int dump_module_load(struct dump *d, struct rd *r, struct dump_event *ev);
int dump_module_unload(struct dump *d, struct rd *r, struct dump_event *ev);

/*
 * The replay's fast lane (replay.c).  dump_heap_run() points *first at the
 * next entries of the batch being handed out and returns how many there are
 * (at most 'max'; 0 when the batch is spent): the caller may apply the
 * DUMP_ALLOC and DUMP_FREE entries among the first of them straight from
 * there, up to the first of another kind (which it must leave to
 * dump_next()), then says how many it took and the latest time among them
 * with dump_heap_took().  The entries stay valid until dump_next(); every
 * entry's handle is set.
 */
size_t dump_heap_run(struct dump *d, const struct bev **first, size_t max);
void dump_heap_took(struct dump *d, size_t n, uint64_t max_time);

/* ---- test knobs ---- */

/*
 * The reader holds decompressed frames until every chunk in them has been
 * replayed.  A well-formed dump needs only what lies between two watermarks;
 * a dump without watermarks would need all of it, so past this limit
 * (default 512 MiB) the reader replays the earliest events it holds without
 * waiting for a watermark, and warns if that put events out of order.
 */
void dump_set_hold_limit(struct dump *d, uint64_t bytes);

/* Highest number of bytes held so far (frames plus queued entries). */
uint64_t dump_hold_peak(const struct dump *d);

/*
 * Whether the producer runs on a thread of its own: 0 never, 1 always (not
 * in follow mode), -1 (the default) for dumps of THREAD_MIN_BYTES or more.
 * The environment variable HEAPTRAIL_READER_THREAD=0|1 sets it at
 * dump_open().  Takes effect at the first dump_next().
 */
void dump_set_thread_mode(struct dump *d, int mode);

/* ---- the reading pipeline, between dump.c and dump_pipe.c ---- */

enum { RF_OK, RF_EOF, RF_PARTIAL, RF_CORRUPT, RF_ERROR };

/*
 * The file's half of reading a frame: header, sizes, data, decompression.
 * With a producer thread it runs on a reader thread of its own, NFETCH
 * frames ahead; it touches nothing but the file, the zstd context and the
 * buffer free list.
 */
struct fetch {
	struct frame *f;		/* RF_OK: the decompressed frame */
	int rf;				/* RF_* */
	uint64_t off, next;		/* the frame's offset, the next one's */
	uint64_t fsize;			/* the file's size as last seen */
	char why[256];			/* RF_CORRUPT */
};

#define NFETCH 2

struct dump_pipe {
	pthread_t th, rth;			/* producer, reader */
	int reading;				/* the reader thread runs */
	pthread_mutex_t mu;
	pthread_cond_t cv_prod, cv_cons;	/* a free batch / a full batch */
	pthread_cond_t cv_fetched, cv_room;	/* a frame read / room for one */
	struct batch *all[NBATCHES];
	struct batch *full[NBATCHES];		/* ring, in stream order */
	unsigned fhead, nfull;
	struct batch *freeb[NBATCHES];		/* ring, the longest free first */
	unsigned frhead, nfree;
	struct fetch fq[NFETCH];		/* ring of frames read ahead */
	unsigned qhead, nq;
	uint64_t roff;				/* where the reader reads next */
	struct chunkunpack unpack;		/* the reader's, see pre_unpack() */
	int stop;
};

/* dump.c */
struct batch *dump_batch_new(void);
void dump_batch_reset(struct batch *b);
void dump_batch_free(struct batch *b);
void dump_frame_put(struct dump *d, struct frame *f);
void dump_fetch_frame(struct dump *d, uint64_t off, struct fetch *x);
int dump_produce(struct dump *d);
/* dump_pipe.c */
int dump_want_thread(const struct dump *d);
int dump_pipe_start(struct dump *d);
void dump_pipe_stop(struct dump *d);
int dump_take_fetched(struct dump *d, struct fetch *x);

#endif
