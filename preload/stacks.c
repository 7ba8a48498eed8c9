/* stacks.c - captures call stacks and interns them in a lock-free stack table */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "unwind.h"

/*
 * The table maps a stack (its return addresses and the module epoch) to a
 * small id.  It is open addressing over a reserved region: a slot holds
 * (hash tag << 32 | id) and is claimed with one compare-and-swap after the
 * stack's addresses are stored, so readers never see a half-built entry.
 * Each new id is written to the dump once, by the thread that created it.
 *
 * The table grows in levels (shim.h): 32K slots first, then 64K, ... up
 * to 1M, and a lookup probes them newest first.  One table of 8 MiB was
 * all resident after a few thousand stacks; level 0 (256 KiB) holds 24K.  Two threads that
 * create the same new stack while a level is added may both succeed, in
 * two levels: the stack then has two ids, both correct.  When a million
 * ids are given out (or the addresses fill their 64 MiB, or the last level
 * is 3/4 full) interning stops: later new stacks get id 0 and are counted
 * as HTR_LOST_STACKS; events are still recorded.
 *
 * The epoch changes when a module is loaded where a different, unloaded one
 * was (modules.c): the same addresses then belong to other code, so they
 * must get new ids.  The same library loaded again in its old place keeps
 * its stacks' ids (a dlopen/dlclose loop does not fill the table).
 */

#define LEVEL0_BITS 15
#define LEVELS 6			/* 32K .. 1M slots, 16 MiB reserved */
#define LEVEL_SLOTS(k) HT_LEVEL_SLOTS(LEVEL0_BITS, k)
#define LEVEL_BASE(k) HT_LEVEL_BASE(LEVEL0_BITS, k)
#define TABLE_SLOTS LEVEL_BASE(LEVELS)	/* all levels */
#define MAX_IDS (1u << 20)
#define IP_SPACE ((size_t)64 << 20)	/* 8M addresses at most */

struct stack_info {
	uint64_t ip_off;	/* index into ips[] */
	uint32_t depth;
	uint32_t epoch;
};

static struct ht_region table_region, info_region, ip_region;
static _Atomic uint64_t *table;
static struct stack_info *infos;	/* by id */
static uintptr_t *ips;
static _Atomic uint32_t next_id = 1;
static _Atomic uint32_t level;		/* where new stacks go */
static _Atomic uint32_t level_used[LEVELS];
static _Atomic uint32_t epoch;
static uintptr_t self_lo, self_hi;
static int check_mode;		/* HEAPTRAIL_UNWIND_CHECK, see check_unwind() */
static _Atomic unsigned check_diffs;


/*
 * A small per-thread cache in front of the table: a program allocates from
 * the same few stacks again and again, and the table (megabytes) is a cache
 * miss away.  Entries are checked against the interned copy, so a hit is
 * exact; the epoch invalidates them after an unload or a fork.
 */
#define CACHE_SLOTS 256		/* 8 KiB a thread (tpool.c); 64 thrashed on 36 stacks */
struct cache_entry {
	uint64_t hash;		/* hash_lanes() */
	const uintptr_t *ips;	/* the stack's addresses in ips[]: no look at infos[] */
	uint32_t id;
	uint32_t epoch;
	uint32_t depth;
};
struct thread_cache {
	struct cache_entry e[CACHE_SLOTS];
};
static __thread struct thread_cache *my_cache __attribute__((tls_model("initial-exec")));
static struct ht_tpool cache_pool;
#define CACHE_RESERVE ((size_t)64 << 20)	/* 8K threads' caches at once */

