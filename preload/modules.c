/* modules.c - tracks loaded objects (path, build-id, ranges) for the dump */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * The loader's list is compared with what was last written; each object seen
 * for the first time gets a MODULE_LOAD record, each one gone a MODULE_UNLOAD.
 *
 * Nothing wraps dlopen or dlclose: glibc takes the caller's RUNPATH, $ORIGIN
 * and namespace from dlopen's return address, which a wrapper would make
 * ours.  The list is learnt lazily instead, two ways:
 * - the writer polls every round: one dl_iterate_phdr() callback reads the
 *   loader's add/sub counters, and only when they moved is the list walked;
 * - a thread interning a new stack checks its addresses with
 *   _dl_find_object() (lock-free): an address inside an object we have not
 *   recorded means a library came since (a dlopen'ed library's constructor
 *   allocating, or code loaded between two polls), and that thread syncs
 *   before its event.  The caller holds its thread BUSY (events.c opens
 *   the buffer before interning), so the records' time and their queueing
 *   obey the watermark rule.
 * A record is committed (the module counted as known) only once it is
 * queued: when the writer's queue is full the sync is undone and retried.
 *
 * Unloading does not start a new stack epoch by itself: a library loaded
 * again at the same address (a dlopen/dlclose loop) is the same code, and
 * its stacks keep their ids.  Only when a newly seen object overlaps the
 * range of a different unloaded one do addresses change meaning, and only
 * then does the epoch move.
 *
 * A forked child of a multithreaded parent may inherit the loader's
 * dl_load_write_lock held by a thread that no longer exists (glibc resets
 * only dl_load_lock), and any dl_iterate_phdr() would wait forever.  Unless
 * the loader was idle at the fork (interpose_proc.c), the shim's own
 * lookups (ours and libunwind's, through the dl_iterate_phdr wrapper) are
 * served from the parent's module list until the program itself gets
 * through a real dl_iterate_phdr() or execs.
 */

#define MAX_MODULES 4096
#define MAX_SEGS 8
#define MAX_RETIRED 64
#define KNOWN_SLOTS 16384	/* power of two, > 2 * MAX_MODULES */

struct module {
	uint32_t id;		/* 0: known but never recorded (the vDSO) */
	int seen;
	uint64_t bias;
	uint64_t name_hash;	/* of the recorded path */
	uint64_t raw_hash;	/* of the loader's name, "" for the program */
	uint64_t lo, hi;	/* its PT_LOAD segments' extent */
	/* for serving dl_iterate_phdr() from this list in a forked child */
	const char *name;
	const ElfW(Phdr) *phdr;
	ElfW(Half) phnum;
	size_t tls_modid;
};

/* An unloaded module's range: new code there means a new stack epoch. */
struct retired {
	uint64_t lo, hi, bias, name_hash;
};

static struct module mods[MAX_MODULES];
static unsigned nmods;
static struct module snap[MAX_MODULES];	/* a forked child: the parent's list */
static unsigned nsnap;
static _Atomic unsigned epoch_moves;
static uint32_t next_module_id = 1;
static struct retired retired[MAX_RETIRED];
static unsigned nretired;
static atomic_flag mod_lock = ATOMIC_FLAG_INIT;
static unsigned long long last_adds, last_subs;
static _Atomic int changed_hint = 1;
static _Atomic int trusted = 1;	/* the real dl_iterate_phdr() is safe to call */
static unsigned long long snap_adds, snap_subs;

/*
 * What a thread checks its stacks against, without a lock: (bias, loader
 * name) keys of every module known, open addressing, rebuilt under mod_lock
 * inside a sequence count.
 */
static _Atomic uint64_t known[KNOWN_SLOTS];
static _Atomic uint32_t known_seq;

struct sync_ctx {
	uint8_t *out, *end;
	uint64_t now;
	int overflow;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t known_key(uint64_t bias, uint64_t raw_hash)
{
	uint64_t k = (bias ^ raw_hash) * 0x9e3779b97f4a7c15ull;

	return (k ^ (k >> 31)) | 1;
}

static void lock_mods(void)
{
	ht_spin_lock(&mod_lock);
}

/*
 * A program thread waits a bounded time only: the holder may be waiting
 * for the loader's write lock, held by a thread whose dl_iterate_phdr()
 * callback is allocating (and would wait for us here).  0 when taken.
 */
static int lock_mods_bounded(void)
{
	uint64_t end = 0;
	unsigned spins = 0;

	while (atomic_flag_test_and_set_explicit(&mod_lock, memory_order_acquire)) {
		uint64_t now = ht_mono_ns();

		if (!end)
			end = now + 50000000u;	/* 50 ms */
		else if (now >= end)
			return -1;
		ht_backoff(&spins);
	}
	return 0;
}

static void unlock_mods(void)
{
	atomic_flag_clear_explicit(&mod_lock, memory_order_release);
}

/* Under mod_lock. */
static void known_rebuild(void)
{
	unsigned i;

	atomic_fetch_add_explicit(&known_seq, 1, memory_order_relaxed);	/* odd: changing */
	atomic_thread_fence(memory_order_release);
	for (i = 0; i < KNOWN_SLOTS; i++)
		atomic_store_explicit(&known[i], 0, memory_order_relaxed);
	for (i = 0; i < nmods; i++) {
		uint64_t k = known_key(mods[i].bias, mods[i].raw_hash);
		uint32_t j = (uint32_t)(k >> 20) & (KNOWN_SLOTS - 1);

		while (atomic_load_explicit(&known[j], memory_order_relaxed))
			j = (j + 1) & (KNOWN_SLOTS - 1);
		atomic_store_explicit(&known[j], k, memory_order_relaxed);
	}
	atomic_fetch_add_explicit(&known_seq, 1, memory_order_release);	/* even: stable */
}

/* 1 when the object is known for sure; 0 when not, or while the set changes. */
static int known_has(uint64_t bias, uint64_t raw_hash)
{
	uint64_t k = known_key(bias, raw_hash), v;
	uint32_t s = atomic_load_explicit(&known_seq, memory_order_acquire);
	uint32_t j = (uint32_t)(k >> 20) & (KNOWN_SLOTS - 1);
	int found = 0;

	if (s & 1)
		return 0;
	while ((v = atomic_load_explicit(&known[j], memory_order_relaxed)) != 0) {
		if (v == k) {
			found = 1;
			break;
		}
		j = (j + 1) & (KNOWN_SLOTS - 1);
	}
	atomic_thread_fence(memory_order_acquire);
	return found && atomic_load_explicit(&known_seq, memory_order_relaxed) == s;
}

static const char *self_exe(void)
{
	static char path[1024];

	if (!path[0]) {
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

		path[n > 0 ? n : 0] = '\0';
	}
	return path;
}

static size_t build_id(const struct dl_phdr_info *info, const uint8_t **out)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof(*nh);
			const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);

			if (desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && nh->n_descsz <= 64) {
				*out = desc;
				return nh->n_descsz;
			}
			p = desc + ((nh->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

static void extent(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
	int i;

	*lo = UINT64_MAX;
	*hi = 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < *lo)
			*lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > *hi)
			*hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (*lo > *hi)
		*lo = *hi = 0;
}

static void remember(struct module *m, const struct dl_phdr_info *info)
{
	m->name = info->dlpi_name;
	m->phdr = info->dlpi_phdr;
	m->phnum = info->dlpi_phnum;
	m->tls_modid = info->dlpi_tls_modid;
}

static int sync_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct sync_ctx *c = arg;
	const char *name = info->dlpi_name;
	uint64_t h, raw;
	unsigned i, nseg = 0;
	const uint8_t *bid = NULL;
	size_t bid_len, name_len;
	uint8_t *p;

	(void)size;
	last_adds = info->dlpi_adds;
	last_subs = info->dlpi_subs;
	raw = hash_str(name ? name : "");
	if (!name || !name[0])
		name = self_exe();
	h = hash_str(name);
	for (i = 0; i < nmods; i++) {
		if (mods[i].bias == info->dlpi_addr && mods[i].name_hash == h) {
			mods[i].seen = 1;
			remember(&mods[i], info);
			return 0;
		}
	}
	if (nmods >= MAX_MODULES)
		return 0;
	memset(&mods[nmods], 0, sizeof(mods[nmods]));
	mods[nmods].seen = 1;
	mods[nmods].bias = info->dlpi_addr;
	mods[nmods].name_hash = h;
	mods[nmods].raw_hash = raw;
	extent(info, &mods[nmods].lo, &mods[nmods].hi);
	remember(&mods[nmods], info);
	if (!strncmp(name, "linux-vdso", 10)) {
		nmods++;	/* known, never recorded: the analyzer has no file for it */
		return 0;
	}
	name_len = strnlen(name, 1024);
	bid_len = build_id(info, &bid);
	if (c->out + 64 + name_len + bid_len + MAX_SEGS * 20 > c->end) {
		c->overflow = 1;
		return 0;
	}
	mods[nmods].id = next_module_id++;
	p = c->out;
	*p++ = HTR_REC_MODULE_LOAD;
	p = htr_put_u64(p, c->now);
	p = htr_put_u64(p, mods[nmods].id);
	p = htr_put_u64(p, info->dlpi_addr);
	p = htr_put_u64(p, name_len);
	memcpy(p, name, name_len);
	p += name_len;
	p = htr_put_u64(p, bid_len);
	if (bid_len)
		memcpy(p, bid, bid_len);
	p += bid_len;
	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD)
			nseg++;
	if (nseg > MAX_SEGS)
		nseg = MAX_SEGS;
	p = htr_put_u64(p, nseg);
	for (i = 0; i < info->dlpi_phnum && nseg; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		p = htr_put_u64(p, info->dlpi_addr + ph->p_vaddr);
		p = htr_put_u64(p, info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
		nseg--;
	}
	c->out = p;
	nmods++;
	return 0;
}

