/* chart.c - terminal glyphs for curves: sparklines and filled columns, UTF-8 or ASCII */
#include <langinfo.h>
#include <locale.h>
#include <string.h>

#include "chart.h"

static int mode = -1;		/* -1 unknown, 0 ASCII, 1 UTF-8 */

int chart_utf8(void)
{
	if (mode < 0) {
		const char *cs;

		/* LC_CTYPE only: numbers keep printing with a '.' */
		setlocale(LC_CTYPE, "");
		cs = nl_langinfo(CODESET);
		mode = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
	}
	return mode;
}

void chart_set_ascii(int ascii)
{
	mode = ascii ? 0 : -1;
}

static const char *const spark_utf8[] = {
	" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588",
};
static const char *const spark_ascii[] = {
	" ", "_", ".", "-", ":", "=", "+", "*", "#",
};

#define LEVELS 8

char *chart_spark(char *buf, size_t len, const double *v, size_t n, double max)
{
	const char *const *g = chart_utf8() ? spark_utf8 : spark_ascii;
	size_t i, o = 0;

	if (!len)
		return buf;
	for (i = 0; i < n; i++) {
		int lv = 0;
		size_t gl;

		if (v[i] > 0 && max > 0) {
			lv = (int)(v[i] / max * LEVELS + 0.5);
			if (lv < 1)
				lv = 1;
			if (lv > LEVELS)
				lv = LEVELS;
		}
		gl = strlen(g[lv]);
		if (o + gl >= len)
			break;
		memcpy(buf + o, g[lv], gl);
		o += gl;
	}
	buf[o] = 0;
	return buf;
}

const char *chart_cell(double fill, int shade)
{
	static const char *const solid_u[] = {
		" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588",
	};
	static const char *const shade_u[] = { "\u2588", "\u2592", "\u2591" };
	static const char *const shade_a[] = { "#", "+", "." };
	int lv;

	if (fill <= 0)
		return " ";
	if (shade < 0 || shade > 2)
		shade = 2;
	if (!chart_utf8()) {
		/* ASCII has no partial cells: round to a whole one */
		return fill >= 0.5 ? shade_a[shade] : " ";
	}
	if (shade == 0) {
		lv = (int)(fill * LEVELS + 0.5);
		if (lv < 1)
			lv = 1;
		return solid_u[lv > LEVELS ? LEVELS : lv];
	}
	return fill >= 0.5 ? shade_u[shade] : " ";
}
