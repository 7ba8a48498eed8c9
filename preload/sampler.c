/* sampler.c - periodic process samples: RSS and the allocator's own figures */
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

/*
 * /proc/self/statm stays open, at a high number, and is read with pread():
 * opening it each round would take the lowest free descriptor for a moment,
 * which a program thread may be about to get from open() or dup() (and
 * POSIX promises it that number).  Its identity is checked before each
 * read: a program may have closed it (closefrom) and reused the number.
 */
static int statm_fd = -1;
static dev_t statm_dev;
static ino_t statm_ino;

static int statm_ours(void)
{
	struct stat st;

	return statm_fd >= 0 && fstat(statm_fd, &st) == 0 && st.st_dev == statm_dev &&
	       st.st_ino == statm_ino;
}

void sampler_open(int above)
{
	struct stat st;
	int f, nf;

	/* a forked child's copy reads its parent's figures: let it go */
	if (statm_ours())
		close(statm_fd);
	statm_fd = -1;
	f = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return;
	nf = above > 3 ? fcntl(f, F_DUPFD_CLOEXEC, above) : -1;
	if (nf >= 0) {
		close(f);
		f = nf;
	}
	if (fstat(f, &st) != 0) {
		close(f);
		return;
	}
	statm_fd = f;
	statm_dev = st.st_dev;
	statm_ino = st.st_ino;
}

static uint64_t rss_bytes(void)
{
	char buf[128];
	ssize_t n;
	uint64_t pages = 0;
	int field = 0;
	ssize_t i;

	if (!statm_ours())
		sampler_open(statm_fd >= 0 ? statm_fd : 0);
	if (statm_fd < 0)
		return 0;
	n = pread(statm_fd, buf, sizeof(buf) - 1, 0);
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