int stacks_init(void)
{
	int ret;

	ret = region_reserve(&table_region, TABLE_SLOTS * sizeof(uint64_t));
	if (!ret)
		ret = region_reserve(&info_region, (size_t)MAX_IDS * sizeof(struct stack_info));
	if (!ret)
		ret = region_reserve(&ip_region, IP_SPACE);
	if (!ret)
		ret = tpool_init(&cache_pool, sizeof(struct thread_cache), CACHE_RESERVE);
	if (ret)
		return ret;
	table = region_alloc(&table_region, TABLE_SLOTS * sizeof(uint64_t));
	infos = region_alloc(&info_region, (size_t)MAX_IDS * sizeof(struct stack_info));
	ips = (uintptr_t *)ip_region.base;	/* bumped through ip_region.used */
	if (ht_cfg.unwind == HTR_UNWIND_LIBUNWIND) {
		const char *v = getenv("HEAPTRAIL_UNWIND_CHECK");

		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
		unwind_init();	/* without it, every stack goes to libunwind */
		check_mode = v && v[0] == '1';
	}
	return 0;
}

void stacks_reset(void)
{
	region_reset(&table_region);
	region_reset(&info_region);
	region_reset(&ip_region);
	table = region_alloc(&table_region, TABLE_SLOTS * sizeof(uint64_t));
	infos = region_alloc(&info_region, (size_t)MAX_IDS * sizeof(struct stack_info));
	ips = (uintptr_t *)ip_region.base;
	atomic_store(&next_id, 1);
	atomic_store(&level, 0);
	for (unsigned k = 0; k < LEVELS; k++)
		atomic_store(&level_used[k], 0);
	atomic_fetch_add(&epoch, 1);	/* ids restart: per-thread caches are stale */
	tpool_after_fork(&cache_pool);
	unwind_after_fork();
}

void stacks_thread_exit(void)
{
	tpool_put(&cache_pool, my_cache);
	my_cache = NULL;
	unwind_thread_exit();
}

void stacks_set_self_range(uintptr_t lo, uintptr_t hi)
{
	self_lo = lo;
	self_hi = hi;
}

static _Atomic int trace_cache_stale;	/* libunwind_backtrace() below */

void stacks_new_epoch(void)
{
	atomic_fetch_add(&epoch, 1);
	unwind_forget();	/* its cached rules may now describe other code */
	/*
	 * libunwind's too: a stack the rules cannot take goes to it (heaptrack
	 * flushes it after every dlopen and dlclose).  The flush also unmaps
	 * the .debug_frame tables of a libunwind built to read them; Debian's
	 * reads none.
	 */
	if (ht_cfg.unwind == HTR_UNWIND_LIBUNWIND) {
		atomic_store(&trace_cache_stale, 1);
		unw_flush_cache(unw_local_addr_space, 0, 0);
	}
}

/*
 * Frame-pointer walk.  Every step is checked: the next frame must lie above
 * the current one, inside this thread's stack, and be aligned; a return
 * address of 0 ends the chain.  A bad chain stops early, never faults.
 */
static unsigned fp_backtrace(uintptr_t *out, unsigned max)
{
	uintptr_t *fp = __builtin_frame_address(0);
	uintptr_t lo, hi;
	unsigned n = 0;

	if (ht_thread_stack(&lo, &hi) < 0)
		return 0;

	while (n < max) {
		uintptr_t *next;
		uintptr_t ret;

		if ((uintptr_t)fp & 7 || (uintptr_t)fp + 16 > hi)
			break;
		ret = fp[1];
		next = (uintptr_t *)fp[0];
		if (!ret)
			break;
		out[n++] = ret;
		if (next <= fp || (uintptr_t)next >= hi)
			break;
		fp = next;
	}
	return n;
}

/*
 * libunwind's unw_backtrace() keeps a per-thread cache of how to step from
 * each address that unw_flush_cache() does not reach: once a module has
 * replaced an unloaded one at the same addresses (stacks_new_epoch), its
 * answers for them may be the old code's.  From then on libunwind is asked
 * step by step (trace_cache_stale), whose cache the flush does empty.
 */
