/* clients.c - per-client figures and residue after disconnect, from one replay */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"

/*
 * One streaming pass (a replay observer), memory bounded by the clients and
 * the sites they touch, never by the number of events:
 *
 * - per client: allocations, bytes, live bytes and their peak;
 * - per site: the live bytes it holds for clients ("held": blocks of
 *   connected clients, and of disconnected ones allocated no later than
 *   their end + grace);
 * - after each disconnect, a sample of every site's held bytes against the
 *   number of disconnected clients k.  Held rather than "left by gone
 *   clients only": a shared cache's entries keep passing from the clients
 *   that left to the ones connected now, so the gone-only figure swings with
 *   every connection while the held one stays level; a leak makes both grow
 *   with k.  At most MAX_SAMPLES are kept per site: when they run out, every
 *   other one is dropped and samples are taken at every 2k-th disconnect
 *   instead.  Sites fill their samples lazily (only when their held bytes
 *   change), so a disconnect costs nothing per site;
 * - the whole-process view: live heap at the first client, and at the last
 *   disconnect + grace, with the live bytes of clients gone and connected.
 *
 * The final residue comes from the live map at the end (clients_finish).
 */

#define NONE UINT32_MAX
#define MAX_SAMPLES 64

struct clients_state {
	struct clients *c;
	size_t vcap;
	/* id -> latest client with that id */
	uint64_t *id_keys;
	uint32_t *id_vals;
	size_t id_cap, id_n;
	/* sites by stack id */
	struct client_site **byst;
	size_t nbyst;
	struct client_site **sampled;	/* sites that own a sample array */
	size_t nsampled, sampled_cap;
	uint64_t step;		/* samples at k = step, 2 step, ... */
	uint32_t npts;
	uint64_t nended;
	/* running figures */
	uint64_t live;		/* heap live bytes */
	uint64_t gone_total;	/* live bytes of disconnected clients */
	uint64_t conn_live;	/* live bytes of connected clients */
	int after_pending;
	uint64_t after_target;
	int oom;
};

/* ---- small tables ------------------------------------------------------ */

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint32_t id_get(const struct clients_state *st, uint64_t id)
{
	size_t mask = st->id_cap - 1, i;

	if (!st->id_cap)
		return NONE;
	for (i = mix(id) & mask; st->id_keys[i]; i = (i + 1) & mask)
		if (st->id_keys[i] == id)
			return st->id_vals[i];
	return NONE;
}

static int id_put(struct clients_state *st, uint64_t id, uint32_t v)
{
	size_t mask, i;

	if ((st->id_n + 1) * 2 > st->id_cap) {
		size_t ncap = st->id_cap ? st->id_cap * 2 : 64, j;
		uint64_t *nk = calloc(ncap, sizeof(*nk));
		uint32_t *nv = calloc(ncap, sizeof(*nv));

		if (!nk || !nv) {
			free(nk);
			free(nv);
			return -ENOMEM;
		}
		for (j = 0; j < st->id_cap; j++) {
			if (!st->id_keys[j])
				continue;
			for (i = mix(st->id_keys[j]) & (ncap - 1); nk[i]; i = (i + 1) & (ncap - 1))
				;
			nk[i] = st->id_keys[j];
			nv[i] = st->id_vals[j];
		}
		free(st->id_keys);
		free(st->id_vals);
		st->id_keys = nk;
		st->id_vals = nv;
		st->id_cap = ncap;
	}
	mask = st->id_cap - 1;
	for (i = mix(id) & mask; st->id_keys[i]; i = (i + 1) & mask) {
		if (st->id_keys[i] == id) {
			st->id_vals[i] = v;
			return 0;
		}
	}
	st->id_keys[i] = id;
	st->id_vals[i] = v;
	st->id_n++;
	return 0;
}

static struct client_site *site_get(struct clients_state *st, uint32_t stack)
{
	struct client_site *s;

	if (stack >= st->nbyst) {
		size_t n = st->nbyst ? st->nbyst : 256;
		struct client_site **nb;

		while (n <= stack)
			n *= 2;
		nb = realloc(st->byst, n * sizeof(*nb));
		if (!nb)
			return NULL;
		memset(nb + st->nbyst, 0, (n - st->nbyst) * sizeof(*nb));
		st->byst = nb;
		st->nbyst = n;
	}
	s = st->byst[stack];
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->stack = stack;
		st->byst[stack] = s;
	}
	return s;
}

