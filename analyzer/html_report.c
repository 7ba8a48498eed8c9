/* html_report.c - the HTML report: runs the analyses and writes template and figures as one page */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "html_internal.h"

void html_opts_default(struct html_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->points = HTML_DEFAULT_POINTS;
	o->series = HTML_DEFAULT_SERIES;
	o->max_sites = HTML_DEFAULT_MAX_SITES;
	o->max_clients = HTML_DEFAULT_MAX_CLIENTS;
	o->map_cells = HTML_DEFAULT_MAP_CELLS;
	o->grace = FLAME_DEFAULT_GRACE;
}

/*
 * The JSON goes through this stream on its way to the page: '<' becomes
 * \u003c.  JSON has '<' only inside strings, where the escape means the
 * same, so the document stays valid while "</script>" and "<!--" can never
 * appear in the element.
 */
static ssize_t escape_write(void *cookie, const char *buf, size_t n)
{
	FILE *out = cookie;
	size_t i, from = 0;

	for (i = 0; i < n; i++) {
		if (buf[i] != '<')
			continue;
		if (i > from && fwrite(buf + from, 1, i - from, out) != i - from)
			return -1;
		if (fputs("\\u003c", out) < 0)
			return -1;
		from = i + 1;
	}
	if (n > from && fwrite(buf + from, 1, n - from, out) != n - from)
		return -1;
	return (ssize_t)n;
}

static int document(struct html *h)
{
	struct json *j = h->j;
	int rc;

	json_obj_begin(j);
	json_kv_u64(j, "format", 1);
	json_kv_str(j, "heaptrail", HEAPTRAIL_VERSION);
	json_kv_str(j, "dump", h->path);
	/* timeline first: its passes are released before the main pass starts */
	if (html_json_timeline(h) < 0)
		return -1;
	if (flame_open(&h->f, h->path, h->opt.grace, FLAME_WITH_FRAG | FLAME_NO_WARNING) < 0)
		return -1;
	html_json_process(h);
	html_json_totals(h);
	json_key(j, "costs");
	json_arr_begin(j);
	for (rc = 0; rc < FLAME_NCOSTS; rc++)
		json_str(j, flame_cost_name((enum flame_cost)rc));
	json_arr_end(j);
	if (html_json_clients(h) < 0 || html_json_frag(h) < 0 ||
	    html_json_pagemap(h) < 0 || html_json_sites(h) < 0) {
		cli_error("out of memory");
		return -1;
	}
	json_obj_end(j);
	json_finish(j);
	return 0;
}

int html_report(const char *path, FILE *out, const struct html_opts *o)
{
	static const cookie_io_functions_t io = { .write = escape_write };
	struct html h;
	struct json j;
	FILE *esc;
	int rc;

	memset(&h, 0, sizeof(h));
	h.path = path;
	h.opt = *o;
	h.j = &j;
	esc = fopencookie(out, "w", io);
	if (!esc) {
		cli_error("out of memory");
		return -1;
	}
	fputs(html_page_head, out);
	json_init(&j, esc, 0);
	rc = document(&h);
	if (fclose(esc) != 0 && !rc) {
		cli_error("cannot write the report: %s", strerror(errno));
		rc = -1;
	}
	fputs(html_page_tail, out);
	if (h.f.sc.sym)
		sym_print_warnings(h.f.sc.sym);
	flame_close(&h.f);
	free(h.growth);
	free(h.wanted);
	return rc;
}
