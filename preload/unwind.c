/* unwind.c - fast x86-64 stack walk from .eh_frame rules cached per return address */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"
#include "unwind.h"

/*
 * libunwind's unw_backtrace costs about a microsecond per stack (a third of
 * the shim's cycles under full tracing).  Most of a stack walk is the same
 * few hundred return addresses again and again, and at each of them the way
 * to the caller's frame is fixed: on x86-64 the canonical frame address
 * (CFA) is RSP or RBP plus a constant, the return address sits at CFA - 8,
 * and RBP is either unchanged or saved at CFA + n.  So this walker learns
 * that rule once per return address from the module's .eh_frame (found with
 * _dl_find_object, no loader lock, no dl_iterate_phdr), caches it in a
 * global lock-free table, and from then on a frame costs one table lookup
 * and two stack reads.
 *
 * Anything the cache cannot express (no FDE, a CFA expression, a signal
 * frame, RBP held in another register, a stack we do not know the bounds
 * of, a read outside it) makes unwind_backtrace() answer -1, and the caller
 * asks libunwind for that stack as before: the result is the same frames,
 * only slower.  Every stack read is checked against the thread's stack
 * bounds first, so a corrupt frame chain ends the walk, never the program.
 */

#if defined(__x86_64__)

enum { K_NONE = 0, K_RSP = 1, K_RBP = 2, K_END = 3, K_FAIL = 4 };

/*
 * One rule in 32 bits: kind (3 bits), RBP saved (1 bit), RBP's slot as
 * (offset from the CFA) / 8 (signed, 8 bits), CFA offset (20 bits).  The
 * other 32 bits of the entry's rule word hold a tag of the address, so an
 * entry read while it is being replaced is recognised as not this one.
 */
#define R_KIND(r) ((r) & 7u)
#define R_BPSAVED(r) (((r) >> 3) & 1u)
#define R_BPOFF(r) ((int64_t)(int8_t)((r) >> 4) * 8)
#define R_CFAOFF(r) ((int64_t)((r) >> 12))
#define CFAOFF_MAX ((1 << 20) - 1)

/*
 * The rules learnt, by return address, shared by all threads: a table in
 * levels (shim.h; 16K entries, then 32K, 64K, 128K), lookups probing the
 * newest first.  One table of 128K was all resident (2 MiB) once a program
 * had used a few thousand return addresses; level 0 is 256 KiB.  It is a
 * cache: a rule it cannot take is learnt again when next needed.
 */
#define LEVEL0_BITS 14
#define LEVELS 4
#define LEVEL_SLOTS(k) HT_LEVEL_SLOTS(LEVEL0_BITS, k)
#define LEVEL_BASE(k) HT_LEVEL_BASE(LEVEL0_BITS, k)
#define CACHE_SLOTS LEVEL_BASE(LEVELS)	/* 240K entries, 3.75 MiB reserved */
#define PROBES 16

struct entry {
	_Atomic uint64_t ip;
	_Atomic uint64_t rule;		/* tag << 32 | rule; 0 = not ready */
};

static struct ht_region cache_region;
static struct entry *cache;
static _Atomic uint32_t cache_level;	/* where new rules go */
static _Atomic uint32_t cache_used[LEVELS];
static int unwind_ok;

/*
 * Each thread keeps the rules it uses in a small direct-mapped cache of its
 * own (8 KiB, from a pool: not static TLS, see tpool.c): the global table is megabytes of address space, and there a
 * stack of 15 frames touched 15 pages (TLB misses) on every walk.  The index
 * is a cheap fold of the address (a multiply would lengthen the chain of
 * dependent loads a walk is).  Keys and rules are two arrays of 8-byte
 * entries, so the masked address, scaled by the load itself, finds either.
 * A thread empties its cache when it sees that unwind_forget() ran.
 *
 * The rules are unpacked into what the walk does, checked once here rather
 * than at every frame: W_RSP and W_RSP_BP frames (CFA = RSP + a multiple of
 * 8) keep the walk aligned and above the callee's frame by construction,
 * and their saved RBP lies inside their own frame, so the walk checks only
 * the stack's top; a CFA from RBP (any value) is checked in full.
 */
enum { W_RSP, W_RSP_BP, W_RBP, W_END, W_FAIL };
#define TCACHE_SLOTS 512
/*
 * A rule unpacked in one 64-bit word, read with one load: the CFA offset
 * (bits 0-31), W_* (32-39), RBP saved (40-47, W_RBP), RBP's slot's offset
 * from the CFA (48-63, signed, <= -16).
 */
