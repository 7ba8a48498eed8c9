/* sympool.c - opened modules kept from one symbolizer for the next (symbolize.c) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sympool.h"

/*
 * An analyzer that reads many dumps one after another (the gate over a CI
 * run, one dump per process; 'growth --follow', a symbolizer a pass)
 * inflated the compressed DWARF of libc anew for every dump, about 45 ms.
 * A module is kept when a symbolizer is done with it if:
 *
 * - its debug info was found: one that was not is opened again next time,
 *   in case a debug file has appeared meanwhile;
 * - an earlier symbolizer had the same file too (the keys of the last
 *   SEEN_MAX are remembered): a module used once, such as each of the
 *   many programs of a test suite, would only hold its debug info, which
 *   can be tens of MB;
 * - it is among the KEEP_MAX put last.
 *
 * It is taken again only for the same file, unchanged (path, device,
 * inode, size, mtime), with the build-id the dump recorded.
 */
#define KEEP_MAX 16
#define SEEN_MAX 256

struct kept {
	struct modinfo mi;
	struct kept *next;
};

struct seen {
	char *path;
	struct stat st;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;	/* put last first */
static size_t nkept;
static struct seen seen[SEEN_MAX];
static size_t seen_next;

/* HEAPTRAIL__SYMPOOL_TRACE (tests only): a line on stderr for each module kept or taken. */
static void trace(const char *what, const char *path)
{
	static int on = -1;

	if (on < 0)
		on = getenv("HEAPTRAIL__SYMPOOL_TRACE") != NULL;
	if (on)
		fprintf(stderr, "heaptrail: sympool: %s %s\n", what, path);
}

void modinfo_end(struct modinfo *mi)
{
	if (mi->dwfl)
		dwfl_end(mi->dwfl);
	free(mi->ranges);
	free(mi->path);
	memset(mi, 0, sizeof(*mi));
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int sympool_take(const struct dump_module *dm, const struct stat *st, struct modinfo *out)
{
	struct kept **pp, *p;

	pthread_mutex_lock(&lock);
	for (pp = &kept; (p = *pp); pp = &p->next) {
		if (strcmp(p->mi.path, dm->path) || !same_file(&p->mi.st, st))
			continue;
		if (dm->build_id_len && (dm->build_id_len != p->mi.build_id_len ||
					 memcmp(dm->build_id, p->mi.build_id, dm->build_id_len)))
			continue;
		*pp = p->next;
		nkept--;
		trace("taken", p->mi.path);
		pthread_mutex_unlock(&lock);
		*out = p->mi;
		free(p);
		return 1;
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Was this file had before?  Remembers it either way (a ring).  Under the lock. */
static int seen_before(const struct modinfo *mi)
{
	struct seen *e;
	size_t i;

	for (i = 0; i < SEEN_MAX; i++)
		if (seen[i].path && !strcmp(seen[i].path, mi->path) &&
		    same_file(&seen[i].st, &mi->st))
			return 1;
	e = &seen[seen_next];
	seen_next = (seen_next + 1) % SEEN_MAX;
	free(e->path);
	e->path = strdup(mi->path);	/* NULL when out of memory: not remembered */
	e->st = mi->st;
	return 0;
}

/* Its DWARF, in the file or a separate one (looked for already: the module was used). */
static int has_debug_info(struct modinfo *mi)
{
	Dwarf_Addr bias;

	return dwfl_module_getdwarf(mi->mod, &bias) != NULL;
}

void sympool_put(struct modinfo *mi)
{
	struct kept *p = NULL, *old = NULL, **pp;

	if (!mi->dwfl || !mi->path || !has_debug_info(mi)) {
		modinfo_end(mi);
		return;
	}
	pthread_mutex_lock(&lock);
	if (seen_before(mi) && (p = malloc(sizeof(*p)))) {
		p->mi = *mi;
		memset(mi, 0, sizeof(*mi));
		p->next = kept;
		kept = p;
		trace("kept", p->mi.path);
		if (++nkept > KEEP_MAX) {
			for (pp = &kept; (*pp)->next; pp = &(*pp)->next)
				;
			old = *pp;
			*pp = NULL;
			nkept--;
		}
	}
	pthread_mutex_unlock(&lock);
	if (!p)
		modinfo_end(mi);
	if (old) {
		modinfo_end(&old->mi);
		free(old);
	}
}
