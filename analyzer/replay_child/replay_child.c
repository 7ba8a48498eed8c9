/* replay_child.c - heaptrail-replay-child: replays an operation stream on whatever malloc it has */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HT_REPLAY_CHILD
#include "../../common/htr_varint.h"
#include "../replay_ops.h"

/*
 * Usage: heaptrail-replay-child OPS-FILE   (run by 'heaptrail replay')
 *
 * Performs the operations of OPS-FILE (replay_ops.h) with malloc, calloc,
 * realloc, posix_memalign and free: glibc's, or those of the allocator
 * library in LD_PRELOAD.  Each block is written once per page, as a program
 * would fill it, so that its pages become resident.  Prints, one "key value"
 * per line on stdout:
 *
 *   malloc_from      the file that provides malloc (to check the preload)
 *   baseline_rss     RSS before the first operation (bytes)
 *   peak_rss         the highest RSS: VmHWM, or the highest sampled
 *   final_rss        RSS after the last operation, the last live blocks kept
 *   ops, failed      operations done, allocations that returned NULL
 *
 * Its own memory never comes from malloc: the slot table is mmapped, the
 * read buffer static, the output formatted into a stack buffer.
 */

#define BUF_SIZE (1u << 20)

static unsigned char buf[BUF_SIZE];
static long page;

static void die(const char *what, const char *why)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "heaptrail-replay-child: %s: %s\n", what, why);

	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(2);
}

static unsigned long long rss_now(void)
{
	char b[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *sp;

	if (fd < 0)
		return 0;
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	b[n] = 0;
	sp = strchr(b, ' ');
	return sp ? strtoull(sp + 1, NULL, 10) * (unsigned long long)page : 0;
}

/* VmHWM from /proc/self/status: the kernel's own high-water mark of RSS. */
static unsigned long long hwm_now(void)
{
	static char b[8192];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;
	char *p;

	if (fd < 0)
		return 0;
	while (got < (ssize_t)sizeof(b) - 1 &&
	       (n = read(fd, b + got, sizeof(b) - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	b[got] = 0;
	p = strstr(b, "VmHWM:");
	return p ? strtoull(p + 6, NULL, 10) * 1024ull : 0;
}

/* One write per page makes the block resident, as a program filling it would. */
static void touch(unsigned char *p, unsigned long long size)
{
	unsigned long long off;

	if (!p || !size)
		return;
	for (off = 0; off < size; off += (unsigned long long)page)
		p[off] = (unsigned char)off;
	p[size - 1] = 1;
}

struct input {
	int fd;
	size_t len, pos;
	int eof;
};

/* Makes at least 'want' bytes available unless the file ends first. */
static void fill(struct input *in, size_t want)
{
	ssize_t n;

	if (in->len - in->pos >= want || in->eof)
		return;
	memmove(buf, buf + in->pos, in->len - in->pos);
	in->len -= in->pos;
	in->pos = 0;
	while (in->len < BUF_SIZE) {
		n = read(in->fd, buf + in->len, BUF_SIZE - in->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("cannot read the operations", strerror(errno));
		if (n == 0) {
			in->eof = 1;
			break;
		}
		in->len += (size_t)n;
	}
}

static int get(struct input *in, uint64_t *v)
{
	const uint8_t *p = htr_get_u64(buf + in->pos, buf + in->len, v);

	if (!p)
		return -1;
	in->pos = (size_t)(p - buf);
	return 0;
}

int main(int argc, char **argv)
{
	struct replay_ops_header h;
	struct input in = { 0 };
	void **slot;
	unsigned long long baseline, peak, final, hwm, ops = 0, failed = 0;
	char out[1024];
	Dl_info info;
	int n;

	page = sysconf(_SC_PAGESIZE);
	if (argc != 2)
		die("usage", "heaptrail-replay-child OPS-FILE");
	in.fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (in.fd < 0)
		die(argv[1], strerror(errno));
	if (read(in.fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, REPLAY_OPS_MAGIC, 8) != 0)
		die(argv[1], "not an operation stream");
	slot = mmap(NULL, (h.slots ? h.slots : 1) * sizeof(*slot), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (slot == MAP_FAILED)
		die("cannot map the slot table", strerror(errno));
	/* the replayer's own pages are resident before the baseline is taken */
	memset(slot, 0, h.slots * sizeof(*slot));
	memset(buf, 0, sizeof(buf));
	baseline = peak = rss_now();

	for (;;) {
		uint64_t op, s, size = 0, align = 0;
		void *p = NULL;

		fill(&in, 1 + 3 * HTR_VARINT_MAX);
		if (in.pos >= in.len)
			break;
		op = buf[in.pos++];
		if (get(&in, &s) < 0 || s >= h.slots)
			die(argv[1], "corrupt operation");
		switch (op) {
		case REPLAY_OP_MALLOC:
		case REPLAY_OP_CALLOC:
			if (get(&in, &size) < 0)
				die(argv[1], "corrupt operation");
			p = op == REPLAY_OP_MALLOC ? malloc(size) : calloc(1, size);
			break;
		case REPLAY_OP_MEMALIGN:
			if (get(&in, &align) < 0 || get(&in, &size) < 0)
				die(argv[1], "corrupt operation");
			if (posix_memalign(&p, align, size) != 0)
				p = NULL;
			break;
		case REPLAY_OP_REALLOC:
			if (get(&in, &size) < 0)
				die(argv[1], "corrupt operation");
			p = realloc(slot[s], size ? size : 1);
			if (!p)
				p = slot[s];	/* realloc failed: the old block stays */
			break;
		case REPLAY_OP_FREE:
			free(slot[s]);
			slot[s] = NULL;
			break;
		default:
			die(argv[1], "unknown operation");
		}
		if (op != REPLAY_OP_FREE) {
			if (!p && size)
				failed++;
			slot[s] = p;
			touch(p, size);
		}
		/* a statm read every 4096 operations: the peak between reads is VmHWM's */
		if ((++ops & 4095) == 0) {
			unsigned long long r = rss_now();

			if (r > peak)
				peak = r;
		}
	}
	final = rss_now();
	hwm = hwm_now();
	if (final > peak)
		peak = final;
	if (hwm > peak)
		peak = hwm;
	if (!dladdr((void *)&malloc, &info) || !info.dli_fname)
		info.dli_fname = "?";
	n = snprintf(out, sizeof(out),
		     "malloc_from %s\nbaseline_rss %llu\npeak_rss %llu\nfinal_rss %llu\n"
		     "ops %llu\nfailed %llu\n",
		     info.dli_fname, baseline, peak, final, ops, failed);
	if (n > 0 && write(1, out, (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1) < 0)
		return 2;
	/* the live blocks stay: exiting frees them all at once */
	_exit(0);
}