#define T_CFAOFF(w) ((uint32_t)(w))
#define T_KIND(w) ((uint8_t)((w) >> 32))
#define T_BPSAVED(w) ((uint8_t)((w) >> 40))
#define T_BPOFF(w) ((int64_t)(int16_t)((w) >> 48))
/*
 * A walk remembered: where it started, and every stack word it read with
 * the value it found.  The walk is a function of its start (ip, sp, and bp
 * when a frame took its CFA from the bp it started with), the rules of the
 * addresses it met (fixed until unwind_forget()) and the words it read.
 * When all of those are the same again, so is the walk: checking the words
 * is a row of independent loads, where the walk is a chain of dependent
 * ones (the next frame's address, then its rule, then the next).  The
 * walk's addresses are the values read with MEMO_OUT (and ip, with
 * first_out).  A saved rbp that no later frame took its CFA from is not
 * kept: in code without frame pointers rbp holds any value, different at
 * every call, and the walk did not depend on it.
 */
#define MEMO_SET_BITS 5
#define MEMO_SETS (1 << MEMO_SET_BITS)
#define MEMO_WAYS 4		/* a call site reached by several paths of one depth */
#define MEMO_READS 32
#define MEMO_OUT 0x8000u	/* off: the value read is an address given out */
#define MEMO_OFF_MAX 0x7fffu	/* words above sp: 256 KiB */
struct memo {
	uintptr_t ip, sp, bp;
	uint32_t gen;		/* forget_gen when recorded; 0 = empty */
	uint16_t nreads, n;	/* words read; addresses given out */
	uint8_t uses_bp;	/* bp is part of the key */
	uint8_t first_out;	/* ip itself is the first address given out */
	uint16_t max;		/* the walk's max */
	uint64_t tag;		/* the caller's (unwind_memo_tag()) */
	uint16_t off[MEMO_READS];	/* word = sp + 8 * (off & MEMO_OFF_MAX) */
	uintptr_t val[MEMO_READS];
};
struct tcache {
	uint64_t key[TCACHE_SLOTS];	/* the return address, 0 = empty */
	uint64_t rule[TCACHE_SLOTS];	/* T_* */
	uint32_t gen;			/* of forget_gen, when last emptied */
	struct memo *last;		/* the walk just made or found */
	uint8_t victim[MEMO_SETS];	/* the way to replace next */
	struct memo memo[MEMO_SETS][MEMO_WAYS];
};
static __thread struct tcache *my_tcache __attribute__((tls_model("initial-exec")));
static struct ht_tpool tcache_pool;
#define TCACHE_RESERVE ((size_t)128 << 20)	/* 3K threads' caches at once */
static _Atomic uint32_t forget_gen = 1;


int unwind_init(void)
{
	if (region_reserve(&cache_region, CACHE_SLOTS * sizeof(struct entry)))
		return -1;
	cache = region_alloc(&cache_region, CACHE_SLOTS * sizeof(struct entry));
	unwind_ok = cache != NULL &&
		    tpool_init(&tcache_pool, sizeof(struct tcache), TCACHE_RESERVE) == 0;
	return unwind_ok ? 0 : -1;
}

void unwind_thread_exit(void)
{
	tpool_put(&tcache_pool, my_tcache);
	my_tcache = NULL;
}

void unwind_after_fork(void)
{
	tpool_after_fork(&tcache_pool);
}

/*
 * A module was unloaded: new code may be mapped where its code was.  Every
 * rule goes; a walk running meanwhile sees either a whole entry or an empty
 * one (the tag check).
 */
void unwind_forget(void)
{
	uint32_t i;

	if (!cache)
		return;
	for (i = 0; i < CACHE_SLOTS; i++) {
		if (atomic_load_explicit(&cache[i].ip, memory_order_relaxed)) {
			atomic_store_explicit(&cache[i].rule, 0, memory_order_relaxed);
			atomic_store_explicit(&cache[i].ip, 0, memory_order_relaxed);
		}
	}
	for (i = 0; i < LEVELS; i++)
		atomic_store(&cache_used[i], 0);
	atomic_store(&cache_level, 0);
	atomic_fetch_add(&forget_gen, 1);
}

static inline uint32_t tag_of(uintptr_t ip)
{
	return (uint32_t)((ip * 0x9e3779b97f4a7c15ull) >> 32) | 1;
}

/* ip's home in level k, as an index into cache[] */
static inline uint32_t slot_of(uintptr_t ip, unsigned k)
{
	return LEVEL_BASE(k) + (uint32_t)((ip * 0xff51afd7ed558ccdull) >> (64 - LEVEL0_BITS - k));
}

/* The next slot of level k after i, wrapping round within the level. */
static inline uint32_t next_slot(uint32_t i, unsigned k)
{
	return LEVEL_BASE(k) + ((i - LEVEL_BASE(k) + 1) & (LEVEL_SLOTS(k) - 1));
}

