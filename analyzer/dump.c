/* dump.c - reads a .htr dump: file, frames, top-level records and the time-ordered merge */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "dump.h"
#include "dump_internal.h"

/*
 * Shape of the reader.
 *
 * Frames are read whole, checked (header check, zstd checksum, sizes), then
 * their records are walked twice: once to validate the top-level structure
 * (a bad frame is dropped as a whole), once to queue them.  Chunks are not
 * copied: a thread's queue points into the decompressed frame, which is
 * reference counted and recycled when its last chunk and record are spent.
 *
 * Each thread is a cursor that has decoded its next deliverable event (the
 * "head") ahead of time; a binary heap orders the cursors and the queued
 * top-level records by (time, class, tie).  The heap top is delivered when
 * its time lies below the last watermark, or once nothing more will be read
 * (end record, end of file, bad frame).  Stack definitions carry no time:
 * they are applied when the event that follows them is delivered, so that
 * their addresses meet the modules loaded at that moment.
 *
 * Chunk contents are validated lazily, as they are decoded; corruption there
 * stops the reader with a warning like a bad frame does.
 */

/* ---- small helpers ---- */

int dump_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* strerror, lowercased for a user line */
static const char *errstr(int err, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

void dump_set_err(struct dump *d, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(d->err, sizeof d->err, "heaptrail: cannot read '%s': %s",
		 d->path, msg);
}

int dump_bad(struct dump *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->why, sizeof d->why, fmt, ap);
	va_end(ap);
	return -1;
}

static void format_warning(struct dump *d)
{
	double s = (double)d->now / 1e9;
	char read[64];

	/* "the first 3.2 s", but "the first 0.045 s" for a short run */
	snprintf(read, sizeof read, s < 1 ? "the first %.3f s were read" :
		 "the first %.1f s were read", s);
	switch (d->warn_kind) {
	case WARN_TRUNC:
		snprintf(d->warn, sizeof d->warn,
			 "truncated frame at byte %llu (the dump ends early; %s)",
			 (unsigned long long)d->warn_off, read);
		break;
	case WARN_CORRUPT:
		snprintf(d->warn, sizeof d->warn,
			 "corrupt frame at byte %llu (%s; reading stopped there, %s)",
			 (unsigned long long)d->warn_off, d->warn_why, read);
		break;
	case WARN_ORDER:
		snprintf(d->warn, sizeof d->warn,
			 "%llu events came after later ones (the dump's watermarks are missing or wrong)",
			 (unsigned long long)d->disorder);
		break;
	}
}

void dump_warn(struct dump *d, int kind, uint64_t off, const char *why)
{
	if (d->warn_kind != WARN_NONE && d->warn_kind != WARN_ORDER)
		return;
	d->warn_kind = kind;
	d->warn_off = off;
	snprintf(d->warn_why, sizeof d->warn_why, "%s", why ? why : "");
	format_warning(d);
}

/* ---- frames ---- */

static struct frame *frame_get(struct dump *d, size_t size)
{
	struct frame *f = d->free_frames;
	size_t cap = size < 65536 ? 65536 : size;

	if (f) {
		d->free_frames = f->next;
		d->nfree--;
	} else {
		f = calloc(1, sizeof *f);
		if (!f)
			return NULL;
	}
	if (f->cap < cap) {
		free(f->raw);
		f->raw = malloc(cap);
		f->cap = f->raw ? cap : 0;
		if (!f->raw) {
			free(f);
			return NULL;
		}
	}
	f->size = size;
	f->refs = 1;
	f->next = NULL;
	return f;
}

void dump_frame_unref(struct dump *d, struct frame *f)
{
	if (--f->refs)
		return;
	d->hold -= f->size;
	if (d->nfree < FREE_FRAMES) {
		f->next = d->free_frames;
		d->free_frames = f;
		d->nfree++;
		return;
	}
	free(f->raw);
	free(f);
}

/* ---- heap ---- */

int dump_heap_push(struct dump *d, uint64_t time, uint64_t order, void *obj)
{
	struct hitem x = { time, order, obj };
	size_t i;

	if (dump_grow((void **)&d->heap, &d->capheap, d->nheap + 1, sizeof *d->heap))
		return -ENOMEM;
	i = d->nheap++;
	while (i) {
		size_t up = (i - 1) / 2;

		if (!hless(&x, &d->heap[up]))
			break;
		d->heap[i] = d->heap[up];
		i = up;
	}
	d->heap[i] = x;
	return 0;
}

