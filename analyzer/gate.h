/* gate.h - the gate's private interfaces: one process judged, baselines */
#ifndef HT_GATE_H
#define HT_GATE_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "json.h"
#include "suppress.h"

/*
 * The gate reads each dump once (gate_dump.c), keeps what the limits and the
 * report need in a struct gate_proc, and closes the dump: a run of a
 * thousand processes holds a thousand small summaries, not a thousand
 * symbolizers.  Sites keep their symbolized frames as strings.
 */

/* One symbolized frame, as site.h's JSON frame objects carry it. */
struct gate_frame {
	char *function, *file, *module;	/* NULL when unknown */
	int line;			/* 0 when unknown */
	uint64_t ip, offset;
	int inlined;
};

struct gate_site {
	char *key;		/* function:file:line of every frame: the same site in another dump */
	char *label;		/* "function file:line" of the top frame */
	struct gate_frame *frames;	/* NULL unless kept (the largest sites) */
	size_t nframes, top;	/* top: index of the top frame (site.h's rule) */
	uint64_t bytes, blocks;		/* leaked (live at the end), not suppressed */
	uint64_t lost_bytes;		/* definitely + indirectly lost (reach scan) */
	uint64_t peak_bytes;		/* its live bytes at the global peak */
	uint64_t max_live_bytes;
	uint64_t allocations, allocated_bytes;
};

struct gate_proc {
	char *path;		/* the dump */
	uint32_t pid, ppid;
	char *exe;
	char *cmdline;		/* argv joined for humans */
	char *name;		/* "basename (pid N)" for reports */
	unsigned flags;		/* HTR_PF_* */
	int end_how, end_status;	/* HTR_END_*, 0 when the dump has no end */
	char *warning;		/* the reader's warning (a truncated dump), or NULL */
	uint64_t lost_events;
	uint64_t duration_ns;

	uint64_t leaked_bytes, leaked_blocks;	/* after suppressions */
	uint64_t suppressed_bytes, suppressed_blocks;
	int have_reach;
	uint64_t lost_bytes;	/* definitely + indirectly lost, after suppressions */
	uint64_t peak_bytes;	/* peak of live heap */
	uint64_t allocations;

	/* live heap growth: least-squares slope over the samples */
	size_t growth_samples;
	double growth_bps;	/* bytes per second; meaningful when growth_samples >= 3 */

	/* per-client residue (clients.c: clients judged after disconnect) */
	uint64_t clients_ended;
	uint64_t residue_bytes;		/* summed over them, less suppressed sites */
	uint64_t residue_max_bytes;	/* of the worst client */
	uint64_t residue_max_client;
	char *residue_max_label;

	/* leaking sites not suppressed, most bytes first */
	struct gate_site *sites;
	size_t nsites;
	/* the largest shares of the peak (keep_frames_sites of them) */
	struct gate_site *peak_sites;
	size_t npeak_sites;
	/* the largest residue after disconnect (bytes: summed over clients) */
	struct gate_site *residue_sites;
	size_t nresidue_sites;
};

struct gate_dump_opts {
	struct suppress *supp;
	int read_target_suppressions;	/* __lsan_default_suppressions() */
	uint64_t grace_ns;		/* residue: grace period after a disconnect */
	size_t keep_frames_sites;	/* sites that keep their frames */
};

/*
 * Reads and judges one dump.  0 with *p filled (release with
 * gate_proc_release), or -1 after printing "heaptrail: cannot read ...".
 */
int gate_dump_read(const char *path, const struct gate_dump_opts *o,
		   struct gate_proc *p);
/*
 * Only the process record: pid, ppid, exe, cmdline, name, flags, path; for
 * the processes the gate does not judge.  0, or -1 after printing why.
 */
int gate_dump_peek(const char *path, struct gate_proc *p);
void gate_proc_release(struct gate_proc *p);

/*
 * The key that finds the same site in another dump (another process, another
 * build): function, source file base name and line of every frame.  Malloc'd,
 * NULL when out of memory; *label (if asked) gets the top frame as
 * "function file:line", malloc'd too.
 */
char *gate_stack_key(struct site_ctx *sc, uint32_t stack, char **label);

/* "function file:line" of a frame, "module+0xoff" without debug info. */
void gate_frame_text(const struct gate_frame *f, char *buf, size_t len);
/* A site as site.h's JSON site object fields (into an open object). */
void gate_site_json(struct json *j, const struct gate_site *s);

/* ---- baselines (baseline.c) -------------------------------------------- */

/*
 * What a run is compared against: its leaked bytes and its peak, for the
 * whole tree and per program (executable base name and how many times it
 * ran, so 'make check' compares test by test).
 */
struct baseline_prog {
	char *name;		/* executable base name */
	uint64_t runs;
	uint64_t leaked_bytes, peak_bytes;
};