/* Counters only: tells whether the loader's list changed since last sync. */
static int peek_counters(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(int *)arg = info->dlpi_adds != last_adds || info->dlpi_subs != last_subs;
	return 1;
}

int modules_changed(void)
{
	int changed = 0;

	if (atomic_load(&changed_hint))
		return 1;
	dl_iterate_phdr(peek_counters, &changed);
	return changed;
}

/* State a sync may have to take back (its records could not be queued). */
struct undo {
	unsigned nmods;
	uint32_t next_module_id;
	unsigned long long adds, subs;
};

/*
 * Under mod_lock: walk the loader's list, append LOAD records for new
 * objects and UNLOAD records for objects gone.  Objects gone stay in mods[]
 * (unseen) until apply() or undo().
 */
static size_t build(uint8_t *out, size_t room, uint64_t now, struct undo *u, int *overflow)
{
	struct sync_ctx c = { out, out + room, now, 0 };
	unsigned i;

	u->nmods = nmods;
	u->next_module_id = next_module_id;
	u->adds = last_adds;
	u->subs = last_subs;
	for (i = 0; i < nmods; i++)
		mods[i].seen = 0;
	dl_iterate_phdr(sync_one, &c);
	for (i = 0; i < u->nmods; i++) {
		uint8_t *p = c.out;

		if (mods[i].seen || !mods[i].id)
			continue;
		if (c.out + 24 > c.end) {
			c.overflow = 1;
			mods[i].seen = 1;	/* no room for its record: next time */
			continue;
		}
		*p++ = HTR_REC_MODULE_UNLOAD;
		p = htr_put_u64(p, now);
		p = htr_put_u64(p, mods[i].id);
		c.out = p;
	}
	*overflow = c.overflow;
	return (size_t)(c.out - out);
}

