/* html_internal.h - what the html_*.c files share: the report's state and its JSON writers */
#ifndef HT_HTML_INTERNAL_H
#define HT_HTML_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "flame.h"
#include "html.h"
#include "json.h"
#include "timeseries.h"

/*
 * Sites are named by their stack id everywhere in the document ("site":
 * 12); the "sites" array holds each named one once.  The timeline's passes
 * come first and are released before the main pass, so the two replays'
 * live maps are never in memory together.
 */

/* What the timeline's pass learned about one site's growth. */
struct html_growth {
	uint8_t present;
	uint8_t cls;		/* enum ts_class */
	double bps, per1k, r2;
	uint64_t last_bytes;
};

struct html {
	const char *path;
	struct html_opts opt;
	struct json *j;
	struct flame f;
	struct html_growth *growth;	/* by stack id */
	uint32_t ngrowth;
	size_t growth_counts[TS_NCLASSES];
	uint32_t *wanted;	/* stack ids the document names: always embedded */
	size_t nwanted, capwanted;
};

/* Notes a site the document refers to, so that "sites" holds it.  0 or -ENOMEM. */
int html_want_site(struct html *h, uint32_t stack);

/* html_data.c: "process", "totals", "clients", "frag" (not its map). */
void html_json_process(struct html *h);
void html_json_totals(struct html *h);
int html_json_clients(struct html *h);
int html_json_frag(struct html *h);

/* html_timeline.c: both timeseries passes, "timeline" and the growth figures. */
int html_json_timeline(struct html *h);

/* html_pagemap.c: "page_map", the heaps' pages at the end.  0 or -ENOMEM. */
int html_json_pagemap(struct html *h);

/* html_sites.c: "sites" and "frames".  0 or -ENOMEM. */
int html_json_sites(struct html *h);

/* html_assets.c: the page before and after the JSON document. */
extern const char html_page_head[];
extern const char html_page_tail[];

#endif
