/* chart.h - terminal glyphs for curves: sparklines and filled columns, UTF-8 or ASCII */
#ifndef HT_CHART_H
#define HT_CHART_H

#include <stddef.h>

/*
 * Unicode block elements when the locale's character set is UTF-8 (LANG,
 * LC_ALL, LC_CTYPE), plain ASCII otherwise or after chart_set_ascii(1).
 */
int chart_utf8(void);
void chart_set_ascii(int ascii);

/*
 * A sparkline of n values, each scaled against 'max' (values <= 0 print as
 * a blank, any value > 0 as at least the lowest glyph).  Writes at most
 * len - 1 bytes and a NUL; returns buf.
 */
char *chart_spark(char *buf, size_t len, const double *v, size_t n, double max);

/*
 * One cell of a filled column chart: 'fill' is how much of the cell is
 * covered, 0 to 1, drawn with 'shade' 0 (solid), 1 (medium) or 2 (light).
 * Returns a static string (one glyph).
 */
const char *chart_cell(double fill, int shade);

#endif