/* ---- clients ----------------------------------------------------------- */

/* Live heap at the first client: the "before" of the process view. */
static void first_client(struct clients_state *st, uint64_t time)
{
	struct clients_process *p = &st->c->proc;

	if (p->have_before)
		return;
	p->have_before = 1;
	p->before_time = time;
	p->before_bytes = st->live;
}

static uint32_t client_new(struct clients_state *st, uint64_t id, uint64_t time,
			   const char *label)
{
	struct clients *c = st->c;
	struct client_info *ci;

	if (c->n == st->vcap) {
		size_t ncap = st->vcap ? st->vcap * 2 : 64;
		struct client_info *nv = realloc(c->v, ncap * sizeof(*nv));

		if (!nv)
			return NONE;
		c->v = nv;
		st->vcap = ncap;
	}
	if (c->n >= NONE - 1)
		return NONE;
	ci = &c->v[c->n];
	memset(ci, 0, sizeof(*ci));
	ci->id = id;
	ci->begin = time;
	ci->end = CLIENTS_NO_END;
	ci->prev = id_get(st, id);
	if (label && *label) {
		ci->label = strdup(label);
		if (!ci->label)
			return NONE;
	}
	if (id_put(st, id, (uint32_t)c->n) < 0) {
		free(ci->label);
		return NONE;
	}
	first_client(st, time);
	return (uint32_t)c->n++;
}

/* The client an allocation made now is for: the latest with that id. */
static uint32_t client_now(struct clients_state *st, uint64_t id, uint64_t time)
{
	uint32_t i = id_get(st, id);

	return i != NONE ? i : client_new(st, id, time, NULL);
}

/* The client a block allocated at 'time' belonged to. */
static uint32_t client_of(const struct clients_state *st, uint64_t id, uint64_t time)
{
	uint32_t i = id_get(st, id);

	while (i != NONE && st->c->v[i].begin > time && st->c->v[i].prev != NONE)
		i = st->c->v[i].prev;
	return i;
}

/* A block allocated at 't' by client ci counts towards its residue. */
static inline int within_grace(const struct clients *c, const struct client_info *ci,
			       uint64_t t)
{
	return ci->end != CLIENTS_NO_END && t <= ci->end + c->grace;
}

/* ---- held bytes and their samples -------------------------------------- */

/* Writes the site's current value into the samples it has not filled yet. */
static int site_sync(struct clients_state *st, struct client_site *s)
{
	if (s->filled >= st->npts)
		return 0;
	if (!s->samples) {
		if (st->nsampled == st->sampled_cap) {
			size_t ncap = st->sampled_cap ? st->sampled_cap * 2 : 64;
			struct client_site **nl = realloc(st->sampled, ncap * sizeof(*nl));

			if (!nl)
				return -ENOMEM;
			st->sampled = nl;
			st->sampled_cap = ncap;
		}
		s->samples = malloc(MAX_SAMPLES * sizeof(*s->samples));
		if (!s->samples)
			return -ENOMEM;
		st->sampled[st->nsampled++] = s;
	}
	while (s->filled < st->npts)
		s->samples[s->filled++] = s->held_bytes > 0 ? (uint64_t)s->held_bytes : 0;
	return 0;
}

static void held_add(struct clients_state *st, uint32_t stack, int64_t delta)
{
	struct client_site *s = site_get(st, stack);

	if (!s || site_sync(st, s) < 0) {
		st->oom = 1;
		return;
	}
	s->held_bytes += delta;
}

static inline void sub_clamped(uint64_t *x, uint64_t v)
{
	*x -= v < *x ? v : *x;
}

/* k clients have disconnected: the sample for k (taken lazily per site). */
static void sample(struct clients_state *st, uint64_t k)
{
	size_t i;
	uint32_t j, keep;

	if (k % st->step)
		return;
	if (st->npts == MAX_SAMPLES) {
		/* keep the samples at even multiples of the old step */
		st->step *= 2;
		keep = st->npts / 2;
		for (i = 0; i < st->nsampled; i++) {
			struct client_site *s = st->sampled[i];
			uint32_t f = s->filled / 2;

			for (j = 0; j < f; j++)
				s->samples[j] = s->samples[2 * j + 1];
			s->filled = f;
		}
		st->npts = keep;
		if (k % st->step)
			return;
	}
	st->npts++;
}

