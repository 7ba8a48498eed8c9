/* sampler.c - periodic process samples: RSS and the allocator's own figures */
#include <malloc.h>
#include <unistd.h>

#include "shim.h"

/* read every round: kept open (keptfile.c) */
static struct ht_kept_file statm = HT_KEPT_FILE("/proc/self/statm");

void sampler_open(int above)
{
	/* a forked child's copy reads its parent's figures: open our own */
	kept_file_open(&statm, above);
}

static uint64_t rss_bytes(void)
{
	char buf[128];
	ssize_t n = kept_file_read(&statm, buf, sizeof(buf));
	uint64_t pages = 0;
	int field = 0;
	ssize_t i;

	if (n <= 0)
		return 0;
	/* "size resident shared ...": the second field. */
	for (i = 0; i < n; i++) {
		if (buf[i] == ' ') {
			if (++field == 2)
				break;
			continue;
		}
		if (field == 1 && buf[i] >= '0' && buf[i] <= '9')
			pages = pages * 10 + (uint64_t)(buf[i] - '0');
	}
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * fresh: the allocator's figures just read with mallinfo2(), or NULL to
 * repeat the previous sample's: the final sample is taken when a thread may
 * have died (or be stuck in a signal handler) holding an arena lock, and
 * mallinfo2() would wait for it forever.
 */
size_t sampler_record(uint8_t *out, size_t room, uint64_t now,
		      const struct mallinfo2 *fresh)
{
	static struct mallinfo2 last;
	struct mallinfo2 mi;
	uint8_t *p = out;

	if (fresh)
		last = *fresh;
	mi = last;
	if (room < 8 * HTR_VARINT_MAX + 1)
		return 0;
	*p++ = HTR_REC_SAMPLE;
	p = htr_put_u64(p, now);
	p = htr_put_u64(p, rss_bytes());
	p = htr_put_u64(p, mi.arena);
	p = htr_put_u64(p, mi.hblkhd);
	p = htr_put_u64(p, mi.uordblks);
	p = htr_put_u64(p, mi.fordblks);
	p = htr_put_u64(p, mi.keepcost);
	p = htr_put_u64(p, region_total_used());
	return (size_t)(p - out);
}
