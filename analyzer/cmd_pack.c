/* cmd_pack.c - heaptrail pack: a dump rewritten smaller, its chunks packed into columns */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "../preload/chunkpack.h"
#include "chunkunpack.h"
#include "cli.h"
#include "commands.h"
#include "dump_internal.h"
#include "frameout.h"
#include "htr_compact.h"
#include "htr_format.h"
#include "htr_varint.h"

/*
 * A dump recorded while every core was busy is not packed
 * (HEAPTRAIL_PACK=auto leaves the CPU to the program): this packs it
 * afterwards, with the shim's own packer, joining the chunks of each
 * thread within a frame, and compresses each frame again at a higher zstd
 * level.  Nothing is dropped: every record comes out in the order it came
 * in (a thread's joined chunks where the first of them was, earlier in the
 * frame than the rest, which keeps the watermark rule), frame after frame,
 * and every analysis reads the same figures.  A frame the input cannot
 * give (truncated, damaged) ends the output there, as it ends every read.
 */

#define SYNOPSIS "heaptrail pack DUMP... [-o OUT] [--level N] [--compact]"

struct chunk_ref {
	uint32_t tid;
	uint64_t base;
	size_t off, len;	/* its plain events in 'plain' */
	size_t rec;		/* where its record began in the input frame */
	int done;
};

struct packer_state {
	FILE *in, *out;
	const char *inpath;
	uint64_t in_off, frames;
	int level, units, shift;
	int have_process, input_packed;	/* its process record seen; it said packed */
	uint8_t *zin, *raw, *frame;
	size_t zin_cap, frame_len;
	uint8_t *plain;
	size_t plain_len, plain_cap;
	struct chunk_ref *chunks;
	size_t nchunks, chunks_cap;
	struct chunkpack cp;
	uint8_t *cp_mem;
	struct chunkunpack un;
	ZSTD_DCtx *dz;
	struct frameout fo;
};

/* Room for a frame's records: what one frame holds, and a joined chunk's growth. */
#define FRAME_CAP (HTR_FRAME_RAW_MAX + CHUNKPACK_MAX_BYTES + 4096)

/* ---- output frames ---- */

static int flush_frame(struct packer_state *s)
{
	size_t n = s->frame_len;

	s->frame_len = 0;
	return n ? frameout_frame(&s->fo, s->frame, n) : 0;
}

/* Room for n more bytes of records in the frame being built (a new frame when full). */
static uint8_t *frame_room(struct packer_state *s, size_t n)
{
	if (n > HTR_FRAME_RAW_MAX) {
		cli_error("cannot pack '%s': a record of %zu bytes is larger than a frame",
			  s->inpath, n);
		return NULL;
	}
	if (s->frame_len + n > HTR_FRAME_RAW_MAX && flush_frame(s))
		return NULL;
	return s->frame + s->frame_len;
}

static int put_record(struct packer_state *s, const uint8_t *rec, size_t n)
{
	uint8_t *p = frame_room(s, n);

	if (!p)
		return -1;
	memcpy(p, rec, n);
	s->frame_len += n;
	return 0;
}

/* ---- reading the input ---- */

static void rd_skip_bytes(struct rd *r)
{
	size_t len;

	(void)rd_bytes(r, &len);
}

static void rd_skip_u(struct rd *r, int n)
{
	while (n-- > 0)
		rd_u(r);
}

/*
 * Steps over the body of a top-level record of 'type' (not PROCESS, not
 * CHUNK); 0, or -1 for an unknown type.  Only lengths: the dump reader
 * checks the values.
 */
static int skip_body(struct rd *r, uint8_t type)
{
	uint64_t n, i;

	switch (type) {
	case HTR_REC_MODULE_LOAD:
		rd_skip_u(r, 3);
		rd_skip_bytes(r);	/* path */
		rd_skip_bytes(r);	/* build id */
		n = rd_u(r);
		for (i = 0; i < n && !r->bad; i++)
			rd_skip_u(r, 2);
		return 0;
	case HTR_REC_MODULE_UNLOAD:
		rd_skip_u(r, 2);
		return 0;
	case HTR_REC_SAMPLE:
		rd_skip_u(r, 8);
		return 0;
	case HTR_REC_WATERMARK:
		rd_skip_u(r, 1);
		return 0;
	case HTR_REC_LOST:
		rd_skip_u(r, 3);
		return 0;
	case HTR_REC_END:
		rd_skip_u(r, 5);
		return 0;
	case HTR_REC_MARK:
		rd_skip_u(r, 1);
		rd_skip_bytes(r);
		return 0;
	case HTR_REC_REACH:
		rd_skip_u(r, 2);
		n = rd_u(r);
		for (i = 0; i < n && !r->bad; i++)
			rd_skip_u(r, 2);
		return 0;
	default:
		return -1;
	}
}