/* ---- the observer ------------------------------------------------------ */

static void take_after(struct clients_state *st, uint64_t time)
{
	struct clients_process *p = &st->c->proc;

	p->have_after = 1;
	p->after_time = time;
	p->after_bytes = st->live;
	p->attributed_bytes = st->gone_total;
	p->connected_bytes = st->conn_live;
	st->after_pending = 0;
}

static void on_alloc(struct clients_state *st, const struct dump_event *ev)
{
	struct clients *c = st->c;
	struct client_info *ci;
	uint64_t size = ev->size;
	uint32_t i;

	if (ev->client) {
		i = client_now(st, ev->client, ev->time);
		if (i == NONE) {
			st->oom = 1;
			return;
		}
		ci = &c->v[i];
		ci->allocations++;
		ci->allocated_bytes += size;
		ci->live_bytes += size;
		if (ci->live_bytes > ci->peak_bytes)
			ci->peak_bytes = ci->live_bytes;
		if (ci->end == CLIENTS_NO_END) {
			held_add(st, ev->stack, (int64_t)size);
			st->conn_live += size;
		} else if (within_grace(c, ci, ev->time)) {
			held_add(st, ev->stack, (int64_t)size);
			st->gone_total += size;
		}
	}
	st->live += size;
}

static void on_free(struct clients_state *st, const struct replay_block *b)
{
	struct clients *c = st->c;
	struct client_info *ci;
	uint32_t i;

	sub_clamped(&st->live, b->size);
	if (!b->client)
		return;
	i = client_of(st, b->client, b->time);
	if (i == NONE)
		return;
	ci = &c->v[i];
	sub_clamped(&ci->live_bytes, b->size);
	if (ci->end == CLIENTS_NO_END) {
		held_add(st, b->stack, -(int64_t)b->size);
		sub_clamped(&st->conn_live, b->size);
	} else if (within_grace(c, ci, b->time)) {
		held_add(st, b->stack, -(int64_t)b->size);
		sub_clamped(&st->gone_total, b->size);
	}
}

static void on_begin(struct clients_state *st, const struct dump_event *ev)
{
	uint32_t i;

	if (!ev->id)
		return;
	i = id_get(st, ev->id);
	if (i != NONE && st->c->v[i].end == CLIENTS_NO_END) {
		/* begun twice (or first seen through an allocation): one client */
		struct client_info *ci = &st->c->v[i];

		if (!ci->label && ev->text && *ev->text) {
			ci->label = strdup(ev->text);
			if (!ci->label)
				st->oom = 1;
		}
		return;
	}
	if (client_new(st, ev->id, ev->time, ev->text) == NONE)
		st->oom = 1;
}

static void on_end(struct clients_state *st, const struct dump_event *ev)
{
	struct clients *c = st->c;
	uint32_t i = id_get(st, ev->id);
	uint64_t live;

	/* an end with no begin and no block tells nothing about a client */
	if (!ev->id || i == NONE || c->v[i].end != CLIENTS_NO_END)
		return;
	if (st->nended)
		sample(st, st->nended);
	c->v[i].end = ev->time;
	st->nended++;
	/* every block it holds now was allocated while it was connected */
	live = c->v[i].live_bytes;
	sub_clamped(&st->conn_live, live);
	st->gone_total += live;
	st->after_pending = 1;
	st->after_target = ev->time + c->grace;
}

static void observe(void *ctx, struct replay *r, const struct dump_event *ev,
		    const struct replay_block *freed)
{
	struct clients_state *st = ctx;

	(void)r;
	if (st->after_pending && ev->time > st->after_target)
		take_after(st, st->after_target);
	switch (ev->kind) {
	case DUMP_ALLOC:
		/* a realloc's old block was released by its own DUMP_FREE */
		on_alloc(st, ev);
		break;
	case DUMP_FREE:
		if (freed)
			on_free(st, freed);
		break;
	case DUMP_CLIENT_BEGIN:
		on_begin(st, ev);
		break;
	case DUMP_CLIENT_END:
		on_end(st, ev);
		break;
	default:
		break;
	}
}

