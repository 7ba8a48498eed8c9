/* events.c - encodes heap and control events into the calling thread's buffer */
#include <string.h>

#include "shim.h"

/* A stack definition: type byte, id, depth, addresses as deltas. */
static uint8_t *put_stack(uint8_t *p, uint32_t id, const struct ht_capture *c)
{
	uintptr_t prev = 0;
	unsigned i;

	*p++ = HTR_EV_BYTE(HTR_EV_STACK, 0);
	p = htr_put_u64(p, id);
	p = htr_put_u64(p, c->depth);
	for (i = 0; i < c->depth; i++) {
		if (i == 0)
			p = htr_put_u64(p, c->ips[0]);
		else
			p = htr_put_s64(p, (int64_t)(c->ips[i] - prev));	/* ips: plain */
		prev = c->ips[i];
	}
	return p;
}

/*
 * Room for the stack's definition, should it be new.  The buffer is opened
 * before the stack is interned: an id handed out must have its definition
 * written, or later events would use an id the dump never defines.
 */
static size_t stack_room(const struct ht_capture *c)
{
	return c ? 24 + (size_t)c->depth * HTR_VARINT_MAX : 0;
}

static uint32_t intern(const struct ht_capture *c, int *is_new)
{
	*is_new = 0;
	return c ? stacks_intern(c, is_new) : HTR_STACK_NONE;
}

static size_t usable_extra(void *ptr, size_t size)
{
	size_t u;

	if (HT_LIKELY(atomic_load_explicit(&ht_glibc_chunks, memory_order_relaxed) ==
		      HT_CHUNKS_READ))
		u = real_chunk_usable(ptr);
	else
		u = real_usable(ptr, size);

	return u > size ? u - size : 0;
}

/* thread_begin() counts its own failures, with their reason. */
static void lost(void)
{
	atomic_fetch_add_explicit(&ht_lost[HTR_LOST_MEMORY], 1, memory_order_relaxed);
}

void ev_alloc(unsigned api, void *ptr, size_t size, const struct ht_capture *c)
{
	int is_new;
	uint32_t id;
	size_t extra = usable_extra(ptr, size);
	struct ht_thread *t;
	uint8_t *p;

	if (HT_UNLIKELY(ht_reach_on))
		reach_note_alloc(ptr, size);
	t = thread_begin(HT_EVENT_MAX + stack_room(c));
	if (!t)
		return;
	id = intern(c, &is_new);
	p = thread_pos(t);
	if (is_new)
		p = put_stack(p, id, c);
	*p++ = HTR_EV_BYTE(HTR_EV_ALLOC, api);
	p = htr_put_u64(p, thread_delta(t, ht_now()));
	p = htr_put_ptr(p, (int64_t)((uintptr_t)ptr - thread_last_ptr(t)));
	p = htr_put_u64(p, size);
	p = htr_put_u64(p, extra);
	p = htr_put_u64(p, id);
	thread_commit(t, p, (uintptr_t)ptr);
	thread_end(t);
	if (ht_cfg.sample_bytes)
		sample_remember(ptr, size);
}

void ev_free(unsigned api, void *ptr)
{
	struct ht_thread *t;
	uint8_t *p;

	if (HT_UNLIKELY(ht_reach_on))
		reach_note_free(ptr);	/* before the block is handed back */
	t = thread_begin(HT_EVENT_MAX);
	if (!t)
		return;
	p = thread_pos(t);
	*p++ = HTR_EV_BYTE(HTR_EV_FREE, api);
	p = htr_put_u64(p, thread_delta(t, ht_now()));
	p = htr_put_ptr(p, (int64_t)((uintptr_t)ptr - thread_last_ptr(t)));
	thread_commit(t, p, (uintptr_t)ptr);
	thread_end(t);
}

/*
 * A realloc holds the thread BUSY across the real call, so that the time
 * read before it (when the old block may already be handed back) is covered
 * by the writer's watermark like any other event time.
 */
int ev_realloc_begin(struct ev_realloc_ctx *x, const struct ht_capture *c)
{
	int is_new;

	x->t = thread_begin(HT_EVENT_MAX + stack_room(c));
	if (!x->t)
		return -1;
	x->id = intern(c, &is_new);
	x->p = thread_pos(x->t);
	if (is_new)
		x->p = put_stack(x->p, x->id, c);
	x->t_before = ht_now();
	return 0;
}

