/* cmd_timeline.c - 'heaptrail timeline': RSS, heap, allocator and top sites over time */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "chart.h"
#include "cli.h"
#include "commands.h"
#include "dumpjson.h"
#include "json.h"
#include "livedump.h"
#include "site.h"
#include "symbolize.h"
#include "timeseries.h"

#define DEFAULT_TOP 5
#define MAX_TOP 100
#define DEFAULT_POINTS 200	/* --csv, --json, --svg */
#define DEFAULT_WIDTH 64	/* chart columns when stdout is no terminal */
#define CHART_HEIGHT 8
#define GUTTER 11		/* y-axis labels left of the chart */

enum out { OUT_TEXT, OUT_CSV, OUT_JSON };

struct timeline {
	const char *path;
	struct ts_scan scan;
	struct timeseries ts;
	struct site_ctx sc;
	enum out out;
	const char *svg;
	size_t top;
	unsigned points;	/* 0: from the output */
	unsigned width, height;
	struct cli_time from, to;
	int have_from, have_to;
};

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* ---- terminal chart --------------------------------------------------- */

/* Where marker times fall among the columns: -1 when outside the window. */
static int column_of(const struct timeseries *ts, uint64_t t)
{
	uint64_t from = ts->cfg.from, to = ts->cfg.to;
	unsigned k;

	if (t < from || t > to)
		return -1;
	for (k = 0; k < ts->npts; k++)
		if (t <= ts->pts[k].time)
			return (int)k;
	return (int)ts->npts - 1;
}

/* A moment on an axis spanning 'span' ns: enough digits to tell them apart. */
static void axis_time(char *buf, size_t len, uint64_t ns, uint64_t span)
{
	if (span >= 10000000000ull)
		snprintf(buf, len, "%.1f s", (double)ns / 1e9);
	else if (span >= 100000000ull)
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	else if (span >= 1000000ull)
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
}

static void print_time_axis(const struct timeseries *ts, unsigned w)
{
	uint64_t span = ts->cfg.to - ts->cfg.from;
	char left[32], mid[32], right[32];
	int pad;

	axis_time(left, sizeof(left), ts->cfg.from, span);
	axis_time(mid, sizeof(mid), ts->cfg.from + span / 2, span);
	axis_time(right, sizeof(right), ts->cfg.to, span);
	printf("%*s%s", GUTTER, "", left);
	pad = (int)(w / 2) - (int)strlen(left) - (int)strlen(mid) / 2;
	if (pad > 0) {
		printf("%*s%s", pad, "", mid);
		pad = (int)w - (int)(w / 2) - (int)(strlen(mid) + 1) / 2 -
		      (int)strlen(right);
	} else {
		pad = (int)w - (int)strlen(left) - (int)strlen(right);
	}
	printf("%*s%s\n", pad > 1 ? pad : 1, "", right);
}

static void print_markers(struct timeline *tl, unsigned w)
{
	const struct ts_scan *s = &tl->scan;
	char *row = malloc(w + 1);
	size_t i, shown = 0, inside = 0;

	if (!row)
		return;
	memset(row, ' ', w);
	row[w] = 0;
	for (i = 0; i < s->nmarks; i++) {
		int c = column_of(&tl->ts, s->marks[i].time);

		if (c < 0)
			continue;
		inside++;
		row[c] = '^';
	}
	if (inside) {
		printf("%*s%s\n", GUTTER, "", row);
		printf("markers   ");
		for (i = 0; i < s->nmarks && shown < 8; i++) {
			if (column_of(&tl->ts, s->marks[i].time) < 0)
				continue;
			printf("%s%s at %s", shown ? ", " : " ", s->marks[i].label,
			       cli_at(s->marks[i].time));
			shown++;
		}
		if (inside > shown)
			printf(" and %zu more", inside - shown);
		printf("\n");
	}
	free(row);
}