struct baseline {
	uint64_t leaked_bytes;	/* summed over the processes */
	uint64_t peak_bytes;	/* summed over the processes' own peaks */
	uint64_t processes;
	struct baseline_prog *progs;
	size_t nprogs;
	char *source;		/* where it came from, for messages */
};

void baseline_add(struct baseline *b, const struct gate_proc *p);
void baseline_release(struct baseline *b);
/* 0, or -1 after printing why. */
int baseline_save(const struct baseline *b, const char *path);
/* 1 when 'path' is a baseline file (not a dump), 0 when not, -1 unreadable. */
int baseline_is_file(const char *path);
/* 0, or -1 after printing why (not a baseline, bad JSON). */
int baseline_load(struct baseline *b, const char *path);


/* ---- a run of the gate (cmd_gate.c, gate_check.c, gate_report.c) ------- */

/*
 * Exit status: 0 within the limits, GATE_FAIL a limit exceeded, CLI_USAGE
 * (2) usage or input error, GATE_CMD_FAILED the command itself failed.
 */
#define GATE_FAIL 1
#define GATE_CMD_FAILED 3

enum gate_limit {
	L_LEAKED, L_PER_SITE, L_LOST, L_PEAK, L_GROWTH, L_RESIDUE, L_INCREASE,
	L_COUNT
};

/* The option of each limit without its dashes: "max-leaked". */
extern const char *const gate_limit_opt[L_COUNT];

enum { ST_PASS, ST_FAIL, ST_SKIP };

struct gate_check {
	enum gate_limit kind;
	int state;
	double value, limit;	/* bytes, bytes/s, or percent for L_INCREASE */
	const char *limit_text;	/* the limit as the user wrote it, or NULL */
	char msg[768];		/* what was measured, one line */
	/* offending sites (borrowed) with the process each belongs to */
	const struct gate_site **sites;
	const struct gate_proc **site_procs;
	uint64_t *site_bytes;	/* bytes that count for this check */
	size_t nsites;
};

struct gate_entry {
	struct gate_proc p;
	int judged;		/* 0: not judged at all */
	int judge_leaks;	/* 0: ended by exec or by a signal */
	const char *why_not;
	struct gate_check checks[L_COUNT];
	int nchecks;
};

struct gate_opts {
	int set[L_COUNT];
	double max[L_COUNT];
	const char *max_text[L_COUNT];	/* as given, for messages */
	const char **baselines;
	size_t nbaselines;
	const char *save_baseline;
	const char *junit;
	const char *json_path;	/* --json=FILE */
	const char *out;
	const char *clients;
	const char **judge;
	size_t njudge;
	int json, top, print_supp, builtins, target_supp, judge_all;
	uint64_t grace_ns;
	struct suppress supp;
};

struct gate_run {
	struct gate_opts *o;
	struct gate_entry *procs;
	size_t nprocs, njudged;
	struct gate_check tree[L_COUNT];
	int ntree;
	struct baseline base, now;
	int have_base;
	/* the command, when the gate ran one */
	char **argv;
	int ran, wstatus;
	double seconds;
	/* merged per-site figures of the whole run (L_PER_SITE) */
	struct gate_merged *merged;
	size_t nmerged;
};

struct gate_merged {
	const char *key;
	const struct gate_site *site;	/* the largest instance, for its frames */
	const struct gate_proc *proc;
	uint64_t bytes, blocks;
	size_t procs;
};


/*
 * gate_check.c: who is judged, and the checks of each process and the run.
 * gate_choose_judged() needs only the programs (gate_dump_peek());
 * gate_judge_ends() how the judged ones ended (gate_dump_read()).
 */
void gate_choose_judged(struct gate_opts *o, struct gate_entry *v, size_t n,
			size_t *njudged);
void gate_judge_ends(struct gate_entry *v, size_t n);
void gate_proc_checks(struct gate_run *run, struct gate_entry *pr);
/* 0, or -1 when out of memory. */
int gate_merge_sites(struct gate_run *run);
void gate_tree_checks(struct gate_run *run);
void gate_check_free(struct gate_check *c);
void gate_count_states(const struct gate_run *run, size_t *fail, size_t *pass,
		       size_t *skip);
int gate_cmd_failed(const struct gate_run *run);
const char *gate_plural(uint64_t n, const char *one, const char *many);
const char *gate_base_name(const char *path);

/* gate_report.c: the one-screen text, JSON and JUnit XML. */
void gate_text_report(struct gate_run *run, FILE *out);
void gate_json_report(struct gate_run *run, FILE *out, int exit_status);
/* 0, or -1 after printing why the file could not be written. */
int gate_junit_report(struct gate_run *run);

#endif
