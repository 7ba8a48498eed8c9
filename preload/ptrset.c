/* ptrset.c - a sharded set of live block addresses, in the shim's own memory */
#include <errno.h>
#include <string.h>

#include "shim.h"

/*
 * Used only when a mode needs to know every live block in the shim:
 * reachability, for the pointer scan.  Off, it costs nothing.  (Sampling
 * keeps its few recorded blocks in a table of its own, bytesample.c: this
 * set's shards, filter and count were eight cache lines an event there.)
 *
 * Keys are spread over 256 shards, each an open-addressing table under its
 * own spinlock: threads rarely meet on one.  A lock is only taken with the
 * thread's guard held, so a signal handler on the same thread never waits
 * for it.  A counting filter (one byte per hash bucket) answers "certainly
 * not in the set" without a lock.  Tables grow by doubling inside the set's
 * region; the old table is not reused (the waste is at most the size of
 * the current one).  A table full of deletion marks is rebuilt at the same
 * size into a spare table, and the two take turns, so churn never eats the
 * region.
 *
 * The filter's counters saturate: one that reached 255 stays there (a
 * "maybe" for ever, never a wrong "no"), however many blocks share it.
 */

#define SHARDS 256
#define FILTER_BITS HT_FILTER_BITS

struct entry {
	uintptr_t key;		/* 0 empty, 1 deleted */
	uint64_t size;
};

struct shard {
	atomic_flag lock;
	uint32_t cap;		/* power of two, 0 until first use */
	uint32_t used;		/* keys + deleted marks */
	uint32_t live;
	struct entry *tab;
	struct entry *spare;	/* a free table of 'cap' entries, or NULL */
} __attribute__((aligned(HT_CACHELINE)));

struct ht_ptrset {
	struct ht_region region;
	_Atomic uint8_t *filter;
	struct shard shards[SHARDS];
	_Atomic uint64_t count;
	int ok;
};

static struct ht_ptrset sets[2];
_Atomic uint8_t *ht_sampled_filter;	/* unused: sampling keeps its blocks in bytesample.c */

#define DELETED ((uintptr_t)1)

static uint64_t mix(uintptr_t p)
{
	return ht_ptr_hash(p);
}

struct ht_ptrset *ptrset_get(int which)
{
	return &sets[which];
}

int ptrset_init(struct ht_ptrset *s, size_t reserve)
{
	int ret;

	if (s->ok)
		return 0;
	ret = region_reserve(&s->region, reserve);
	if (ret)
		return ret;
	s->filter = region_alloc(&s->region, (size_t)1 << FILTER_BITS);
	if (!s->filter)
		return -ENOMEM;
	s->ok = 1;
	return 0;
}

void ptrset_reset(struct ht_ptrset *s)
{
	int i;

	if (!s->ok)
		return;
	region_reset(&s->region);
	s->filter = region_alloc(&s->region, (size_t)1 << FILTER_BITS);
	for (i = 0; i < SHARDS; i++) {
		atomic_flag_clear(&s->shards[i].lock);
		s->shards[i].cap = s->shards[i].used = s->shards[i].live = 0;
		s->shards[i].tab = NULL;
		s->shards[i].spare = NULL;
	}
	atomic_store(&s->count, 0);
}

static void lock(struct shard *sh)
{
	ht_spin_lock(&sh->lock);
}

#define FILTER_FULL 255

static _Atomic uint8_t *filter_slot(struct ht_ptrset *s, uint64_t h)
{
	return &s->filter[(h >> 40) & ((1u << FILTER_BITS) - 1)];
}

