/* frameout.c - writing a dump's frames: each compressed, behind its header */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "frameout.h"
#include "htr_format.h"

int frameout_init(struct frameout *o, int level, size_t max_raw, const char *what)
{
	memset(o, 0, sizeof(*o));
	o->what = what;
	o->zcap = ZSTD_compressBound(max_raw);
	o->z = malloc(o->zcap);
	o->cz = ZSTD_createCCtx();
	if (!o->z || !o->cz ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(o->cz, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(o->cz, ZSTD_c_checksumFlag, 1)))
		return -1;
	return 0;
}

int frameout_raw(struct frameout *o, const void *p, size_t n)
{
	if (fwrite(p, 1, n, o->out) != n) {
		cli_error("cannot write %s: %s", o->what, strerror(errno));
		return -1;
	}
	o->bytes += n;
	return 0;
}

int frameout_frame(struct frameout *o, const void *raw, size_t n)
{
	struct htr_frame_header h;
	size_t z;

	if (n > HTR_FRAME_RAW_MAX) {	/* the writers' limits keep it below */
		cli_error("cannot write %s: a frame of %zu bytes", o->what, n);
		return -1;
	}
	z = ZSTD_compress2(o->cz, o->z, o->zcap, raw, n);
	if (ZSTD_isError(z)) {
		cli_error("cannot compress a frame: %s", ZSTD_getErrorName(z));
		return -1;
	}
	h.magic = HTR_FRAME_MAGIC;
	h.compressed_size = (uint32_t)z;
	h.raw_size = (uint32_t)n;
	h.check = htr_frame_check(&h);
	return frameout_raw(o, &h, sizeof(h)) || frameout_raw(o, o->z, z) ? -1 : 0;
}

void frameout_free(struct frameout *o)
{
	free(o->z);
	if (o->cz)
		ZSTD_freeCCtx(o->cz);
	memset(o, 0, sizeof(*o));
}