void dump_heap_pop(struct dump *d)
{
	d->heap[0] = d->heap[--d->nheap];
	if (d->nheap)
		sift_down(d->heap, d->nheap, 0);
}

/* ---- top-level records ---- */

static int parse_process(struct dump *d, struct rd *r, int commit)
{
	struct dump_process *pr = &d->proc;
	uint64_t pid = rd_u32(r), ppid = rd_u32(r), mono = rd_u(r), real = rd_u(r);
	uint64_t page = rd_u(r), sample, unw, depth, flags, gen;
	size_t exelen, cmdlen, i, n, argc = 0;
	const uint8_t *exe = rd_bytes(r, &exelen), *cmd = rd_bytes(r, &cmdlen);

	sample = rd_u(r);
	unw = rd_u32(r);
	depth = rd_u32(r);
	flags = rd_u32(r);
	gen = rd_u32(r);
	if (r->bad || !commit)
		return r->bad ? -1 : 0;
	pr->pid = (uint32_t)pid;
	pr->ppid = (uint32_t)ppid;
	pr->start_mono_ns = mono;
	pr->start_realtime_ns = real;
	pr->page_size = page;
	pr->sample_bytes = sample;
	pr->unwinder = (int)unw;
	pr->max_depth = (unsigned)depth;
	pr->flags = (unsigned)flags;
	pr->fork_generation = (unsigned)gen;
	pr->exe = strndup((const char *)exe, exelen);
	for (i = 0; i < cmdlen; i = n + 1) {
		n = i;
		while (n < cmdlen && cmd[n])
			n++;
		argc++;
	}
	pr->argv = calloc(argc + 1, sizeof *pr->argv);
	if (!pr->exe || !pr->argv)
		return -ENOMEM;
	for (i = 0, argc = 0; i < cmdlen; i = n + 1) {
		n = i;
		while (n < cmdlen && cmd[n])
			n++;
		pr->argv[argc] = strndup((const char *)cmd + i, n - i);
		if (!pr->argv[argc++])
			return -ENOMEM;
	}
	pr->argc = (int)argc;
	d->have_process = 1;
	return 0;
}

static int queue_record(struct dump *d, struct frame *f, uint8_t type,
			const uint8_t *body, uint64_t time, int cls)
{
	struct tlrec *t = malloc(sizeof *t);

	if (!t || dump_heap_push(d, time, ((uint64_t)cls << 56) | (d->seq++ & (ORD_CURSOR - 1)), t)) {
		free(t);
		return dump_bad(d, "out of memory");
	}
	t->f = f;
	t->body = body;
	t->end = f->raw + f->size;
	t->type = type;
	f->refs++;
	hold_add(d, ENTRY_COST);
	return 0;
}

/*
 * Walks a frame's records: checks them (commit = 0) or queues them
 * (commit = 1).  Returns 0 or -1 with d->why set; -ENOMEM on commit.
 */
