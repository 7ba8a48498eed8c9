/* dump.c - reads a .htr dump: file, frames, top-level records and the time-ordered merge */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "dump.h"
#include "dump_internal.h"
#include "htr_compact.h"

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
 *
 * All of that is the producer (see dump_internal.h): "delivered" means
 * written into a batch.  dump_next() hands the batches' entries out and
 * applies the stack definitions and module loads among them to the tables
 * the accessors show.  On a dump of THREAD_MIN_BYTES or more the producer
 * runs on a thread, NBATCHES batches ahead at most, and a reader thread
 * below it reads, decompresses and unpacks the frames, NFETCH ahead of it:
 * the caller's replay, the decoding and merge, and the decompression then
 * overlap.
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
	snprintf(d->perr, sizeof d->perr, "heaptrail: cannot read '%s': %s",
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

/* The consumer's: the time read is that of the last event handed out. */
static void format_warning(struct dump *d)
{
	double s = (double)d->pub_now / 1e9;
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

/* The producer's: dump_next() formats the warning at the end of the stream. */
void dump_warn(struct dump *d, int kind, uint64_t off, const char *why)
{
	if (d->warn_kind != WARN_NONE && d->warn_kind != WARN_ORDER)
		return;
	d->warn_kind = kind;
	d->warn_off = off;
	snprintf(d->warn_why, sizeof d->warn_why, "%s", why ? why : "");
}

/* ---- batches ---- */

void dump_batch_reset(struct batch *b)
{
	size_t i;

	for (i = 0; i < b->nrare; i++)
		free(b->rare[i].mod.path);	/* a module load never handed out */
	b->n = b->pos = b->ntext = b->nrare = b->nreach = 0;
	b->status = BS_MORE;
}

void dump_batch_free(struct batch *b)
{
	if (!b)
		return;
	dump_batch_reset(b);
	free(b->ev);
	free(b->text);
	free(b->rare);
	free(b->reach);
	free(b);
}

struct batch *dump_batch_new(void)
{
	struct batch *b = calloc(1, sizeof *b);

	if (!b)
		return NULL;
	/* slack for the stack definitions that come with the last event */
	b->cap = BATCH_EVENTS + 64;
	b->ev = malloc(b->cap * sizeof *b->ev);
	if (!b->ev) {
		free(b);
		return NULL;
	}
	return b;
}

struct bev *dump_bev_grow(struct dump *d)
{
	struct batch *b = d->pb;

	if (dump_grow((void **)&b->ev, &b->cap, b->n + 1, sizeof *b->ev))
		return NULL;
	return &b->ev[b->n++];
}

int64_t dump_text_add(struct dump *d, const uint8_t *s, size_t n)
{
	struct batch *b = d->pb;
	size_t off = b->ntext;

	if (dump_grow((void **)&b->text, &b->captext, off + n + 1, 1))
		return -1;
	memcpy(b->text + off, s, n);
	b->text[off + n] = 0;
	b->ntext = off + n + 1;
	return (int64_t)off;
}

/* ---- frames ---- */

/*
 * The free list of decompressed buffers is shared by the reader thread
 * (frame_get) and the producer (dump_frame_unref) when there is one:
 * d->flock is then the pipe's mutex.
 */
static struct frame *frame_get(struct dump *d, size_t size)
{
	struct frame *f, **pf, **best = NULL;
	size_t cap = size < 65536 ? 65536 : size;

	if (d->flock)
		pthread_mutex_lock(d->flock);
	/*
	 * The smallest buffer that fits, else the largest (replaced by a
	 * larger one): taking the first one instead, every buffer in turn
	 * met the largest frames and was replaced, so that the buffers grew
	 * toward the largest frame's size and their memory with the dump's
	 * length, and each replacement left a hole in the heap.
	 */
	for (pf = &d->free_frames; *pf; pf = &(*pf)->next) {
		size_t c = (*pf)->cap;

		if (!best || (c >= cap ? (*best)->cap < cap || c < (*best)->cap
				       : (*best)->cap < cap && c > (*best)->cap))
			best = pf;
	}
	f = best ? *best : NULL;
	if (f) {
		*best = f->next;
		d->nfree--;
		d->free_bytes -= f->cap;
	}
	if (d->flock)
		pthread_mutex_unlock(d->flock);
	if (!f) {
		f = calloc(1, sizeof *f);
		if (!f)
			return NULL;
	}
	if (f->cap < cap) {
		/*
		 * Frames differ in size by a few per cent: with some room to
		 * spare a buffer fits the next ones, instead of being freed and
		 * allocated again (fresh pages, a page fault each).
		 */
		cap = (cap + cap / 8 + 65535) & ~(size_t)65535;
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
	f->ulen = f->npre = f->prei = 0;
	return f;
}

static void frame_free(struct frame *f)
{
	free(f->raw);
	free(f->ubuf);
	free(f->pre);
	free(f);
}

/* Back to the free list, or freed. */
void dump_frame_put(struct dump *d, struct frame *f)
{
	int keep = 0;

	/* unpacked chunks are sized to their frame: not kept for the next */
	if (f->ucap)
		__atomic_sub_fetch(&d->ubytes, f->ucap, __ATOMIC_RELAXED);
	free(f->ubuf);
	f->ubuf = NULL;
	f->ucap = 0;

	if (d->flock)
		pthread_mutex_lock(d->flock);
	if (d->nfree < FREE_FRAMES && d->free_bytes + f->cap <= FREE_FRAME_BYTES) {
		f->next = d->free_frames;
		d->free_frames = f;
		d->nfree++;
		d->free_bytes += f->cap;
		keep = 1;
	}
	if (d->flock)
		pthread_mutex_unlock(d->flock);
	if (keep)
		return;
	frame_free(f);
}

/*
 * At the end of the stream the spare buffers go: what follows (printing,
 * symbolization) should not find the frames' memory still taken.
 */
static void frames_trim(struct dump *d)
{
	struct frame *f;

	if (d->flock)
		pthread_mutex_lock(d->flock);
	f = d->free_frames;
	d->free_frames = NULL;
	d->nfree = 0;
	d->free_bytes = 0;
	if (d->flock)
		pthread_mutex_unlock(d->flock);
	while (f) {
		struct frame *next = f->next;

		frame_free(f);
		f = next;
	}
}

void dump_frame_unref(struct dump *d, struct frame *f)
{
	if (--f->refs)
		return;
	d->hold -= f->size;
	dump_frame_put(d, f);
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
	if (!r->bad)
		d->compact_flag = !!(flags & HTR_PF_COMPACT);	/* the check of its frame needs it */
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
	d->tshift = flags & HTR_PF_TIME_TICKS ? HTR_TICK_SHIFT : 0;
	d->units = !!(flags & HTR_PF_PTR_UNITS);
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
 * A compact window (HTR_PF_COMPACT): decoded when the frame is checked,
 * its plain chunks (d->cout) queued when it is committed.  The frame owns
 * their bytes from the end of the check on (frame_records()).
 */
static int compact_record(struct dump *d, struct frame *f, struct rd *r, const uint8_t *rec,
			  int commit)
{
	size_t off = (size_t)(rec - f->raw), i;
	const char *why = NULL;
	int ret;

	if (!d->compact_flag)
		return dump_bad(d, "a compact window at byte %zu of a dump that is not compact", off);
	if (commit) {
		r->p = compact_skip(r->p, r->end);
		if (!r->p)
			r->p = r->end;	/* checked before: cannot happen */
		for (i = 0; i < d->cout.nch; i++) {
			const struct compact_chunk *c = &d->cout.ch[i];

			if (c->rec_off == off &&
			    dump_enqueue_chunk(d, f, c->tid, c->base, f->ubuf + c->off,
					       f->ubuf + c->off + c->len))
				return d->failed ? -ENOMEM : -1;
		}
		return 0;
	}
	if (!d->compact && !(d->compact = compact_reader_new()))
		return -ENOMEM;
	ret = compact_decode(d->compact, r->p, r->end, off, &d->cout, &r->p, &why);
	if (ret == -ENOMEM)
		return dump_bad(d, "out of memory");
	if (ret)
		return dump_bad(d, "%s at byte %zu of its data", why, off);
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

	if (!commit)
		compact_out_reset(&d->cout);
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
		case HTR_REC_COMPACT:
			ret = compact_record(d, f, &r, rec, commit);
			if (ret == -ENOMEM)
				return ret;
			if (ret)
				return -1;
			continue;
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
	if (!commit && d->cout.nch) {
		/* the frame keeps its windows' chunks as long as it lives */
		free(f->ubuf);
		f->ubuf = d->cout.buf.p;
		f->ucap = d->cout.buf.cap;
		f->ulen = d->cout.buf.n;
		__atomic_add_fetch(&d->ubytes, f->ucap, __ATOMIC_RELAXED);
		memset(&d->cout.buf, 0, sizeof(d->cout.buf));
	}
	return 0;
}

/* ---- reading frames ---- */

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

static void fetch_error(struct fetch *x, int err)
{
	x->rf = RF_ERROR;
	errstr(err, x->why, sizeof x->why);
}

void dump_fetch_frame(struct dump *d, uint64_t off, struct fetch *x)
{
	struct htr_frame_header h;
	struct frame *f;
	size_t n;
	ssize_t got;

	x->f = NULL;
	x->off = off;
	x->why[0] = 0;
	x->rf = RF_PARTIAL;
	if (!have_bytes(d, off, sizeof h)) {
		x->rf = off >= d->fsize ? RF_EOF : RF_PARTIAL;
		goto out;
	}
	got = pread_full(d->fd, &h, sizeof h, off);
	if (got < 0) {
		fetch_error(x, (int)-got);
		goto out;
	}
	if ((size_t)got < sizeof h)
		goto out;
	h.magic = le32toh(h.magic);
	h.compressed_size = le32toh(h.compressed_size);
	h.raw_size = le32toh(h.raw_size);
	h.check = le32toh(h.check);
	x->rf = RF_CORRUPT;
	if (h.magic != HTR_FRAME_MAGIC || htr_frame_check(&h) != h.check) {
		snprintf(x->why, sizeof x->why, "bad frame header");
		goto out;
	}
	if (h.raw_size > HTR_FRAME_RAW_MAX) {
		snprintf(x->why, sizeof x->why, "frame of %u bytes, more than the %u allowed",
			 h.raw_size, HTR_FRAME_RAW_MAX);
		goto out;
	}
	if (h.compressed_size == 0 ||
	    h.compressed_size > ZSTD_compressBound(h.raw_size) + 1024) {
		snprintf(x->why, sizeof x->why, "impossible compressed size %u for %u bytes",
			 h.compressed_size, h.raw_size);
		goto out;
	}
	x->rf = RF_PARTIAL;
	if (!have_bytes(d, off + sizeof h, h.compressed_size))
		goto out;
	if (dump_grow((void **)&d->zbuf, &d->zcap, h.compressed_size, 1)) {
		fetch_error(x, ENOMEM);
		goto out;
	}
	got = pread_full(d->fd, d->zbuf, h.compressed_size, off + sizeof h);
	if (got < 0) {
		fetch_error(x, (int)-got);
		goto out;
	}
	if ((size_t)got < h.compressed_size)
		goto out;
	f = frame_get(d, h.raw_size);
	if (!f) {
		fetch_error(x, ENOMEM);
		goto out;
	}
	f->off = off;
	x->rf = RF_CORRUPT;
	n = ZSTD_decompressDCtx(d->zd, f->raw, f->cap, d->zbuf, h.compressed_size);
	if (ZSTD_isError(n)) {
		snprintf(x->why, sizeof x->why, "zstd: %s", ZSTD_getErrorName(n));
	} else if (n != h.raw_size) {
		snprintf(x->why, sizeof x->why, "it holds %zu bytes, its header says %u",
			 n, h.raw_size);
	} else {
		x->rf = RF_OK;
		x->f = f;
		x->next = off + sizeof h + h.compressed_size;
		goto out;
	}
	dump_frame_put(d, f);
out:
	x->fsize = d->fsize;
}

/*
 * The end of a compact dump: a realloc's free half carried to a window the
 * dump does not hold (cut short) is queued as a plain free, in a frame of
 * its own.  0, or -ENOMEM.
 */
static int compact_end(struct dump *d)
{
	struct frame *f;
	size_t i;
	int ret = 0;

	if (!d->compact)
		return 0;
	if (compact_carried_out(d->compact, &d->cout) < 0)
		return -ENOMEM;
	if (!d->cout.nch)
		return 0;
	f = frame_get(d, d->cout.buf.n);
	if (!f)
		return -ENOMEM;
	memcpy(f->raw, d->cout.buf.p, d->cout.buf.n);
	f->off = d->off;
	hold_add(d, f->size);
	for (i = 0; i < d->cout.nch && !ret; i++) {
		const struct compact_chunk *c = &d->cout.ch[i];

		if (dump_enqueue_chunk(d, f, c->tid, c->base, f->raw + c->off,
				       f->raw + c->off + c->len))
			ret = d->failed ? -ENOMEM : -1;
	}
	dump_frame_unref(d, f);
	return ret;
}

/* The producer's half: checks the frame's records and queues them. */
static int read_frame(struct dump *d)
{
	struct fetch x;
	struct frame *f;
	int ret;

	if (!d->pipe || dump_take_fetched(d, &x) < 0)
		dump_fetch_frame(d, d->off, &x);
	d->bad_off = x.off;
	d->pfsize = x.fsize;
	if (x.rf != RF_OK) {
		if (x.rf == RF_CORRUPT)
			snprintf(d->why, sizeof d->why, "%s", x.why);
		if (x.rf == RF_ERROR)
			dump_set_err(d, "%s", x.why);
		return x.rf;
	}
	f = x.f;
	ret = frame_records(d, f, 0) ? RF_CORRUPT : RF_OK;
	hold_add(d, f->size);
	if (ret == RF_OK) {
		d->off = x.next;
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

/* ---- delivery (the producer) ---- */

/*
 * Delivers a top-level record as a BEV_RARE entry of the producer's batch
 * (its time in *time): 1, 0 when it yields no event, -ENOMEM.
 */
static int emit_record(struct dump *d, struct tlrec *t, uint64_t *time)
{
	struct rd r = { t->body, t->end, 0 };
	struct batch *b = d->pb;
	uint64_t n, i, ptr = 0;
	struct dump_event *ev;
	struct rare *x;
	struct bev *e;
	const uint8_t *s;
	size_t len;
	int ret = 0;

	if (dump_grow((void **)&b->rare, &b->caprare, b->nrare + 1, sizeof *b->rare))
		return -ENOMEM;
	x = &b->rare[b->nrare];
	memset(x, 0, sizeof *x);
	ev = &x->ev;
	ev->time = rd_u(&r);
	switch (t->type) {
	case HTR_REC_MODULE_LOAD:
		ret = dump_module_load(d, &r, ev);
		if (ret == 1) {
			/* the consumer's copy: its own path, taken at hand-out */
			x->mod = d->mods[ev->id];
			x->mod.path = strdup(d->mods[ev->id].path);
			if (!x->mod.path)
				return -ENOMEM;
		}
		break;
	case HTR_REC_MODULE_UNLOAD:
		ret = dump_module_unload(d, &r, ev);
		break;
	case HTR_REC_SAMPLE:
		ev->kind = DUMP_SAMPLE;
		ev->sample.rss_bytes = rd_u(&r);
		ev->sample.arena_bytes = rd_u(&r);
		ev->sample.mmap_bytes = rd_u(&r);
		ev->sample.in_use_bytes = rd_u(&r);
		ev->sample.free_bytes = rd_u(&r);
		ev->sample.top_releasable_bytes = rd_u(&r);
		ev->sample.shim_bytes = rd_u(&r);
		ret = 1;
		break;
	case HTR_REC_LOST:
		ev->kind = DUMP_LOST;
		ev->lost_events = rd_u(&r);
		ev->lost_reason = (int)rd_u(&r);
		ret = 1;
		break;
	case HTR_REC_END:
		ev->kind = DUMP_END;
		ev->end_how = (int)rd_u(&r);
		ev->end_status = (int)rd_u(&r);
		ev->events_written = rd_u(&r);
		ev->lost_events = rd_u(&r);
		ret = 1;
		break;
	case HTR_REC_MARK: {
		int64_t off;

		ev->kind = DUMP_MARK;
		s = rd_bytes(&r, &len);
		off = dump_text_add(d, s, len);
		if (off < 0)
			return -ENOMEM;
		x->off = (size_t)off;
		ret = 1;
		break;
	}
	case HTR_REC_REACH:
		ev->kind = DUMP_REACH;
		ev->reach_kind = (int)rd_u(&r);
		n = rd_u(&r);
		x->off = b->nreach;
		if (dump_grow((void **)&b->reach, &b->capreach, b->nreach + (n ? n : 1),
			      sizeof *b->reach))
			return -ENOMEM;
		for (i = 0; i < n; i++) {
			ptr += (uint64_t)rd_s(&r);
			b->reach[b->nreach + i].ptr = ptr;
			b->reach[b->nreach + i].cls = (uint8_t)rd_u(&r);
		}
		b->nreach += n;
		ev->nreach = n;
		ret = 1;
		break;
	}
	if (ret != 1)
		return ret;
	e = dump_bev_add(d);
	if (!e) {
		free(x->mod.path);
		return -ENOMEM;
	}
	e->kind = BEV_RARE;
	e->handle = HANDLE_NONE;	/* read by the replay's read-ahead */
	e->aux = b->nrare++;
	e->time = ev->time;
	*time = ev->time;
	return 1;
}

/*
 * Fills the producer's batch with the merged stream: BS_MORE once it holds
 * BATCH_EVENTS entries, BS_END at the end of the dump (warnings in
 * d->warn_*), BS_FAIL on a hard error (d->perr), BS_WAIT in follow mode at
 * the end of what the writer has written so far.
 */
int dump_produce(struct dump *d)
{
	uint64_t time = 0;
	int ret;

	for (;;) {
		if (d->failed)
			return BS_FAIL;
		if (d->stopped)
			break;
		if (d->nheap) {
			struct hitem *top = &d->heap[0];

			if (top->time < d->wm || d->flush || d->hold > d->hold_limit) {
				if (top->order & ORD_CURSOR) {
					ret = dump_emit_cursor(d, top->obj, &time);
					if (ret < 0) {
						if (d->failed)
							return BS_FAIL;
						continue;	/* stopped */
					}
				} else {
					struct tlrec *t = top->obj;

					dump_heap_pop(d);
					ret = emit_record(d, t, &time);
					dump_frame_unref(d, t->f);
					free(t);
					d->hold -= ENTRY_COST;
					if (ret < 0) {
						d->failed = 1;
						dump_set_err(d, "out of memory");
						return BS_FAIL;
					}
					if (!ret)
						continue;
				}
				if (time < d->now) {
					if (!d->disorder++ && d->warn_kind == WARN_NONE)
						d->warn_kind = WARN_ORDER;
				} else {
					d->now = time;
				}
				if (d->pb->n >= BATCH_EVENTS)
					return BS_MORE;
				continue;
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
			if (d->pfollow)
				return BS_WAIT;
			d->final = 1;
			break;
		case RF_PARTIAL:
			if (d->pfollow)
				return BS_WAIT;
			dump_warn(d, WARN_TRUNC, d->off, NULL);
			d->final = 1;
			break;
		case RF_CORRUPT:
			dump_warn(d, WARN_CORRUPT, d->bad_off, d->why);
			d->final = 1;
			break;
		default:
			d->failed = 1;
			return BS_FAIL;
		}
		if (compact_end(d) == -ENOMEM) {
			dump_set_err(d, "out of memory");
			d->failed = 1;
			return BS_FAIL;
		}
	}
	frames_trim(d);
	return BS_END;
}

/* ---- hand-out (the consumer) ---- */

/* The consumer's next batch: returns the previous one to the producer. */
static void next_batch(struct dump *d)
{
	struct dump_pipe *p = d->pipe;
	struct batch *b;

	if (!p) {
		b = d->pb;
		if (d->cb)
			dump_batch_reset(b);		/* all handed out */
		d->cb = b;
		d->pfollow = d->follow;
		b->status = dump_produce(d);
		b->off = d->off;
		b->fsize = d->pfsize;
	} else {
		pthread_mutex_lock(&p->mu);
		if (d->cb) {
			p->freeb[(p->frhead + p->nfree++) % NBATCHES] = d->cb;
			if (p->nfree == NBATCHES / 2)
				pthread_cond_signal(&p->cv_prod);
		}
		while (!p->nfull)
			pthread_cond_wait(&p->cv_cons, &p->mu);
		b = p->full[p->fhead];
		p->fhead = (p->fhead + 1) % NBATCHES;
		p->nfull--;
		pthread_mutex_unlock(&p->mu);
		d->cb = b;
	}
	d->pub_off = b->off;
	d->pub_fsize = b->fsize;
}

static int consumer_fail(struct dump *d, const char *msg)
{
	if (msg)
		snprintf(d->err, sizeof d->err, "heaptrail: cannot read '%s': %s",
			 d->path, msg);
	else
		memcpy(d->err, d->perr, sizeof d->err);
	d->cdone = -1;
	return -1;
}

static int take_stack(struct dump *d, const struct bev *e)
{
	uint64_t id = e->aux;

	if (id >= d->pub_capstacks) {
		size_t old = d->pub_capstacks;

		if (dump_grow((void **)&d->pub_stacks, &d->pub_capstacks, id + 1,
			      sizeof *d->pub_stacks))
			return -ENOMEM;
		memset(d->pub_stacks + old, 0,
		       (d->pub_capstacks - old) * sizeof *d->pub_stacks);
	}
	d->pub_stacks[id].depth = (uint32_t)e->size;
	d->pub_stacks[id].frames = (struct dump_frame *)(uintptr_t)e->ptr;
	if (id > d->pub_stack_max)
		d->pub_stack_max = (uint32_t)id;
	return 0;
}

static int take_rare(struct dump *d, struct batch *b, const struct bev *e,
		     struct dump_event *ev)
{
	struct rare *x = &b->rare[e->aux];

	*ev = x->ev;
	switch (ev->kind) {
	case DUMP_MODULE_LOAD:
		if (dump_grow((void **)&d->pub_mods, &d->pub_capmods, d->pub_nmods + 1,
			      sizeof *d->pub_mods))
			return -ENOMEM;
		d->pub_mods[d->pub_nmods] = x->mod;
		x->mod.path = NULL;
		ev->id = d->pub_nmods++;
		break;
	case DUMP_MODULE_UNLOAD:
		if (ev->id < d->pub_nmods)
			d->pub_mods[ev->id].unloaded_at = ev->time;
		break;
	case DUMP_MARK:
		ev->text = b->text + x->off;
		break;
	case DUMP_REACH:
		ev->reach = b->reach + x->off;
		break;
	default:
		break;
	}
	return 0;
}

size_t dump_heap_run(struct dump *d, const struct bev **first, size_t max)
{
	struct batch *b = d->cb;
	size_t n;

	if (!b)
		return 0;
	n = b->n - b->pos < max ? b->n - b->pos : max;
	*first = b->ev + b->pos;
	return n;
}

void dump_heap_took(struct dump *d, size_t n, uint64_t max_time)
{
	d->cb->pos += n;
	if (max_time > d->pub_now)
		d->pub_now = max_time;
}

int dump_next(struct dump *d, struct dump_event *ev)
{
	for (;;) {
		struct batch *b = d->cb;

		if (__builtin_expect(b && b->pos < b->n, 1)) {
			const struct bev *e = &b->ev[b->pos++];

			if (__builtin_expect(e->kind < BEV_STACK, 1)) {
				ev->kind = (enum dump_kind)e->kind;
				ev->time = e->time;
				ev->tid = e->tid;
				ev->api = e->api;
				ev->ptr = e->ptr;
				ev->size = e->size;
				ev->usable = e->usable;
				ev->stack = e->stack;
				ev->handle = e->handle;
				ev->client = e->client;
				ev->text = NULL;
				ev->realloc_pair = !!(e->flags & BEV_PAIR);
				if (e->kind == DUMP_ALLOC) {
					ev->old_ptr = e->aux;
					ev->id = 0;
				} else {
					ev->old_ptr = 0;
					ev->id = e->aux;
				}
				if (__builtin_expect(e->flags & BEV_TEXT, 0)) {
					ev->text = b->text + e->usable;
					ev->usable = 0;
				}
			} else if (e->kind == BEV_STACK) {
				if (take_stack(d, e))
					return consumer_fail(d, "out of memory");
				continue;
			} else if (take_rare(d, b, e, ev)) {
				return consumer_fail(d, "out of memory");
			}
			if (ev->time > d->pub_now)
				d->pub_now = ev->time;
			return 1;
		}
		if (d->cdone)
			return d->cdone < 0 ? -1 : 0;
		if (b) {
			switch (b->status) {
			case BS_END:
				d->cdone = 1;
				if (d->warn_kind != WARN_NONE)
					format_warning(d);
				return 0;
			case BS_FAIL:
				return consumer_fail(d, NULL);
			case BS_WAIT:
				/* follow mode: the next call looks for more */
				b->status = BS_MORE;
				return 0;
			default:
				break;
			}
		} else if (dump_want_thread(d)) {
			dump_pipe_start(d);	/* or read here without one */
		}
		next_batch(d);
	}
}

/* ---- open, close, accessors ---- */

static struct dump *open_fail(struct dump *d, char *err, size_t errlen, int e)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", d->perr);
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
	const char *env;

	if (!d || !(d->path = strdup(path))) {
		if (err && errlen)
			snprintf(err, errlen, "heaptrail: cannot read '%s': out of memory", path);
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->fd = -1;
	d->hold_limit = DEFAULT_HOLD_LIMIT;
	env = getenv("HEAPTRAIL_READER_THREAD");
	d->thread_mode = env && (*env == '0' || *env == '1') ? *env - '0' : -1;
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
		dump_set_err(d, "truncated file header (the file holds only %zd byte%s)", got,
			     got == 1 ? "" : "s");
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
	d->pb = dump_batch_new();
	if (!d->zd || !d->pb) {
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
	d->pub_off = d->off;
	d->pub_fsize = d->fsize;
	return d;
}

void dump_close(struct dump *d)
{
	struct arena_block *b;
	size_t i;

	if (!d)
		return;
	if (d->pipe)
		dump_pipe_stop(d);
	else
		dump_batch_free(d->pb);
	compact_reader_free(d->compact);
	compact_out_free(&d->cout);
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
		frame_free(f);
	}
	while ((b = d->arena)) {
		d->arena = b->next;
		free(b);
	}
	for (i = 0; i < d->nmods; i++) {
		free(d->mods[i].path);
		free((void *)d->mods[i].segs);	/* the handed-out copies share it */
	}
	for (i = 0; i < d->pub_nmods; i++)
		free(d->pub_mods[i].path);
	free(d->pub_mods);
	free(d->pub_stacks);
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
	free(d->zbuf);
	hmap_release(&d->hm);
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
	if (id == HTR_STACK_NONE || id >= d->pub_capstacks || !d->pub_stacks[id].frames)
		return NULL;
	return &d->pub_stacks[id];
}

uint32_t dump_stack_count(const struct dump *d)
{
	return d->pub_stack_max;
}

const struct dump_module *dump_modules(const struct dump *d, size_t *n)
{
	*n = d->pub_nmods;
	return d->pub_mods;
}

uint64_t dump_time(const struct dump *d)
{
	return d->pub_now;
}

uint64_t dump_offset(const struct dump *d)
{
	return d->pub_off;
}

uint64_t dump_file_size(const struct dump *d)
{
	return d->pub_fsize;
}

void dump_set_follow(struct dump *d, int follow)
{
	d->follow = follow;
}

void dump_set_hold_limit(struct dump *d, uint64_t bytes)
{
	d->hold_limit = bytes;
}

/* Read it at the end of the stream: a producer thread has finished then. */
uint64_t dump_hold_peak(const struct dump *d)
{
	return d->hold_peak;
}

void dump_set_thread_mode(struct dump *d, int mode)
{
	d->thread_mode = mode;
}
