/* cmd_help.c - help text of every verb: 'heaptrail help VERB' and 'VERB --help' */
#include <string.h>

#include "cli.h"
#include "commands.h"

/*
 * One entry per verb.  Adding a verb: add its entry here (usage line first,
 * then what it does, then its options), in the order of main.c's table.
 * Lines stay under 80 columns.
 */
static const struct help_entry {
	const char *verb;
	const char *text;
} helps[] = {
	{ "record",
	  "usage: heaptrail record [-o FILE] [OPTIONS] [--] CMD [ARGS...]\n"
	  "\n"
	  "Runs CMD under the shim (libheaptrail.so, set in LD_PRELOAD) and writes\n"
	  "every heap event with its call stack into a dump.  Exits with CMD's exit\n"
	  "status, or 128 + N when CMD was killed by signal N.  SIGINT, SIGTERM,\n"
	  "SIGHUP and SIGQUIT sent to heaptrail are passed on to CMD.\n"
	  "\n"
	  "options:\n"
	  "  -o, --output FILE     dump file name; %p is replaced by the pid, %e by\n"
	  "                        the executable's name (default\n"
	  "                        heaptrail.%e.%p.htr in the current directory)\n"
	  "  --follow-forks=0|1    also record forked children, each into its own\n"
	  "                        dump (default 1)\n"
	  "  --depth N             frames per stack, 1 to 256 (default 64)\n"
	  "  --interval MS         RSS and allocator samples every MS milliseconds\n"
	  "                        (default 100)\n"
	  "  --sample BYTES        record only a sample: about one allocation per\n"
	  "                        BYTES allocated (sizes like 512KiB; default: all)\n"
	  "  --unwind libunwind|fp stack unwinder: libunwind (exact, default: the\n"
	  "                        binaries' .eh_frame rules, libunwind for what\n"
	  "                        they cannot express) or frame pointers (needs\n"
	  "                        code built with -fno-omit-frame-pointer)\n"
	  "  --pack=auto|1|0|after|compact\n"
	  "                        pack the dump into columns: a third smaller, more\n"
	  "                        CPU for the writer thread (auto: while the\n"
	  "                        machine and the process leave a CPU idle;\n"
	  "                        after: none while it runs, every dump packed\n"
	  "                        once the command has ended, as 'heaptrail pack';\n"
	  "                        compact: the same with 'heaptrail pack --compact')\n"
	  "  --reach               classify the blocks left at exit as definitely,\n"
	  "                        indirectly or possibly lost or still reachable\n"
	  "                        (shown by 'heaptrail leaks')\n"
	  "  --clients=MODE        attribute allocations to clients: off, sockets\n"
	  "                        or threads (default: only heaptrail.h calls)\n"
	  "\n"
	  "The shim is found next to the heaptrail executable, in\n"
	  "../lib/heaptrail/ when installed, or at $HEAPTRAIL_LIB.  Statically\n"
	  "linked and setuid programs cannot be recorded (the dynamic loader does\n"
	  "not preload into them).\n"
	  "\n"
	  "example:\n"
	  "  heaptrail record -o server.htr -- ./server --port 8080\n"
	  "  heaptrail report server.htr\n" },
	{ "report",
	  "usage: heaptrail report DUMP [--top N] [--json]\n"
	  "\n"
	  "Summary of a dump: the command, how long it ran and how it ended, the\n"
	  "number of allocations and frees, bytes allocated, the peak of live heap\n"
	  "and when it happened, bytes leaked at exit, peak RSS, frees of unknown\n"
	  "blocks, frees through the wrong function (new[] then free, ...), lost\n"
	  "events; then the top sites by leaked bytes, by their share of the peak,\n"
	  "by number of allocations and by temporary allocations (freed right\n"
	  "after they were made, before the thread allocated anything else).\n"
	  "\n"
	  "options:\n"
	  "  --top N     sites per table (default 10; 0 = all)\n"
	  "  --json      JSON instead of text (see docs/json.md)\n"
	  "  --at T, --between T1 T2  a snapshot instead ('heaptrail help snapshot')\n" },
	{ "leaks",
	  "usage: heaptrail leaks DUMP [--top N] [--json]\n"
	  "\n"
	  "Every allocation site with blocks still live at exit, most bytes first,\n"
	  "with full stacks.  When the dump holds a reachability scan (recorded\n"
	  "with 'heaptrail record --reach' or HEAPTRAIL_REACH=exit), each site's\n"
	  "bytes are split into definitely lost (no pointer to them anywhere),\n"
	  "indirectly lost (pointed to only by lost blocks), possibly lost (only\n"
	  "interior pointers) and still reachable.\n"
	  "\n"
	  "options:\n"
	  "  --top N     at most N sites (default 0 = all)\n"
	  "  --json      JSON instead of text (see docs/json.md)\n" },
	{ "timeline",
	  "usage: heaptrail timeline DUMP [--csv | --json | --svg FILE] [OPTIONS]\n"
	  "\n"
	  "Memory over time: RSS, the allocator's bytes (mallinfo2 arena + mmapped,\n"
	  "from the periodic samples), live heap bytes and the live bytes of the\n"
	  "sites that held the most, sampled at evenly spaced moments.  The default\n"
	  "is a terminal chart (Unicode blocks in a UTF-8 locale, else ASCII) with\n"
	  "one curve per series below it, each scaled to its own highest value,\n"
	  "and the markers (heaptrail_mark; the marker signal) under the time axis.\n"
	  "A dump still being written is read up to its last complete frame.\n"
	  "\n"
	  "options:\n"
	  "  --csv           one row per moment (docs/timeline.md)\n"
	  "  --json          JSON instead of text (docs/timeline.md)\n"
	  "  --svg FILE      write an SVG chart to FILE ('-': stdout)\n"
	  "  --top N         sites drawn (default 5, at most 100)\n"
	  "  --points N      moments sampled (default: the chart's width; 200 for\n"
	  "                  --csv, --json and --svg)\n"
	  "  --from T, --to T  the window: seconds (2.5, 500ms), 'start', 'end',\n"
	  "                  'peak' or a marker name (default: the whole run)\n"
	  "  --width N, --height N  chart size in columns and rows\n"
	  "  --follow        redraw every --interval (default 2s) while the dump\n"
	  "                  grows, until its process ends or Ctrl-C\n"
	  "  --ascii         ASCII characters only\n" },
	{ "growth",
	  "usage: heaptrail growth DUMP [--json] [--top N] [OPTIONS]\n"
	  "\n"
	  "Sites ranked by how steadily and how fast their live bytes rise.  Each\n"
	  "site's live bytes are sampled at --samples moments and fitted with a\n"
	  "least-squares line: slope in bytes per second and per 1000 allocations\n"
	  "of the program, and R^2 (1 = a perfectly steady rise).  Classes:\n"
	  "  growing    rises steadily to the end (a leak, or an unbounded table)\n"
	  "  bounded    rose, then stayed (a cache with a cap, start-up tables)\n"
	  "  transient  allocated and freed again (temporaries, churn)\n"
	  "Per site also its temporary allocations: freed within --temporary-ms,\n"
	  "and freed with at most --temporary-allocs other allocations in between.\n"
	  "See docs/timeline.md.\n"
	  "\n"
	  "options:\n"
	  "  --top N               sites shown (default 10; 0 = all)\n"
	  "  --json                JSON instead of text (docs/timeline.md)\n"
	  "  --from T, --to T      fit only this window (seconds, 'peak', markers)\n"
	  "  --samples N           moments sampled (default 200)\n"
	  "  --temporary-ms MS     lifetime of a temporary (default 10)\n"
	  "  --temporary-allocs N  allocations in between (default 16)\n"
	  "  --follow              report again every --interval (default 2s) while\n"
	  "                        the dump grows, until its process ends or Ctrl-C\n"
	  "  --ascii               ASCII characters only\n" },
	{ "snapshot",
	  "usage: heaptrail snapshot DUMP (--at T | --between T1 T2) [--top N] [--json]\n"
	  "\n"
	  "--at T: live bytes and blocks per site at moment T, with the live heap\n"
	  "and the last RSS sample.  --between T1 T2: per site, the bytes allocated\n"
	  "after T1 that are still live at T2 (what the window left behind), and\n"
	  "what it allocated in the window.  Times are seconds since the start\n"
	  "(2.5, 500ms), 'start', 'end', 'peak' (when live heap peaked) or marker\n"
	  "names from heaptrail_mark() or the marker signal ('signal', with\n"
	  "HEAPTRAIL_MARK_SIGNAL=USR2 and kill -USR2 PID); NAME#2 is the\n"
	  "second marker of that name.  'heaptrail report DUMP --at T' is the same.\n"
	  "\n"
	  "options:\n"
	  "  --top N     sites shown (default 10; 0 = all)\n"
	  "  --json      JSON instead of text (docs/timeline.md)\n" },
	{ "clients",
	  "usage: heaptrail clients DUMP [--grace S] [--top N] [--json]\n"
	  "\n"
	  "What each client leaves behind after it disconnects.  Clients come from\n"
	  "the recording: HEAPTRAIL_CLIENTS=sockets (every accepted connection, by\n"
	  "peer address), HEAPTRAIL_CLIENTS=threads (every thread but the main one)\n"
	  "or heaptrail.h's heaptrail_client_begin/end/enter/leave.\n"
	  "\n"
	  "Prints the number of clients and, per client, allocations, bytes and\n"
	  "peak; the residue: bytes allocated on a client's behalf still live when\n"
	  "it disconnected plus the grace period and still live at the end of the\n"
	  "dump (mean, median and max per client); the top sites by residue with\n"
	  "bytes per client and a trend: 'grows' (linear in the number of clients\n"
	  "that left: a leak) or 'bounded' (levels off: a shared cache); and the\n"
	  "live heap before the first client and after the last disconnect, the\n"
	  "difference split into residue and unattributed growth.  See\n"
	  "docs/clients.md.\n"
	  "\n"
	  "options:\n"
	  "  --grace S   time a client's memory may take to be freed after it\n"
	  "              disconnects (default 1s; 500ms, 0 ...)\n"
	  "  --top N     sites and clients shown (default 10; 0 = all)\n"
	  "  --json      JSON instead of text (see docs/clients.md)\n" },
	{ "frag",
	  "usage: heaptrail frag DUMP [--at T] [--top N] [--json]\n"
	  "\n"
	  "Why RSS stays above live bytes.  The byte ladder at moment T: bytes\n"
	  "requested -> usable (allocator rounding) -> pages holding live blocks ->\n"
	  "held by the allocator (mallinfo2 arena + mmapped, from the sample\n"
	  "nearest T) -> RSS, with the gap at each step and the ratios known from\n"
	  "Redis INFO and jemalloc stats; then page occupancy of the heaps: span,\n"
	  "free pages malloc_trim could return, memory pinned below live blocks and\n"
	  "the sites whose live blocks pin it; holes between live blocks by size\n"
	  "against the sizes asked for; sites that grow blocks to exact fit\n"
	  "(realloc by small steps) rather than geometrically; the ladder over time\n"
	  "and at the peak; pools annotated with heaptrail.h, each on its own.\n"
	  "Definitions: docs/fragmentation.md.\n"
	  "\n"
	  "options:\n"
	  "  --at T      the moment: seconds (2.5, 500ms), 'start', 'end' (default),\n"
	  "              'peak' or a marker name (heaptrail_mark)\n"
	  "  --top N     sites per table (default 10; 0 = all)\n"
	  "  --json      JSON instead of text (see docs/json.md)\n" },
	{ "diff",
	  "usage: heaptrail diff OLD NEW [--top N] [--all] [--json]\n"
	  "\n"
	  "Per-site changes between two dumps: leaked bytes and blocks, bytes at\n"
	  "the peak of live heap, allocations and bytes allocated.  Sites are\n"
	  "matched by function, source file and line of every frame, not by\n"
	  "address, so dumps of two builds of a program compare.  Sites whose\n"
	  "leaked bytes changed most come first.\n"
	  "\n"
	  "options:\n"
	  "  --top N     at most N sites (default 20; 0 = all)\n"
	  "  --all       JSON: also the sites that did not change\n"
	  "  --json      JSON instead of text (see docs/ci.md)\n" },
	{ "gate",
	  "usage: heaptrail gate [LIMITS] [OPTIONS] -- CMD [ARGS...]\n"
	  "       heaptrail gate [LIMITS] [OPTIONS] DUMP...\n"
	  "\n"
	  "Runs CMD under the shim (every process it starts is recorded) or reads\n"
	  "dumps, and checks each process and the run as a whole against the\n"
	  "limits.  Exits 0 within the limits, 1 when a limit was exceeded, 2 on\n"
	  "usage or input errors, 3 when CMD itself failed (its status is shown).\n"
	  "Without any limit, --max-leaked 0 applies.  Sizes take units: 4096,\n"
	  "512KiB, 10MB.\n"
	  "\n"
	  "limits:\n"
	  "  --max-leaked SIZE      bytes left allocated at exit\n"
	  "  --max-leaked-per-site SIZE\n"
	  "                         bytes left at exit by any one call stack\n"
	  "  --max-lost SIZE        definitely and indirectly lost bytes only\n"
	  "                         (a reachability scan; the gate asks for it)\n"
	  "  --max-peak SIZE        peak of live heap\n"
	  "  --max-growth SIZE      growth of live heap per second (least squares\n"
	  "                         over the samples; 1MB or 1MB/s)\n"
	  "  --max-residue-per-client SIZE\n"
	  "                         bytes a client leaves behind after it\n"
	  "                         disconnects, on average (see 'clients')\n"
	  "  --baseline DUMP|FILE   compare leaked bytes and peak with an earlier\n"
	  "                         run (its dumps, or a --save-baseline file)\n"
	  "  --max-increase PCT     allowed increase over the baseline (default 0)\n"
	  "\n"
	  "options:\n"
	  "  --suppressions FILE    LeakSanitizer suppressions: 'leak:PATTERN' on\n"
	  "                         function, file or module, '*' wildcards\n"
	  "  --print-suppressions   every suppression and what it matched\n"
	  "  --no-builtin-suppressions\n"
	  "                         also count the runtime's own one-time blocks\n"
	  "                         (dynamic loader, TLS, libstdc++'s pool, stdio)\n"
	  "  --no-target-suppressions\n"
	  "                         ignore the program's __lsan_default_suppressions\n"
	  "  --judge GLOB           judge only programs matching GLOB (repeatable)\n"
	  "  --judge-all            judge system programs (sh, make) too\n"
	  "  --junit FILE           JUnit XML: a test case per process and limit\n"
	  "  --json[=FILE]          JSON instead of text (see docs/ci.md); with\n"
	  "                         FILE, text on stdout and JSON in FILE\n"
	  "  --save-baseline FILE   store this run's figures for --baseline\n"
	  "  --top N                offending stacks shown per limit (default 5)\n"
	  "  --grace SECONDS        residue: grace after a disconnect (default 1)\n"
	  "  --clients=MODE         attribute allocations to clients: sockets or\n"
	  "                         threads (default: only heaptrail.h calls)\n"
	  "  -o, --output FILE      keep the dumps: FILE, FILE.PID, ...\n"
	  "\n"
	  "example:\n"
	  "  heaptrail gate --max-leaked 0 --junit leaks.xml -- make check\n" },
	{ "replay",
	  "usage: heaptrail replay DUMP [--allocator LIB]... [--json]\n"
	  "\n"
	  "Is it the program or the allocator?  Replays the dump's heap operations\n"
	  "(sizes, order and lifetimes, all threads in time order on one thread)\n"
	  "in a child process, once on glibc's malloc and once on each allocator\n"
	  "given, and shows their peak and final RSS side by side.  The child writes\n"
	  "every page of each block, as a program filling it would.\n"
	  "\n"
	  "options:\n"
	  "  --allocator LIB  jemalloc, tcmalloc, mimalloc, glibc, or the path of a\n"
	  "                   library that replaces malloc when preloaded; repeat\n"
	  "                   for more (default: glibc and each of the known ones\n"
	  "                   installed)\n"
	  "  --json           JSON instead of text\n"
	  "\n"
	  "Exits 1 when the replay failed on an allocator (the table says why).\n"
	  "The child is heaptrail-replay-child, next to heaptrail or in\n"
	  "../lib/heaptrail/ ($HEAPTRAIL_REPLAY_CHILD overrides).\n" },
	{ "html",
	  "usage: heaptrail html DUMP [-o FILE.html] [OPTIONS]\n"
	  "\n"
	  "Writes one self-contained HTML page (no network access, opens from\n"
	  "disk, light and dark) with what the other verbs print, drawn: the\n"
	  "timeline of RSS, allocator-held memory and live heap with markers and\n"
	  "client connections; the top sites by leaked bytes, peak, growth and\n"
	  "allocations in sortable tables with their stacks; a flame graph of any\n"
	  "cost that zooms on click; each client's residue; the fragmentation\n"
	  "ladder and a map of the heap's pages.\n"
	  "\n"
	  "options:\n"
	  "  -o, --output FILE  the page (default: the dump's name with .html, in\n"
	  "                     the current directory; - for stdout)\n"
	  "  --points N         moments of the timeline (default 400)\n"
	  "  --grace SECONDS    residue: grace after a disconnect (default 1)\n"
	  "  --max-sites N      sites embedded (default 20000, 0 = all); the rest\n"
	  "                     are summed as one\n"
	  "\n"
	  "example:\n"
	  "  heaptrail html server.htr -o server.html && xdg-open server.html\n" },
	{ "flame",
	  "usage: heaptrail flame DUMP [--cost COST] [--lines] [-o FILE]\n"
	  "\n"
	  "Folded stacks, one line per stack: \"main;serve;parse 4096\", the\n"
	  "outermost caller first, inline frames expanded, then the cost of the\n"
	  "stack's allocations.  flamegraph.pl, inferno-flamegraph and speedscope\n"
	  "draw them.  The lines add up to the figure 'heaptrail report' (or\n"
	  "'clients', for residue) gives for the whole run.\n"
	  "\n"
	  "options:\n"
	  "  --cost COST     what each stack weighs (default leaked):\n"
	  "                  leaked       bytes still live at the end\n"
	  "                  peak         bytes live at the peak of live heap\n"
	  "                  allocations  number of allocations\n"
	  "                  temporary    allocations freed right after they were made\n"
	  "                  residue      bytes clients left behind ('heaptrail help\n"
	  "                               clients')\n"
	  "                  allocated    bytes allocated in total\n"
	  "  --lines         frames as \"function (file.c:12)\" instead of function\n"
	  "                  names alone\n"
	  "  --grace SECONDS residue: grace after a disconnect (default 1)\n"
	  "  -o, --output FILE  write to FILE instead of stdout\n"
	  "\n"
	  "example:\n"
	  "  heaptrail flame server.htr --cost peak | flamegraph.pl > peak.svg\n" },
	{ "pprof",
	  "usage: heaptrail pprof DUMP [-o FILE.pb.gz]\n"
	  "\n"
	  "Writes the dump's allocation sites as a pprof profile (gzip'd protobuf)\n"
	  "with the sample types alloc_objects, alloc_space (every allocation of the\n"
	  "run), inuse_objects and inuse_space (still live at the end: leaked),\n"
	  "symbolized with function, file, line and inline frames.  go tool pprof\n"
	  "reads it, and so do Pyroscope and Parca for fleet-wide views.\n"
	  "\n"
	  "options:\n"
	  "  -o, --output FILE  the profile (default: the dump's name with .pb.gz,\n"
	  "                     in the current directory; - for stdout)\n"
	  "\n"
	  "example:\n"
	  "  heaptrail pprof server.htr -o server.pb.gz\n"
	  "  go tool pprof -top -sample_index=inuse_space server.pb.gz\n" },
	{ "pack",
	  "usage: heaptrail pack DUMP... [-o OUT] [--level N] [--compact]\n"
	  "\n"
	  "Rewrites a dump smaller: its chunks packed into columns (as the shim\n"
	  "does with CPU to spare, HEAPTRAIL_PACK), a thread's chunks of one frame\n"
	  "joined, every frame compressed again at zstd level N.  Nothing is lost:\n"
	  "every analysis reads the same figures from the packed dump.  Use it on\n"
	  "a dump recorded while every core was busy (HEAPTRAIL_PACK=auto did not\n"
	  "pack) before you keep or ship it.  A dump cut short or damaged is packed\n"
	  "up to its last good frame, with a warning; one a running process\n"
	  "still writes is not replaced.  Several dumps (a process tree's\n"
	  "run.htr*) are each packed in place.\n"
	  "\n"
	  "With --compact the dump keeps no block addresses and times only to\n"
	  "the millisecond, about heaptrack's size or less: every verb but frag\n"
	  "(which refuses it) reads the same figures, times rounded down; a free\n"
	  "deep among its site's live blocks may name another block of the same\n"
	  "site, size, thread and client, so blocks' own lifetimes are not kept.\n"
	  "\n"
	  "options:\n"
	  "  -o, --output OUT  write OUT (one DUMP only; default: DUMP itself,\n"
	  "                    replaced once the packed dump is complete)\n"
	  "  --level N         zstd level, 1 to 19 (default 9; 12 with --compact)\n"
	  "  --compact         the compact encoding (docs/usage.md)\n"
	  "\n"
	  "example:\n"
	  "  heaptrail pack run.htr -o run.packed.htr\n"
	  "  heaptrail pack --compact run.htr -o run.compact.htr\n" },
	{ "help",
	  "usage: heaptrail help [VERB]\n"
	  "\n"
	  "Lists the verbs, or prints the help of one ('heaptrail VERB --help'\n"
	  "prints the same).\n" },
};