/*
 * A process record's body: where its flags field and the field after it
 * (fork_generation) begin, and the flags.  0, or -1 when malformed.
 */
static int process_fields(struct rd *r, const uint8_t **flags_at, const uint8_t **gen_at,
			  uint64_t *flags)
{
	rd_skip_u(r, 5);	/* pid, ppid, start_mono_ns, start_realtime_ns, page_size */
	rd_skip_bytes(r);	/* exe */
	rd_skip_bytes(r);	/* cmdline */
	rd_skip_u(r, 3);	/* sample_bytes, unwinder, max_depth */
	*flags_at = r->p;
	*flags = rd_u(r);
	*gen_at = r->p;
	rd_skip_u(r, 1);	/* fork_generation */
	return r->bad ? -1 : 0;
}

/* The process record again, its flags saying packed. */
static int put_process(struct packer_state *s, struct rd *r)
{
	const uint8_t *start = r->p, *flags_at, *gen_at;
	uint64_t flags;
	uint8_t *p, *o;

	if (process_fields(r, &flags_at, &gen_at, &flags))
		return -1;
	p = frame_room(s, 1 + (size_t)(r->p - start) + HTR_VARINT_MAX);
	if (!p)
		return -1;
	o = p;
	*o++ = HTR_REC_PROCESS;
	memcpy(o, start, (size_t)(flags_at - start));
	o += flags_at - start;
	o = htr_put_u64(o, flags | HTR_PF_PACKED);
	memcpy(o, gen_at, (size_t)(r->p - gen_at));
	o += r->p - gen_at;
	s->frame_len += (size_t)(o - p);
	return 0;
}

/* One chunk record of the input: its plain events kept for the frame's end. */
static int take_chunk(struct packer_state *s, struct rd *r, size_t rec_off, int packed)
{
	uint64_t tid = rd_u(r), base = rd_u(r), n = rd_u(r);
	const uint8_t *p, *end;
	const char *why = "";
	struct chunk_ref *c;

	if (r->bad || n > (uint64_t)(r->end - r->p))
		return -1;
	p = r->p;
	end = r->p + n;
	r->p = end;
	if (packed) {
		int ret = chunk_unpack(&s->un, &p, &end, s->units, &why);

		if (ret == -ENOMEM)
			return -ENOMEM;
		if (ret)
			return -1;
	}
	if (dump_grow((void **)&s->plain, &s->plain_cap, s->plain_len + (size_t)(end - p), 1) ||
	    dump_grow((void **)&s->chunks, &s->chunks_cap, s->nchunks + 1, sizeof(*s->chunks)))
		return -ENOMEM;
	c = &s->chunks[s->nchunks++];
	c->tid = (uint32_t)tid;
	c->base = base;
	c->off = s->plain_len;
	c->len = (size_t)(end - p);
	c->rec = rec_off;
	c->done = 0;
	memcpy(s->plain + s->plain_len, p, c->len);
	s->plain_len += c->len;
	return 0;
}

/* A chunk record of the output: tid, base, its body (n bytes at body). */
static int put_chunk(struct packer_state *s, uint32_t tid, uint64_t base, int raw_mode,
		     const uint8_t *body, size_t n)
{
	uint8_t *p = frame_room(s, 1 + 3 * HTR_VARINT_MAX + 1 + n), *o = p;

	if (!p)
		return -1;
	*o++ = HTR_REC_CHUNK;
	o = htr_put_u64(o, tid);
	o = htr_put_u64(o, base);
	o = htr_put_u64(o, n + (raw_mode ? 1 : 0));
	if (raw_mode)
		*o++ = HTR_PACK_RAW;
	memcpy(o, body, n);
	o += n;
	s->frame_len += (size_t)(o - p);
	return 0;
}

/*
 * Chunk 'first' and the thread's next chunks of this frame, packed into
 * one chunk (as many as the packer takes, up to CHUNKPACK_MAX_BYTES), put
 * where 'first' was.  Those left over go at their own places.
 */
