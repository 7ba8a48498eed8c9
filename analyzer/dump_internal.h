/* dump_internal.h - knobs and counters of the dump reader for its tests */
#ifndef HT_DUMP_INTERNAL_H
#define HT_DUMP_INTERNAL_H

#include <stdint.h>

#include "dump.h"

/*
 * The reader holds decompressed frames until every chunk in them has been
 * replayed.  A well-formed dump needs only what lies between two watermarks;
 * a dump without watermarks would need all of it, so past this limit
 * (default 512 MiB) the reader replays the earliest events it holds without
 * waiting for a watermark, and warns if that put events out of order.
 */
void dump_set_hold_limit(struct dump *d, uint64_t bytes);

/* Highest number of bytes held so far (frames plus queued entries). */
uint64_t dump_hold_peak(const struct dump *d);

#endif