/* Shards share filter slots, so these are atomic even under a shard lock. */
static void filter_add(_Atomic uint8_t *c)
{
	uint8_t v = atomic_load_explicit(c, memory_order_relaxed);

	while (v != FILTER_FULL &&
	       !atomic_compare_exchange_weak_explicit(c, &v, (uint8_t)(v + 1),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

static void filter_remove(_Atomic uint8_t *c)
{
	uint8_t v = atomic_load_explicit(c, memory_order_relaxed);

	while (v != FILTER_FULL && v != 0 &&
	       !atomic_compare_exchange_weak_explicit(c, &v, (uint8_t)(v - 1),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

static void unlock(struct shard *sh)
{
	atomic_flag_clear_explicit(&sh->lock, memory_order_release);
}

static struct entry *find(struct shard *sh, uintptr_t p, uint64_t h, int for_insert)
{
	uint32_t mask = sh->cap - 1, i = (uint32_t)(h >> 8) & mask;
	struct entry *tomb = NULL;

	for (;;) {
		struct entry *e = &sh->tab[i];

		if (e->key == p)
			return e;
		if (e->key == 0)
			return for_insert ? (tomb ? tomb : e) : NULL;
		if (e->key == DELETED && !tomb)
			tomb = e;
		i = (i + 1) & mask;
	}
}

static int grow(struct ht_ptrset *s, struct shard *sh)
{
	uint32_t ncap = sh->cap ? (sh->live * 4 > sh->cap ? sh->cap * 2 : sh->cap) : 64;
	struct entry *old = sh->tab, *tab;
	uint32_t i, ocap = sh->cap;

	if (ncap == ocap && sh->spare) {
		tab = sh->spare;	/* same size: the two tables take turns */
	} else {
		tab = region_alloc(&s->region, (size_t)ncap * sizeof(*tab));
		if (!tab)
			return -ENOMEM;
	}
	memset(tab, 0, (size_t)ncap * sizeof(*tab));
	sh->tab = tab;
	sh->cap = ncap;
	sh->used = sh->live;
	for (i = 0; i < ocap; i++) {
		if (old[i].key > DELETED) {
			struct entry *e = find(sh, old[i].key, mix(old[i].key), 1);

			*e = old[i];
		}
	}
	/* a smaller old table is left behind: bounded by the geometric growth */
	sh->spare = ncap == ocap ? old : NULL;
	return 0;
}

int ptrset_add(struct ht_ptrset *s, uintptr_t p, uint64_t size)
{
	uint64_t h = mix(p);
	struct shard *sh = &s->shards[h & (SHARDS - 1)];
	struct entry *e;
	int ret = 0;

	if (!s->ok || p <= DELETED)
		return -EINVAL;
	lock(sh);
	if ((sh->used + 1) * 4 > sh->cap * 3 && grow(s, sh) < 0) {
		ret = -ENOMEM;
		goto out;
	}
	e = find(sh, p, h, 1);
	if (e->key != p) {
		if (e->key == 0)
			sh->used++;
		e->key = p;
		sh->live++;
		filter_add(filter_slot(s, h));
		atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	}
	e->size = size;
out:
	unlock(sh);
	return ret;
}

int ptrset_maybe(struct ht_ptrset *s, uintptr_t p)
{
	if (!s->ok || !atomic_load_explicit(&s->count, memory_order_relaxed))
		return 0;
	return atomic_load_explicit(filter_slot(s, mix(p)), memory_order_relaxed) != 0;
}

int ptrset_remove(struct ht_ptrset *s, uintptr_t p, uint64_t *size)
{
	uint64_t h = mix(p);
	struct shard *sh = &s->shards[h & (SHARDS - 1)];
	struct entry *e;
	int found = 0;

	if (!ptrset_maybe(s, p))
		return 0;
	lock(sh);
	if (sh->cap) {
		e = find(sh, p, h, 0);
		if (e) {
			if (size)
				*size = e->size;
			e->key = DELETED;
			sh->live--;
			filter_remove(filter_slot(s, h));
			atomic_fetch_sub_explicit(&s->count, 1, memory_order_relaxed);
			found = 1;
		}
	}
	unlock(sh);
	return found;
}

_Atomic uint8_t *ptrset_filter(struct ht_ptrset *s)
{
	return s->filter;
}

uint64_t ptrset_count(struct ht_ptrset *s)
{
	return atomic_load(&s->count);
}

void ptrset_each(struct ht_ptrset *s, void (*fn)(void *ctx, uintptr_t p, uint64_t size),
		 void *ctx)
{
	int i;
	uint32_t j;

	if (!s->ok)
		return;
	for (i = 0; i < SHARDS; i++) {
		struct shard *sh = &s->shards[i];

		lock(sh);
		for (j = 0; j < sh->cap; j++)
			if (sh->tab[j].key > DELETED)
				fn(ctx, sh->tab[j].key, sh->tab[j].size);
		unlock(sh);
	}
}

void ptrset_after_fork(struct ht_ptrset *s)
{
	int i;

	if (!s->ok)
		return;
	for (i = 0; i < SHARDS; i++)
		atomic_flag_clear(&s->shards[i].lock);
}
