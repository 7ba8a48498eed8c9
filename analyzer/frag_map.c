/* frag_map.c - an open-addressing map from 64-bit keys to 64-bit values */
#include <errno.h>
#include <stdlib.h>

#include "frag_map.h"

/* Fibonacci hashing spreads page numbers and aligned addresses alike. */
static inline uint64_t slot_of(const struct fmap *m, uint64_t key)
{
	return ((key * 0x9e3779b97f4a7c15ull) >> 17) & m->mask;
}

static int fmap_alloc(struct fmap *m, uint64_t cap)
{
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = calloc(cap, sizeof(*m->vals));
	if (!m->keys || !m->vals) {
		free(m->keys);
		free(m->vals);
		m->keys = m->vals = NULL;
		return -ENOMEM;
	}
	m->mask = cap - 1;
	m->count = 0;
	return 0;
}

int fmap_init(struct fmap *m, uint64_t capacity_hint)
{
	uint64_t cap = 64;

	while (cap < capacity_hint * 2)
		cap <<= 1;
	return fmap_alloc(m, cap);
}

void fmap_release(struct fmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
	m->mask = m->count = 0;
}

uint64_t *fmap_get(const struct fmap *m, uint64_t key)
{
	uint64_t i;

	if (!m->keys)
		return NULL;
	for (i = slot_of(m, key);; i = (i + 1) & m->mask) {
		if (m->keys[i] == key)
			return &m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

static int grow(struct fmap *m)
{
	struct fmap old = *m;
	uint64_t i;

	if (fmap_alloc(m, (old.mask + 1) * 2) < 0) {
		*m = old;
		return -ENOMEM;
	}
	for (i = 0; i <= old.mask; i++) {
		uint64_t j;

		if (!old.keys[i])
			continue;
		for (j = slot_of(m, old.keys[i]); m->keys[j]; j = (j + 1) & m->mask)
			;
		m->keys[j] = old.keys[i];
		m->vals[j] = old.vals[i];
		m->count++;
	}
	free(old.keys);
	free(old.vals);
	return 0;
}

uint64_t *fmap_put(struct fmap *m, uint64_t key, int *found)
{
	uint64_t i;

	if (!m->keys && fmap_init(m, 32) < 0)
		return NULL;
	/* at most half full: probes stay short */
	if ((m->count + 1) * 2 > m->mask + 1 && grow(m) < 0)
		return NULL;
	for (i = slot_of(m, key);; i = (i + 1) & m->mask) {
		if (m->keys[i] == key) {
			*found = 1;
			return &m->vals[i];
		}
		if (!m->keys[i])
			break;
	}
	m->keys[i] = key;
	m->vals[i] = 0;
	m->count++;
	*found = 0;
	return &m->vals[i];
}

int fmap_del(struct fmap *m, uint64_t key)
{
	uint64_t i, j;

	if (!m->keys)
		return 0;
	for (i = slot_of(m, key);; i = (i + 1) & m->mask) {
		if (!m->keys[i])
			return 0;
		if (m->keys[i] == key)
			break;
	}
	/* backward shift: move later entries of the run into the hole */
	for (j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
		uint64_t home = slot_of(m, m->keys[j]);

		/* j's entry may move to i when its home is not in (i, j] */
		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i] = 0;
	m->count--;
	return 1;
}