#define NHELPS (sizeof(helps) / sizeof(helps[0]))

static const struct command *cmds;
static size_t ncmds;

void help_register(const struct command *c, size_t n)
{
	cmds = c;
	ncmds = n;
}

int help_verb(const char *verb, FILE *out)
{
	size_t i;

	for (i = 0; i < NHELPS; i++) {
		if (!strcmp(helps[i].verb, verb)) {
			fputs(helps[i].text, out);
			return 0;
		}
	}
	/* a verb without an entry yet still says what it is */
	for (i = 0; i < ncmds; i++) {
		if (!strcmp(cmds[i].name, verb)) {
			fprintf(out, "usage: heaptrail %s ...\n\n%s.\n", verb,
				cmds[i].summary);
			return 0;
		}
	}
	return -1;
}

void help_global(FILE *out)
{
	size_t i, w = 0;

	fprintf(out,
		"usage: heaptrail VERB [ARGS...]\n"
		"\n"
		"heaptrail records every heap allocation of a program with its call\n"
		"stack and tells where the memory goes: leaks, peak, growth, clients,\n"
		"fragmentation.\n"
		"\n"
		"verbs:\n");
	for (i = 0; i < ncmds; i++)
		if (strlen(cmds[i].name) > w)
			w = strlen(cmds[i].name);
	for (i = 0; i < ncmds; i++)
		fprintf(out, "  %-*s  %s\n", (int)w, cmds[i].name, cmds[i].summary);
	fprintf(out,
		"\n"
		"Run 'heaptrail help VERB' or 'heaptrail VERB --help' for the options of\n"
		"a verb, 'heaptrail --version' for the version.\n"
		"\n"
		"example:\n"
		"  heaptrail record -o run.htr -- ./server --port 8080\n"
		"  heaptrail report run.htr\n");
}

int cmd_help(int argc, char **argv)
{
	if (argc < 2) {
		help_global(stdout);
		return 0;
	}
	if (argc > 2)
		return cli_usage("help", "'help' takes one verb, not %d", argc - 1);
	if (help_verb(argv[1], stdout) < 0)
		return cli_usage(NULL, "unknown verb '%s'", argv[1]);
	return 0;
}
