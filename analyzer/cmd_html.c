/* cmd_html.c - 'heaptrail html': one self-contained HTML report of a dump */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "html.h"

/*
 * The page is written next to its final name and renamed into place when
 * complete, so a failed run never leaves half a report (or clobbers the
 * previous one).
 */
static int write_report(const char *dump, const char *outpath,
			const struct html_opts *o)
{
	char *tmp;
	FILE *f;
	int rc, direct;

	if (!strcmp(outpath, "-")) {
		rc = html_report(dump, stdout, o);
		if (fflush(stdout) != 0 && !rc) {
			cli_error("cannot write the report: %s", strerror(errno));
			rc = -1;
		}
		return rc;
	}
	tmp = malloc(strlen(outpath) + 32);
	if (!tmp) {
		cli_error("out of memory");
		return -1;
	}
	/* written in place when a rename would replace a device (/dev/null, a pipe) */
	direct = cli_output_direct(outpath);
	if (direct)
		strcpy(tmp, outpath);
	else
		sprintf(tmp, "%s.tmp.%d", outpath, (int)getpid());
	f = fopen(tmp, "w");
	if (!f) {
		cli_error("cannot write '%s': %s", outpath, strerror(errno));
		free(tmp);
		return -1;
	}
	rc = html_report(dump, f, o);
	if (fclose(f) != 0 && !rc) {
		cli_error("cannot write '%s': %s", outpath, strerror(errno));
		rc = -1;
	}
	if (!direct && !rc && rename(tmp, outpath) != 0) {
		cli_error("cannot write '%s': %s", outpath, strerror(errno));
		rc = -1;
	}
	if (rc && !direct)
		unlink(tmp);
	free(tmp);
	return rc;
}

int cmd_html(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "points", required_argument, NULL, 'p' },
		{ "grace", required_argument, NULL, 'g' },
		{ "max-sites", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct html_opts o;
	const char *outpath = NULL;
	char *defname = NULL;
	uint64_t u;
	int c, n, rc;

	html_opts_default(&o);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			outpath = optarg;
			break;
		case 'p':
			if (cli_parse_int(optarg, 2, 100000, &n) < 0)
				return cli_usage("html", "--points wants a number from 2 to 100000, not '%s'",
						 optarg);
			o.points = (unsigned)n;
			break;
		case 'g':
			if (cli_parse_seconds(optarg, &o.grace) < 0)
				return cli_usage("html", "--grace wants a duration like 1s or 500ms, not '%s'",
						 optarg);
			break;
		case 'm':
			if (cli_parse_u64(optarg, &u) < 0)
				return cli_usage("html", "--max-sites wants a number of sites (0 = all), not '%s'",
						 optarg);
			o.max_sites = (size_t)u;
			break;
		case 'h':
			help_verb("html", stdout);
			return 0;
		default:
			return cli_bad_option("html", c, argv);
		}
	}
	if (cli_one_dump("html", argc, argv, "heaptrail html DUMP [-o FILE.html]") < 0)
		return CLI_USAGE;
	if (!outpath) {
		outpath = defname = cli_output_name(argv[optind], ".html");
		if (!defname) {
			cli_error("out of memory");
			return CLI_USAGE;
		}
	}
	rc = write_report(argv[optind], outpath, &o);
	if (!rc && defname)
		fprintf(stderr, "heaptrail: wrote '%s'\n", outpath);
	free(defname);
	return rc ? CLI_USAGE : 0;
}