void ev_realloc_end(struct ev_realloc_ctx *x, unsigned api, void *old,
		    void *new_ptr, size_t size)
{
	struct ht_thread *t = x->t;
	uint8_t *p = x->p;
	uintptr_t last = thread_last_ptr(t);

	if (!new_ptr && (size || !old)) {
		/* Failed: the old block is untouched; keep only a stack definition. */
	} else if (!old) {
		*p++ = HTR_EV_BYTE(HTR_EV_ALLOC, api);
		p = htr_put_u64(p, thread_delta(t, ht_now()));
		p = htr_put_ptr(p, (int64_t)((uintptr_t)new_ptr - last));
		p = htr_put_u64(p, size);
		p = htr_put_u64(p, usable_extra(new_ptr, size));
		p = htr_put_u64(p, x->id);
		last = (uintptr_t)new_ptr;
	} else if (!new_ptr) {
		*p++ = HTR_EV_BYTE(HTR_EV_FREE, api);
		p = htr_put_u64(p, thread_delta(t, x->t_before));
		p = htr_put_ptr(p, (int64_t)((uintptr_t)old - last));
		last = (uintptr_t)old;
	} else {
		uint64_t before = thread_delta(t, x->t_before);

		*p++ = HTR_EV_BYTE(HTR_EV_REALLOC, api);
		p = htr_put_u64(p, before);
		p = htr_put_u64(p, thread_delta(t, ht_now()));
		p = htr_put_ptr(p, (int64_t)((uintptr_t)old - last));
		p = htr_put_ptr(p, (int64_t)((uintptr_t)new_ptr - (uintptr_t)old));
		p = htr_put_u64(p, size);
		p = htr_put_u64(p, usable_extra(new_ptr, size));
		p = htr_put_u64(p, x->id);
		last = (uintptr_t)new_ptr;
	}
	if (p != thread_pos(t))
		thread_commit(t, p, last);
	thread_end(t);
}

void ev_control(unsigned sub, uint64_t a, uint64_t b, const char *text)
{
	size_t tlen = text ? strnlen(text, 1024) : 0;
	struct ht_thread *t = thread_begin(HT_EVENT_MAX + tlen);
	uint8_t *p;

	if (!t)
		return;
	p = thread_pos(t);
	*p++ = HTR_EV_BYTE(HTR_EV_CONTROL, 0);
	p = htr_put_u64(p, thread_delta(t, ht_now()));
	p = htr_put_u64(p, sub);
	switch (sub) {
	case HTR_SUB_THREAD_START:
		p = htr_put_u64(p, a);
		break;
	case HTR_SUB_THREAD_NAME:
		p = htr_put_u64(p, tlen);
		memcpy(p, text, tlen);
		p += tlen;
		break;
	case HTR_SUB_CLIENT_BEGIN:
	case HTR_SUB_POOL_CREATE:
		p = htr_put_u64(p, a);
		p = htr_put_u64(p, tlen);
		memcpy(p, text, tlen);
		p += tlen;
		break;
	case HTR_SUB_CLIENT_END:
	case HTR_SUB_CLIENT_SET:
	case HTR_SUB_POOL_DESTROY:
		p = htr_put_u64(p, a);
		break;
	case HTR_SUB_POOL_FREE:
		p = htr_put_u64(p, a);
		p = htr_put_ptr(p, (int64_t)(b - thread_last_ptr(t)));
		thread_commit(t, p, (uintptr_t)b);
		thread_end(t);
		return;
	default:
		break;
	}
	thread_commit(t, p, thread_last_ptr(t));
	thread_end(t);
}

void ev_pool_alloc(uint64_t pool, const void *ptr, size_t size,
		   const struct ht_capture *c)
{
	int is_new;
	uint32_t id;
	struct ht_thread *t = thread_begin(HT_EVENT_MAX + stack_room(c));
	uint8_t *p;

	if (!t)
		return;
	id = intern(c, &is_new);
	p = thread_pos(t);
	if (is_new)
		p = put_stack(p, id, c);
	*p++ = HTR_EV_BYTE(HTR_EV_CONTROL, 0);
	p = htr_put_u64(p, thread_delta(t, ht_now()));
	p = htr_put_u64(p, HTR_SUB_POOL_ALLOC);
	p = htr_put_u64(p, pool);
	p = htr_put_ptr(p, (int64_t)((uintptr_t)ptr - thread_last_ptr(t)));
	p = htr_put_u64(p, size);
	p = htr_put_u64(p, id);
	thread_commit(t, p, (uintptr_t)ptr);
	thread_end(t);
}

void ev_mark(const char *label)
{
	size_t len = label ? strnlen(label, 1024) : 0;
	uint8_t rec[1100];
	struct ht_thread *t = thread_begin(0);
	uint8_t *p = rec;

	if (!t)
		return;
	*p++ = HTR_REC_MARK;
	p = htr_put_u64(p, ht_now());
	p = htr_put_u64(p, len);
	memcpy(p, label, len);
	p += len;
	if (writer_top_record(rec, (size_t)(p - rec)) < 0)
		lost();
	thread_end(t);
}
