/* fuzz_dump.c - fuzz target of the dump reader: libFuzzer, or a corpus runner */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include "dump.h"

/*
 * The input is a dump file, read to its end through dump_open/dump_next,
 * touching everything an analysis would touch (stacks, frames, modules,
 * texts, reach entries).  The reader must end cleanly: an open error, a
 * clean end, a warning, or -1 with a message.  Invariant violations abort.
 *
 * Mode byte 0x01: the rest is a list of (u16 little-endian length, bytes)
 * raw frame payloads that this harness compresses into a well-formed dump,
 * so that mutations reach the record parser past zstd's checksum.
 *
 * Built with -DFUZZ_STANDALONE it is a corpus runner: every file under the
 * directories or files given is run once (with a 20 s alarm against hangs);
 * files named "valid-*-n<N>.*" must read cleanly into exactly N events.
 * It prints "N passed, N failed".
 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, "fuzz_dump: invariant broken: %s (%s:%d)\n", \
			#c, __FILE__, __LINE__);			\
		abort();						\
	}								\
} while (0)

/* What the last input did, for the corpus runner. */
static struct {
	int opened, rc, warned;
	unsigned long long events;
} last;

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Mode 0x01: wraps raw frame payloads into a dump with valid framing. */
static int write_wrapped(int fd, const uint8_t *data, size_t size)
{
	struct htr_file_header h;
	size_t i = 0;
	int ret = 0;

	memset(&h, 0, sizeof h);
	memcpy(h.magic, HTR_FILE_MAGIC, 8);
	h.version = HTR_FORMAT_VERSION;
	h.header_size = sizeof h;
	if (write_all(fd, &h, sizeof h))
		return -1;
	while (i + 2 <= size && !ret) {
		size_t len = (size_t)data[i] | (size_t)data[i + 1] << 8, n;
		struct htr_frame_header fh;
		ZSTD_CCtx *c = ZSTD_createCCtx();
		void *z;

		i += 2;
		if (len > size - i)
			len = size - i;
		z = malloc(ZSTD_compressBound(len));
		if (!c || !z) {
			ZSTD_freeCCtx(c);
			free(z);
			return -1;
		}
		ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
		n = ZSTD_compress2(c, z, ZSTD_compressBound(len), data + i, len);
		if (ZSTD_isError(n)) {
			ret = -1;
		} else {
			fh.magic = HTR_FRAME_MAGIC;
			fh.compressed_size = (uint32_t)n;
			fh.raw_size = (uint32_t)len;
			fh.check = htr_frame_check(&fh);
			ret = write_all(fd, &fh, sizeof fh) || write_all(fd, z, n) ? -1 : 0;
		}
		ZSTD_freeCCtx(c);
		free(z);
		i += len;
	}
	return ret;
}

static void touch_stack(const struct dump *d, uint32_t id)
{
	const struct dump_stack *s = dump_stack(d, id);
	size_t nm, i;

	if (!s)
		return;
	dump_modules(d, &nm);
	REQUIRE(s->depth <= HTR_MAX_DEPTH);
	for (i = 0; i < s->depth; i++)
		REQUIRE(s->frames[i].module >= -1 && s->frames[i].module < (int)nm);
}

