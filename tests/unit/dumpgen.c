/* dumpgen.c - writes synthetic .htr dumps with exactly known content (tests only) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "dumpgen.h"
#include "htr_varint.h"

struct buf {
	uint8_t *p;
	size_t len, cap;
};

struct dumpgen {
	FILE *f;
	int failed;
	int level;
	size_t frame_max;
	uint64_t offset;
	struct buf frame, rec, chunk, zbuf;
	ZSTD_CCtx *cctx;
	void (*raw_hook)(void *, uint8_t *, size_t);
	void *raw_ctx;
	void (*hdr_hook)(void *, struct htr_frame_header *);
	void *hdr_ctx;
	/* chunk state */
	int in_chunk;
	uint32_t tid;
	uint64_t base, t, prev;
};

static void die(const char *what)
{
	fprintf(stderr, "dumpgen: %s\n", what);
	abort();
}

static uint8_t *room(struct buf *b, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			die("out of memory");
		b->cap = cap;
	}
	return b->p + b->len;
}

static void put_u(struct buf *b, uint64_t v)
{
	b->len = (size_t)(htr_put_u64(room(b, HTR_VARINT_MAX), v) - b->p);
}

static void put_s(struct buf *b, int64_t v)
{
	put_u(b, htr_zigzag(v));
}

static void put_bytes(struct buf *b, const void *s, size_t n)
{
	put_u(b, n);
	memcpy(room(b, n), s, n);
	b->len += n;
}

static void put_str(struct buf *b, const char *s)
{
	put_bytes(b, s, strlen(s));
}

struct dumpgen *dg_create(const char *path, uint32_t version)
{
	struct dumpgen *g = calloc(1, sizeof *g);
	struct htr_file_header h;

	if (!g)
		return NULL;
	g->f = fopen(path, "wb");
	g->cctx = ZSTD_createCCtx();
	if (!g->f || !g->cctx) {
		if (g->f)
			fclose(g->f);
		ZSTD_freeCCtx(g->cctx);
		free(g);
		return NULL;
	}
	g->level = 1;
	g->frame_max = HTR_FRAME_RAW_MAX;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, HTR_FILE_MAGIC, 8);
	h.version = version ? version : HTR_FORMAT_VERSION;
	h.header_size = sizeof h;
	h.pid = 4242;
	h.start_realtime_ns = 1700000000000000000ull;
	if (fwrite(&h, sizeof h, 1, g->f) != 1)
		g->failed = 1;
	g->offset = sizeof h;
	return g;
}

void dg_set_level(struct dumpgen *g, int zstd_level)
{
	g->level = zstd_level;
}

void dg_set_frame_max(struct dumpgen *g, size_t bytes)
{
	g->frame_max = bytes;
}

void dg_set_raw_hook(struct dumpgen *g,
		     void (*fn)(void *ctx, uint8_t *raw, size_t len), void *ctx)
{
	g->raw_hook = fn;
	g->raw_ctx = ctx;
}

void dg_set_header_hook(struct dumpgen *g,
			void (*fn)(void *ctx, struct htr_frame_header *h), void *ctx)
{
	g->hdr_hook = fn;
	g->hdr_ctx = ctx;
}

