/* replay_ops.c - writes a dump's allocation sequence as an operation stream for replay */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/htr_varint.h"
#include "frag_map.h"
#include "replay.h"
#include "replay_ops.h"

/*
 * An observer of the event replay.  Each heap block gets a slot when it is
 * allocated and gives it back when freed; realloc keeps its block's slot.
 * The dump delivers a realloc as the free of the old block and then the
 * allocation of the new one, possibly with other threads' events between:
 * the free is held per thread until its allocation half arrives (then one
 * REALLOC op) or the thread does something else (then a FREE: realloc(p, 0)).
 * Pool blocks are left out: the pools' own memory is in the malloc stream.
 */

struct pending {		/* a realloc's free, waiting for its allocation */
	uint64_t old_ptr;
	uint32_t slot;
	int active;
};

struct replay_ops {
	FILE *out;
	int err;
	struct fmap live;	/* ptr -> slot + 1 */
	struct fmap threads;	/* tid + 1 -> index into pend + 1 */
	struct pending *pend;
	size_t npend, cappend;
	uint32_t *freeslots;
	size_t nfree, capfree;
	uint64_t nslots;
	uint64_t ops, allocations;
	uint64_t live_bytes, peak_live_bytes;
	struct fmap sizes;	/* slot + 1 -> requested size, for the live figures */
};

static void put_op(struct replay_ops *o, enum replay_op op, uint64_t a, uint64_t b,
		   uint64_t c, int nargs)
{
	uint8_t buf[1 + 3 * HTR_VARINT_MAX], *p = buf;

	*p++ = (uint8_t)op;
	p = htr_put_u64(p, a);
	if (nargs > 1)
		p = htr_put_u64(p, b);
	if (nargs > 2)
		p = htr_put_u64(p, c);
	if (fwrite(buf, 1, (size_t)(p - buf), o->out) != (size_t)(p - buf) && !o->err)
		o->err = -(errno ? errno : EIO);
	o->ops++;
}

static int64_t new_slot(struct replay_ops *o)
{
	if (o->nfree)
		return o->freeslots[--o->nfree];
	if (o->nslots >= UINT32_MAX)
		return -1;
	return (int64_t)o->nslots++;
}

static void release_slot(struct replay_ops *o, uint32_t slot)
{
	uint64_t *sz = fmap_get(&o->sizes, (uint64_t)slot + 1);

	if (sz) {
		o->live_bytes -= *sz;
		fmap_del(&o->sizes, (uint64_t)slot + 1);
	}
	if (o->nfree == o->capfree) {
		size_t cap = o->capfree ? o->capfree * 2 : 1024;
		uint32_t *nf = realloc(o->freeslots, cap * sizeof(*nf));

		if (!nf) {
			o->err = -ENOMEM;
			return;
		}
		o->freeslots = nf;
		o->capfree = cap;
	}
	o->freeslots[o->nfree++] = slot;
}

static void set_size(struct replay_ops *o, uint32_t slot, uint64_t size)
{
	int found;
	uint64_t *sz = fmap_put(&o->sizes, (uint64_t)slot + 1, &found);

	if (!sz) {
		o->err = -ENOMEM;
		return;
	}
	if (found)
		o->live_bytes -= *sz;
	*sz = size;
	o->live_bytes += size;
	if (o->live_bytes > o->peak_live_bytes)
		o->peak_live_bytes = o->live_bytes;
}

static struct pending *pending_of(struct replay_ops *o, uint32_t tid)
{
	int found;
	uint64_t *v = fmap_put(&o->threads, (uint64_t)tid + 1, &found);

	if (!v)
		return NULL;
	if (!found) {
		if (o->npend == o->cappend) {
			size_t cap = o->cappend ? o->cappend * 2 : 16;
			struct pending *np = realloc(o->pend, cap * sizeof(*np));

			if (!np) {
				fmap_del(&o->threads, (uint64_t)tid + 1);
				return NULL;
			}
			o->pend = np;
			o->cappend = cap;
		}
		memset(&o->pend[o->npend], 0, sizeof(o->pend[0]));
		*v = ++o->npend;
	}
	return &o->pend[*v - 1];
}

/* A held realloc free that no allocation followed: it was a free. */
static void flush_pending(struct replay_ops *o, struct pending *p)
{
	if (!p->active)
		return;
	p->active = 0;
	put_op(o, REPLAY_OP_FREE, p->slot, 0, 0, 1);
	release_slot(o, p->slot);
}

/* The alignment an aligned allocation asked for, as far as its address tells. */
static uint64_t align_of(const struct dump_event *ev)
{
	uint64_t a;

	if (ev->api == HTR_API_VALLOC || ev->api == HTR_API_PVALLOC)
		return 4096;
	a = ev->ptr & -ev->ptr;
	if (a < 16)
		a = 16;
	if (a > 4096)
		a = 4096;
	return a;
}