static void memory_chart(struct timeline *tl)
{
	const struct timeseries *ts = &tl->ts;
	unsigned w = ts->npts, h = tl->height, r, k;
	double max = 0;
	int utf8 = chart_utf8();

	for (k = 0; k < w; k++) {
		const struct ts_point *p = &ts->pts[k];

		max = dmax(max, (double)p->heap_max_bytes);
		if (p->sampled)
			max = dmax(max, dmax((double)p->rss_bytes,
					     (double)p->allocator_bytes));
	}
	printf("memory    %s live heap  %s allocator  %s RSS\n",
	       utf8 ? "\u2588" : "#", utf8 ? "\u2592" : "+", utf8 ? "\u2591" : ".");
	if (max <= 0) {
		printf("          nothing was live\n");
		return;
	}
	for (r = 0; r < h; r++) {
		double lo = max * (h - 1 - r) / h, hi = max * (h - r) / h;

		if (r == 0)
			printf("%*s %s", GUTTER - 2, cli_bytes((uint64_t)max), utf8 ? "\u2524" : "|");
		else if (r == h / 2)
			printf("%*s %s", GUTTER - 2, cli_bytes((uint64_t)(max / 2)),
			       utf8 ? "\u2524" : "|");
		else
			printf("%*s %s", GUTTER - 2, "", utf8 ? "\u2502" : "|");
		for (k = 0; k < w; k++) {
			const struct ts_point *p = &ts->pts[k];
			double heap = ((double)p->heap_max_bytes - lo) / (hi - lo);

			if (heap > 0) {
				fputs(chart_cell(heap, 0), stdout);
			} else if (p->sampled && ((double)p->allocator_bytes - lo) / (hi - lo) >= 0.5) {
				fputs(chart_cell(1, 1), stdout);
			} else if (p->sampled && ((double)p->rss_bytes - lo) / (hi - lo) >= 0.5) {
				fputs(chart_cell(1, 2), stdout);
			} else {
				fputs(" ", stdout);
			}
		}
		printf("\n");
	}
	printf("%*s %s", GUTTER - 2, "0 B", utf8 ? "\u2514" : "+");
	for (k = 0; k < w; k++)
		fputs(utf8 ? "\u2500" : "-", stdout);
	printf("\n");
	print_time_axis(ts, w);
	print_markers(tl, w);
}

/* One sparkline row: 'label', the curve, its highest and last values. */
static void spark_row(const char *label, const double *v, unsigned n)
{
	char *buf = malloc((size_t)n * 4 + 1);
	double max = 0;
	unsigned k;

	if (!buf)
		return;
	for (k = 0; k < n; k++)
		max = dmax(max, v[k]);
	printf("%-*s%s  max %s, end %s\n", GUTTER, label,
	       chart_spark(buf, (size_t)n * 4 + 1, v, n, max),
	       cli_bytes((uint64_t)max), cli_bytes((uint64_t)v[n - 1]));
	free(buf);
}

static void timeline_text(struct timeline *tl)
{
	const struct timeseries *ts = &tl->ts;
	const struct ts_scan *s = &tl->scan;
	unsigned n = ts->npts, k;
	double *v = malloc((size_t)n * sizeof(*v));
	int sampled = 0;
	size_t i;

	if (!v)
		return;
	printf("heaptrail timeline for '%s'\n", tl->path);
	if (s->live)
		printf("the process is still running: read up to %s (the last complete frame)\n",
		       cli_at(s->end));
	else if (dumpjson_end_name(s->end_how))
		printf("%s, ended by %s\n", cli_duration(s->end), dumpjson_end_name(s->end_how));
	else
		printf("%s, no end record (killed, or the dump was cut short)\n",
		       cli_duration(s->end));
	printf("window %s to %s in %u columns of %s\n\n", cli_at(ts->cfg.from),
	       cli_at(ts->cfg.to), n, cli_duration((ts->cfg.to - ts->cfg.from) / n));
	memory_chart(tl);

	printf("\ncurves, each scaled to its own highest value:\n");
	for (k = 0; k < n; k++) {
		v[k] = (double)ts->pts[k].rss_bytes;
		sampled |= ts->pts[k].sampled;
	}
	if (sampled) {
		spark_row("RSS", v, n);
		for (k = 0; k < n; k++)
			v[k] = (double)ts->pts[k].allocator_bytes;
		spark_row("allocator", v, n);
	} else {
		printf("%-*s(no samples in the dump)\n", GUTTER, "RSS");
	}
	for (k = 0; k < n; k++)
		v[k] = (double)ts->pts[k].heap_live_bytes;
	spark_row("live heap", v, n);
	for (i = 0; i < ts->ndrawn; i++) {
		const struct ts_site *st = ts->drawn[i];
		char label[32];

		for (k = 0; k < n; k++)
			v[k] = (double)st->series[k];
		snprintf(label, sizeof(label), "site #%zu", i + 1);
		spark_row(label, v, n);
		printf("%*s", GUTTER, "");
		site_print(stdout, &tl->sc, st->stack, GUTTER + 2, 0);
	}
	if (!ts->ndrawn)
		printf("(no site held memory)\n");
	free(v);
}

