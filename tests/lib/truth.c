/* truth.c - ground-truth bookkeeping for test targets, without allocating */
#include "truth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_SITES 512
#define MAX_CALLERS 16
#define MAX_FACTS 32
#define PTR_SLOTS (1u << 17)	/* live blocks tracked at once, at most half of this */

struct site {
	const char *function;
	const char *file;
	int line;
	unsigned long long allocations, allocated_bytes;
	unsigned long long live_bytes, live_blocks;
};

struct slot {
	uintptr_t ptr;		/* 0 = empty */
	size_t size;
	int site;
};

struct fact {
	const char *key;
	long long value;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct site sites[MAX_SITES];
static int nsites;
static struct slot slots[PTR_SLOTS];
static const char *callers[MAX_CALLERS];
static int ncallers;
static struct fact facts[MAX_FACTS];
static int nfacts;
static int exact_totals = 1, peak_exact = 1;
static unsigned long long allocations, frees, reallocs, allocated_bytes;
static unsigned long long live_bytes, live_blocks, peak_live_bytes;
static int overflow;		/* a table filled up: the truth is void */

void *volatile truth_sink;

/*
 * Addresses are kept xor'ed with this (never a user-space address), so
 * that the table does not make the blocks reachable to a conservative
 * pointer scan (HEAPTRAIL_REACH, LeakSanitizer, memcheck).
 */
#define HIDE ((uintptr_t)0xa5a5a5a5a5a5a5a0ull)

static unsigned hash_ptr(uintptr_t p)
{
	return (unsigned)(((p >> 4) * 0x9e3779b97f4a7c15ull) >> 47) & (PTR_SLOTS - 1);
}

static int site_index(const char *function, const char *file, int line)
{
	int i;

	for (i = 0; i < nsites; i++)
		if (sites[i].line == line && strcmp(sites[i].function, function) == 0 &&
		    strcmp(sites[i].file, file) == 0)
			return i;
	if (nsites == MAX_SITES) {
		overflow = 1;
		return -1;
	}
	sites[nsites].function = function;
	sites[nsites].file = file;
	sites[nsites].line = line;
	return nsites++;
}

static void add_block(uintptr_t p, size_t size, int site)
{
	unsigned i = hash_ptr(p ^= HIDE);

	while (slots[i].ptr) {
		if (slots[i].ptr == p) {
			/* The program counted a block twice: its truth is wrong. */
			overflow = 1;
			return;
		}
		i = (i + 1) & (PTR_SLOTS - 1);
	}
	slots[i].ptr = p;
	slots[i].size = size;
	slots[i].site = site;
}

/* Linear probing with backward-shift deletion: no tombstones pile up. */
static int remove_block(uintptr_t p, struct slot *out)
{
	unsigned i = hash_ptr(p ^= HIDE), j, k;

	while (slots[i].ptr != p) {
		if (!slots[i].ptr)
			return -1;
		i = (i + 1) & (PTR_SLOTS - 1);
	}
	*out = slots[i];
	j = i;
	for (;;) {
		j = (j + 1) & (PTR_SLOTS - 1);
		if (!slots[j].ptr)
			break;
		k = hash_ptr(slots[j].ptr);
		/* Move slots[j] into the hole at i unless its home lies in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			slots[i] = slots[j];
			i = j;
		}
	}
	slots[i].ptr = 0;
	return 0;
}

static void track_locked(void *p, size_t size, const char *function,
			 const char *file, int line)
{
	int s = site_index(function, file, line);

	if (s < 0)
		return;
	allocations++;
	allocated_bytes += size;
	live_bytes += size;
	live_blocks++;
	if (live_bytes > peak_live_bytes)
		peak_live_bytes = live_bytes;
	sites[s].allocations++;
	sites[s].allocated_bytes += size;
	sites[s].live_bytes += size;
	sites[s].live_blocks++;
	add_block((uintptr_t)p, size, s);
}

static void untrack_locked(void *p)
{
	struct slot b;

	if (remove_block((uintptr_t)p, &b) < 0) {
		/* Freeing a block the program never counted: its truth is wrong. */
		overflow = 1;
		return;
	}
	live_bytes -= b.size;
	live_blocks--;
	sites[b.site].live_bytes -= b.size;
	sites[b.site].live_blocks--;
}

void *truth_track_in(void *p, size_t size, const char *function,
		     const char *file, int line)
{
	int saved = errno;

	if (!p)
		return p;
	pthread_mutex_lock(&lock);
	track_locked(p, size, function, file, line);
	pthread_mutex_unlock(&lock);
	errno = saved;
	return p;
}

void *truth_track(void *p, size_t size, const char *function, int line)
{
	return truth_track_in(p, size, function, "", line);
}

void truth_untrack(void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&lock);
	untrack_locked(p);
	frees++;
	pthread_mutex_unlock(&lock);
}