static void new_epoch(void)
{
	stacks_new_epoch();
	atomic_fetch_add(&epoch_moves, 1);
	nretired = 0;
}

static void retire(const struct module *m)
{
	if (!m->id)
		return;
	if (nretired == MAX_RETIRED)
		new_epoch();	/* too many to compare with: forget them all, once */
	retired[nretired++] = (struct retired){ m->lo, m->hi, m->bias, m->name_hash };
}

/*
 * Does a newly seen module lie where a different unloaded one was?  Then
 * stacks with those addresses must get new ids.  The same library again at
 * the same place is the same code: its old stacks stay valid.
 */
static int reuses_addresses(const struct module *m)
{
	int other = 0;
	unsigned i, j;

	for (i = j = 0; i < nretired; i++) {
		const struct retired *r = &retired[i];

		if (r->hi <= m->lo || r->lo >= m->hi) {
			retired[j++] = *r;
			continue;
		}
		if (r->bias != m->bias || r->name_hash != m->name_hash)
			other = 1;
		/* overlapped: it is no longer what lies there */
	}
	nretired = j;
	return other;
}

/* Under mod_lock: the records are on their way; make the state say so. */
static void apply(const struct undo *u, int overflow)
{
	unsigned i, j;
	int moved = 0;

	for (i = j = 0; i < nmods; i++) {
		if (!mods[i].seen) {
			retire(&mods[i]);
			continue;
		}
		mods[j++] = mods[i];
	}
	nmods = j;
	for (i = 0; i < nmods; i++)
		if (mods[i].id >= u->next_module_id)	/* recorded just now */
			moved |= reuses_addresses(&mods[i]);
	if (moved)
		new_epoch();
	known_rebuild();
	atomic_store(&changed_hint, overflow);
}