static inline uint32_t cache_get(uintptr_t ip)
{
	unsigned k = atomic_load_explicit(&cache_level, memory_order_acquire) + 1;

	while (k--) {
		uint32_t i = slot_of(ip, k), n;

		for (n = 0; n < PROBES; n++, i = next_slot(i, k)) {
			uint64_t key = atomic_load_explicit(&cache[i].ip, memory_order_acquire);

			if (key == ip) {
				uint64_t r = atomic_load_explicit(&cache[i].rule,
								  memory_order_acquire);

				return (uint32_t)(r >> 32) == tag_of(ip) ? (uint32_t)r : K_NONE;
			}
			if (!key)
				break;
		}
	}
	return K_NONE;
}

static void cache_put(uintptr_t ip, uint32_t rule)
{
	unsigned k = atomic_load_explicit(&cache_level, memory_order_acquire);
	uint32_t i, n;

	if (atomic_load_explicit(&cache_used[k], memory_order_relaxed) >=
	    HT_LEVEL_FULL(LEVEL0_BITS, k)) {
		unsigned want = k;

		if (k + 1 >= LEVELS)
			return;		/* full: learnt again when next needed */
		atomic_compare_exchange_strong(&cache_level, &want, k + 1);
		k = atomic_load_explicit(&cache_level, memory_order_acquire);
	}
	for (n = 0, i = slot_of(ip, k); n < PROBES; n++, i = next_slot(i, k)) {
		uint64_t key = 0;

		if (atomic_compare_exchange_strong_explicit(&cache[i].ip, &key, ip,
							    memory_order_acq_rel,
							    memory_order_acquire)) {
			atomic_fetch_add_explicit(&cache_used[k], 1, memory_order_relaxed);
			atomic_store_explicit(&cache[i].rule, (uint64_t)tag_of(ip) << 32 | rule,
					      memory_order_release);
			return;
		}
		if (key == ip)
			return;		/* another thread learnt it */
	}
}

/* ---- reading .eh_frame_hdr and .eh_frame ---- */

#define DW_EH_PE_omit 0xff
#define DW_EH_PE_absptr 0x00
#define DW_EH_PE_uleb128 0x01
#define DW_EH_PE_udata2 0x02
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sleb128 0x09
#define DW_EH_PE_sdata2 0x0a
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_indirect 0x80

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (r->p < r->end) {
		uint8_t b = *r->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

static int64_t rd_sleb(struct rd *r)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t b = 0;

	while (r->p < r->end) {
		b = *r->p++;
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= -((int64_t)1 << shift);
			return v;
		}
	}
	r->bad = 1;
	return 0;
}

static uint64_t rd_fixed(struct rd *r, unsigned n)
{
	uint64_t v = 0;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, n);	/* little-endian */
	r->p += n;
	return v;
}

static uint8_t rd_u8(struct rd *r)
{
	return (uint8_t)rd_fixed(r, 1);
}

/* A pointer in encoding 'enc'; 'data' is the base of DW_EH_PE_datarel. */
static uint64_t rd_ptr(struct rd *r, uint8_t enc, uintptr_t data)
{
	uintptr_t at = (uintptr_t)r->p;
	uint64_t v;

	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		v = rd_fixed(r, 8);
		break;
	case DW_EH_PE_uleb128:
		v = rd_uleb(r);
		break;
	case DW_EH_PE_udata2:
		v = rd_fixed(r, 2);
		break;
	case DW_EH_PE_sdata2:
		v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2);
		break;
	case DW_EH_PE_udata4:
		v = rd_fixed(r, 4);
		break;
	case DW_EH_PE_sdata4:
		v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4);
		break;
	case DW_EH_PE_sleb128:
		v = (uint64_t)rd_sleb(r);
		break;
	default:
		r->bad = 1;
		return 0;
	}
	switch (enc & 0x70) {
	case 0:
		break;
	case DW_EH_PE_pcrel:
		v += at;
		break;
	case DW_EH_PE_datarel:
		v += data;
		break;
	default:
		r->bad = 1;	/* textrel, funcrel, aligned: not in .eh_frame on x86-64 */
		return 0;
	}
	if (enc & DW_EH_PE_indirect)
		r->bad = 1;	/* only personality pointers are indirect; we skip those */
	return v;
}

/* The FDE covering pc, through the binary-search table of .eh_frame_hdr. */
static const uint8_t *find_fde(const uint8_t *hdr, uintptr_t pc)
{
	struct rd r = { hdr, hdr + 4 + 16, 0 };
	uint8_t version, fp_enc, count_enc, table_enc;
	uint64_t count, lo, hi;
	const int32_t *table;

	version = rd_u8(&r);
	fp_enc = rd_u8(&r);
	count_enc = rd_u8(&r);
	table_enc = rd_u8(&r);
	if (version != 1 || table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return NULL;
	r.end = r.p + 16;
	(void)rd_ptr(&r, fp_enc, (uintptr_t)hdr);
	count = rd_ptr(&r, count_enc, (uintptr_t)hdr);
	if (r.bad || !count || count > (1u << 28))
		return NULL;
	table = (const int32_t *)r.p;
	/* last entry whose initial location <= pc */
	lo = 0;
	hi = count;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if ((uintptr_t)hdr + (intptr_t)table[2 * mid] <= pc)
			lo = mid;
		else
			hi = mid;
	}
	if ((uintptr_t)hdr + (intptr_t)table[2 * lo] > pc)
		return NULL;
	return hdr + (intptr_t)table[2 * lo + 1];
}