static int put_thread_chunks(struct packer_state *s, size_t first)
{
	struct chunk_ref *c0 = &s->chunks[first];
	size_t j, bytes = 0, len, head_max = 1 + 3 * HTR_VARINT_MAX;
	uint8_t *p;

	chunkpack_begin(&s->cp, s->units, (unsigned)s->shift);
	for (j = first; j < s->nchunks; j++) {
		struct chunk_ref *c = &s->chunks[j];

		if (c->done || c->tid != c0->tid)
			continue;
		if (j > first && bytes + c->len > CHUNKPACK_MAX_BYTES)
			break;
		if (chunkpack_add(&s->cp, s->plain + c->off, c->len, c->base) != 0)
			break;
		bytes += c->len;
		c->done = 2;	/* in the chunk being packed */
	}
	if (!c0->done) {
		/* the packer could not take it: as it is */
		c0->done = 1;
		return put_chunk(s, c0->tid, c0->base, 1, s->plain + c0->off, c0->len);
	}
	p = frame_room(s, head_max + (size_t)chunkpack_plain_len(&s->cp) + CHUNKPACK_SLACK);
	if (!p)
		return -1;
	len = chunkpack_finish(&s->cp, p + head_max);
	if (len) {
		uint8_t head[1 + 3 * HTR_VARINT_MAX], *o = head;

		*o++ = HTR_REC_CHUNK;
		o = htr_put_u64(o, c0->tid);
		o = htr_put_u64(o, c0->base);
		o = htr_put_u64(o, len);
		memmove(p + (o - head), p + head_max, len);
		memcpy(p, head, (size_t)(o - head));
		s->frame_len += (size_t)(o - head) + len;
	}
	for (j = first; j < s->nchunks; j++) {
		struct chunk_ref *c = &s->chunks[j];

		if (c->done != 2)
			continue;
		c->done = 1;
		/* packing would not make them smaller: each as it is */
		if (!len && put_chunk(s, c->tid, c->base, 1, s->plain + c->off, c->len))
			return -1;
	}
	return 0;
}

/* The records of one input frame, rewritten. */
static int pack_frame(struct packer_state *s, const uint8_t *raw, size_t n)
{
	struct rd r = { raw, raw + n, 0 };
	size_t k = 0;

	/* first the chunks, their plain events */
	s->nchunks = 0;
	s->plain_len = 0;
	while (r.p < r.end) {
		const uint8_t *rec = r.p;
		uint8_t type = *r.p++;
		int ret;

		if (type == HTR_REC_PROCESS) {
			if (s->have_process || rec != raw)
				return -1;
			/* read now for the chunk encoding; written in the second pass */
			{
				const uint8_t *fa, *ga;
				uint64_t flags;

				if (process_fields(&r, &fa, &ga, &flags))
					return -1;
				if (flags & HTR_PF_COMPACT) {
					cli_error("cannot pack '%s': it is a compact dump, smaller "
						  "than packing makes it", s->inpath);
					return -2;
				}
				s->units = !!(flags & HTR_PF_PTR_UNITS);
				s->shift = flags & HTR_PF_TIME_TICKS ? HTR_TICK_SHIFT : 0;
				s->have_process = 1;
				s->input_packed = !!(flags & HTR_PF_PACKED);
			}
			continue;
		}
		if (!s->have_process)
			return -1;
		if (type == HTR_REC_CHUNK) {
			ret = take_chunk(s, &r, (size_t)(rec - raw), s->input_packed);
			if (ret)
				return ret;
			continue;
		}
		if (skip_body(&r, type) || r.bad)
			return -1;
	}
	/* then every record in its order, a thread's chunks joined at its first */
	r.p = raw;
	r.bad = 0;
	while (r.p < r.end) {
		const uint8_t *rec = r.p;
		uint8_t type = *r.p++;

		if (type == HTR_REC_PROCESS) {
			if (put_process(s, &r))
				return -2;
			continue;
		}
		if (type == HTR_REC_CHUNK) {
			struct rd q = r;

			rd_skip_u(&q, 2);
			rd_skip_bytes(&q);
			r.p = q.p;
			while (k < s->nchunks && s->chunks[k].rec < (size_t)(rec - raw))
				k++;
			if (k < s->nchunks && !s->chunks[k].done && put_thread_chunks(s, k))
				return -2;
			continue;
		}
		skip_body(&r, type);
		if (put_record(s, rec, (size_t)(r.p - rec)))
			return -2;
	}
	return 0;
}

/*
 * The next frame of the input into s->raw: its raw length, 0 at a clean
 * end of the file, -1 where the file stops making sense (*why says how).
 */
