/* livedump.h - opens a dump for analysis, also while its process still writes it */
#ifndef HT_LIVEDUMP_H
#define HT_LIVEDUMP_H

#include <stdint.h>

#include "dump.h"

/*
 * A dump whose writer is still running ends in the middle of things: frames
 * being written, and chunks of some threads newer than the last watermark
 * while other threads' events of that time are still in their buffers.  A
 * plain read would take the half-written frame for damage and replay the
 * unordered tail.  live_open() reads such a dump in follow mode instead:
 * dump_next() returns 0 at the last watermark of the last complete frame,
 * so everything delivered is complete and in order up to that moment.
 *
 * "Still running" means: the process named in the dump holds the file open
 * (a look at /proc/PID/fd).  A writer killed by SIGKILL holds nothing, and
 * its dump is read to the end like any other.
 */

/*
 * Opens 'path' (cli_open_dump: prints the error and returns NULL); *live is
 * set to 1 when the writer still runs, and the dump is then in follow mode.
 */
struct dump *live_open(const char *path, int *live);

/* 1 when the process that writes 'path' (named in 'd') holds it open. */
int live_writer_running(const struct dump *d, const char *path);

/*
 * --follow: waits 'ns' nanoseconds.  Returns 0, or -1 when interrupted by
 * SIGINT or SIGTERM (the caller stops quietly).
 */
int live_follow_sleep(uint64_t ns);
/* Installs the SIGINT/SIGTERM handlers that live_follow_sleep() watches. */
void live_follow_signals(void);
/* 1 once SIGINT or SIGTERM arrived during follow mode. */
int live_follow_stopped(void);
/*
 * --follow of a dump not written yet ('record' just started): waits until
 * 'path' exists and holds its first frame, looking every 'ns'.  0 (also
 * for a file that is not a dump at all: opening it says why), or -1 when
 * interrupted.
 */
int live_wait_for_file(const char *path, uint64_t ns);

/*
 * --follow: waits for 'path' (live_wait_for_file), then calls 'pass' every
 * 'ns' until a pass fails, the dump is complete (the pass sets *ended when
 * its writer wrote the end record or is gone) or SIGINT/SIGTERM arrives.
 * With 'text', the screen of a terminal is cleared before each pass and
 * passes are separated by an empty line.  Returns the last pass's result,
 * or 0 when interrupted before the first.
 */
int live_follow(const char *path, uint64_t ns, int text,
		int (*pass)(void *arg, int *ended), void *arg);

#endif