static int frame_records(struct dump *d, struct frame *f, int commit)
{
	struct rd r = { f->raw, f->raw + f->size, 0 };
	int ret;

	while (r.p < r.end) {
		const uint8_t *rec = r.p, *body;
		uint8_t type = *r.p++;
		uint64_t time = 0, n, i;
		size_t len;
		int cls = CLS_ALLOC;

		body = r.p;
		if (!d->have_process && rec == f->raw && type != HTR_REC_PROCESS)
			return dump_bad(d, "the dump does not start with a process record");
		switch (type) {
		case HTR_REC_PROCESS:
			if (d->have_process || rec != f->raw)
				return dump_bad(d, "a second process record at byte %zu of its data",
						(size_t)(rec - f->raw));
			ret = parse_process(d, &r, commit);
			if (ret == -ENOMEM)
				return ret;
			break;
		case HTR_REC_MODULE_LOAD:
			time = rd_u(&r);
			rd_u32(&r);
			rd_u(&r);
			rd_bytes(&r, &len);
			if (len > MAX_PATH_LEN)
				r.bad = 1;
			rd_bytes(&r, &len);
			if (len > sizeof d->mods[0].build_id)
				r.bad = 1;
			n = rd_u(&r);
			if (n > MAX_SEGS || n > (uint64_t)(r.end - r.p) / 2)
				r.bad = 1;
			for (i = 0; !r.bad && i < n; i++) {
				rd_u(&r);
				rd_u(&r);
			}
			cls = CLS_LOAD;
			break;
		case HTR_REC_MODULE_UNLOAD:
			time = rd_u(&r);
			rd_u32(&r);
			cls = CLS_LAST;
			break;
		case HTR_REC_CHUNK: {
			uint64_t tid = rd_u32(&r), base = rd_u(&r);

			n = rd_u(&r);
			if (r.bad || n > (uint64_t)(r.end - r.p))
				return dump_bad(d, "a chunk at byte %zu of its data runs off its end",
						(size_t)(rec - f->raw));
			if (commit && dump_enqueue_chunk(d, f, (uint32_t)tid, base, r.p, r.p + n))
				return d->failed ? -ENOMEM : -1;
			r.p += n;
			continue;
		}
		case HTR_REC_SAMPLE:
			time = rd_u(&r);
			for (i = 0; i < 7; i++)
				rd_u(&r);
			break;
		case HTR_REC_WATERMARK:
			time = rd_u(&r);
			if (commit && !r.bad && time > d->wm)
				d->wm = time;
			break;
		case HTR_REC_LOST:
			time = rd_u(&r);
			rd_u(&r);
			rd_u(&r);
			break;
		case HTR_REC_END:
			time = rd_u(&r);
			for (i = 0; i < 4; i++)
				rd_u(&r);
			cls = CLS_LAST;
			break;
		case HTR_REC_MARK:
			time = rd_u(&r);
			rd_bytes(&r, &len);
			break;
		case HTR_REC_REACH:
			time = rd_u(&r);
			rd_u(&r);
			n = rd_u(&r);
			if (n > (uint64_t)(r.end - r.p) / 2)
				r.bad = 1;
			for (i = 0; !r.bad && i < n; i++) {
				rd_u(&r);
				if (rd_u(&r) > HTR_REACH_LOST)
					r.bad = 1;
			}
			cls = CLS_LAST;
			break;
		default:
			return dump_bad(d, "unknown record type %u at byte %zu of its data",
					type, (size_t)(rec - f->raw));
		}
		if (r.bad)
			return dump_bad(d, "record of type %u at byte %zu of its data is malformed",
					type, (size_t)(rec - f->raw));
		if (!commit || type == HTR_REC_PROCESS || type == HTR_REC_WATERMARK)
			continue;
		if (type == HTR_REC_END)
			d->flush = 1;
		if (queue_record(d, f, type, body, time, cls))
			return -ENOMEM;
	}
	return 0;
}

/* ---- reading frames ---- */

enum { RF_OK, RF_EOF, RF_PARTIAL, RF_CORRUPT, RF_ERROR };

static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Are 'n' bytes available at 'off'?  Looks again at the file's size. */
static int have_bytes(struct dump *d, uint64_t off, uint64_t n)
{
	struct stat st;

	if (off + n <= d->fsize)
		return 1;
	if (fstat(d->fd, &st) == 0)
		d->fsize = (uint64_t)st.st_size;
	return off + n <= d->fsize;
}

static int io_error(struct dump *d, int err)
{
	char buf[128];

	dump_set_err(d, "%s", errstr(err, buf, sizeof buf));
	return RF_ERROR;
}