/* ---- CSV -------------------------------------------------------------- */

/* RFC 4180: quotes around a field, quotes inside doubled. */
static void csv_field(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void timeline_csv(struct timeline *tl)
{
	const struct timeseries *ts = &tl->ts;
	unsigned k;
	size_t i;

	printf("time_seconds,heap_live_bytes,heap_max_bytes,rss_bytes,allocator_bytes,"
	       "allocator_in_use_bytes,allocations,marker");
	for (i = 0; i < ts->ndrawn; i++) {
		char buf[512];
		char col[600];

		snprintf(col, sizeof(col), "site%zu %s", i + 1,
			 site_label(&tl->sc, ts->drawn[i]->stack, buf, sizeof(buf)));
		fputc(',', stdout);
		csv_field(stdout, col);
	}
	printf("\n");
	for (k = 0; k < ts->npts; k++) {
		const struct ts_point *p = &ts->pts[k];

		printf("%.6f,%" PRIu64 ",%" PRIu64 ",", (double)p->time / 1e9,
		       p->heap_live_bytes, p->heap_max_bytes);
		if (p->sampled)
			printf("%" PRIu64 ",%" PRIu64 ",%" PRIu64, p->rss_bytes,
			       p->allocator_bytes, p->allocator_in_use_bytes);
		else
			printf(",,");
		printf(",%" PRIu64 ",", p->allocations);
		if (p->mark)
			csv_field(stdout, p->mark);
		for (i = 0; i < ts->ndrawn; i++)
			printf(",%" PRIu64, ts->drawn[i]->series[k]);
		printf("\n");
	}
}

/* ---- JSON ------------------------------------------------------------- */

static void timeline_json(struct timeline *tl)
{
	const struct timeseries *ts = &tl->ts;
	const struct ts_scan *s = &tl->scan;
	struct json j;
	unsigned k;
	size_t i;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", tl->path);
	json_key(&j, "live");
	json_bool(&j, s->live);
	json_kv_str(&j, "end", dumpjson_end_name(s->end_how));
	json_kv_double(&j, "duration_seconds", (double)s->end / 1e9);
	json_kv_double(&j, "from_seconds", (double)ts->cfg.from / 1e9);
	json_kv_double(&j, "to_seconds", (double)ts->cfg.to / 1e9);
	json_kv_u64(&j, "peak_live_bytes", s->peak_live_bytes);
	json_kv_double(&j, "peak_time_seconds", (double)s->peak_time / 1e9);
	json_key(&j, "markers");
	json_arr_begin(&j);
	for (i = 0; i < s->nmarks; i++) {
		json_obj_begin(&j);
		json_kv_str(&j, "label", s->marks[i].label);
		json_kv_double(&j, "time_seconds", (double)s->marks[i].time / 1e9);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_key(&j, "points");
	json_arr_begin(&j);
	for (k = 0; k < ts->npts; k++) {
		const struct ts_point *p = &ts->pts[k];

		json_obj_begin(&j);
		json_kv_double(&j, "time_seconds", (double)p->time / 1e9);
		json_kv_u64(&j, "heap_live_bytes", p->heap_live_bytes);
		json_kv_u64(&j, "heap_max_bytes", p->heap_max_bytes);
		json_kv_u64(&j, "allocations", p->allocations);
		json_key(&j, "rss_bytes");
		p->sampled ? json_u64(&j, p->rss_bytes) : json_null(&j);
		json_key(&j, "allocator_bytes");
		p->sampled ? json_u64(&j, p->allocator_bytes) : json_null(&j);
		json_key(&j, "allocator_in_use_bytes");
		p->sampled ? json_u64(&j, p->allocator_in_use_bytes) : json_null(&j);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_key(&j, "sites");
	json_arr_begin(&j);
	for (i = 0; i < ts->ndrawn; i++) {
		const struct ts_site *st = ts->drawn[i];

		json_obj_begin(&j);
		site_json_fields(&j, &tl->sc, st->stack);
		json_kv_u64(&j, "max_live_bytes", ts_site_stats(&tl->ts, st)->max_live_bytes);
		json_key(&j, "live_bytes");
		json_arr_begin(&j);
		for (k = 0; k < ts->npts; k++)
			json_u64(&j, st->series[k]);
		json_arr_end(&j);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

/* ---- SVG -------------------------------------------------------------- */

#define SVG_W 960
#define SVG_H 540
#define SVG_L 90		/* plot area margins */
#define SVG_R 300
#define SVG_T 50
#define SVG_B 60

static void xml_text(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			/* XML 1.0 forbids most control characters */
			if ((unsigned char)*s >= 0x20 || *s == '\t')
				fputc(*s, f);
		}
	}
}

/* A round step for about five gridlines up to 'max' bytes. */
static double byte_step(double max)
{
	static const double m[] = { 1, 2, 5, 10, 20, 50, 100, 200, 500 };
	double unit = 1;
	int u, i;

	for (u = 0; u < 6; u++, unit *= 1024)
		for (i = 0; i < 9; i++)
			if (max / (m[i] * unit) <= 6)
				return m[i] * unit;
	return max / 5;
}

static void byte_label(char *buf, size_t len, double v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%g %s", v, units[u]);
}

static double time_step(double span)
{
	static const double m[] = { 1, 2, 5 };
	double p = 1e-6;
	int i;

	for (;;) {
		for (i = 0; i < 3; i++)
			if (span / (m[i] * p) <= 8)
				return m[i] * p;
		p *= 10;
	}
}

struct svgctx {
	FILE *f;
	const struct timeseries *ts;
	double max, t0, t1;
};

static double sx(const struct svgctx *c, double t)
{
	double span = c->t1 > c->t0 ? c->t1 - c->t0 : 1;

	return SVG_L + (t - c->t0) / span * (SVG_W - SVG_L - SVG_R);
}

static double sy(const struct svgctx *c, double v)
{
	return SVG_H - SVG_B - v / c->max * (SVG_H - SVG_T - SVG_B);
}

/* A polyline of per-point values; 'get' picks the value of point k. */
static void svg_line(const struct svgctx *c, const char *color, double width,
		     const char *dash, double (*get)(const void *arg, unsigned k),
		     const void *arg, int need_sample)
{
	unsigned k;
	int open = 0;

	for (k = 0; k < c->ts->npts; k++) {
		const struct ts_point *p = &c->ts->pts[k];

		if (need_sample && !p->sampled)
			continue;
		if (!open) {
			fprintf(c->f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s%s%s points=\"",
				color, width, dash ? " stroke-dasharray=\"" : "",
				dash ? dash : "", dash ? "\"" : "");
			open = 1;
		}
		fprintf(c->f, "%.1f,%.1f ", sx(c, (double)p->time / 1e9),
			sy(c, get(arg, k)));
	}
	if (open)
		fprintf(c->f, "\"/>\n");
}

static double get_rss(const void *arg, unsigned k)
{
	return (double)((const struct timeseries *)arg)->pts[k].rss_bytes;
}

static double get_alloc(const void *arg, unsigned k)
{
	return (double)((const struct timeseries *)arg)->pts[k].allocator_bytes;
}

static double get_heap(const void *arg, unsigned k)
{
	return (double)((const struct timeseries *)arg)->pts[k].heap_live_bytes;
}

static double get_site(const void *arg, unsigned k)
{
	return (double)((const struct ts_site *)arg)->series[k];
}

static void svg_legend(FILE *f, int row, const char *color, const char *dash,
		       const char *label)
{
	double y = SVG_T + 14 + row * 20;
	double x = SVG_W - SVG_R + 20;

	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"%s%s%s/>\n",
		x, y - 4, x + 24, y - 4, color, dash ? " stroke-dasharray=\"" : "",
		dash ? dash : "", dash ? "\"" : "");
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", x + 32, y);
	xml_text(f, label);
	fprintf(f, "</text>\n");
}

static int timeline_svg(struct timeline *tl)
{
	static const char *const palette[] = {
		"#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
		"#17becf", "#bcbd22", "#7f7f7f", "#1f77b4", "#ff7f0e",
	};
	const struct timeseries *ts = &tl->ts;
	struct svgctx c;
	char tmp[4096], buf[512], lab[64];
	double step, t;
	unsigned k;
	size_t i;
	int sampled = 0, direct;
	FILE *f;

	/* in place when a rename would replace a device (/dev/null, a pipe) */
	direct = cli_output_direct(tl->svg);
	snprintf(tmp, sizeof(tmp), direct ? "%s" : "%s.tmp", tl->svg);
	f = !strcmp(tl->svg, "-") ? stdout : fopen(tmp, "w");
	if (!f) {
		cli_error("cannot write '%s': %s", tl->svg, strerror(errno));
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.f = f;
	c.ts = ts;
	c.t0 = (double)ts->cfg.from / 1e9;
	c.t1 = (double)ts->cfg.to / 1e9;
	for (k = 0; k < ts->npts; k++) {
		const struct ts_point *p = &ts->pts[k];

		c.max = dmax(c.max, (double)p->heap_live_bytes);
		if (p->sampled) {
			sampled = 1;
			c.max = dmax(c.max, dmax((double)p->rss_bytes,
						 (double)p->allocator_bytes));
		}
	}
	/* the y axis ends on the first round step above every value */
	step = byte_step(c.max > 0 ? c.max : 1);
	t = step;
	while (t < c.max)
		t += step;
	c.max = t;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		SVG_W, SVG_H, SVG_W, SVG_H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\">heaptrail timeline: ", SVG_L);
	xml_text(f, tl->path);
	if (tl->scan.live)
		fprintf(f, " (still running)");
	fprintf(f, "</text>\n");

	/* grid and axes */
	for (t = 0; t <= c.max + step / 2; t += step) {
		byte_label(lab, sizeof(lab), t);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			SVG_L, sy(&c, t), SVG_W - SVG_R, sy(&c, t));
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			SVG_L - 6, sy(&c, t) + 4, lab);
	}
	step = time_step(c.t1 - c.t0 > 0 ? c.t1 - c.t0 : 1);
	for (t = step * (double)(int64_t)(c.t0 / step); t <= c.t1 + step / 1000; t += step) {
		if (t < c.t0 - step / 1000)
			continue;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n",
			sx(&c, t), SVG_T, sx(&c, t), SVG_H - SVG_B);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g s</text>\n",
			sx(&c, t), SVG_H - SVG_B + 18, t);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n",
		SVG_L, SVG_T, SVG_W - SVG_L - SVG_R, SVG_H - SVG_T - SVG_B);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since start</text>\n",
		SVG_L + (SVG_W - SVG_L - SVG_R) / 2, SVG_H - 16);

	/* markers */
	for (i = 0; i < tl->scan.nmarks; i++) {
		double mt = (double)tl->scan.marks[i].time / 1e9;

		if (mt < c.t0 || mt > c.t1)
			continue;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"2,3\"/>\n",
			sx(&c, mt), SVG_T, sx(&c, mt), SVG_H - SVG_B);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">",
			sx(&c, mt) - 3, SVG_T + 4, sx(&c, mt) - 3, SVG_T + 4);
		xml_text(f, tl->scan.marks[i].label);
		fprintf(f, "</text>\n");
	}

	/* curves */
	if (sampled) {
		svg_line(&c, "#999999", 2, NULL, get_rss, ts, 1);
		svg_line(&c, "#ff7f0e", 2, "6,3", get_alloc, ts, 1);
	}
	svg_line(&c, "#1f77b4", 2.5, NULL, get_heap, ts, 0);
	for (i = 0; i < ts->ndrawn; i++)
		svg_line(&c, palette[i % 10], 1.5, i >= 10 ? "4,2" : NULL,
			 get_site, ts->drawn[i], 0);

	/* legend */
	k = 0;
	if (sampled) {
		svg_legend(f, (int)k++, "#999999", NULL, "RSS");
		svg_legend(f, (int)k++, "#ff7f0e", "6,3", "allocator (mallinfo2)");
	}
	svg_legend(f, (int)k++, "#1f77b4", NULL, "live heap");
	for (i = 0; i < ts->ndrawn; i++) {
		char label[600];

		snprintf(label, sizeof(label), "%s",
			 site_label(&tl->sc, ts->drawn[i]->stack, buf, sizeof(buf)));
		if (strlen(label) > 44)
			strcpy(label + 41, "...");
		svg_legend(f, (int)k++, palette[i % 10], i >= 10 ? "4,2" : NULL, label);
	}
	fprintf(f, "</svg>\n");
	if (f == stdout) {
		fflush(f);
		return 0;
	}
	/* a viewer reloading the file never sees half of it */
	if (fclose(f) != 0 || (!direct && rename(tmp, tl->svg) < 0)) {
		cli_error("cannot write '%s': %s", tl->svg, strerror(errno));
		if (!direct)
			unlink(tmp);
		return -1;
	}
	return 0;
}

