/* dumpgen.h - writes synthetic .htr dumps with exactly known content (tests only) */
#ifndef HT_DUMPGEN_H
#define HT_DUMPGEN_H

#include <stddef.h>
#include <stdint.h>

#include "htr_format.h"

/*
 * A tiny dump writer for the reader's tests, the fuzz corpus and the reader
 * benchmark.  It writes what it is told, in the order it is told, so a test
 * can lay out chunks, watermarks and frames exactly as a case needs.  Times
 * are absolute dump times; the writer turns them into the format's deltas
 * (they must not go backwards inside a chunk).  Pointers likewise.
 *
 * Records go into the current frame; dg_flush() compresses and writes it.
 * A frame is flushed on its own before it would exceed 'frame_max' bytes
 * (dg_set_frame_max, default HTR_FRAME_RAW_MAX).
 *
 * Errors (I/O, out of memory) are sticky: dg_close() returns -1 if any
 * happened.  Misuse (time going backwards) aborts: it is a test bug.
 */

struct dumpgen;

struct dg_process {
	uint32_t pid, ppid;
	uint64_t start_mono_ns, start_realtime_ns, page_size;
	const char *exe;
	const char *const *argv;	/* NULL-terminated, may be NULL */
	uint64_t sample_bytes;
	unsigned unwinder, max_depth, flags, fork_generation;
};

/* Writes the file header; version 0 means HTR_FORMAT_VERSION. */
struct dumpgen *dg_create(const char *path, uint32_t version);
int dg_close(struct dumpgen *g);

void dg_set_level(struct dumpgen *g, int zstd_level);
void dg_set_frame_max(struct dumpgen *g, size_t bytes);
/* Called on each frame's raw records before compression (may change them). */
void dg_set_raw_hook(struct dumpgen *g,
		     void (*fn)(void *ctx, uint8_t *raw, size_t len), void *ctx);
/* Called on each frame header after the check was computed. */
void dg_set_header_hook(struct dumpgen *g,
			void (*fn)(void *ctx, struct htr_frame_header *h), void *ctx);

/* Top-level records. */
void dg_process(struct dumpgen *g, const struct dg_process *p);
void dg_module_load(struct dumpgen *g, uint64_t time, uint32_t id,
		    uint64_t bias, const char *path, const uint8_t *build_id,
		    size_t build_id_len, size_t nseg, const uint64_t *segs);
void dg_module_unload(struct dumpgen *g, uint64_t time, uint32_t id);
void dg_sample(struct dumpgen *g, uint64_t time, const uint64_t v[7]);
void dg_watermark(struct dumpgen *g, uint64_t time);
void dg_lost(struct dumpgen *g, uint64_t time, uint64_t n, unsigned reason);
void dg_end(struct dumpgen *g, uint64_t time, unsigned how, unsigned status,
	    uint64_t written, uint64_t lost);
void dg_mark(struct dumpgen *g, uint64_t time, const char *label);
void dg_reach(struct dumpgen *g, uint64_t time, unsigned kind, size_t n,
	      const uint64_t *ptrs, const uint8_t *cls);
/* Arbitrary bytes appended to the current frame (for corrupt records). */
void dg_raw(struct dumpgen *g, const void *bytes, size_t n);

/* Chunks: events of one thread, written as one HTR_REC_CHUNK on end. */
void dg_chunk_begin(struct dumpgen *g, uint32_t tid, uint64_t base_time);
void dg_chunk_end(struct dumpgen *g);
size_t dg_chunk_bytes(const struct dumpgen *g);
void dg_alloc(struct dumpgen *g, uint64_t time, unsigned api, uint64_t ptr,
	      uint64_t size, uint64_t usable_extra, uint32_t stack);
void dg_free(struct dumpgen *g, uint64_t time, unsigned api, uint64_t ptr);
void dg_realloc(struct dumpgen *g, uint64_t t1, uint64_t t2, unsigned api,
		uint64_t old_ptr, uint64_t new_ptr, uint64_t size,
		uint64_t usable_extra, uint32_t stack);
void dg_stack(struct dumpgen *g, uint32_t id, size_t depth, const uint64_t *ips);
void dg_thread_start(struct dumpgen *g, uint64_t time, uint32_t parent);
void dg_thread_exit(struct dumpgen *g, uint64_t time);
void dg_thread_name(struct dumpgen *g, uint64_t time, const char *name);
void dg_client_begin(struct dumpgen *g, uint64_t time, uint64_t id, const char *label);
void dg_client_end(struct dumpgen *g, uint64_t time, uint64_t id);
void dg_client_set(struct dumpgen *g, uint64_t time, uint64_t id);
void dg_pool_create(struct dumpgen *g, uint64_t time, uint64_t pool, const char *label);
void dg_pool_destroy(struct dumpgen *g, uint64_t time, uint64_t pool);
void dg_pool_alloc(struct dumpgen *g, uint64_t time, uint64_t pool, uint64_t ptr,
		   uint64_t size, uint32_t stack);
void dg_pool_free(struct dumpgen *g, uint64_t time, uint64_t pool, uint64_t ptr);
/* Arbitrary bytes appended to the current chunk. */
void dg_chunk_raw(struct dumpgen *g, const void *bytes, size_t n);

/* Ends the current frame (no-op when it is empty); 0 or -1. */
int dg_flush(struct dumpgen *g);
/* Bytes written to the file so far (header and flushed frames). */
uint64_t dg_offset(const struct dumpgen *g);

#endif
