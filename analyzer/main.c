/* main.c - the heaptrail command: finds the verb and runs it */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

/* One line per verb; keep the order in which users meet them. */
static const struct command commands[] = {
	{ "record", cmd_record, "run a command under the shim and write a dump" },
	{ "report", cmd_report, "summary of a dump: totals, peak, leaks and the top sites" },
	{ "leaks", cmd_leaks, "every site that leaked, with full stacks and reachability" },
	{ "timeline", cmd_timeline, "RSS, live heap, allocator and top sites over time: chart, CSV, JSON, SVG" },
	{ "growth", cmd_growth, "sites ranked by steady growth of live bytes: growing, bounded, transient" },
	{ "snapshot", cmd_snapshot, "live bytes per site at a moment (--at) or left by a window (--between)" },
	{ "frag", cmd_frag, "fragmentation: why RSS stays above live bytes, what pins it" },
	{ "replay", cmd_replay, "replay the allocations on other allocators: RSS side by side" },
	{ "clients", cmd_clients, "what each client leaves behind after it disconnects (residue)" },
	{ "diff", cmd_diff, "per-site changes between two dumps, matched by symbol" },
	{ "gate", cmd_gate, "CI leak gate: run a command or read dumps, fail past limits" },
	{ "html", cmd_html, "one self-contained HTML report: timeline, top sites, flame graph, clients, pages" },
	{ "flame", cmd_flame, "folded stacks of a cost (leaked, peak, ...) for flame graph tools" },
	{ "pprof", cmd_pprof, "a pprof profile (gzip'd protobuf) for go tool pprof, Pyroscope, Parca" },
	{ "pack", cmd_pack, "rewrite a dump smaller: chunks packed into columns, zstd again" },
	{ "help", cmd_help, "help for a verb: heaptrail help VERB" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static int is_help(const char *a)
{
	return !strcmp(a, "--help") || !strcmp(a, "-h");
}

int main(int argc, char **argv)
{
	size_t i;

	help_register(commands, NCOMMANDS);
	if (argc < 2 || is_help(argv[1])) {
		help_global(stdout);
		return argc < 2 ? CLI_USAGE : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("heaptrail %s\n", HEAPTRAIL_VERSION);
		return 0;
	}
	for (i = 0; i < NCOMMANDS; i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		/* 'heaptrail VERB --help' means the same for every verb */
		if (argc > 2 && is_help(argv[2]))
			return help_verb(commands[i].name, stdout) < 0 ? CLI_USAGE : 0;
		return commands[i].fn(argc - 1, argv + 1);
	}
	if (argv[1][0] == '-')
		return cli_usage(NULL, "unknown option '%s'", argv[1]);
	return cli_usage(NULL, "unknown verb '%s'", argv[1]);
}
