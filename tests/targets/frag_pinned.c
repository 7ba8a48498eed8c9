/* frag_pinned.c - frees most of a large heap but keeps small blocks between the freed ones */
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'heaptrail frag' names the sites whose few small live blocks pin
 * a large freed heap, with pinned bytes close to what glibc itself says,
 * and its ladder agrees with mallinfo2() and /proc/self/statm at the same
 * moments.
 *
 * Two phases fill the brk heap: keep_dense puts a 64-byte keeper after
 * every 4000-byte temporary (4 KiB apart: every page keeps a live block,
 * so even malloc_trim(0) returns nothing), keep_sparse one after every
 * 60000-byte temporary (whole free pages between keepers: malloc_trim can
 * return them, free() cannot).  A 1 MiB block is mmapped and stays live.
 * Then every temporary is freed.
 *
 * Truth, from glibc at the markers (single-threaded, nothing allocates
 * between a marker and the figures taken after it):
 *   mark "freed":   mallinfo2 and statm; fordblks - keepcost are the free
 *                   bytes below the top of the heap: the pinned bytes.
 *   malloc_trim(0), then mark "trimmed": mallinfo2 and statm again; the
 *   RSS that trimming returned is the part of the pinned bytes that lay in
 *   whole free pages; the rest sits on pages with live blocks.
 * Per site: the chunk bytes (usable size + 8) of the temporaries freed
 * right below its keepers.  The program sleeps after "freed" so that a
 * sample is taken before anything changes, and exits right after
 * "trimmed" (the shim's last sample is taken at exit).
 */

#define noinline __attribute__((noinline))

#define NDENSE 12000
#define NSPARSE 1200
#define DENSE_TEMP 4000
#define SPARSE_TEMP 60000
#define KEEP 64

static void *dense_tmp[NDENSE], *dense_keep[NDENSE];
static void *sparse_tmp[NSPARSE], *sparse_keep[NSPARSE];

static long long rss_now(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n;
	long long pages = 0;
	char *p;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strchr(buf, ' ');
	if (!p)
		return -1;
	pages = strtoll(p + 1, NULL, 10);
	return pages * sysconf(_SC_PAGESIZE);
}

static noinline void *temp_block(size_t n)
{
	void *p = T_MALLOC(n);

	memset(p, 't', n);
	return p;
}

static noinline void *keep_dense(void)
{
	void *p = T_MALLOC(KEEP);

	memset(p, 'd', KEEP);
	return p;
}

static noinline void *keep_sparse(void)
{
	void *p = T_MALLOC(KEEP);

	memset(p, 's', KEEP);
	return p;
}

static noinline void *big_mapping(void)
{
	void *p = T_MALLOC(1 << 20);

	memset(p, 'b', 1 << 20);
	return p;
}

/* mallinfo2 and RSS now, as facts named PREFIX_... */
static void take(const char *arena, const char *hblkhd, const char *uord,
		 const char *ford, const char *keep, const char *rss)
{
	struct mallinfo2 mi = mallinfo2();
	long long r = rss_now();

	truth_fact(arena, (long long)mi.arena);
	truth_fact(hblkhd, (long long)mi.hblkhd);
	truth_fact(uord, (long long)mi.uordblks);
	truth_fact(ford, (long long)mi.fordblks);
	truth_fact(keep, (long long)mi.keepcost);
	truth_fact(rss, r);
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0)
		;
}

int main(int argc, char **argv)
{
	long long dense_freed = 0, sparse_freed = 0;
	struct mallinfo2 a;
	long long rss_freed, rss_trimmed;
	void *big;
	int i;

	heaptrail_mark("start");	/* looks the shim up before the heap work */
	/* keep glibc from moving the mmap threshold or trimming on its own */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	for (i = 0; i < NDENSE; i++) {
		dense_tmp[i] = temp_block(DENSE_TEMP);
		dense_keep[i] = keep_dense();
	}
	for (i = 0; i < NSPARSE; i++) {
		sparse_tmp[i] = temp_block(SPARSE_TEMP);
		sparse_keep[i] = keep_sparse();
	}
	big = big_mapping();
	truth_sink = big;
	for (i = 0; i < NDENSE; i++) {
		dense_freed += (long long)malloc_usable_size(dense_tmp[i]) + 8;
		T_FREE(dense_tmp[i]);
	}
	for (i = 0; i < NSPARSE; i++) {
		sparse_freed += (long long)malloc_usable_size(sparse_tmp[i]) + 8;
		T_FREE(sparse_tmp[i]);
	}

	heaptrail_mark("freed");
	take("freed_arena", "freed_hblkhd", "freed_uordblks", "freed_fordblks",
	     "freed_keepcost", "freed_rss");
	a = mallinfo2();
	rss_freed = rss_now();
	pause_ms(argc > 1 ? atol(argv[1]) : 300);

	malloc_trim(0);
	rss_trimmed = rss_now();
	heaptrail_mark("trimmed");
	take("trimmed_arena", "trimmed_hblkhd", "trimmed_uordblks", "trimmed_fordblks",
	     "trimmed_keepcost", "trimmed_rss");

	truth_fact("pinned_bytes", (long long)(a.fordblks - a.keepcost));
	/* what trimming could not return: on pages that hold live blocks */
	truth_fact("pinned_page_bytes",
		   (long long)(a.fordblks - a.keepcost) - (rss_freed - rss_trimmed));
	truth_fact("trim_returned_bytes", rss_freed - rss_trimmed);
	truth_fact("dense_freed_bytes", dense_freed);
	truth_fact("sparse_freed_bytes", sparse_freed);
	truth_fact("live_bytes", (long long)truth_live_bytes());
	truth_fact("page_size", sysconf(_SC_PAGESIZE));
	truth_write();
	return 0;
}
