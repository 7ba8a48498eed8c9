/* cmd_pprof.c - 'heaptrail pprof': a dump as a gzip'd pprof profile for go tool pprof, Pyroscope, Parca */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "flame.h"
#include "pprof.h"

int cmd_pprof(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *outpath = NULL;
	char *defname = NULL;
	struct flame f;
	FILE *out;
	int c, rc = 0;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			outpath = optarg;
			break;
		case 'h':
			help_verb("pprof", stdout);
			return 0;
		default:
			return cli_bad_option("pprof", c, argv);
		}
	}
	if (cli_one_dump("pprof", argc, argv, "heaptrail pprof DUMP [-o FILE.pb.gz]") < 0)
		return CLI_USAGE;
	if (outpath && !strcmp(outpath, "-") && isatty(STDOUT_FILENO))
		return cli_usage("pprof", "the profile is binary: redirect stdout or name a file with -o");
	if (!outpath) {
		outpath = defname = cli_output_name(argv[optind], ".pb.gz");
		if (!defname) {
			cli_error("out of memory");
			return CLI_USAGE;
		}
	}
	if (flame_open(&f, argv[optind], FLAME_DEFAULT_GRACE, 0) < 0) {
		flame_close(&f);
		free(defname);
		return CLI_USAGE;
	}
	out = strcmp(outpath, "-") ? fopen(outpath, "wb") : stdout;
	if (!out) {
		cli_error("cannot write '%s': %s", outpath, strerror(errno));
		rc = CLI_USAGE;
		goto done;
	}
	rc = pprof_write(&f, out);
	if (out != stdout) {
		if (fclose(out) != 0 && !rc)
			rc = -errno;
	} else if (fflush(out) != 0 && !rc) {
		rc = -errno;
	}
	if (rc == -ENOMEM)
		cli_error("out of memory");
	else if (rc < 0)
		cli_error("cannot write '%s': %s", outpath, strerror(-rc));
	else if (defname)
		fprintf(stderr, "heaptrail: wrote '%s'\n", outpath);
	rc = rc < 0 ? CLI_USAGE : 0;
	sym_print_warnings(f.sc.sym);
done:
	flame_close(&f);
	free(defname);
	return rc;
}
