/* modules.c - tracks loaded objects (path, build-id, ranges) for the dump */
#include <elf.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

/*
 * The loader's list is compared with what was last written; each object seen
 * for the first time gets a MODULE_LOAD record, each one gone a MODULE_UNLOAD
 * (and a new stack epoch: its addresses may now belong to other code).
 * Called by the writer every interval and by the thread that returns from
 * dlopen/dlclose, so a library's records precede its first allocations.
 */

#define MAX_MODULES 4096
#define MAX_SEGS 8

struct module {
	uint32_t id;
	int seen;
	uint64_t bias;
	uint64_t name_hash;
};

static struct module mods[MAX_MODULES];
static unsigned nmods;
static uint32_t next_module_id = 1;
static atomic_flag mod_lock = ATOMIC_FLAG_INIT;
static unsigned long long last_adds, last_subs;
static _Atomic int changed_hint = 1;

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

static int sync_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct sync_ctx *c = arg;
	const char *name = info->dlpi_name;
	uint64_t h;
	unsigned i, nseg = 0;
	const uint8_t *bid = NULL;
	size_t bid_len, name_len;
	uint8_t *p;

	(void)size;
	last_adds = info->dlpi_adds;
	last_subs = info->dlpi_subs;
	if (!name || !name[0])
		name = self_exe();
	if (!strncmp(name, "linux-vdso", 10))
		return 0;
	h = hash_str(name);
	for (i = 0; i < nmods; i++) {
		if (mods[i].bias == info->dlpi_addr && mods[i].name_hash == h &&
		    mods[i].id) {
			mods[i].seen = 1;
			return 0;
		}
	}
	if (nmods >= MAX_MODULES)
		return 0;
	name_len = strnlen(name, 1024);
	bid_len = build_id(info, &bid);
	if (c->out + 64 + name_len + bid_len + MAX_SEGS * 20 > c->end) {
		c->overflow = 1;
		return 0;
	}
	mods[nmods].id = next_module_id++;
	mods[nmods].seen = 1;
	mods[nmods].bias = info->dlpi_addr;
	mods[nmods].name_hash = h;
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

size_t modules_sync(uint8_t *out, size_t room, uint64_t now)
{
	struct sync_ctx c = { out, out + room, now, 0 };
	unsigned i, j;

	while (atomic_flag_test_and_set_explicit(&mod_lock, memory_order_acquire))
		sched_yield();
	for (i = 0; i < nmods; i++)
		mods[i].seen = 0;
	dl_iterate_phdr(sync_one, &c);
	for (i = j = 0; i < nmods; i++) {
		if (!mods[i].seen && c.out + 24 <= c.end) {
			uint8_t *p = c.out;

			*p++ = HTR_REC_MODULE_UNLOAD;
			p = htr_put_u64(p, now);
			p = htr_put_u64(p, mods[i].id);
			c.out = p;
			stacks_new_epoch();
			continue;
		}
		if (!mods[i].seen)
			c.overflow = 1;	/* no room for its record: next time */
		mods[j++] = mods[i];
	}
	nmods = j;
	atomic_store(&changed_hint, c.overflow);
	atomic_flag_clear_explicit(&mod_lock, memory_order_release);
	return (size_t)(c.out - out);
}

void modules_note_change(void)
{
	atomic_store(&changed_hint, 1);
}

int modules_init(void)
{
	return 0;
}

void modules_reset_after_fork(void)
{
	atomic_flag_clear(&mod_lock);
	nmods = 0;
	next_module_id = 1;
	atomic_store(&changed_hint, 1);
}