/* ---- the CFA program ---- */

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };
enum { RU_SAME = 0, RU_OFFSET = 1, RU_OTHER = 2, RU_UNDEF = 3 };

struct cfa_state {
	int cfa_reg;
	int64_t cfa_off;
	int bp_rule, ra_rule;
	int64_t bp_off, ra_off;
	int cfa_other;		/* a CFA expression */
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	int has_aug, signal;
	const uint8_t *insns, *end;
};

static int parse_cie(const uint8_t *p, struct cie *c)
{
	struct rd r;
	uint32_t len;
	uint8_t version;
	const char *aug;

	memcpy(&len, p, 4);
	if (len == 0 || len == 0xffffffffu)
		return -1;
	r.p = p + 4;
	r.end = p + 4 + len;
	r.bad = 0;
	if (rd_fixed(&r, 4) != 0)
		return -1;	/* not a CIE */
	version = rd_u8(&r);
	if (version != 1 && version != 3)
		return -1;
	aug = (const char *)r.p;
	while (r.p < r.end && *r.p)
		r.p++;
	if (r.p >= r.end)
		return -1;
	r.p++;
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	c->fde_enc = DW_EH_PE_absptr;
	c->has_aug = 0;
	c->signal = 0;
	if (aug[0] == 'z') {
		uint64_t alen = rd_uleb(&r);
		const uint8_t *aend = r.p + alen;
		const char *a;

		c->has_aug = 1;
		if (alen > (uint64_t)(r.end - r.p))
			return -1;
		for (a = aug + 1; *a; a++) {
			if (*a == 'R') {
				c->fde_enc = rd_u8(&r);
			} else if (*a == 'L') {
				(void)rd_u8(&r);
			} else if (*a == 'P') {
				uint8_t enc = rd_u8(&r);

				/* skip the personality pointer, whatever it holds */
				(void)rd_ptr(&r, enc & 0x7f, 0);
			} else if (*a == 'S') {
				c->signal = 1;
			} else if (*a != 'B') {
				return -1;
			}
		}
		r.p = aend;
	} else if (aug[0]) {
		return -1;
	}
	if (r.bad || r.p > r.end)
		return -1;
	c->insns = r.p;
	c->end = r.end;
	return 0;
}

static void set_rule(struct cfa_state *s, uint64_t reg, int rule, int64_t off)
{
	if (reg == REG_RBP) {
		s->bp_rule = rule;
		s->bp_off = off;
	} else if (reg == REG_RA) {
		s->ra_rule = rule;
		s->ra_off = off;
	} else if (reg == REG_RSP && rule != RU_SAME) {
		s->cfa_other = 1;	/* RSP is always the CFA here */
	}
}

#define STATE_STACK 8

/*
 * Run CFA instructions until the location passes pc.  'init' is the state
 * after the CIE's instructions (what DW_CFA_restore goes back to); NULL while
 * running them.  Returns 1 when pc was passed, 0 at the end, -1 on anything
 * unsupported.
 */