static ssize_t read_frame(struct packer_state *s, const char **why)
{
	struct htr_frame_header h;
	size_t got = fread(&h, 1, sizeof(h), s->in), n;

	if (got == 0 && feof(s->in))
		return 0;
	if (got != sizeof(h)) {
		*why = "a frame header is cut short";
		return -1;
	}
	if (h.magic != HTR_FRAME_MAGIC || h.check != htr_frame_check(&h) ||
	    h.raw_size > HTR_FRAME_RAW_MAX || h.compressed_size > s->zin_cap) {
		*why = "a frame header is damaged";
		return -1;
	}
	if (fread(s->zin, 1, h.compressed_size, s->in) != h.compressed_size) {
		*why = "the last frame is cut short";
		return -1;
	}
	n = ZSTD_decompressDCtx(s->dz, s->raw, HTR_FRAME_RAW_MAX, s->zin, h.compressed_size);
	if (ZSTD_isError(n) || n != h.raw_size) {
		*why = "a frame does not decompress";
		return -1;
	}
	s->in_off += sizeof(h) + h.compressed_size;
	return (ssize_t)n;
}

static int setup(struct packer_state *s)
{
	size_t ws = chunkpack_size(CHUNKPACK_MAX_BYTES + CHUNKPACK_MAX_BYTES / 4);

	s->zin_cap = ZSTD_compressBound(HTR_FRAME_RAW_MAX) + 1024;
	s->zin = malloc(s->zin_cap);
	s->raw = malloc(HTR_FRAME_RAW_MAX);
	s->frame = malloc(FRAME_CAP);
	s->cp_mem = calloc(1, ws);
	s->dz = ZSTD_createDCtx();
	if (!s->zin || !s->raw || !s->frame || !s->cp_mem || !s->dz ||
	    frameout_init(&s->fo, s->level, HTR_FRAME_RAW_MAX, "the packed dump"))
		return -ENOMEM;
	chunkpack_init(&s->cp, s->cp_mem, CHUNKPACK_MAX_BYTES + CHUNKPACK_MAX_BYTES / 4);
	return 0;
}

static void teardown(struct packer_state *s)
{
	free(s->zin);
	free(s->raw);
	free(s->frame);
	free(s->cp_mem);
	free(s->plain);
	free(s->chunks);
	chunkunpack_free(&s->un);
	ZSTD_freeDCtx(s->dz);
	frameout_free(&s->fo);
}

/* Header, then every frame the input gives.  0, 1 (input damaged: packed up to there), -1. */
static int pack_all(struct packer_state *s)
{
	struct htr_file_header h;
	uint8_t head[4096];
	const char *why = NULL;
	int ret = 0;

	if (fread(&h, 1, sizeof(h), s->in) != sizeof(h) ||
	    memcmp(h.magic, HTR_FILE_MAGIC, sizeof(h.magic)) || h.header_size < sizeof(h) ||
	    h.header_size > sizeof(head)) {
		cli_error("cannot read '%s': not a heaptrail dump", s->inpath);
		return -1;
	}
	if (h.version != HTR_FORMAT_VERSION) {
		cli_error("cannot read '%s': dump format version %u, this heaptrail reads %u",
			  s->inpath, h.version, HTR_FORMAT_VERSION);
		return -1;
	}
	memcpy(head, &h, sizeof(h));
	if (fread(head + sizeof(h), 1, h.header_size - sizeof(h), s->in) !=
	    h.header_size - sizeof(h)) {
		cli_error("cannot read '%s': its header is cut short", s->inpath);
		return -1;
	}
	s->in_off = h.header_size;
	if (frameout_raw(&s->fo, head, h.header_size))
		return -1;
	for (;;) {
		uint64_t at = s->in_off;
		ssize_t n = read_frame(s, &why);

		if (n == 0)
			break;
		if (n > 0) {
			ret = pack_frame(s, s->raw, (size_t)n);
			if (ret == -ENOMEM) {
				cli_error("out of memory");
				return -1;
			}
			if (ret == -2)
				return -1;
			if (ret)
				why = "a frame's records are malformed";
		}
		if (n < 0 || ret) {
			if (!s->frames) {
				cli_error("cannot read '%s': %s", s->inpath, why);
				return -1;
			}
			cli_warn("'%s': %s at byte %llu: packed what came before", s->inpath, why,
				 (unsigned long long)at);
			ret = 1;
			break;
		}
		/* frames stay frames: a damaged one later costs no more than before */
		if (flush_frame(s))
			return -1;
		s->frames++;
	}
	if (!s->frames) {
		cli_error("cannot read '%s': the dump holds no frame", s->inpath);
		return -1;
	}
	return ret;
}

