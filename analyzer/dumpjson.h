/* dumpjson.h - a dump's process, totals and site figures as JSON, shared by the verbs */
#ifndef HT_DUMPJSON_H
#define HT_DUMPJSON_H

#include "dump.h"
#include "json.h"
#include "replay.h"

/*
 * 'report --json' and the HTML report write the same "process" and
 * "totals" objects; the HTML one carries a few more keys (the page's clock
 * and axis need them), asked for by these flags.  The keys keep their
 * places, so either output stays as it was.
 */
enum {
	DUMPJSON_START = 1 << 0,	/* process: start_unix_seconds, page_size */
	DUMPJSON_RSS_TIME = 1 << 1,	/* totals: peak_rss_time_seconds */
	DUMPJSON_REACH = 1 << 2,	/* totals: reach_scan and its classes */
};

/* "exit", "signal", "exec", "unknown" for an HTR_END_* value; NULL for none. */
const char *dumpjson_end_name(int how);

/* Writes "process": {...} (a key and its object) into an open object. */
void dumpjson_process(struct json *j, const struct dump_process *p, unsigned flags);

/* Writes "totals": {...}; 'r' is read only with DUMPJSON_REACH. */
void dumpjson_totals(struct json *j, struct replay *r,
		     const struct replay_totals *t, unsigned flags);

/*
 * A site's figures as 'report --json' names them ("leaked_bytes" ...
 * "mismatches"), into the site's open object; growth and the HTML report
 * write them the same way.
 */
/* An RSS and allocator sample's figures, as keys of the object being written. */
void dumpjson_sample(struct json *j, const struct dump_sample *s);

void dumpjson_site_figures(struct json *j, const struct site_stats *s);

#endif