static int run_cfa(const uint8_t *p, const uint8_t *end, const struct cie *c,
		   uint64_t *loc, uint64_t pc, struct cfa_state *s,
		   const struct cfa_state *init)
{
	struct cfa_state stack[STATE_STACK];
	unsigned depth = 0;
	struct rd r = { p, end, 0 };

	while (r.p < r.end && !r.bad) {
		uint8_t op = *r.p++;
		uint8_t hi2 = op >> 6, low = op & 0x3f;
		uint64_t reg, delta;
		int64_t off;

		if (hi2 == 1) {		/* DW_CFA_advance_loc */
			*loc += low * c->code_align;
			if (*loc > pc)
				return 1;
			continue;
		}
		if (hi2 == 2) {		/* DW_CFA_offset */
			off = (int64_t)rd_uleb(&r) * c->data_align;
			set_rule(s, low, RU_OFFSET, off);
			continue;
		}
		if (hi2 == 3) {		/* DW_CFA_restore */
			if (!init)
				return -1;
			if (low == REG_RBP) {
				s->bp_rule = init->bp_rule;
				s->bp_off = init->bp_off;
			} else if (low == REG_RA) {
				s->ra_rule = init->ra_rule;
				s->ra_off = init->ra_off;
			}
			continue;
		}
		switch (op) {
		case 0x00:	/* nop */
			break;
		case 0x01:	/* set_loc */
			*loc = rd_ptr(&r, c->fde_enc, 0);
			if (*loc > pc)
				return 1;
			break;
		case 0x02:	/* advance_loc1 */
		case 0x03:	/* advance_loc2 */
		case 0x04:	/* advance_loc4 */
			delta = rd_fixed(&r, op == 0x02 ? 1 : op == 0x03 ? 2 : 4);
			*loc += delta * c->code_align;
			if (*loc > pc)
				return 1;
			break;
		case 0x05:	/* offset_extended */
			reg = rd_uleb(&r);
			off = (int64_t)rd_uleb(&r) * c->data_align;
			set_rule(s, reg, RU_OFFSET, off);
			break;
		case 0x06:	/* restore_extended */
			reg = rd_uleb(&r);
			if (!init)
				return -1;
			if (reg == REG_RBP) {
				s->bp_rule = init->bp_rule;
				s->bp_off = init->bp_off;
			} else if (reg == REG_RA) {
				s->ra_rule = init->ra_rule;
				s->ra_off = init->ra_off;
			}
			break;
		case 0x07:	/* undefined */
			set_rule(s, rd_uleb(&r), RU_UNDEF, 0);
			break;
		case 0x08:	/* same_value */
			set_rule(s, rd_uleb(&r), RU_SAME, 0);
			break;
		case 0x09:	/* register */
			reg = rd_uleb(&r);
			(void)rd_uleb(&r);
			set_rule(s, reg, RU_OTHER, 0);
			break;
		case 0x0a:	/* remember_state */
			if (depth >= STATE_STACK)
				return -1;
			stack[depth++] = *s;
			break;
		case 0x0b:	/* restore_state */
			if (!depth)
				return -1;
			/* the CFA too, as libgcc and libunwind do: GCC's
			 * epilogues in mid-function rely on it */
			*s = stack[--depth];
			break;
		case 0x0c:	/* def_cfa */
			s->cfa_reg = (int)rd_uleb(&r);
			s->cfa_off = (int64_t)rd_uleb(&r);
			s->cfa_other = 0;
			break;
		case 0x0d:	/* def_cfa_register */
			s->cfa_reg = (int)rd_uleb(&r);
			s->cfa_other = 0;
			break;
		case 0x0e:	/* def_cfa_offset */
			s->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x0f:	/* def_cfa_expression */
			s->cfa_other = 1;
			delta = rd_uleb(&r);
			if (delta > (uint64_t)(r.end - r.p))
				return -1;
			r.p += delta;
			break;
		case 0x10:	/* expression */
		case 0x16:	/* val_expression */
			reg = rd_uleb(&r);
			delta = rd_uleb(&r);
			if (delta > (uint64_t)(r.end - r.p))
				return -1;
			r.p += delta;
			set_rule(s, reg, RU_OTHER, 0);
			break;
		case 0x11:	/* offset_extended_sf */
			reg = rd_uleb(&r);
			off = rd_sleb(&r) * c->data_align;
			set_rule(s, reg, RU_OFFSET, off);
			break;
		case 0x12:	/* def_cfa_sf */
			s->cfa_reg = (int)rd_uleb(&r);
			s->cfa_off = rd_sleb(&r) * c->data_align;
			s->cfa_other = 0;
			break;
		case 0x13:	/* def_cfa_offset_sf */
			s->cfa_off = rd_sleb(&r) * c->data_align;
			break;
		case 0x14:	/* val_offset */
			reg = rd_uleb(&r);
			(void)rd_uleb(&r);
			set_rule(s, reg, RU_OTHER, 0);
			break;
		case 0x15:	/* val_offset_sf */
			reg = rd_uleb(&r);
			(void)rd_sleb(&r);
			set_rule(s, reg, RU_OTHER, 0);
			break;
		case 0x2e:	/* GNU_args_size */
			(void)rd_uleb(&r);
			break;
		case 0x2f:	/* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			off = -(int64_t)rd_uleb(&r) * c->data_align;
			set_rule(s, reg, RU_OFFSET, off);
			break;
		default:
			return -1;
		}
	}
	return r.bad ? -1 : 0;
}

/* The rule at return address ip (the call is at ip - 1). */
static uint32_t learn(uintptr_t ip)
{
	struct dl_find_object dlfo;
	const uint8_t *fde, *cie_p;
	struct cie c;
	struct cfa_state s, init;
	struct rd r;
	uint32_t len, cie_off;
	uint64_t pc = ip - 1, start, range, loc;
	uint32_t rule;
	int ret;

	if (_dl_find_object((void *)pc, &dlfo) != 0 || !dlfo.dlfo_eh_frame)
		return K_FAIL;
	fde = find_fde(dlfo.dlfo_eh_frame, pc);
	if (!fde)
		return K_FAIL;
	memcpy(&len, fde, 4);
	if (len == 0 || len == 0xffffffffu)
		return K_FAIL;
	memcpy(&cie_off, fde + 4, 4);
	if (!cie_off)
		return K_FAIL;
	cie_p = fde + 4 - cie_off;
	if (parse_cie(cie_p, &c) < 0 || c.signal || c.ra_reg != REG_RA)
		return K_FAIL;
	r.p = fde + 8;
	r.end = fde + 4 + len;
	r.bad = 0;
	start = rd_ptr(&r, c.fde_enc, 0);
	range = rd_ptr(&r, c.fde_enc & 0x0f, 0);
	if (r.bad || pc < start || pc >= start + range)
		return K_FAIL;
	if (c.has_aug) {
		uint64_t alen = rd_uleb(&r);

		if (alen > (uint64_t)(r.end - r.p))
			return K_FAIL;
		r.p += alen;
	}
	memset(&s, 0, sizeof(s));
	s.cfa_reg = -1;
	s.bp_rule = RU_SAME;
	s.ra_rule = RU_UNDEF;
	loc = start;
	if (run_cfa(c.insns, c.end, &c, &loc, pc, &s, NULL) != 0)
		return K_FAIL;	/* the CIE's instructions cannot pass a location */
	init = s;
	loc = start;
	ret = run_cfa(r.p, r.end, &c, &loc, pc, &s, &init);
	if (ret < 0 || s.cfa_other)
		return K_FAIL;
	if (s.ra_rule == RU_UNDEF)
		return K_END;	/* the outermost frame (_start, clone) */
	if (s.ra_rule != RU_OFFSET || s.ra_off != -8)
		return K_FAIL;
	if (s.cfa_reg != REG_RSP && s.cfa_reg != REG_RBP)
		return K_FAIL;
	if (s.cfa_off < 8 || s.cfa_off > CFAOFF_MAX)
		return K_FAIL;
	if (s.bp_rule == RU_OFFSET) {
		if (s.bp_off % 8 || s.bp_off < -128 * 8 || s.bp_off > 127 * 8)
			return K_FAIL;
	} else if (s.bp_rule != RU_SAME) {
		return K_FAIL;
	}
	rule = (s.cfa_reg == REG_RSP ? K_RSP : K_RBP) |
	       (s.bp_rule == RU_OFFSET ? 1u << 3 : 0) |
	       ((uint32_t)(uint8_t)(int8_t)(s.bp_off / 8) << 4) |
	       ((uint32_t)s.cfa_off << 12);
	return rule;
}

/* What the walk does with a frame of rule r (above), as T_* */
static uint64_t unpack_rule(uint32_t r)
{
	uint32_t cfa_off = (uint32_t)R_CFAOFF(r);
	int64_t bp_off = R_BPOFF(r);
	uint64_t kind = W_FAIL;

	if (R_KIND(r) == K_END) {
		kind = W_END;
	} else if (R_KIND(r) == K_RSP) {
		if (cfa_off % 8 || cfa_off < 8)	/* learn() says so too: not relied on */
			kind = W_FAIL;
		else if (!R_BPSAVED(r))
			kind = W_RSP;
		else if (bp_off <= -16 && -bp_off <= (int64_t)cfa_off)
			kind = W_RSP_BP;
	} else if (R_KIND(r) == K_RBP) {
		if (!R_BPSAVED(r) || bp_off <= -16)
			kind = W_RBP;
	}
	return cfa_off | kind << 32 | (uint64_t)R_BPSAVED(r) << 40 |
	       (uint64_t)(uint16_t)(int16_t)bp_off << 48;
}

/*
 * The cache's slot is a byte offset taken straight from the address (bits
 * 3-11), so that each load finds its entry in one addressing mode: the
 * walk's chain is the mask, this load, an add and the next frame's load.
 */
static inline uint64_t rule_of(struct tcache *tc, uintptr_t ip)
{
	char *slot = (char *)tc + (ip & ((TCACHE_SLOTS - 1) << 3));
	uint64_t *key = (uint64_t *)(slot + offsetof(struct tcache, key));
	uint64_t *rule = (uint64_t *)(slot + offsetof(struct tcache, rule));
	uint32_t r;

	if (HT_LIKELY(*key == ip))
		return *rule;
	r = cache_get(ip);
	if (HT_UNLIKELY(r == K_NONE)) {
		r = learn(ip);
		cache_put(ip, r);
	}
	*key = ip;
	*rule = unpack_rule(r);
	return *rule;
}

/* The set a walk starting at (ip, sp) is remembered in. */
static inline struct memo *memo_set(struct tcache *tc, uintptr_t ip, uintptr_t sp)
{
	uint64_t h = (ip ^ (sp << 7) ^ (sp >> 9)) * 0x9e3779b97f4a7c15ull;

	return tc->memo[h >> (64 - MEMO_SET_BITS)];
}

/* A remembered walk from this start whose words are all as they were, or NULL. */
static struct memo *memo_find(struct tcache *tc, uintptr_t ip, uintptr_t sp, uintptr_t bp,
			      uint32_t gen, unsigned max)
{
	struct memo *m = memo_set(tc, ip, sp);
	unsigned w, i;

	for (w = 0; w < MEMO_WAYS; w++, m++) {
		if (m->gen != gen || m->ip != ip || m->sp != sp || (m->uses_bp && m->bp != bp) ||
		    m->max != max)
			continue;
		/* every word inside [sp, the stack's top): it was when recorded */
		for (i = 0; i < m->nreads; i++)
			if (*(const uintptr_t *)(sp + 8 * (uintptr_t)(m->off[i] & MEMO_OFF_MAX)) !=
			    m->val[i])
				break;
		if (i == m->nreads)
			return m;
	}
	return NULL;
}

/*
 * The walk's addresses: ip, then the words read that were given out, first
 * (memo_finish()).  A loop, not memcpy(): a call into the C library for a
 * dozen words, on every remembered walk, cost more than the copy.
 */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static unsigned memo_out(const struct memo *m, uintptr_t *out)
{
	unsigned i, k = m->first_out;

	out[0] = m->ip;
	for (i = 0; i + k < m->n; i++)
		out[k + i] = m->val[i];
	return m->n;
}

/* Notes a word the walk read; the recording stops (rec = NULL) when it cannot hold it. */
static inline struct memo *memo_read(struct memo *rec, uintptr_t sp0, uintptr_t addr,
				     uintptr_t val)
{
	uintptr_t off = (addr - sp0) / 8;

	if (rec->nreads == MEMO_READS || off > MEMO_OFF_MAX)
		return NULL;
	rec->off[rec->nreads] = (uint16_t)off;
	rec->val[rec->nreads++] = val;
	return rec;
}

/* The saved rbps a recorded walk read (bits by read), and those a frame used. */
struct bp_track {
	uint64_t reads, used;
	unsigned at;		/* the latest one */
};

/* memo_read() of a saved rbp (rec may be NULL: nothing is recorded). */
static inline struct memo *memo_read_bp(struct memo *rec, uintptr_t sp0, uintptr_t slot,
					uintptr_t bp, struct bp_track *bt)
{
	if (rec && (rec = memo_read(rec, sp0, slot, bp)) != NULL) {
		bt->at = rec->nreads - 1u;
		bt->reads |= 1ull << bt->at;
	}
	return rec;
}

/*
 * Drops the reads in unused (saved rbps that no frame took its CFA from),
 * and puts the words given out first, in the walk's order: memo_out() is
 * then one copy.  The order of the others does not matter (all are checked).
 */
static void memo_finish(struct memo *rec, uint64_t unused)
{
	uint16_t off[MEMO_READS];
	uintptr_t val[MEMO_READS];
	unsigned i, k = 0, pass;

	for (pass = 0; pass < 2; pass++) {
		for (i = 0; i < rec->nreads; i++) {
			if (unused >> i & 1 || (unsigned)!(rec->off[i] & MEMO_OUT) != pass)
				continue;
			off[k] = rec->off[i];
			val[k++] = rec->val[i];
		}
	}
	memcpy(rec->off, off, k * sizeof(*off));
	memcpy(rec->val, val, k * sizeof(*val));
	rec->nreads = (uint16_t)k;
}

void unwind_memo_tag(uint64_t tag)
{
	struct tcache *tc = my_tcache;

	if (tc && tc->last)
		tc->last->tag = tag;
}

/*
 * The return addresses of the caller's stack from the program's first frame
 * out, at most max, our own frames [self_lo, self_hi) left out (those at the
 * top and any further down, such as main()'s wrapper).  -1: some frame is
 * beyond the cache's rules; ask libunwind.
 */
__attribute__((noinline)) int unwind_backtrace(uintptr_t *out, unsigned max,
					       uintptr_t self_lo, uintptr_t self_hi,
					       uint64_t *tag)
{
	uintptr_t *fp = __builtin_frame_address(0);
	uintptr_t lo, hi, sp, bp, ip, sp0;
	uint32_t gen = atomic_load_explicit(&forget_gen, memory_order_acquire);
	struct tcache *tc = my_tcache;
	struct memo *rec = NULL;
	uintptr_t span = self_hi - self_lo;
	unsigned n = 0;
	struct bp_track bt = { 0, 0, 0 };

	if (!unwind_ok || ht_thread_stack(&lo, &hi) < 0)
		return -1;
	if (HT_UNLIKELY(!tc)) {
		tc = my_tcache = tpool_get(&tcache_pool);
		if (!tc)
			return -1;	/* exiting, or the pool is spent: libunwind */
	}
	if ((uintptr_t)fp < lo || (uintptr_t)fp + 16 > hi)
		return -1;	/* another stack (sigaltstack, a coroutine) */
	/* one register for the whole walk, not the TLS address re-derived */
	__asm__("" : "+r"(tc));
	if (HT_UNLIKELY(tc->gen != gen)) {
		memset(tc->key, 0, sizeof(tc->key));
		tc->gen = gen;
	}
	/*
	 * Our own frames keep frame pointers (SHIM_CFLAGS; HT_FAST functions
	 * only tail-call, so they leave no frame): follow the chain past them
	 * to the program's first frame, checking each link.
	 */
	while (fp[1] - self_lo < span) {
		uintptr_t *next = (uintptr_t *)fp[0];

		if (next <= fp || (uintptr_t)next + 16 > hi || ((uintptr_t)next & 7))
			return -1;
		fp = next;
	}
	ip = fp[1];
	sp = (uintptr_t)(fp + 2);	/* aligned: fp is, and so is every step */
	bp = fp[0];
	sp0 = sp;
	if (tag) {
		struct memo *m = memo_find(tc, ip, sp, bp, gen, max);
		struct memo *set = memo_set(tc, ip, sp);
		uint8_t *victim = &tc->victim[(set - tc->memo[0]) / MEMO_WAYS];

		*tag = 0;
		tc->last = m;
		if (m) {
			*tag = m->tag;
			return (int)memo_out(m, out);
		}
		/* the ways in turn; a half-made record has gen 0 */
		rec = set + *victim % MEMO_WAYS;
		*victim = (uint8_t)(*victim + 1);
		rec->gen = 0;
		rec->ip = ip;
		rec->sp = sp;
		rec->bp = bp;
		rec->max = (uint16_t)max;
		rec->nreads = 0;
		rec->uses_bp = 0;
		rec->first_out = 0;
		rec->tag = 0;
		if (max > 0xffff)
			rec = NULL;
	}
	while (n < max) {
		uint64_t w;
		uintptr_t cfa, ra;

		if (HT_LIKELY(ip - self_lo >= span)) {
			out[n++] = ip;
			if (rec) {
				if (sp == sp0)
					rec->first_out = 1;
				else
					rec->off[rec->nreads - 1] |= MEMO_OUT;	/* ip is the last word read */
			}
			if (HT_UNLIKELY(n == max))
				break;	/* not a step further: it could only fail */
		}
		w = rule_of(tc, ip);
		if (HT_LIKELY(T_KIND(w) <= W_RSP_BP)) {
			/* above sp and aligned by construction (unpack_rule) */
			cfa = sp + T_CFAOFF(w);
			if (HT_UNLIKELY(cfa > hi))
				return -1;
			if (T_KIND(w) == W_RSP_BP) {	/* in [sp, cfa - 16] */
				uintptr_t slot = cfa + (uintptr_t)T_BPOFF(w);

				bp = *(const uintptr_t *)slot;
				rec = memo_read_bp(rec, sp0, slot, bp, &bt);
			}
		} else if (T_KIND(w) == W_RBP) {
			if (rec && !bt.reads)
				rec->uses_bp = 1;	/* the start's bp decides this frame */
			else if (rec)
				bt.used |= 1ull << bt.at;	/* and that saved rbp */
			cfa = bp + T_CFAOFF(w);
			/* sp < cfa <= hi, in one comparison */
			if (cfa - sp - 1 >= hi - sp || (cfa & 7))
				return -1;
			if (T_BPSAVED(w)) {
				uintptr_t slot = cfa + (uintptr_t)T_BPOFF(w);

				if (slot < sp)	/* slot + 8 <= cfa - 8: bp_off <= -16 */
					return -1;
				bp = *(const uintptr_t *)slot;
				rec = memo_read_bp(rec, sp0, slot, bp, &bt);
			}
		} else if (T_KIND(w) == W_END) {
			break;
		} else {
			return -1;
		}
		ra = ((const uintptr_t *)cfa)[-1];
		if (rec)
			rec = memo_read(rec, sp0, cfa - 8, ra);
		if (!ra)
			break;
		sp = cfa;
		ip = ra;
	}
	if (rec) {
		memo_finish(rec, bt.reads & ~bt.used);
		rec->n = (uint16_t)n;
		rec->gen = gen;
		tc->last = rec;
	}
	return (int)n;
}

#else

int unwind_init(void)
{
	return -1;
}

void unwind_forget(void)
{
}

void unwind_thread_exit(void)
{
}

void unwind_after_fork(void)
{
}

int unwind_backtrace(uintptr_t *out, unsigned max, uintptr_t self_lo, uintptr_t self_hi,
		     uint64_t *tag)
{
	(void)out;
	(void)max;
	(void)self_lo;
	(void)self_hi;
	(void)tag;
	return -1;
}

void unwind_memo_tag(uint64_t tag)
{
	(void)tag;
}

#endif
