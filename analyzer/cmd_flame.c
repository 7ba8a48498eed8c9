/* cmd_flame.c - 'heaptrail flame': folded stacks of a cost, for flamegraph.pl, inferno and speedscope */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "flame.h"

/*
 * One line per distinct stack: "root;caller;allocating_function N", frames
 * named by function (inline frames expanded), N the site's cost.  Stacks
 * that read the same once named (two call sites in one function) are one
 * line with their costs summed, so every line is unique and the lines add
 * up to the report's total for the cost.  Lines are sorted, so the output
 * of one dump is always the same.
 */

#define NO_STACK "[no stack]"

struct folded {
	char *stack;
	uint64_t value;
};

static int by_stack(const void *pa, const void *pb)
{
	const struct folded *a = pa, *b = pb;

	return strcmp(a->stack, b->stack);
}

/* "a;b;c" for a site, malloc'd; NULL when out of memory. */
static char *fold(struct flame *f, uint32_t stack, int lines)
{
	const struct sym_frame *const *fr;
	size_t n = flame_stack(f, stack, &fr), i, len = 0, cap = 256;
	char *s = malloc(cap), name[1024];

	if (!s)
		return NULL;
	s[0] = 0;
	if (!n)
		return strcpy(s, NO_STACK);
	for (i = 0; i < n; i++) {
		size_t k;

		flame_frame_name(fr[i], lines, name, sizeof(name));
		k = strlen(name);
		if (len + k + 2 > cap) {
			char *ns;

			cap = (len + k + 2) * 2;
			ns = realloc(s, cap);
			if (!ns) {
				free(s);
				return NULL;
			}
			s = ns;
		}
		if (i)
			s[len++] = ';';
		memcpy(s + len, name, k + 1);
		len += k;
	}
	return s;
}

static int write_folded(struct flame *f, FILE *out, enum flame_cost cost,
			int lines)
{
	size_t nsites, i, n = 0;
	struct site_stats **sites = replay_sites(f->r, &nsites);
	struct folded *v = calloc(nsites + 1, sizeof(*v));
	struct cli_progress p;
	int rc = 0;

	if (!v)
		return -ENOMEM;
	cli_progress_begin(&p, "stacks");
	for (i = 0; i < nsites; i++) {
		uint64_t c = flame_site_cost(f, sites[i], cost);

		if (!c)
			continue;
		v[n].stack = fold(f, sites[i]->stack, lines);
		if (!v[n].stack) {
			rc = -ENOMEM;
			break;
		}
		v[n++].value = c;
		if ((n & 255) == 0)
			cli_progress_update(&p, i, nsites);
	}
	cli_progress_end(&p);
	if (!rc) {
		qsort(v, n, sizeof(*v), by_stack);
		for (i = 0; i < n; i++) {
			uint64_t sum = v[i].value;

			while (i + 1 < n && !strcmp(v[i].stack, v[i + 1].stack))
				sum += v[++i].value;
			fprintf(out, "%s %" PRIu64 "\n", v[i].stack, sum);
		}
	}
	for (i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
	return rc;
}

int cmd_flame(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cost", required_argument, NULL, 'c' },
		{ "lines", no_argument, NULL, 'l' },
		{ "grace", required_argument, NULL, 'g' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum flame_cost cost = FLAME_LEAKED;
	uint64_t grace = FLAME_DEFAULT_GRACE;
	const char *outpath = NULL;
	struct flame f;
	FILE *out = stdout;
	int c, lines = 0, rc = 0;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (flame_cost_parse(optarg, &cost) < 0)
				return cli_usage("flame", "--cost wants leaked, peak, allocations, temporary, residue or allocated, not '%s'",
						 optarg);
			break;
		case 'l':
			lines = 1;
			break;
		case 'g':
			if (cli_parse_seconds(optarg, &grace) < 0)
				return cli_usage("flame", "--grace wants a duration like 1s or 500ms, not '%s'",
						 optarg);
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'h':
			help_verb("flame", stdout);
			return 0;
		default:
			return cli_bad_option("flame", c, argv);
		}
	}
	if (cli_one_dump("flame", argc, argv, "heaptrail flame DUMP [--cost COST] [--lines] [-o FILE]") < 0)
		return CLI_USAGE;
	if (flame_open(&f, argv[optind], grace, 0) < 0) {
		flame_close(&f);
		return CLI_USAGE;
	}
	if (outpath && strcmp(outpath, "-")) {
		out = fopen(outpath, "w");
		if (!out) {
			cli_error("cannot write '%s': %s", outpath, strerror(errno));
			flame_close(&f);
			return CLI_USAGE;
		}
	}
	if (write_folded(&f, out, cost, lines) < 0) {
		cli_error("out of memory");
		rc = CLI_USAGE;
	}
	if (out != stdout) {
		if (fclose(out) != 0 && !rc) {
			cli_error("cannot write '%s': %s", outpath, strerror(errno));
			rc = CLI_USAGE;
		}
	} else if (fflush(stdout) != 0 && !rc) {
		cli_error("cannot write the output: %s", strerror(errno));
		rc = CLI_USAGE;
	}
	sym_print_warnings(f.sc.sym);
	flame_close(&f);
	return rc;
}
