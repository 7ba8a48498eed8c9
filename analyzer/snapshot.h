/* snapshot.h - live bytes per site at one moment, or what a time window left live */
#ifndef HT_SNAPSHOT_H
#define HT_SNAPSHOT_H

#include <stddef.h>

#include "cli.h"

/*
 * --at T: replays the dump up to T (every event at or before it) and lists
 * each site's live bytes and blocks then, with the live heap and the last
 * RSS sample.  --between T1 T2: replays up to T2 and lists, per site, the
 * blocks allocated after T1 that are still live at T2 (what the window left
 * behind), with what the site allocated in the window.
 *
 * Times are anything cli_parse_time() takes: seconds, 'peak', 'end' or a
 * marker name.  A dump still being written is read up to its last complete
 * frame (livedump.h).
 */
struct snapshot_opts {
	const char *verb;	/* named in messages: "snapshot", "report" */
	const char *path;
	int between;		/* 0: at 'at'; 1: between 'from' and 'to' */
	struct cli_time at, from, to;
	size_t top;		/* sites shown, 0 = all */
	int json;
};

/* Runs it and prints the result: the exit status (0, or CLI_USAGE). */
int snapshot_run(struct snapshot_opts *o);

/* 1 when a verb's arguments ask for a snapshot (--at, --between): 'report' hands over. */
int snapshot_wanted(int argc, char **argv);

#endif