/* ---- the end ----------------------------------------------------------- */

struct pair {
	uint32_t stack, client;
};

struct residue_walk {
	struct clients_state *st;
	struct pair *pairs;
	size_t n, cap;
	int oom;
};

static int residue_block(void *ctx, const struct replay_block *b)
{
	struct residue_walk *w = ctx;
	struct clients_state *st = w->st;
	struct client_info *ci;
	struct client_site *s;
	uint32_t i;

	if (!b->client)
		return 0;
	i = client_of(st, b->client, b->time);
	if (i == NONE)
		return 0;
	ci = &st->c->v[i];
	if (!ci->judged || !within_grace(st->c, ci, b->time))
		return 0;
	s = site_get(st, b->stack);
	if (!s) {
		w->oom = 1;
		return 1;
	}
	ci->residue_bytes += b->size;
	ci->residue_blocks++;
	s->residue_bytes += b->size;
	s->residue_blocks++;
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 1024;
		struct pair *np = realloc(w->pairs, ncap * sizeof(*np));

		if (!np) {
			w->oom = 1;
			return 1;
		}
		w->pairs = np;
		w->cap = ncap;
	}
	w->pairs[w->n].stack = b->stack;
	w->pairs[w->n].client = i;
	w->n++;
	return 0;
}

static int by_pair(const void *pa, const void *pb)
{
	const struct pair *a = pa, *b = pb;

	if (a->stack != b->stack)
		return a->stack < b->stack ? -1 : 1;
	return a->client < b->client ? -1 : a->client > b->client;
}

static int by_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