static void on_alloc(struct replay_ops *o, const struct dump_event *ev,
		     const struct replay_block *old)
{
	struct pending *p = pending_of(o, ev->tid);
	int64_t slot = -1;
	int found;
	uint64_t *v;

	if (!p) {
		o->err = -ENOMEM;
		return;
	}
	o->allocations++;
	if (p->active && ev->api == HTR_API_REALLOC && old && p->old_ptr == ev->old_ptr) {
		slot = p->slot;
		p->active = 0;
		put_op(o, REPLAY_OP_REALLOC, (uint64_t)slot, ev->size, 0, 2);
	} else {
		flush_pending(o, p);
		slot = new_slot(o);
		if (slot < 0) {
			o->err = -ENOMEM;
			return;
		}
		switch (ev->api) {
		case HTR_API_CALLOC:
			put_op(o, REPLAY_OP_CALLOC, (uint64_t)slot, ev->size, 0, 2);
			break;
		case HTR_API_POSIX_MEMALIGN:
		case HTR_API_ALIGNED_ALLOC:
		case HTR_API_MEMALIGN:
		case HTR_API_VALLOC:
		case HTR_API_PVALLOC:
			put_op(o, REPLAY_OP_MEMALIGN, (uint64_t)slot, align_of(ev), ev->size, 3);
			break;
		default:
			put_op(o, REPLAY_OP_MALLOC, (uint64_t)slot, ev->size, 0, 2);
			break;
		}
	}
	set_size(o, (uint32_t)slot, ev->size);
	v = fmap_put(&o->live, ev->ptr, &found);
	if (!v) {
		o->err = -ENOMEM;
		return;
	}
	if (found && *v - 1 != (uint64_t)slot) {
		/* the old block's free was lost: end it here */
		put_op(o, REPLAY_OP_FREE, *v - 1, 0, 0, 1);
		release_slot(o, (uint32_t)(*v - 1));
	}
	*v = (uint64_t)slot + 1;
}

static void on_free(struct replay_ops *o, const struct dump_event *ev)
{
	struct pending *p = pending_of(o, ev->tid);
	uint64_t *v = fmap_get(&o->live, ev->ptr);
	uint32_t slot;

	if (!p) {
		o->err = -ENOMEM;
		return;
	}
	flush_pending(o, p);
	if (!v)
		return;		/* allocated before recording began */
	slot = (uint32_t)(*v - 1);
	fmap_del(&o->live, ev->ptr);
	if (ev->api == HTR_API_REALLOC) {
		p->active = 1;
		p->slot = slot;
		p->old_ptr = ev->ptr;
		return;
	}
	put_op(o, REPLAY_OP_FREE, slot, 0, 0, 1);
	release_slot(o, slot);
}

static void observe(void *ctx, struct replay *r, const struct dump_event *ev,
		    const struct replay_block *freed)
{
	struct replay_ops *o = ctx;

	(void)r;
	if (ev->kind == DUMP_ALLOC)
		on_alloc(o, ev, freed);
	else if (ev->kind == DUMP_FREE && ev->ptr)
		on_free(o, ev);
}

struct replay_ops *replay_ops_new(struct replay *r, FILE *out)
{
	struct replay_ops *o = calloc(1, sizeof(*o));
	struct replay_ops_header h;

	if (!o)
		return NULL;
	o->out = out;
	memset(&h, 0, sizeof(h));
	if (fmap_init(&o->live, 1024) < 0 || fmap_init(&o->threads, 16) < 0 ||
	    fmap_init(&o->sizes, 1024) < 0 || replay_observe(r, observe, o) < 0) {
		replay_ops_free(o);
		errno = ENOMEM;
		return NULL;
	}
	/* room for the header, written for real at the end */
	if (fwrite(&h, sizeof(h), 1, out) != 1) {
		int e = errno ? errno : EIO;

		replay_ops_free(o);
		errno = e;
		return NULL;
	}
	return o;
}

int replay_ops_finish(struct replay_ops *o, struct replay_ops_header *h)
{
	/* a realloc cut off by the end of the dump keeps its block: nothing to write */
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, REPLAY_OPS_MAGIC, 8);
	h->ops = o->ops;
	h->slots = o->nslots;
	h->allocations = o->allocations;
	h->peak_live_bytes = o->peak_live_bytes;
	h->final_live_bytes = o->live_bytes;
	if (o->err)
		return o->err;
	if (fflush(o->out) != 0 || fseek(o->out, 0, SEEK_SET) != 0 ||
	    fwrite(h, sizeof(*h), 1, o->out) != 1 || fflush(o->out) != 0)
		return -(errno ? errno : EIO);
	return 0;
}

void replay_ops_free(struct replay_ops *o)
{
	if (!o)
		return;
	fmap_release(&o->live);
	fmap_release(&o->threads);
	fmap_release(&o->sizes);
	free(o->pend);
	free(o->freeslots);
	free(o);
}
