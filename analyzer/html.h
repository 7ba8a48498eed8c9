/* html.h - the HTML report: one self-contained page with the analyses' figures embedded */
#ifndef HT_HTML_H
#define HT_HTML_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

/*
 * The page is the template of html_assets.c (HTML, CSS and vanilla JS, no
 * external resource, so it opens from disk and works offline) with the
 * figures as one JSON document in a <script type="application/json">
 * element.  The JSON is written with every '<' as \u003c, so no string in
 * it (a C++ "operator<", a path) can end the element.  docs/reports.md
 * describes the document; the script draws everything from it.
 *
 * The figures are those of the verbs: timeline and growth (timeseries.h,
 * two passes), report, clients and frag (one more pass with their
 * observers, flame.h), so each page shows what its verb prints.
 */

struct html_opts {
	unsigned points;	/* timeline moments */
	size_t series;		/* sites whose live bytes the timeline draws */
	size_t max_sites;	/* sites embedded; the rest summed as one row */
	size_t max_clients;	/* clients listed one by one */
	unsigned map_cells;	/* cells of the page map (pages merged to fit) */
	uint64_t grace;		/* clients: grace after a disconnect, ns */
};

#define HTML_DEFAULT_POINTS 400
#define HTML_DEFAULT_SERIES 8
#define HTML_DEFAULT_MAX_SITES 20000
#define HTML_DEFAULT_MAX_CLIENTS 20000
#define HTML_DEFAULT_MAP_CELLS 16384

void html_opts_default(struct html_opts *o);

/*
 * Analyses the dump at 'path' and writes the page to 'out'.  0, or -1
 * after printing why (unreadable dump, out of memory, write error).
 */
int html_report(const char *path, FILE *out, const struct html_opts *o);

#endif
