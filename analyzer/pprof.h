/* pprof.h - a dump's sites as a pprof profile (profile.proto, gzip'd) */
#ifndef HT_PPROF_H
#define HT_PPROF_H

#include <stdio.h>

#include "flame.h"

/*
 * The profile go tool pprof, Pyroscope and Parca read: sample types
 * alloc_objects/count, alloc_space/bytes (every allocation of the run),
 * inuse_objects/count and inuse_space/bytes (live at the end: what
 * 'heaptrail report' calls leaked), default inuse_space.  One sample per
 * site, its locations leaf first; one location per captured address, its
 * lines innermost (inlined) first; one mapping per module of the dump with
 * its path and build-id, marked as symbolized so that pprof does not look
 * for the binaries.
 *
 * Writes the gzip'd profile to 'out'.  0, or -ENOMEM / -EIO.
 */
int pprof_write(struct flame *f, FILE *out);

#endif
