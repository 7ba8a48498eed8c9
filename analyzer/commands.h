/* commands.h - the verbs of the heaptrail CLI, one line each */
#ifndef HT_COMMANDS_H
#define HT_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

/*
 * Adding a verb: write cmd_VERB.c with int cmd_VERB(int argc, char **argv),
 * declare it below, add one line to the table in main.c and one entry with
 * its help text to the table in cmd_help.c.
 *
 * A verb gets argv[0] = its own name and the arguments after it.  It returns
 * the process exit status: 0 ok, 2 usage or input errors (CLI_USAGE), and
 * whatever else the verb documents (gate: 1 over the limits).
 */

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;	/* one line for 'heaptrail --help' */
};

int cmd_help(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_growth(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_clients(int argc, char **argv);
int cmd_frag(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_gate(int argc, char **argv);
int cmd_html(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_pprof(int argc, char **argv);
int cmd_pack(int argc, char **argv);
/*
 * cmd_pack.c: packs the dump at inpath into out (NULL: in place) at zstd
 * 'level', in the compact encoding when 'compact' (htr_compact.h); says
 * what it did on 'say' (NULL: nothing).  0, or -1 after its one line on
 * stderr.  'heaptrail record --pack=after' calls it too.
 */
#define PACK_DEFAULT_LEVEL 9
#define COMPACT_DEFAULT_LEVEL 12	/* its streams are small: a higher level costs little */
int pack_dump(const char *inpath, const char *out, int level, int compact, FILE *say);
/*
 * compact_write.c: writes the dump at inpath to out in the compact
 * encoding: 0, 1 when the dump was cut short (warned, what came before
 * written), -1 after its one line on stderr.
 */
int compact_dump(const char *inpath, FILE *out, int level, uint64_t *frames,
		 uint64_t *bytes_out);

/* cmd_help.c.  main() hands the verb table over before dispatching. */
void help_register(const struct command *cmds, size_t n);
/* Prints the help of 'verb' to out: 0, or -1 for an unknown verb. */
int help_verb(const char *verb, FILE *out);
/* The global usage and the list of verbs. */
void help_global(FILE *out);

#endif