void truth_free(void *p)
{
	truth_untrack(p);
	free(p);
}

void *truth_realloc_in(uintptr_t old, void *r, size_t size,
		       const char *function, const char *file, int line)
{
	pthread_mutex_lock(&lock);
	if (old && r) {
		/* Moved or resized: one allocation, the old block released. */
		untrack_locked((void *)old);
		reallocs++;
	} else if (old && size == 0) {
		/* glibc's realloc(p, 0) frees p and returns NULL. */
		untrack_locked((void *)old);
		frees++;
	}
	if (r)
		track_locked(r, size, function, file, line);
	pthread_mutex_unlock(&lock);
	return r;
}

void truth_runtime_caller(const char *function)
{
	pthread_mutex_lock(&lock);
	if (ncallers < MAX_CALLERS)
		callers[ncallers++] = function;
	else
		overflow = 1;
	pthread_mutex_unlock(&lock);
}

void truth_set_exact(int exact, int peak)
{
	exact_totals = exact;
	peak_exact = peak;
}

void truth_fact(const char *key, long long value)
{
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < nfacts; i++)
		if (strcmp(facts[i].key, key) == 0)
			break;
	if (i == MAX_FACTS) {
		overflow = 1;
	} else {
		facts[i].key = key;
		facts[i].value = value;
		if (i == nfacts)
			nfacts++;
	}
	pthread_mutex_unlock(&lock);
}

void truth_reset(void)
{
	/*
	 * Called in a forked child: the lock may have been held by another
	 * thread at fork time, so start from a fresh one.
	 */
	pthread_mutex_init(&lock, NULL);
	memset(sites, 0, sizeof(sites));
	memset(slots, 0, sizeof(slots));
	nsites = ncallers = nfacts = 0;
	allocations = frees = reallocs = allocated_bytes = 0;
	live_bytes = live_blocks = peak_live_bytes = 0;
	overflow = 0;
}

size_t truth_live_bytes(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = live_bytes;
	pthread_mutex_unlock(&lock);
	return n;
}

static char out[1 << 16];
static size_t outlen;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (outlen >= sizeof(out))
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + outlen, sizeof(out) - outlen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(out) - outlen) {
		outlen = sizeof(out);
		overflow = 1;
	} else {
		outlen += (size_t)n;
	}
}

/* Names are C identifiers and paths; escape what JSON requires anyway. */
static void emit_str(const char *s)
{
	emit("\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			emit("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			emit("\\u%04x", *s);
		else
			emit("%c", *s);
	}
	emit("\"");
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

int truth_write(void)
{
	const char *path = getenv("TRUTH_OUT");
	int i, fd, ret = 0, saved = errno;

	if (!path || !*path)
		return 0;
	pthread_mutex_lock(&lock);
	outlen = 0;
	emit("{\"pid\":%d,\"ppid\":%d,\"image\":", (int)getpid(), (int)getppid());
	emit_str(program_invocation_short_name);
	emit(",\"exact_totals\":%s,\"peak_exact\":%s,\"valid\":%s",
	     exact_totals ? "true" : "false", peak_exact ? "true" : "false",
	     overflow ? "false" : "true");
	emit(",\"allocations\":%llu,\"frees\":%llu,\"reallocs\":%llu"
	     ",\"allocated_bytes\":%llu,\"leaked_bytes\":%llu"
	     ",\"leaked_blocks\":%llu,\"peak_live_bytes\":%llu",
	     allocations, frees, reallocs, allocated_bytes, live_bytes,
	     live_blocks, peak_live_bytes);
	emit(",\"runtime_callers\":[");
	for (i = 0; i < ncallers; i++) {
		emit(i ? "," : "");
		emit_str(callers[i]);
	}
	emit("],\"facts\":{");
	for (i = 0; i < nfacts; i++) {
		emit(i ? "," : "");
		emit_str(facts[i].key);
		emit(":%lld", facts[i].value);
	}
	emit("},\"sites\":[");
	for (i = 0; i < nsites; i++) {
		emit(i ? "," : "");
		emit("{\"function\":");
		emit_str(sites[i].function);
		emit(",\"file\":");
		emit_str(base_name(sites[i].file));
		emit(",\"line\":%d,\"allocations\":%llu,\"allocated_bytes\":%llu"
		     ",\"leaked_bytes\":%llu,\"leaked_blocks\":%llu}",
		     sites[i].line, sites[i].allocations,
		     sites[i].allocated_bytes, sites[i].live_bytes,
		     sites[i].live_blocks);
	}
	emit("]}\n");
	/* One write with O_APPEND: lines of several processes never mix. */
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, out, outlen) != (ssize_t)outlen)
		ret = -1;
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&lock);
	if (!ret)
		errno = saved;
	return ret;
}