static int libunwind_backtrace(uintptr_t *out, int max)
{
	unw_context_t uc;
	unw_cursor_t cur;
	int n = 0;

	if (!atomic_load_explicit(&trace_cache_stale, memory_order_relaxed))
		return unw_backtrace((void **)out, max);
	if (unw_getcontext(&uc) != 0 || unw_init_local(&cur, &uc) != 0)
		return 0;
	while (n < max && unw_step(&cur) > 0) {
		unw_word_t ip;

		if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || !ip)
			break;
		out[n++] = (uintptr_t)ip;
	}
	return n;
}

/*
 * HEAPTRAIL_UNWIND_CHECK=1: every stack is also taken by libunwind and the
 * two compared (after our frames are dropped and the depth is cut), and the
 * first differences are said on stderr.  For checking unwind.c on a
 * program; it costs what libunwind costs.
 */
static void check_unwind(const uintptr_t *raw, unsigned n, unsigned want, unsigned keep)
{
	uintptr_t lib[HTR_MAX_DEPTH + 16];
	unsigned i = 0, j = 0, kept = 0, nl;
	int got = libunwind_backtrace(lib, (int)want);
	uintptr_t lo = self_lo, span = self_hi - self_lo;

	nl = got > 0 ? (unsigned)got : 0;
	for (;; i++, j++) {
		while (i < n && raw[i] - lo < span)
			i++;
		while (j < nl && lib[j] - lo < span)
			j++;
		if (kept++ == keep || (i >= n && j >= nl))
			return;
		if (i >= n || j >= nl || raw[i] != lib[j])
			break;
	}
	if (atomic_fetch_add(&check_diffs, 1) < 5) {
		char buf[160];
		struct ht_str m;

		str_init(&m, buf, sizeof(buf));
		str_add(&m, "unwind check: a stack differs from libunwind's at frame ");
		str_add_u64(&m, kept - 1);
		str_add(&m, " (ours ");
		str_add_u64(&m, i < n ? raw[i] : 0);
		str_add(&m, ", libunwind's ");
		str_add_u64(&m, j < nl ? lib[j] : 0);
		str_add(&m, ")");
		ht_msg(buf);
	}
}

void stacks_capture(struct ht_capture *c)
{
	uintptr_t raw[HTR_MAX_DEPTH + 16];
	unsigned keep = ht_cfg.depth, want = keep + 16, n, i, d;
	uintptr_t lo = self_lo, span = self_hi - self_lo;

	c->memo = 0;
	c->memo_tag = 0;
	if (want > sizeof(raw) / sizeof(raw[0]))
		want = sizeof(raw) / sizeof(raw[0]);
	if (ht_cfg.unwind == HTR_UNWIND_FP) {
		n = fp_backtrace(raw, want);
	} else {
		/* cached .eh_frame rules (unwind.c), our frames left out as it goes */
		int got = unwind_backtrace(c->ips, keep, self_lo, self_hi, &c->memo_tag);

		if (HT_LIKELY(got >= 0)) {
			c->depth = (unsigned)got;
			c->memo = 1;
			if (HT_UNLIKELY(check_mode))
				check_unwind(c->ips, c->depth, want, keep);
			return;
		}
		/* libunwind for what the rules cannot do */
		got = libunwind_backtrace(raw, (int)want);
		n = got > 0 ? (unsigned)got : 0;
		if (HT_UNLIKELY(check_mode))
			check_unwind(raw, n, want, keep);
	}
	/* Our frames go: the interposed entry and main()'s wrapper alike. */
	for (i = 0, d = 0; i < n && d < keep; i++)
		if (raw[i] - lo >= span)	/* not in [self_lo, self_hi) */
			c->ips[d++] = raw[i];
	c->depth = d;
}

/*
 * Four independent lanes: a stack is hashed on every allocation, and one
 * serial multiply chain over 15 addresses costs more than the lookup.
 * What the lanes give is the key of the thread's cache; the table's hash
 * mixes it further (hash_finish), only when the thread's cache misses.
 */
#define HASH_MUL 0xff51afd7ed558ccdull