static int by_residue(const void *pa, const void *pb)
{
	const struct client_site *a = *(struct client_site *const *)pa;
	const struct client_site *b = *(struct client_site *const *)pb;

	if (a->residue_bytes != b->residue_bytes)
		return a->residue_bytes < b->residue_bytes ? 1 : -1;
	return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/*
 * The held-bytes samples of site s against k, with the final value at
 * k = nended.  A leak rises in proportion to k: the mean of the last quarter
 * of the run (k in (3K/4, K]) is about 7/3 of the mean of the second quarter
 * (K/4, K/2]; a cache that fills and then evicts stays level: 1.  Means
 * over quarters rather than a slope: the samples swing with the clients
 * connected at each disconnect, and a slope over a few points follows the
 * swings.  'grows' from a ratio of 1.5.
 */
static int fit_trend(const struct clients_state *st, const struct client_site *s)
{
	double k_end = (double)st->nended, y_end, q2 = 0, q4 = 0;
	size_t n2 = 0, n4 = 1;
	uint32_t j;

	if (st->nended < CLIENTS_TREND_MIN)
		return TREND_UNKNOWN;
	/*
	 * Most judged clients still hold something here at the end: the site
	 * grew with them, whatever the samples say (they swing with how many
	 * clients were connected at each disconnect, which a loaded server or
	 * machine changes; a cache keeps only its last few clients' blocks).
	 */
	if (st->c->judged >= CLIENTS_TREND_MIN && (uint64_t)s->clients * 4 >= st->c->judged * 3)
		return TREND_GROWS;
	y_end = s->held_bytes > 0 ? (double)s->held_bytes : 0;
	q4 = y_end;
	for (j = 0; j < st->npts; j++) {
		double k = (double)((uint64_t)(j + 1) * st->step);
		double v = j < s->filled ? (double)s->samples[j] : y_end;

		if (4 * k > k_end && 2 * k <= k_end) {
			q2 += v;
			n2++;
		} else if (4 * k > 3 * k_end) {
			q4 += v;
			n4++;
		}
	}
	if (!n2)
		return TREND_UNKNOWN;
	q2 /= (double)n2;
	q4 /= (double)n4;
	if (q4 <= 0)
		return TREND_BOUNDED;
	return q4 >= 1.5 * q2 ? TREND_GROWS : TREND_BOUNDED;
}

int clients_finish(struct clients *c, struct replay *r)
{
	struct clients_state *st = c->st;
	const struct replay_totals *t = replay_totals(r);
	struct residue_walk w = { st, NULL, 0, 0, 0 };
	uint64_t *res = NULL;
	size_t i, j, nres = 0;

	c->duration = t->duration;
	c->exited = t->end_how == HTR_END_EXIT;
	if (st->oom)
		return -ENOMEM;
	if (st->after_pending) {
		c->proc.after_is_end = st->after_target > c->duration;
		take_after(st, c->proc.after_is_end ? c->duration : st->after_target);
	}
	if (c->proc.have_before && c->proc.have_after) {
		struct clients_process *p = &c->proc;

		p->growth_bytes = (int64_t)(p->after_bytes - p->before_bytes);
		p->unattributed_bytes = p->growth_bytes - (int64_t)p->attributed_bytes -
					(int64_t)p->connected_bytes;
	}

	for (i = 0; i < c->n; i++) {
		struct client_info *ci = &c->v[i];

		if (ci->end == CLIENTS_NO_END) {
			c->connected++;
			continue;
		}
		c->ended++;
		ci->judged = ci->end + c->grace <= c->duration || c->exited;
		if (ci->judged)
			c->judged++;
	}
	replay_each_block(r, residue_block, &w);
	if (w.oom) {
		free(w.pairs);
		return -ENOMEM;
	}
	/* judged clients with residue, per site */
	if (w.n)
		qsort(w.pairs, w.n, sizeof(*w.pairs), by_pair);
	for (i = 0; i < w.n; i++)
		if (!i || by_pair(&w.pairs[i - 1], &w.pairs[i]))
			st->byst[w.pairs[i].stack]->clients++;
	free(w.pairs);

	for (i = 0; i < st->nbyst; i++)
		if (st->byst[i] && st->byst[i]->residue_bytes)
			c->nsites++;
	c->sites = malloc((c->nsites + 1) * sizeof(*c->sites));
	if (!c->sites)
		return -ENOMEM;
	for (i = 0, j = 0; i < st->nbyst; i++) {
		struct client_site *s = st->byst[i];

		if (!s || !s->residue_bytes)
			continue;
		site_sync(st, s);
		s->trend = fit_trend(st, s);
		c->sites[j++] = s;
	}
	qsort(c->sites, c->nsites, sizeof(*c->sites), by_residue);

	if (c->judged) {
		res = malloc(c->judged * sizeof(*res));
		if (!res)
			return -ENOMEM;
		for (i = 0; i < c->n; i++) {
			if (!c->v[i].judged)
				continue;
			res[nres++] = c->v[i].residue_bytes;
			c->residue_bytes += c->v[i].residue_bytes;
		}
		qsort(res, nres, sizeof(*res), by_u64);
		c->residue_mean = (c->residue_bytes + nres / 2) / nres;
		c->residue_median = nres % 2 ? res[nres / 2] :
			(res[nres / 2 - 1] + res[nres / 2] + 1) / 2;
		c->residue_max = res[nres - 1];
		free(res);
	}
	return 0;
}

struct clients *clients_new(struct replay *r, uint64_t grace_ns)
{
	struct clients *c = calloc(1, sizeof(*c));
	struct clients_state *st = calloc(1, sizeof(*st));
	int ret;

	if (!c || !st) {
		free(c);
		free(st);
		errno = ENOMEM;
		return NULL;
	}
	c->grace = grace_ns;
	c->st = st;
	st->c = c;
	st->step = 1;
	ret = replay_observe(r, observe, st);
	if (ret < 0) {
		clients_free(c);
		errno = -ret;
		return NULL;
	}
	return c;
}

void clients_free(struct clients *c)
{
	struct clients_state *st;
	size_t i;

	if (!c)
		return;
	st = c->st;
	for (i = 0; i < c->n; i++)
		free(c->v[i].label);
	free(c->v);
	free(c->sites);
	if (st) {
		for (i = 0; i < st->nbyst; i++) {
			if (st->byst[i])
				free(st->byst[i]->samples);
			free(st->byst[i]);
		}
		free(st->byst);
		free(st->sampled);
		free(st->id_keys);
		free(st->id_vals);
		free(st);
	}
	free(c);
}

const char *clients_trend_name(int trend)
{
	switch (trend) {
	case TREND_GROWS:
		return "grows";
	case TREND_BOUNDED:
		return "bounded";
	default:
		return "unknown";
	}
}
