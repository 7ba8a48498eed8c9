/* frameout.h - writing a dump's frames: each compressed, behind its header */
#ifndef HT_FRAMEOUT_H
#define HT_FRAMEOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zstd.h>

/*
 * What 'heaptrail pack' and 'pack --compact' write: the file header as
 * given, then frames (htr_format.h) compressed at one zstd level with a
 * checksum.  Errors are said in one line, naming 'what' ("the packed
 * dump").
 */
struct frameout {
	FILE *out;			/* set by the caller before writing */
	const char *what;
	ZSTD_CCtx *cz;
	uint8_t *z;
	size_t zcap;
	uint64_t bytes;			/* written so far, headers included */
};

/* For frames of at most max_raw bytes; -1 when out of memory (nothing said). */
int frameout_init(struct frameout *o, int level, size_t max_raw, const char *what);
/* Bytes as they are (the file header); 0 or -1. */
int frameout_raw(struct frameout *o, const void *p, size_t n);
/* One frame of n raw bytes (n > 0, at most HTR_FRAME_RAW_MAX); 0 or -1. */
int frameout_frame(struct frameout *o, const void *raw, size_t n);
void frameout_free(struct frameout *o);

#endif