static int read_frame(struct dump *d)
{
	struct htr_frame_header h;
	uint64_t off = d->off;
	struct frame *f;
	size_t n;
	ssize_t got;
	int ret;

	d->bad_off = off;
	if (!have_bytes(d, off, sizeof h))
		return off >= d->fsize ? RF_EOF : RF_PARTIAL;
	got = pread_full(d->fd, &h, sizeof h, off);
	if (got < 0)
		return io_error(d, (int)-got);
	if ((size_t)got < sizeof h)
		return RF_PARTIAL;
	h.magic = le32toh(h.magic);
	h.compressed_size = le32toh(h.compressed_size);
	h.raw_size = le32toh(h.raw_size);
	h.check = le32toh(h.check);
	if (h.magic != HTR_FRAME_MAGIC || htr_frame_check(&h) != h.check)
		return dump_bad(d, "bad frame header"), RF_CORRUPT;
	if (h.raw_size > HTR_FRAME_RAW_MAX)
		return dump_bad(d, "frame of %u bytes, more than the %u allowed",
				h.raw_size, HTR_FRAME_RAW_MAX), RF_CORRUPT;
	if (h.compressed_size == 0 ||
	    h.compressed_size > ZSTD_compressBound(h.raw_size) + 1024)
		return dump_bad(d, "impossible compressed size %u for %u bytes",
				h.compressed_size, h.raw_size), RF_CORRUPT;
	if (!have_bytes(d, off + sizeof h, h.compressed_size))
		return RF_PARTIAL;
	if (dump_grow((void **)&d->zbuf, &d->zcap, h.compressed_size, 1))
		return io_error(d, ENOMEM);
	got = pread_full(d->fd, d->zbuf, h.compressed_size, off + sizeof h);
	if (got < 0)
		return io_error(d, (int)-got);
	if ((size_t)got < h.compressed_size)
		return RF_PARTIAL;
	f = frame_get(d, h.raw_size);
	if (!f)
		return io_error(d, ENOMEM);
	f->off = off;
	n = ZSTD_decompressDCtx(d->zd, f->raw, f->cap, d->zbuf, h.compressed_size);
	if (ZSTD_isError(n)) {
		dump_bad(d, "zstd: %s", ZSTD_getErrorName(n));
		ret = RF_CORRUPT;
	} else if (n != h.raw_size) {
		dump_bad(d, "it holds %zu bytes, its header says %u", n, h.raw_size);
		ret = RF_CORRUPT;
	} else {
		ret = frame_records(d, f, 0) ? RF_CORRUPT : RF_OK;
	}
	hold_add(d, f->size);
	if (ret == RF_OK) {
		d->off = off + sizeof h + h.compressed_size;
		ret = frame_records(d, f, 1);
		if (ret == -ENOMEM) {
			dump_frame_unref(d, f);
			return io_error(d, ENOMEM);
		}
		ret = ret ? RF_CORRUPT : RF_OK;
	}
	dump_frame_unref(d, f);
	return ret;
}

/* ---- delivery ---- */

int dump_set_text(struct dump *d, struct dump_event *ev, const uint8_t *s, size_t n)
{
	if (dump_grow((void **)&d->text, &d->textcap, n + 1, 1))
		return -ENOMEM;
	memcpy(d->text, s, n);
	d->text[n] = 0;
	ev->text = d->text;
	return 0;
}

/* Delivers a top-level record: 1, 0 when it yields no event, -ENOMEM. */
static int emit_record(struct dump *d, struct tlrec *t, struct dump_event *ev)
{
	struct rd r = { t->body, t->end, 0 };
	uint64_t n, i, ptr = 0;
	const uint8_t *s;
	size_t len;

	memset(ev, 0, sizeof *ev);
	ev->time = rd_u(&r);
	switch (t->type) {
	case HTR_REC_MODULE_LOAD:
		return dump_module_load(d, &r, ev);
	case HTR_REC_MODULE_UNLOAD:
		return dump_module_unload(d, &r, ev);
	case HTR_REC_SAMPLE:
		ev->kind = DUMP_SAMPLE;
		ev->sample.rss_bytes = rd_u(&r);
		ev->sample.arena_bytes = rd_u(&r);
		ev->sample.mmap_bytes = rd_u(&r);
		ev->sample.in_use_bytes = rd_u(&r);
		ev->sample.free_bytes = rd_u(&r);
		ev->sample.top_releasable_bytes = rd_u(&r);
		ev->sample.shim_bytes = rd_u(&r);
		return 1;
	case HTR_REC_LOST:
		ev->kind = DUMP_LOST;
		ev->lost_events = rd_u(&r);
		ev->lost_reason = (int)rd_u(&r);
		return 1;
	case HTR_REC_END:
		ev->kind = DUMP_END;
		ev->end_how = (int)rd_u(&r);
		ev->end_status = (int)rd_u(&r);
		ev->events_written = rd_u(&r);
		ev->lost_events = rd_u(&r);
		return 1;
	case HTR_REC_MARK:
		ev->kind = DUMP_MARK;
		s = rd_bytes(&r, &len);
		return dump_set_text(d, ev, s, len) ? -ENOMEM : 1;
	case HTR_REC_REACH:
		ev->kind = DUMP_REACH;
		ev->reach_kind = (int)rd_u(&r);
		n = rd_u(&r);
		if (dump_grow((void **)&d->reach, &d->capreach, n ? n : 1, sizeof *d->reach))
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			ptr += (uint64_t)rd_s(&r);
			d->reach[i].ptr = ptr;
			d->reach[i].cls = (uint8_t)rd_u(&r);
		}
		ev->reach = d->reach;
		ev->nreach = n;
		return 1;
	}
	return 0;
}