int pack_dump(const char *inpath, const char *out, int level, int compact, FILE *say)
{
	struct packer_state s;
	char tmp[PATH_MAX + 32], real[PATH_MAX];
	struct stat st, ost;
	int ret, in_place, direct;

	memset(&s, 0, sizeof(s));
	s.level = level;
	s.inpath = inpath;
	s.in = fopen(s.inpath, "rb");
	if (!s.in) {
		cli_error("cannot read '%s': %s", s.inpath, strerror(errno));
		return -1;
	}
	if (fstat(fileno(s.in), &st) != 0 || !S_ISREG(st.st_mode)) {
		cli_error("cannot read '%s': not a regular file", s.inpath);
		fclose(s.in);
		return -1;
	}
	in_place = !out || (stat(out, &ost) == 0 && ost.st_dev == st.st_dev &&
			    ost.st_ino == st.st_ino);
	if (in_place) {
		/* the file itself, not a symbolic link to it, is replaced */
		if (!realpath(s.inpath, real)) {
			cli_error("cannot read '%s': %s", s.inpath, strerror(errno));
			fclose(s.in);
			return -1;
		}
		out = real;
	}
	/* the shim holds an exclusive lock on a dump while it writes it */
	if (flock(fileno(s.in), LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
		if (in_place) {
			cli_error("cannot pack '%s' in place: a running process is still writing it "
				  "(pack it when the process has ended, or write a copy with -o)",
				  s.inpath);
			fclose(s.in);
			return -1;
		}
		cli_warn("'%s' is still being written: packed what it holds so far", s.inpath);
	}
	/* /dev/null or a pipe is written in place: a rename would replace the device */
	direct = !in_place && cli_output_direct(out);
	if (snprintf(tmp, sizeof(tmp), direct ? "%s" : "%s.pack.%d", out,
		     (int)getpid()) >= (int)sizeof(tmp)) {
		cli_error("cannot pack '%s': the output path is too long", s.inpath);
		fclose(s.in);
		return -1;
	}
	if (setup(&s)) {
		cli_error("out of memory");
		fclose(s.in);
		teardown(&s);
		return -1;
	}
	/* written next to its name and renamed into place: OUT may be DUMP itself */
	s.out = s.fo.out = fopen(tmp, "wb");
	if (!s.out) {
		cli_error("cannot create '%s': %s", tmp, strerror(errno));
		fclose(s.in);
		teardown(&s);
		return -1;
	}
	/* the packed dump is readable by whom the dump was */
	if (!direct)
		(void)fchmod(fileno(s.out), st.st_mode & 07777);
	if (compact) {
		s.in_off = (uint64_t)st.st_size;
		ret = compact_dump(s.inpath, s.out, level, &s.frames, &s.fo.bytes);
	} else {
		ret = pack_all(&s);
	}
	fclose(s.in);
	if (fclose(s.out) != 0 && ret >= 0) {
		cli_error("cannot write '%s': %s", tmp, strerror(errno));
		ret = -1;
	}
	if (ret >= 0 && !direct && rename(tmp, out) != 0) {
		cli_error("cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
		ret = -1;
	}
	if (ret < 0 && !direct)
		unlink(tmp);
	else if (ret >= 0 && say)
		fprintf(say, "%s '%s': %llu frames, %s -> %s\n", compact ? "compacted" : "packed", out,
			(unsigned long long)s.frames, cli_bytes(s.in_off), cli_bytes(s.fo.bytes));
	teardown(&s);
	return ret < 0 ? -1 : 0;
}

int cmd_pack(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "level", required_argument, NULL, 'l' },
		{ "compact", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	int c, i, level = 0, compact = 0, failed = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'c':
			compact = 1;
			break;
		case 'l':
			if (cli_parse_int(optarg, 1, 19, &level))
				return cli_usage("pack", "--level wants a zstd level from 1 to 19, "
						 "not '%s'", optarg);
			break;
		default:
			return cli_bad_option("pack", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage("pack", "which dump? (%s)", SYNOPSIS);
	if (!level)
		level = compact ? COMPACT_DEFAULT_LEVEL : PACK_DEFAULT_LEVEL;
	if (out && argc - optind > 1)
		return cli_usage("pack", "-o names the output of one dump; without it, "
				 "each dump is packed in place");
	/* a process tree's dumps in one go (OUT, OUT.PID, ...): each on its own */
	for (i = optind; i < argc; i++)
		if (pack_dump(argv[i], out, level, compact, stdout) != 0)
			failed = 1;
	return failed ? CLI_USAGE : CLI_OK;
}
