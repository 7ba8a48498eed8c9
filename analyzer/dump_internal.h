/* dump_internal.h - the dump reader's private structures, shared by dump.c and dump_thread.c */
#ifndef HT_DUMP_INTERNAL_H
#define HT_DUMP_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <zstd.h>

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
	return ((uint64_t)c->h.cls << 56) | ORD_CURSOR | c->idx;
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
int dump_set_text(struct dump *d, struct dump_event *ev, const uint8_t *s, size_t n);

/* dump_thread.c */
/* Queues a chunk on its thread: 0, or -1 (d->why; d->failed on ENOMEM). */
int dump_enqueue_chunk(struct dump *d, struct frame *f, uint32_t tid,
		       uint64_t base, const uint8_t *p, const uint8_t *end);
/* Delivers the head of the heap top's cursor: 1, or -1 (stopped or failed). */
int dump_emit_cursor(struct dump *d, struct cursor *c, struct dump_event *ev);
void dump_cursor_free(struct dump *d, struct cursor *c);
/* MODULE_LOAD / MODULE_UNLOAD delivery: 1, 0 for nothing to tell, -ENOMEM. */
int dump_module_load(struct dump *d, struct rd *r, struct dump_event *ev);
int dump_module_unload(struct dump *d, struct rd *r, struct dump_event *ev);

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

#endif