/* Delivers the head of the heap top's cursor: 1, or < 0 (stopped/failed). */

int dump_next(struct dump *d, struct dump_event *ev)
{
	int ret;

	for (;;) {
		if (d->failed)
			return -1;
		if (d->stopped)
			break;
		if (d->nheap) {
			struct hitem *top = &d->heap[0];

			if (top->time < d->wm || d->flush || d->hold > d->hold_limit) {
				if (top->order & ORD_CURSOR) {
					ret = dump_emit_cursor(d, top->obj, ev);
					if (ret < 0) {
						if (d->failed)
							return -1;
						continue;	/* stopped */
					}
				} else {
					struct tlrec *t = top->obj;

					dump_heap_pop(d);
					ret = emit_record(d, t, ev);
					dump_frame_unref(d, t->f);
					free(t);
					d->hold -= ENTRY_COST;
					if (ret < 0) {
						d->failed = 1;
						dump_set_err(d, "out of memory");
						return -1;
					}
					if (!ret)
						continue;
				}
				if (ev->time < d->now) {
					if (!d->disorder++ && d->warn_kind == WARN_NONE)
						d->warn_kind = WARN_ORDER;
					if (d->warn_kind == WARN_ORDER)
						format_warning(d);
				} else {
					d->now = ev->time;
				}
				return 1;
			}
		}
		if (d->final) {
			if (!d->nheap)
				break;
			d->flush = 1;
			continue;
		}
		switch (read_frame(d)) {
		case RF_OK:
			continue;
		case RF_EOF:
			if (d->follow)
				return 0;
			d->final = 1;
			continue;
		case RF_PARTIAL:
			if (d->follow)
				return 0;
			dump_warn(d, WARN_TRUNC, d->off, NULL);
			d->final = 1;
			continue;
		case RF_CORRUPT:
			dump_warn(d, WARN_CORRUPT, d->bad_off, d->why);
			d->final = 1;
			continue;
		default:
			d->failed = 1;
			return -1;
		}
	}
	if (d->warn_kind != WARN_NONE)
		format_warning(d);
	return 0;
}

/* ---- open, close, accessors ---- */

static struct dump *open_fail(struct dump *d, char *err, size_t errlen, int e)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", d->err);
	dump_close(d);
	errno = e;
	return NULL;
}

struct dump *dump_open(const char *path, char *err, size_t errlen)
{
	struct htr_file_header h;
	struct dump *d = calloc(1, sizeof *d);
	struct stat st;
	char buf[128];
	ssize_t got;
	uint32_t version, hsize;