static void read_fully(const char *path, int follow)
{
	struct dump_event ev;
	struct dump *d;
	char err[1024];
	uint32_t i;
	size_t nm, k;
	const struct dump_module *m;

	memset(&last, 0, sizeof last);
	err[0] = 0;
	d = dump_open(path, err, sizeof err);
	if (!d) {
		REQUIRE(!strncmp(err, "heaptrail: cannot read '", 24));
		return;
	}
	last.opened = 1;
	REQUIRE(dump_process(d) != NULL);
	/* follow mode first: it must stop at the end too, then hand over */
	dump_set_follow(d, follow);
	while ((last.rc = dump_next(d, &ev)) == 1 || (last.rc == 0 && follow--)) {
		if (last.rc == 0) {
			dump_set_follow(d, 0);
			continue;
		}
		last.events++;
		switch (ev.kind) {
		case DUMP_ALLOC:
		case DUMP_POOL_ALLOC:
			touch_stack(d, ev.stack);
			break;
		case DUMP_MODULE_LOAD:
		case DUMP_MODULE_UNLOAD:
			m = dump_modules(d, &nm);
			REQUIRE(ev.id < nm);
			REQUIRE(m[ev.id].path != NULL);
			break;
		case DUMP_MARK:
		case DUMP_THREAD_NAME:
		case DUMP_CLIENT_BEGIN:
		case DUMP_POOL_CREATE:
			REQUIRE(ev.text != NULL);
			(void)strlen(ev.text);
			break;
		case DUMP_REACH:
			for (k = 0; k < ev.nreach; k++)
				REQUIRE(ev.reach[k].cls <= HTR_REACH_LOST);
			break;
		default:
			break;
		}
	}
	REQUIRE(last.rc == 0 || last.rc == -1);
	if (last.rc < 0)
		REQUIRE(dump_error(d) != NULL);
	REQUIRE(dump_next(d, &ev) == last.rc);	/* the end stays the end */
	last.warned = dump_warning(d) != NULL;
	for (i = 1; i <= dump_stack_count(d); i++)
		touch_stack(d, i);
	dump_close(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = memfd_create("fuzz_dump", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && data[0] == 0x01 ? write_wrapped(fd, data + 1, size - 1)
				    : write_all(fd, data, size)) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	read_fully(path, size > 1 && (data[size - 1] & 1));
	close(fd);
	return 0;
}

#ifdef FUZZ_STANDALONE

static int passed, failed, n_openerr, n_warned, n_hard, n_clean;

static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	const char *base = strrchr(path, '/'), *n;
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, got;

	base = base ? base + 1 : path;
	if (!f) {
		fprintf(stderr, "fuzz_dump: cannot read '%s': %s\n", path, strerror(errno));
		failed++;
		return;
	}
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got);
	fclose(f);
	alarm(20);
	LLVMFuzzerTestOneInput(buf, len);
	alarm(0);
	free(buf);
	if (!last.opened)
		n_openerr++;
	else if (last.rc < 0)
		n_hard++;
	else if (last.warned)
		n_warned++;
	else
		n_clean++;
	if (!strncmp(base, "valid-", 6) && (n = strstr(base, "-n"))) {
		unsigned long long want = strtoull(n + 2, NULL, 10);

		if (!last.opened || last.rc != 0 || last.warned || last.events != want) {
			fprintf(stderr, "FAIL %s: opened %d rc %d warned %d events %llu (want %llu)\n",
				path, last.opened, last.rc, last.warned, last.events, want);
			failed++;
			return;
		}
	}
	passed++;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, i;

	if (!dir) {
		run_file(path);
		return;
	}
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof *names);
		if (!names || asprintf(&names[n], "%s/%s", path, de->d_name) < 0)
			abort();
		n++;
	}
	closedir(dir);
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	for (i = 0; i < n; i++) {
		run_file(names[i]);
		free(names[i]);
	}
	free(names);
}

static void on_alarm(int sig)
{
	static const char msg[] = "fuzz_dump: an input ran for 20 s (a hang)\n";

	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(3);
	abort();
}

int main(int argc, char **argv)
{
	int i;

	signal(SIGALRM, on_alarm);
	if (argc < 2) {
		fprintf(stderr, "usage: fuzz_dump_run DIR|FILE...\n");
		return 2;
	}
	for (i = 1; i < argc; i++)
		run_path(argv[i]);
	printf("fuzz_dump: %d open errors, %d read errors, %d warnings, %d clean reads\n",
	       n_openerr, n_hard, n_warned, n_clean);
	printf("%d passed, %d failed\n", passed, failed);
	return failed || !passed ? 1 : 0;
}

#endif
