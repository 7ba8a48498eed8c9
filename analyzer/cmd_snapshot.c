/* cmd_snapshot.c - 'heaptrail snapshot DUMP --at T | --between T1 T2' (also 'report --at') */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "snapshot.h"

#define DEFAULT_TOP 10

static int bad_time(const char *verb, const char *opt, const char *v)
{
	return cli_usage(verb, "%s wants a time (seconds like 2.5, 'peak', 'end' or a marker name), not '%s'",
			 opt, v);
}

/*
 * getopt takes one value per option; '--between T1 T2' takes two, so it is
 * lifted out of argv before getopt sees the rest.  Returns the new argc, or
 * -1 after a usage error (*rc set).
 */
static int take_between(int argc, char **argv, struct snapshot_opts *o, int *rc)
{
	int i, n = 0;

	for (i = 0; i < argc; i++) {
		if (i > 0 && !strcmp(argv[i], "--"))
			break;
		if (i == 0 || strcmp(argv[i], "--between")) {
			argv[n++] = argv[i];
			continue;
		}
		if (i + 2 >= argc) {
			*rc = cli_usage(o->verb, "--between wants two times: --between T1 T2");
			return -1;
		}
		if (cli_parse_time(argv[i + 1], &o->from) < 0) {
			*rc = bad_time(o->verb, "--between", argv[i + 1]);
			return -1;
		}
		if (cli_parse_time(argv[i + 2], &o->to) < 0) {
			*rc = bad_time(o->verb, "--between", argv[i + 2]);
			return -1;
		}
		o->between = 1;
		i += 2;
	}
	for (; i < argc; i++)
		argv[n++] = argv[i];
	argv[n] = NULL;
	return n;
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "at", required_argument, NULL, 'a' },
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct snapshot_opts o;
	int c, top = DEFAULT_TOP, have_at = 0, rc = CLI_USAGE;
	char synopsis[96];

	memset(&o, 0, sizeof(o));
	o.verb = argv[0];
	argc = take_between(argc, argv, &o, &rc);
	if (argc < 0)
		return rc;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (cli_parse_time(optarg, &o.at) < 0)
				return bad_time(o.verb, "--at", optarg);
			have_at = 1;
			break;
		case 't':
			if (cli_parse_top(optarg, &top) < 0)
				return cli_usage(o.verb, "--top wants a number of sites, not '%s'", optarg);
			break;
		case 'j':
			o.json = 1;
			break;
		case 'h':
			help_verb(o.verb, stdout);
			return 0;
		default:
			return cli_bad_option(o.verb, c, argv);
		}
	}
	if (have_at == o.between)
		return cli_usage(o.verb, "say when: --at T, or --between T1 T2 (not both)");
	snprintf(synopsis, sizeof(synopsis), "heaptrail %s DUMP --at T | --between T1 T2", o.verb);
	if (cli_one_dump(o.verb, argc, argv, synopsis) < 0)
		return CLI_USAGE;
	o.path = argv[optind];
	o.top = (size_t)top;
	return snapshot_run(&o);
}