static uint64_t hash_lanes(const uintptr_t *p, unsigned n, uint32_t ep)
{
	const uint64_t k = HASH_MUL;
	uint64_t a = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n << 32) ^ ep;
	uint64_t b = 0xc2b2ae3d27d4eb4full, c = 0x165667b19e3779f9ull, d = 0x27d4eb2f165667c5ull;
	unsigned i = 0;

	for (; i + 4 <= n; i += 4) {
		a = (a ^ p[i]) * k;
		b = (b ^ p[i + 1]) * k;
		c = (c ^ p[i + 2]) * k;
		d = (d ^ p[i + 3]) * k;
		a ^= a >> 32;
		b ^= b >> 32;
		c ^= c >> 32;
		d ^= d >> 32;
	}
	/* the last one to three, one lane each: no chain of multiplies */
	if (i < n)
		a = (a ^ p[i]) * k, a ^= a >> 32;
	if (i + 1 < n)
		b = (b ^ p[i + 1]) * k, b ^= b >> 32;
	if (i + 2 < n)
		c = (c ^ p[i + 2]) * k, c ^= c >> 32;
	return a ^ ((b << 17) | (b >> 47)) ^ ((c << 31) | (c >> 33)) ^ ((d << 47) | (d >> 17));
}

static uint64_t hash_finish(uint64_t h)
{
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	h *= HASH_MUL;
	h ^= h >> 32;
	return h;
}

static inline int same_ips(const uintptr_t *a, const uintptr_t *b, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)	/* short: inline, not memcmp */
		if (a[i] != b[i])
			return 0;
	return 1;
}

static int same_stack(uint32_t id, const struct ht_capture *c, uint32_t ep)
{
	const struct stack_info *si = &infos[id];

	if (si->depth != c->depth || si->epoch != ep)
		return 0;
	return same_ips(ips + si->ip_off, c->ips, c->depth);
}

/* The stack's id in levels top .. 0, or 0. */
static uint32_t find(uint64_t h, uint32_t tag, const struct ht_capture *c, uint32_t ep,
		     unsigned top)
{
	unsigned k = top + 1;

	while (k--) {
		_Atomic uint64_t *t = table + LEVEL_BASE(k);
		uint32_t mask = LEVEL_SLOTS(k) - 1, idx = (uint32_t)h & mask;
		uint64_t slot;

		while ((slot = atomic_load_explicit(&t[idx], memory_order_acquire)) != 0) {
			if ((uint32_t)(slot >> 32) == tag && same_stack((uint32_t)slot, c, ep))
				return (uint32_t)slot;
			idx = (idx + 1) & mask;
		}
	}
	return 0;
}

/*
 * A stack not in the table is checked against the modules the dump knows
 * first (modules.c): its definition is resolved against the modules loaded
 * at its event's time, so a library the dump has not heard of yet (loaded
 * since the writer last looked) is recorded now, before the event.
 */