int dg_flush(struct dumpgen *g)
{
	struct htr_frame_header h;
	size_t n;

	if (!g->frame.len)
		return g->failed ? -1 : 0;
	if (g->raw_hook)
		g->raw_hook(g->raw_ctx, g->frame.p, g->frame.len);
	g->zbuf.len = 0;
	room(&g->zbuf, ZSTD_compressBound(g->frame.len));
	ZSTD_CCtx_reset(g->cctx, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(g->cctx, ZSTD_c_compressionLevel, g->level);
	ZSTD_CCtx_setParameter(g->cctx, ZSTD_c_checksumFlag, 1);
	n = ZSTD_compress2(g->cctx, g->zbuf.p, g->zbuf.cap, g->frame.p, g->frame.len);
	if (ZSTD_isError(n))
		die(ZSTD_getErrorName(n));
	h.magic = HTR_FRAME_MAGIC;
	h.compressed_size = (uint32_t)n;
	h.raw_size = (uint32_t)g->frame.len;
	h.check = htr_frame_check(&h);
	if (g->hdr_hook)
		g->hdr_hook(g->hdr_ctx, &h);
	if (fwrite(&h, sizeof h, 1, g->f) != 1 || fwrite(g->zbuf.p, 1, n, g->f) != n ||
	    fflush(g->f))
		g->failed = 1;
	g->offset += sizeof h + n;
	g->frame.len = 0;
	return g->failed ? -1 : 0;
}

uint64_t dg_offset(const struct dumpgen *g)
{
	return g->offset;
}

int dg_close(struct dumpgen *g)
{
	int ret;

	if (g->in_chunk)
		dg_chunk_end(g);
	dg_flush(g);
	ret = g->failed ? -1 : 0;
	if (fclose(g->f))
		ret = -1;
	ZSTD_freeCCtx(g->cctx);
	free(g->frame.p);
	free(g->rec.p);
	free(g->chunk.p);
	free(g->zbuf.p);
	free(g);
	return ret;
}

/* Moves the record built in g->rec into the frame, flushing first if full. */
static void emit(struct dumpgen *g)
{
	if (g->frame.len && g->frame.len + g->rec.len > g->frame_max)
		dg_flush(g);
	memcpy(room(&g->frame, g->rec.len), g->rec.p, g->rec.len);
	g->frame.len += g->rec.len;
	g->rec.len = 0;
}

static struct buf *rec(struct dumpgen *g, uint8_t type)
{
	g->rec.len = 0;
	*room(&g->rec, 1) = type;
	g->rec.len = 1;
	return &g->rec;
}

void dg_raw(struct dumpgen *g, const void *bytes, size_t n)
{
	g->rec.len = 0;
	memcpy(room(&g->rec, n), bytes, n);
	g->rec.len = n;
	emit(g);
}

void dg_process(struct dumpgen *g, const struct dg_process *p)
{
	struct buf *b = rec(g, HTR_REC_PROCESS);
	struct buf cmd = { 0 };
	size_t i;

	put_u(b, p->pid);
	put_u(b, p->ppid);
	put_u(b, p->start_mono_ns);
	put_u(b, p->start_realtime_ns);
	put_u(b, p->page_size);
	put_str(b, p->exe ? p->exe : "");
	for (i = 0; p->argv && p->argv[i]; i++) {
		size_t n = strlen(p->argv[i]) + 1;

		memcpy(room(&cmd, n), p->argv[i], n);
		cmd.len += n;
	}
	put_bytes(b, cmd.p ? cmd.p : (const uint8_t *)"", cmd.len);
	free(cmd.p);
	put_u(b, p->sample_bytes);
	put_u(b, p->unwinder);
	put_u(b, p->max_depth);
	put_u(b, p->flags);
	put_u(b, p->fork_generation);
	emit(g);
}

void dg_module_load(struct dumpgen *g, uint64_t time, uint32_t id,
		    uint64_t bias, const char *path, const uint8_t *build_id,
		    size_t build_id_len, size_t nseg, const uint64_t *segs)
{
	struct buf *b = rec(g, HTR_REC_MODULE_LOAD);
	size_t i;

	put_u(b, time);
	put_u(b, id);
	put_u(b, bias);
	put_str(b, path);
	put_bytes(b, build_id ? build_id : (const uint8_t *)"", build_id_len);
	put_u(b, nseg);
	for (i = 0; i < 2 * nseg; i++)
		put_u(b, segs[i]);
	emit(g);
}

void dg_module_unload(struct dumpgen *g, uint64_t time, uint32_t id)
{
	struct buf *b = rec(g, HTR_REC_MODULE_UNLOAD);

	put_u(b, time);
	put_u(b, id);
	emit(g);
}

void dg_sample(struct dumpgen *g, uint64_t time, const uint64_t v[7])
{
	struct buf *b = rec(g, HTR_REC_SAMPLE);
	int i;

	put_u(b, time);
	for (i = 0; i < 7; i++)
		put_u(b, v[i]);
	emit(g);
}

void dg_watermark(struct dumpgen *g, uint64_t time)
{
	put_u(rec(g, HTR_REC_WATERMARK), time);
	emit(g);
}

void dg_lost(struct dumpgen *g, uint64_t time, uint64_t n, unsigned reason)
{
	struct buf *b = rec(g, HTR_REC_LOST);

	put_u(b, time);
	put_u(b, n);
	put_u(b, reason);
	emit(g);
}

void dg_end(struct dumpgen *g, uint64_t time, unsigned how, unsigned status,
	    uint64_t written, uint64_t lost)
{
	struct buf *b = rec(g, HTR_REC_END);

	put_u(b, time);
	put_u(b, how);
	put_u(b, status);
	put_u(b, written);
	put_u(b, lost);
	emit(g);
}

void dg_mark(struct dumpgen *g, uint64_t time, const char *label)
{
	struct buf *b = rec(g, HTR_REC_MARK);

	put_u(b, time);
	put_str(b, label);
	emit(g);
}

void dg_reach(struct dumpgen *g, uint64_t time, unsigned kind, size_t n,
	      const uint64_t *ptrs, const uint8_t *cls)
{
	struct buf *b = rec(g, HTR_REC_REACH);
	uint64_t prev = 0;
	size_t i;

	put_u(b, time);
	put_u(b, kind);
	put_u(b, n);
	for (i = 0; i < n; i++) {
		put_s(b, (int64_t)(ptrs[i] - prev));
		prev = ptrs[i];
		put_u(b, cls[i]);
	}
	emit(g);
}

/* ---- chunks ---- */

void dg_chunk_begin(struct dumpgen *g, uint32_t tid, uint64_t base_time)
{
	if (g->in_chunk)
		die("chunk already open");
	g->in_chunk = 1;
	g->tid = tid;
	g->base = g->t = base_time;
	g->prev = 0;
	g->chunk.len = 0;
}

size_t dg_chunk_bytes(const struct dumpgen *g)
{
	return g->chunk.len;
}

void dg_chunk_end(struct dumpgen *g)
{
	struct buf *b;

	if (!g->in_chunk)
		die("no chunk open");
	g->in_chunk = 0;
	b = rec(g, HTR_REC_CHUNK);
	put_u(b, g->tid);
	put_u(b, g->base);
	put_bytes(b, g->chunk.p ? g->chunk.p : (const uint8_t *)"", g->chunk.len);
	emit(g);
}

static void ev_time(struct dumpgen *g, uint64_t time)
{
	if (!g->in_chunk)
		die("event outside a chunk");
	if (time < g->t)
		die("time goes backwards in a chunk");
	put_u(&g->chunk, time - g->t);
	g->t = time;
}

static void ev_ptr(struct dumpgen *g, uint64_t ptr)
{
	put_s(&g->chunk, (int64_t)(ptr - g->prev));
	g->prev = ptr;
}

static void ev_byte(struct dumpgen *g, unsigned type, unsigned api)
{
	*room(&g->chunk, 1) = HTR_EV_BYTE(type, api);
	g->chunk.len++;
}

void dg_alloc(struct dumpgen *g, uint64_t time, unsigned api, uint64_t ptr,
	      uint64_t size, uint64_t usable_extra, uint32_t stack)
{
	ev_byte(g, HTR_EV_ALLOC, api);
	ev_time(g, time);
	ev_ptr(g, ptr);
	put_u(&g->chunk, size);
	put_u(&g->chunk, usable_extra);
	put_u(&g->chunk, stack);
}

void dg_free(struct dumpgen *g, uint64_t time, unsigned api, uint64_t ptr)
{
	ev_byte(g, HTR_EV_FREE, api);
	ev_time(g, time);
	ev_ptr(g, ptr);
}

void dg_realloc(struct dumpgen *g, uint64_t t1, uint64_t t2, unsigned api,
		uint64_t old_ptr, uint64_t new_ptr, uint64_t size,
		uint64_t usable_extra, uint32_t stack)
{
	if (t2 < t1)
		die("realloc ends before it starts");
	ev_byte(g, HTR_EV_REALLOC, api);
	ev_time(g, t1);
	put_u(&g->chunk, t2 - t1);
	g->t = t2;
	ev_ptr(g, old_ptr);
	ev_ptr(g, new_ptr);
	put_u(&g->chunk, size);
	put_u(&g->chunk, usable_extra);
	put_u(&g->chunk, stack);
}

void dg_stack(struct dumpgen *g, uint32_t id, size_t depth, const uint64_t *ips)
{
	size_t i;

	ev_byte(g, HTR_EV_STACK, 0);
	put_u(&g->chunk, id);
	put_u(&g->chunk, depth);
	for (i = 0; i < depth; i++) {
		if (i)
			put_s(&g->chunk, (int64_t)(ips[i] - ips[i - 1]));
		else
			put_u(&g->chunk, ips[0]);
	}
}

static void control(struct dumpgen *g, uint64_t time, unsigned sub)
{
	ev_byte(g, HTR_EV_CONTROL, 0);
	ev_time(g, time);
	put_u(&g->chunk, sub);
}

void dg_thread_start(struct dumpgen *g, uint64_t time, uint32_t parent)
{
	control(g, time, HTR_SUB_THREAD_START);
	put_u(&g->chunk, parent);
}

void dg_thread_exit(struct dumpgen *g, uint64_t time)
{
	control(g, time, HTR_SUB_THREAD_EXIT);
}

void dg_thread_name(struct dumpgen *g, uint64_t time, const char *name)
{
	control(g, time, HTR_SUB_THREAD_NAME);
	put_str(&g->chunk, name);
}

void dg_client_begin(struct dumpgen *g, uint64_t time, uint64_t id, const char *label)
{
	control(g, time, HTR_SUB_CLIENT_BEGIN);
	put_u(&g->chunk, id);
	put_str(&g->chunk, label);
}

void dg_client_end(struct dumpgen *g, uint64_t time, uint64_t id)
{
	control(g, time, HTR_SUB_CLIENT_END);
	put_u(&g->chunk, id);
}

void dg_client_set(struct dumpgen *g, uint64_t time, uint64_t id)
{
	control(g, time, HTR_SUB_CLIENT_SET);
	put_u(&g->chunk, id);
}

void dg_pool_create(struct dumpgen *g, uint64_t time, uint64_t pool, const char *label)
{
	control(g, time, HTR_SUB_POOL_CREATE);
	put_u(&g->chunk, pool);
	put_str(&g->chunk, label);
}

void dg_pool_destroy(struct dumpgen *g, uint64_t time, uint64_t pool)
{
	control(g, time, HTR_SUB_POOL_DESTROY);
	put_u(&g->chunk, pool);
}

void dg_pool_alloc(struct dumpgen *g, uint64_t time, uint64_t pool, uint64_t ptr,
		   uint64_t size, uint32_t stack)
{
	control(g, time, HTR_SUB_POOL_ALLOC);
	put_u(&g->chunk, pool);
	ev_ptr(g, ptr);
	put_u(&g->chunk, size);
	put_u(&g->chunk, stack);
}

void dg_pool_free(struct dumpgen *g, uint64_t time, uint64_t pool, uint64_t ptr)
{
	control(g, time, HTR_SUB_POOL_FREE);
	put_u(&g->chunk, pool);
	ev_ptr(g, ptr);
}

void dg_chunk_raw(struct dumpgen *g, const void *bytes, size_t n)
{
	memcpy(room(&g->chunk, n), bytes, n);
	g->chunk.len += n;
}