/* Under mod_lock: as if build() had not run. */
static void undo(const struct undo *u)
{
	unsigned i;

	nmods = u->nmods;
	next_module_id = u->next_module_id;
	last_adds = u->adds;
	last_subs = u->subs;
	for (i = 0; i < nmods; i++)
		mods[i].seen = 1;
	atomic_store(&changed_hint, 1);
}

/* The writer, into its own frame: always delivered. */
size_t modules_sync(uint8_t *out, size_t room, uint64_t now)
{
	struct undo u;
	int overflow;
	size_t len;

	lock_mods();
	len = build(out, room, now, &u, &overflow);
	apply(&u, overflow);
	unlock_mods();
	return len;
}

/*
 * A program thread, holding its buffer BUSY: the records go through the
 * writer's queue.  0 when the list is in the dump (or nothing changed).
 */
static int sync_from_thread(void)
{
	static uint8_t scratch[192u << 10];	/* under mod_lock */
	struct undo u;
	int overflow, changed = 0, ret = 0;
	size_t len;

	if (lock_mods_bounded() != 0)
		return 0;	/* busy a long time: the writer's next round */
	dl_iterate_phdr(peek_counters, &changed);
	if (!changed && !atomic_load(&changed_hint)) {
		unlock_mods();
		return 0;
	}
	len = build(scratch, sizeof(scratch), ht_now(), &u, &overflow);
	if (len && writer_top_record(scratch, len) != 0) {
		undo(&u);	/* the queue is full: nothing was said, nothing is known */
		ret = -1;
	} else {
		apply(&u, overflow);
	}
	unlock_mods();
	return ret;
}

/*
 * Is every address of a stack inside a module the dump knows?  Called for
 * new stacks only.  Returns 1 when the stack epoch moved (the caller hashes
 * again).
 */
/*
 * Link maps this thread found known lately, with the set's sequence count
 * then: hashing a module's name again costs more than the rest of a check.
 */
#define MEMO 4
static __thread struct link_map *memo_lm[MEMO];
static __thread uint32_t memo_seq[MEMO];
static __thread unsigned memo_next;

static int known_map(struct link_map *lm)
{
	uint32_t seq = atomic_load_explicit(&known_seq, memory_order_acquire);
	unsigned k;

	for (k = 0; k < MEMO; k++)
		if (memo_lm[k] == lm && memo_seq[k] == seq)
			return 1;
	if (!known_has(lm->l_addr, hash_str(lm->l_name ? lm->l_name : "")))
		return 0;
	memo_lm[memo_next] = lm;
	memo_seq[memo_next] = seq;
	memo_next = (memo_next + 1) % MEMO;
	return 1;
}

