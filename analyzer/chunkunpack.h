/* chunkunpack.h - the reader's inverse of the writer's chunk packing (HTR_PF_PACKED) */
#ifndef CHUNKUNPACK_H
#define CHUNKUNPACK_H

#include <stddef.h>
#include <stdint.h>

/* Where unpacked events live until the next chunk of the same reader. */
struct chunkunpack {
	uint8_t *buf;
	size_t cap;
	uint64_t *slots;	/* pointers of the chunk's allocations, then frees */
	size_t nslots;
};

/*
 * *p .. *end hold one packed chunk (htr_chunkpack.h); on return they hold
 * its events in the plain chunk encoding, in u->buf (or, for a chunk the
 * writer left as it was, inside the input); units: HTR_PF_PTR_UNITS.  Returns 0, -EINVAL when the
 * packing is damaged (streams that do not add up, a length beyond
 * HTR_PACK_PLAIN_MAX) with *why set to a phrase, or -ENOMEM.
 */
int chunk_unpack(struct chunkunpack *u, const uint8_t **p, const uint8_t **end,
		 int units, const char **why);

void chunkunpack_free(struct chunkunpack *u);

#endif