	if (!d || !(d->path = strdup(path))) {
		if (err && errlen)
			snprintf(err, errlen, "heaptrail: cannot read '%s': out of memory", path);
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->fd = -1;
	d->hold_limit = DEFAULT_HOLD_LIMIT;
	d->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0 || fstat(d->fd, &st) < 0) {
		int e = errno;

		dump_set_err(d, "%s", errstr(e, buf, sizeof buf));
		return open_fail(d, err, errlen, e);
	}
	if (S_ISDIR(st.st_mode)) {
		dump_set_err(d, "is a directory");
		return open_fail(d, err, errlen, EISDIR);
	}
	if (!S_ISREG(st.st_mode)) {
		dump_set_err(d, "not a regular file");
		return open_fail(d, err, errlen, EINVAL);
	}
	d->fsize = (uint64_t)st.st_size;
	memset(&h, 0, sizeof h);
	got = pread_full(d->fd, &h, sizeof h, 0);
	if (got < 0) {
		dump_set_err(d, "%s", errstr((int)-got, buf, sizeof buf));
		return open_fail(d, err, errlen, (int)-got);
	}
	if (got == 0) {
		dump_set_err(d, "empty file (not a heaptrail dump)");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (memcmp(h.magic, HTR_FILE_MAGIC, (size_t)got < 8 ? (size_t)got : 8)) {
		dump_set_err(d, "not a heaptrail dump (bad magic)");
		return open_fail(d, err, errlen, EINVAL);
	}
	if ((size_t)got < sizeof h) {
		dump_set_err(d, "truncated file header (the file holds only %zd bytes)", got);
		return open_fail(d, err, errlen, EINVAL);
	}
	version = le32toh(h.version);
	hsize = le32toh(h.header_size);
	if (version > HTR_FORMAT_VERSION) {
		dump_set_err(d, "dump format version %u is newer than this heaptrail reads (%u); use a newer heaptrail",
			     version, HTR_FORMAT_VERSION);
		return open_fail(d, err, errlen, EINVAL);
	}
	if (version == 0) {
		dump_set_err(d, "unknown dump format version 0");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (hsize < sizeof h || hsize > MAX_HEADER) {
		dump_set_err(d, "corrupt file header (header size %u)", hsize);
		return open_fail(d, err, errlen, EINVAL);
	}
	d->proc.start_realtime_ns = le64toh(h.start_realtime_ns);
	d->off = hsize;
	d->zd = ZSTD_createDCtx();
	if (!d->zd) {
		dump_set_err(d, "out of memory");
		return open_fail(d, err, errlen, ENOMEM);
	}
	switch (read_frame(d)) {
	case RF_OK:
		break;
	case RF_EOF:
	case RF_PARTIAL:
		dump_set_err(d, "no complete frame (the dump ends before its first frame was written)");
		return open_fail(d, err, errlen, EINVAL);
	case RF_CORRUPT:
		dump_set_err(d, "corrupt frame at byte %llu (%s)",
			     (unsigned long long)d->bad_off, d->why);
		return open_fail(d, err, errlen, EINVAL);
	default:
		return open_fail(d, err, errlen, EIO);
	}
	if (!d->have_process) {	/* an empty first frame */
		dump_set_err(d, "no process record at the start of the dump");
		return open_fail(d, err, errlen, EINVAL);
	}
	if (d->stopped) {	/* a corrupt chunk in the first frame */
		dump_set_err(d, "corrupt frame at byte %llu (%s)",
			     (unsigned long long)d->warn_off, d->warn_why);
		return open_fail(d, err, errlen, EINVAL);
	}
	return d;
}

void dump_close(struct dump *d)
{
	struct arena_block *b;
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->nheap; i++) {
		if (!(d->heap[i].order & ORD_CURSOR)) {
			struct tlrec *t = d->heap[i].obj;

			dump_frame_unref(d, t->f);
			free(t);
		}
	}
	for (i = 0; i < d->tids.cap; i++)
		if (d->tids.vals[i])
			dump_cursor_free(d, (struct cursor *)(uintptr_t)d->tids.vals[i]);
	while (d->free_frames) {
		struct frame *f = d->free_frames;

		d->free_frames = f->next;
		free(f->raw);
		free(f);
	}
	while ((b = d->arena)) {
		d->arena = b->next;
		free(b);
	}
	for (i = 0; i < d->nmods; i++)
		free(d->mods[i].path);
	if (d->proc.argv)
		for (i = 0; d->proc.argv[i]; i++)
			free(d->proc.argv[i]);
	free(d->proc.argv);
	free(d->proc.exe);
	free(d->mods);
	free(d->act);
	free(d->stacks);
	free(d->heap);
	free(d->tids.keys);
	free(d->tids.vals);
	free(d->modids.keys);
	free(d->modids.vals);
	free(d->text);
	free(d->reach);
	free(d->zbuf);
	ZSTD_freeDCtx(d->zd);
	if (d->fd >= 0)
		close(d->fd);
	free(d->path);
	free(d);
}

const char *dump_path(const struct dump *d)
{
	return d->path;
}

const char *dump_error(const struct dump *d)
{
	return d->err[0] ? d->err : NULL;
}

const char *dump_warning(const struct dump *d)
{
	return d->warn[0] ? d->warn : NULL;
}

const struct dump_process *dump_process(const struct dump *d)
{
	return &d->proc;
}

const struct dump_stack *dump_stack(const struct dump *d, uint32_t id)
{
	if (id == HTR_STACK_NONE || id >= d->capstacks || !d->stacks[id].frames)
		return NULL;
	return &d->stacks[id];
}

uint32_t dump_stack_count(const struct dump *d)
{
	return d->stack_max;
}

const struct dump_module *dump_modules(const struct dump *d, size_t *n)
{
	*n = d->nmods;
	return d->mods;
}

uint64_t dump_time(const struct dump *d)
{
	return d->now;
}

uint64_t dump_offset(const struct dump *d)
{
	return d->off;
}

uint64_t dump_file_size(const struct dump *d)
{
	return d->fsize;
}

void dump_set_follow(struct dump *d, int follow)
{
	d->follow = follow;
}

void dump_set_hold_limit(struct dump *d, uint64_t bytes)
{
	d->hold_limit = bytes;
}

uint64_t dump_hold_peak(const struct dump *d)
{
	return d->hold_peak;
}