int modules_check_stack(const uintptr_t *ips, unsigned n)
{
	uintptr_t lo = 0, hi = 0;
	unsigned i, moves;
	int tries;

	if (!atomic_load_explicit(&trusted, memory_order_relaxed))
		return 0;	/* a forked child living on its parent's list */
	for (i = 0; i < n; i++) {
		struct dl_find_object fo;
		struct link_map *lm;
		uintptr_t a = ips[i] - 1;	/* the call, not the return address */

		if (a >= lo && a < hi)
			continue;
		if (_dl_find_object((void *)a, &fo) != 0)
			continue;	/* not in an object: generated code */
		lo = (uintptr_t)fo.dlfo_map_start;
		hi = (uintptr_t)fo.dlfo_map_end;
		lm = fo.dlfo_link_map;
		if (!lm || known_map(lm))
			continue;
		break;
	}
	if (i == n)
		return 0;
	moves = atomic_load(&epoch_moves);
	/*
	 * Queue full: let the writer take the records in its own round
	 * (dated before our event, which reads its time after this), and wait
	 * a little for it; on failure this event's new frames stay unnamed.
	 */
	for (tries = 0; sync_from_thread() != 0 && tries < 100; tries++) {
		struct timespec ms = { 0, 1000000 };

		writer_wake();
		nanosleep(&ms, NULL);
		if (!atomic_load(&changed_hint))
			break;	/* the writer synced meanwhile */
	}
	return atomic_load(&epoch_moves) != moves;
}

void modules_note_change(void)
{
	atomic_store(&changed_hint, 1);
}

int modules_init(void)
{
	return 0;
}

/* ---- forked children: the loader's lock may be held by nobody alive ---- */

int modules_loader_trusted(void)
{
	return atomic_load_explicit(&trusted, memory_order_relaxed);
}

/* The program got through a real dl_iterate_phdr(): the lock is not orphaned. */
void modules_loader_proven(void)
{
	if (!atomic_load_explicit(&trusted, memory_order_relaxed)) {
		atomic_store(&trusted, 1);
		atomic_store(&changed_hint, 1);	/* the writer looks at the real list */
	}
}

/* dl_iterate_phdr() from the parent's list (the shim's calls, untrusted child). */
int modules_iterate_snapshot(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < nsnap && !ret; i++) {
		struct dl_phdr_info info;

		memset(&info, 0, sizeof(info));
		info.dlpi_addr = snap[i].bias;
		info.dlpi_name = snap[i].name;
		info.dlpi_phdr = snap[i].phdr;
		info.dlpi_phnum = snap[i].phnum;
		info.dlpi_adds = snap_adds;
		info.dlpi_subs = snap_subs;
		info.dlpi_tls_modid = snap[i].tls_modid;
		info.dlpi_tls_data = NULL;
		ret = cb(&info, sizeof(info), data);
	}
	return ret;
}

/*
 * A forked child (only this thread exists).  loader_idle: no thread was
 * inside the loader at the fork, so the real dl_iterate_phdr() is safe.
 * Otherwise keep the parent's list, less what the child no longer has
 * (checked with the lock-free _dl_find_object()), to serve our lookups.
 */
/* Is every page of [lo, hi) mapped?  mincore() says ENOMEM where not; no fault. */
static int mapped(uint64_t lo, uint64_t hi)
{
	static unsigned char vec[4096];
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), chunk = page * sizeof(vec);

	lo &= ~(page - 1);
	while (lo < hi) {
		uint64_t len = hi - lo < chunk ? hi - lo : chunk;

		if (mincore((void *)lo, len, vec) != 0)
			return 0;
		lo += len;
	}
	return 1;
}

void modules_after_fork(int loader_idle)
{
	unsigned i;

	atomic_flag_clear(&mod_lock);
	nsnap = 0;
	for (i = 0; i < nmods; i++) {
		struct dl_find_object fo;
		const struct module *m = &mods[i];

		/*
		 * Gone, or being loaded or unloaded at the fork: libunwind
		 * reads what we hand it, so all of it must be there.
		 */
		if (!m->hi || _dl_find_object((void *)m->lo, &fo) != 0 ||
		    !fo.dlfo_link_map || fo.dlfo_link_map->l_addr != m->bias ||
		    !m->phdr || !mapped(m->lo, m->hi) ||
		    !mapped((uint64_t)m->phdr, (uint64_t)(m->phdr + m->phnum)))
			continue;
		snap[nsnap] = *m;
		snap[nsnap++].name = fo.dlfo_link_map->l_name;	/* the live one */
	}
	snap_adds = last_adds;
	snap_subs = last_subs;
	/* the child's dump has recorded nothing yet: every module is new to it */
	nmods = 0;
	next_module_id = 1;
	nretired = 0;
	last_adds = last_subs = 0;
	known_rebuild();
	atomic_store(&trusted, loader_idle);
	atomic_store(&changed_hint, 1);
}