uint32_t stacks_intern(const struct ht_capture *c, int *is_new)
{
	uint32_t ep, tag, idx, mask, new_id = 0, found;
	uint64_t key, h, off, want;
	struct thread_cache *tc = my_cache;
	struct cache_entry *ce, spare;
	_Atomic uint64_t *t;
	unsigned k;
	int checked = 0;

	*is_new = 0;
	if (!c->depth || !table)
		return HTR_STACK_NONE;
	/* the same walk as before, and interned in this epoch: its id */
	if (c->memo_tag &&
	    (uint32_t)(c->memo_tag >> 32) == atomic_load_explicit(&epoch, memory_order_relaxed))
		return (uint32_t)c->memo_tag;
	if (HT_UNLIKELY(!tc))
		tc = my_cache = tpool_get(&cache_pool);
again:
	ep = atomic_load_explicit(&epoch, memory_order_relaxed);
	key = hash_lanes(c->ips, c->depth, ep);
	if (HT_LIKELY(tc != NULL)) {
		ce = &tc->e[(key ^ (key >> 29)) & (CACHE_SLOTS - 1)];
	} else {
		/* no cache of its own (exiting): an entry that is never hit */
		memset(&spare, 0, sizeof(spare));
		ce = &spare;
	}
	/* an empty entry has depth 0, a capture here never */
	if (ce->hash == key && ce->epoch == ep && ce->depth == c->depth &&
	    same_ips(ce->ips, c->ips, c->depth)) {
		if (c->memo)
			unwind_memo_tag((uint64_t)ep << 32 | ce->id);
		return ce->id;
	}
	h = hash_finish(key);
	tag = (uint32_t)(h >> 32) | 1;
	k = atomic_load_explicit(&level, memory_order_acquire);
	found = find(h, tag, c, ep, k);
	if (found)
		goto hit;
	if (!checked) {
		checked = 1;
		if (modules_check_stack(c->ips, c->depth))
			goto again;	/* addresses changed meaning: hash again */
	}
	/* out of ids or room for addresses: no shared counter moves (a cheap no) */
	if (atomic_load_explicit(&next_id, memory_order_relaxed) >= MAX_IDS ||
	    atomic_load_explicit(&ip_region.used, memory_order_relaxed) +
	    c->depth * sizeof(uintptr_t) > ip_region.reserved)
		goto full;
	/*
	 * A slot of level k is reserved before it is taken, so that no level
	 * ever holds more than 3/4 of its slots however many threads race:
	 * the probes, which stop only at an empty slot, always find one.
	 */
	if (atomic_fetch_add(&level_used[k], 1) >= HT_LEVEL_FULL(LEVEL0_BITS, k)) {
		unsigned want_k = k;

		atomic_fetch_sub(&level_used[k], 1);
		if (k + 1 >= LEVELS)
			goto full;
		/* whoever wins, the level is past k: look there too */
		atomic_compare_exchange_strong(&level, &want_k, k + 1);
		goto again;
	}
	new_id = atomic_fetch_add(&next_id, 1);
	off = atomic_fetch_add(&ip_region.used, c->depth * sizeof(uintptr_t));
	if (new_id >= MAX_IDS || off + c->depth * sizeof(uintptr_t) > ip_region.reserved) {
		atomic_fetch_sub(&level_used[k], 1);
		goto full;
	}
	off /= sizeof(uintptr_t);
	memcpy(ips + off, c->ips, c->depth * sizeof(uintptr_t));
	infos[new_id].ip_off = off;
	infos[new_id].depth = c->depth;
	infos[new_id].epoch = ep;
	/* into level k even if another thread has added one since: lookups probe every level */
	t = table + LEVEL_BASE(k);
	mask = LEVEL_SLOTS(k) - 1;
	idx = (uint32_t)h & mask;
	want = (uint64_t)tag << 32 | new_id;
	for (;;) {
		uint64_t slot = atomic_load_explicit(&t[idx], memory_order_acquire);

		if (!slot) {
			if (atomic_compare_exchange_strong_explicit(&t[idx], &slot, want,
								    memory_order_release,
								    memory_order_acquire)) {
				*is_new = 1;	/* in the slot reserved above */
				found = new_id;
				goto hit;
			}
			/* Lost the race for this slot: look at what won it. */
		}
		if ((uint32_t)(slot >> 32) == tag && same_stack((uint32_t)slot, c, ep)) {
			found = (uint32_t)slot;	/* new_id stays unused, its slot too */
			atomic_fetch_sub(&level_used[k], 1);
			goto hit;
		}
		idx = (idx + 1) & mask;
	}
hit:
	ce->hash = key;
	ce->id = found;
	ce->epoch = ep;
	ce->depth = c->depth;
	ce->ips = ips + infos[found].ip_off;
	if (c->memo)
		unwind_memo_tag((uint64_t)ep << 32 | found);
	return found;
full:
	atomic_fetch_add(&ht_lost[HTR_LOST_STACKS], 1);
	return HTR_STACK_NONE;
}