/* ---- the verb --------------------------------------------------------- */

static unsigned terminal_width(void)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");
	int n;

	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 &&
	    ws.ws_col > GUTTER + 40)
		return ws.ws_col - GUTTER - 30;
	if (cols && cli_parse_int(cols, GUTTER + 40, 10000, &n) == 0)
		return (unsigned)n - GUTTER - 30;
	return DEFAULT_WIDTH;
}

static void timeline_release(struct timeline *tl)
{
	sym_free(tl->sc.sym);
	tl->sc.sym = NULL;
	ts_release(&tl->ts);
	ts_scan_release(&tl->scan);
}

static int timeline_once(struct timeline *tl)
{
	struct cli_time t[2];
	struct ts_config cfg;
	int rc = 0;

	memset(&cfg, 0, sizeof(cfg));
	if (ts_scan(&tl->scan, tl->path, tl->top) < 0)
		return CLI_USAGE;
	t[0] = tl->from;
	t[1] = tl->to;
	if (ts_resolve(&tl->scan, tl->path, t, 2) < 0)
		return CLI_USAGE;
	if (tl->have_from && tl->have_to && t[1].ns <= t[0].ns) {
		cli_error("the window is empty: %s is not before %s",
			  cli_time_str(&t[0]), cli_time_str(&t[1]));
		return CLI_USAGE;
	}
	cfg.buckets = tl->points;
	if (!cfg.buckets)
		cfg.buckets = tl->out == OUT_TEXT && !tl->svg ? tl->width : DEFAULT_POINTS;
	cfg.from = tl->have_from ? t[0].ns : 0;
	cfg.to = tl->have_to ? t[1].ns : 0;
	if (ts_build(&tl->ts, tl->path, &tl->scan, &cfg) < 0)
		return CLI_USAGE;
	tl->sc.dump = tl->ts.d;
	tl->sc.sym = sym_new(tl->ts.d);
	if (!tl->sc.sym) {
		cli_error("out of memory");
		return CLI_USAGE;
	}
	if (tl->svg && timeline_svg(tl) < 0)
		rc = CLI_USAGE;
	if (tl->out == OUT_CSV)
		timeline_csv(tl);
	else if (tl->out == OUT_JSON)
		timeline_json(tl);
	else if (!tl->svg)
		timeline_text(tl);
	fflush(stdout);
	sym_print_warnings(tl->sc.sym);
	return rc;
}

/* One pass of --follow (live_follow). */
static int timeline_pass(void *arg, int *ended)
{
	struct timeline *tl = arg;
	int rc = timeline_once(tl);

	/* until the writer's end record, or its process is gone */
	*ended = !tl->scan.live || tl->scan.end_how;
	timeline_release(tl);
	return rc;
}

int cmd_timeline(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "csv", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "svg", required_argument, NULL, 's' },
		{ "top", required_argument, NULL, 't' },
		{ "points", required_argument, NULL, 'p' },
		{ "width", required_argument, NULL, 'w' },
		{ "height", required_argument, NULL, 'H' },
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'T' },
		{ "follow", no_argument, NULL, 'F' },
		{ "interval", required_argument, NULL, 'i' },
		{ "ascii", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *verb = argv[0];
	struct timeline tl;
	uint64_t interval = 2000000000ull;
	int c, n, top = DEFAULT_TOP, follow = 0, rc;

	memset(&tl, 0, sizeof(tl));
	tl.height = CHART_HEIGHT;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			tl.out = OUT_CSV;
			break;
		case 'j':
			tl.out = OUT_JSON;
			break;
		case 's':
			tl.svg = optarg;
			break;
		case 't':
			if (cli_parse_int(optarg, 0, MAX_TOP, &top) < 0)
				return cli_usage(verb, "--top wants a number of sites from 0 to %d, not '%s'",
						 MAX_TOP, optarg);
			break;
		case 'p':
			if (cli_parse_int(optarg, 2, 100000, &n) < 0)
				return cli_usage(verb, "--points wants a number from 2 to 100000, not '%s'", optarg);
			tl.points = (unsigned)n;
			break;
		case 'w':
			if (cli_parse_int(optarg, 8, 10000, &n) < 0)
				return cli_usage(verb, "--width wants a number of columns from 8 to 10000, not '%s'", optarg);
			tl.width = (unsigned)n;
			break;
		case 'H':
			if (cli_parse_int(optarg, 2, 200, &n) < 0)
				return cli_usage(verb, "--height wants a number of rows from 2 to 200, not '%s'", optarg);
			tl.height = (unsigned)n;
			break;
		case 'f':
			if (cli_parse_time(optarg, &tl.from) < 0)
				return cli_usage(verb, "--from wants a time (seconds like 2.5, 'peak' or a marker name), not '%s'", optarg);
			tl.have_from = 1;
			break;
		case 'T':
			if (cli_parse_time(optarg, &tl.to) < 0)
				return cli_usage(verb, "--to wants a time (seconds like 2.5, 'peak' or a marker name), not '%s'", optarg);
			tl.have_to = 1;
			break;
		case 'F':
			follow = 1;
			break;
		case 'i':
			if (cli_parse_seconds(optarg, &interval) < 0 || interval < 1000000)
				return cli_usage(verb, "--interval wants a duration like 2 or 500ms, not '%s'", optarg);
			break;
		case 'A':
			chart_set_ascii(1);
			break;
		case 'h':
			help_verb("timeline", stdout);
			return 0;
		default:
			return cli_bad_option(verb, c, argv);
		}
	}
	if (cli_one_dump(verb, argc, argv, "heaptrail timeline DUMP [--csv | --json | --svg FILE]") < 0)
		return CLI_USAGE;
	tl.path = argv[optind];
	tl.top = (size_t)top;
	if (!tl.width)
		tl.width = terminal_width();
	if (!tl.have_to)
		cli_parse_time("end", &tl.to);
	if (!follow) {
		rc = timeline_once(&tl);
		timeline_release(&tl);
		return rc;
	}
	return live_follow(tl.path, interval, tl.out == OUT_TEXT && !tl.svg,
			   timeline_pass, &tl);
}
