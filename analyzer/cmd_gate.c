/* cmd_gate.c - 'heaptrail gate': runs a command (or reads dumps) and fails when it leaks past limits */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "gate.h"
#include "launch.h"
#include "suppress.h"

/*
 * Runs the command under the shim into a temporary directory (or reads the
 * dumps it is given), reads every dump once (gate_dump.c), judges
 * (gate_check.c) and reports (gate_report.c).  Exit status: see gate.h.
 */

/* ---- options ------------------------------------------------------------- */

static int parse_rate(const char *s, double *v)
{
	char buf[64];
	size_t n = strlen(s);
	uint64_t b;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n + 1);
	if (n > 2 && !strcmp(buf + n - 2, "/s"))
		buf[n - 2] = 0;
	if (cli_parse_size(buf, &b) < 0)
		return -EINVAL;
	*v = (double)b;
	return 0;
}

static int parse_percent(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	if (errno || end == s || *v < 0 || !isfinite(*v) ||
	    (*end && strcmp(end, "%")))
		return -EINVAL;
	return 0;
}

static int add_str(const char ***v, size_t *n, const char *s)
{
	const char **nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	nv[(*n)++] = s;
	*v = nv;
	return 0;
}

/* ---- running the command ----------------------------------------------------- */

static int rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	return rmdir(dir);
}

struct dumpset {
	char **paths;
	size_t n;
};

static int dumpset_add(struct dumpset *ds, const char *path)
{
	char **nv = realloc(ds->paths, (ds->n + 1) * sizeof(*nv));

	if (!nv)
		return -1;
	ds->paths = nv;
	nv[ds->n] = strdup(path);
	if (!nv[ds->n])
		return -1;
	ds->n++;
	return 0;
}

static void dumpset_free(struct dumpset *ds)
{
	size_t i;

	for (i = 0; i < ds->n; i++)
		free(ds->paths[i]);
	free(ds->paths);
	memset(ds, 0, sizeof(*ds));
}

static int is_dump(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[8];
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return n == 8 && !memcmp(buf, "HTRDUMP\n", 8);
}

/* A file as it was before the run: a dump of an earlier run, or not. */
struct seen {
	char *name;
	struct stat st;
};

struct seenset {
	struct seen *v;
	size_t n;
};

static void seenset_free(struct seenset *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int unchanged(const struct seenset *before, const char *path,
		     const struct stat *st)
{
	size_t i;

	for (i = 0; before && i < before->n; i++)
		if (!strcmp(before->v[i].name, path))
			return before->v[i].st.st_ino == st->st_ino &&
			       before->v[i].st.st_size == st->st_size &&
			       before->v[i].st.st_mtim.tv_sec == st->st_mtim.tv_sec &&
			       before->v[i].st.st_mtim.tv_nsec == st->st_mtim.tv_nsec;
	return 0;
}

/*
 * The files named like the dumps of a run: OUT for the first process,
 * OUT.PID for the others, OUT.PID.N for exec'd images.  With 'snap', every
 * such file goes there (taken before the run: with -o in a directory of the
 * user's, dumps of an earlier run may lie there); else the dumps written or
 * rewritten since 'before' go to 'ds'.
 */
static int find_dumps(const char *out, const struct seenset *before,
		      struct seenset *snap, struct dumpset *ds)
{
	char dir[PATH_MAX + 64], *slash;
	const char *base;
	size_t blen;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%s", out);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = 0;
		base = out + (slash - dir) + 1;
	} else {
		snprintf(dir, sizeof(dir), ".");
		base = out;
	}
	blen = strlen(base);
	d = opendir(dir[0] ? dir : "/");
	if (!d)
		return snap ? 0 : -1;	/* a directory the run may still create */
	while (!rc && (e = readdir(d))) {
		char path[PATH_MAX + 640];
		struct stat st;
		const char *rest = e->d_name + blen;

		if (strncmp(e->d_name, base, blen) ||
		    (*rest && (*rest != '.' || !strchr("0123456789", rest[1]))))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (snap) {
			struct seen *nv = realloc(snap->v, (snap->n + 1) * sizeof(*nv));

			if (!nv || !(nv[snap->n].name = strdup(path))) {
				if (nv)
					snap->v = nv;
				rc = -1;
				break;
			}
			nv[snap->n].st = st;
			snap->v = nv;
			snap->n++;
			continue;
		}
		if (unchanged(before, path, &st) || !is_dump(path))
			continue;
		if (dumpset_add(ds, path) < 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

static int by_version(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the command under the shim; 0 with the dumps found, else an exit status. */
static int run_command(struct gate_run *run, char **argv, struct dumpset *ds,
		       char *tmpdir, size_t tmplen)
{
	struct gate_opts *o = run->o;
	char path[PATH_MAX], out[PATH_MAX + 32], cwd[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	struct seenset before = { NULL, 0 };
	double t0;
	int rc;

	rc = launch_prepare(argv[0], path, sizeof(path));
	if (rc)
		return CLI_USAGE;	/* a command that cannot run is a usage error here */
	tmpdir[0] = 0;
	if (o->out) {
		if (o->out[0] == '/' || !getcwd(cwd, sizeof(cwd)))
			snprintf(out, sizeof(out), "%s", o->out);
		else
			snprintf(out, sizeof(out), "%s/%s", cwd, o->out);
	} else {
		snprintf(tmpdir, tmplen, "%s/heaptrail-gate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tmpdir)) {
			cli_error("cannot make a directory for the dumps in '%s': %s (set TMPDIR, or use -o FILE)",
				  tmp && *tmp ? tmp : "/tmp", strerror(errno));
			tmpdir[0] = 0;
			return CLI_USAGE;
		}
		snprintf(out, sizeof(out), "%s/run.htr", tmpdir);
	}
	if (launch_setenv("HEAPTRAIL_OUT", out) < 0 ||
	    launch_setenv("HEAPTRAIL_FOLLOW", "1") < 0 ||
	    (o->set[L_LOST] && launch_setenv("HEAPTRAIL_REACH", "exit") < 0) ||
	    (o->clients && launch_setenv("HEAPTRAIL_CLIENTS", o->clients) < 0))
		return CLI_USAGE;
	if (o->out && find_dumps(out, NULL, &before, NULL) < 0) {
		cli_error("cannot list the files '%s*': %s", out, strerror(errno ? errno : ENOMEM));
		return CLI_USAGE;
	}
	t0 = now_s();
	rc = launch_run(path, argv, &run->wstatus);
	run->seconds = now_s() - t0;
	if (rc) {
		seenset_free(&before);
		return rc;
	}
	run->ran = 1;
	run->argv = argv;
	rc = find_dumps(out, &before, NULL, ds);
	seenset_free(&before);
	if (rc < 0) {
		cli_error("cannot list the dumps '%s*': %s", out, strerror(errno ? errno : ENOMEM));
		return CLI_USAGE;
	}
	if (!ds->n) {
		cli_error("the command wrote no dump ('%s'): did it start, and is it dynamically linked?",
			  out);
		return WIFEXITED(run->wstatus) && WEXITSTATUS(run->wstatus) == 0 ?
		       CLI_USAGE : GATE_CMD_FAILED;
	}
	qsort(ds->paths, ds->n, sizeof(*ds->paths), by_version);
	return 0;
}

static int write_json(struct gate_run *run, const char *path, int status)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		cli_error("cannot write '%s': %s", path, strerror(errno));
		return -1;
	}
	gate_json_report(run, f, status);
	if (ferror(f) | (fclose(f) != 0)) {
		cli_error("cannot write '%s': %s", path, strerror(errno ? errno : EIO));
		return -1;
	}
	return 0;
}

/* ---- putting it together ----------------------------------------------------- */

/*
 * Reads the dumps: every process record first, so that the programs not
 * judged (shells, make) are not replayed and symbolized for nothing; then
 * the judged ones in full.
 */
static int read_dumps(struct gate_opts *o, struct dumpset *ds, struct gate_entry **out,
		      size_t *n, size_t *njudged)
{
	struct gate_dump_opts go = {
		.supp = &o->supp, .read_target_suppressions = o->target_supp,
		.grace_ns = o->grace_ns,
		.keep_frames_sites = o->top > 0 ? (size_t)o->top + 5 : 64,
	};
	struct gate_entry *v = calloc(ds->n + 1, sizeof(*v));
	size_t i;

	if (!v) {
		cli_error("out of memory");
		return -1;
	}
	for (i = 0; i < ds->n; i++)
		if (gate_dump_peek(ds->paths[i], &v[i].p) < 0)
			goto fail;
	gate_choose_judged(o, v, ds->n, njudged);
	for (i = 0; i < ds->n; i++) {
		if (!v[i].judged)
			continue;
		gate_proc_release(&v[i].p);
		if (gate_dump_read(ds->paths[i], &go, &v[i].p) < 0)
			goto fail;
	}
	gate_judge_ends(v, ds->n);
	*out = v;
	*n = ds->n;
	return 0;
fail:
	for (i = 0; i < ds->n; i++)
		gate_proc_release(&v[i].p);
	free(v);
	return -1;
}

static void procs_free(struct gate_entry *v, size_t n)
{
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < L_COUNT; k++)
			gate_check_free(&v[i].checks[k]);
		gate_proc_release(&v[i].p);
	}
	free(v);
}

/* The baseline: a file of --save-baseline, or dumps read like the run's. */
static int load_baseline(struct gate_run *run)
{
	struct gate_opts *o = run->o;
	struct dumpset ds = { NULL, 0 };
	struct gate_entry *v = NULL;
	size_t n = 0, i, nj;
	int rc;

	if (o->nbaselines == 1 && baseline_is_file(o->baselines[0]) == 1)
		return baseline_load(&run->base, o->baselines[0]);
	for (i = 0; i < o->nbaselines; i++) {
		if (!is_dump(o->baselines[i])) {
			if (access(o->baselines[i], R_OK) < 0)
				cli_error("cannot read '%s': %s", o->baselines[i], strerror(errno));
			else
				cli_error("cannot read '%s': a baseline is one file written by --save-baseline, or dumps",
					  o->baselines[i]);
			dumpset_free(&ds);
			return -1;
		}
		if (dumpset_add(&ds, o->baselines[i]) < 0) {
			dumpset_free(&ds);
			return -1;
		}
	}
	rc = read_dumps(o, &ds, &v, &n, &nj);
	dumpset_free(&ds);
	if (rc < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (v[i].judged)
			baseline_add(&run->base, &v[i].p);
	procs_free(v, n);
	/* --print-suppressions tells about this run, not the baseline's */
	supp_reset_counts(&o->supp);
	run->base.source = strdup(o->baselines[0]);
	return 0;
}

static int parse_opts(int argc, char **argv, struct gate_opts *o, int *dashdash)
{
	static const struct option opts[] = {
		{ "max-leaked", required_argument, NULL, 'L' },
		{ "max-leaked-per-site", required_argument, NULL, 'S' },
		{ "max-lost", required_argument, NULL, 'X' },
		{ "max-peak", required_argument, NULL, 'P' },
		{ "max-growth", required_argument, NULL, 'G' },
		{ "max-residue-per-client", required_argument, NULL, 'R' },
		{ "max-increase", required_argument, NULL, 'I' },
		{ "baseline", required_argument, NULL, 'B' },
		{ "save-baseline", required_argument, NULL, 'W' },
		{ "suppressions", required_argument, NULL, 's' },
		{ "no-builtin-suppressions", no_argument, NULL, 'n' },
		{ "no-target-suppressions", no_argument, NULL, 'N' },
		{ "print-suppressions", no_argument, NULL, 'p' },
		{ "junit", required_argument, NULL, 'J' },
		{ "json", optional_argument, NULL, 'j' },
		{ "top", required_argument, NULL, 't' },
		{ "grace", required_argument, NULL, 'g' },
		{ "clients", required_argument, NULL, 'c' },
		{ "judge", required_argument, NULL, 'u' },
		{ "judge-all", no_argument, NULL, 'a' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char **supp_files = NULL;
	size_t nsupp = 0, i;
	int c, li;

	o->builtins = 1;
	o->target_supp = 1;
	o->top = 5;
	o->grace_ns = 1000000000ull;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:h", opts, NULL)) != -1) {
		uint64_t v;

		li = -1;
		switch (c) {
		case 'L': li = L_LEAKED; break;
		case 'S': li = L_PER_SITE; break;
		case 'X': li = L_LOST; break;
		case 'P': li = L_PEAK; break;
		case 'R': li = L_RESIDUE; break;
		case 'G':
			if (parse_rate(optarg, &o->max[L_GROWTH]) < 0)
				return cli_usage("gate", "--max-growth is bytes per second like 64KiB or 1MB/s, not '%s'",
						 optarg);
			o->set[L_GROWTH] = 1;
			o->max_text[L_GROWTH] = optarg;
			break;
		case 'I':
			if (parse_percent(optarg, &o->max[L_INCREASE]) < 0)
				return cli_usage("gate", "--max-increase is a percentage like 10 or 2.5%%, not '%s'",
						 optarg);
			o->set[L_INCREASE] = 1;
			o->max_text[L_INCREASE] = optarg;
			break;
		case 'B':
			if (add_str(&o->baselines, &o->nbaselines, optarg) < 0)
				return cli_usage("gate", "out of memory");
			break;
		case 'W':
			o->save_baseline = optarg;
			break;
		case 's':
			if (add_str(&supp_files, &nsupp, optarg) < 0)
				return cli_usage("gate", "out of memory");
			break;
		case 'n':
			o->builtins = 0;
			break;
		case 'N':
			o->target_supp = 0;
			break;
		case 'p':
			o->print_supp = 1;
			break;
		case 'J':
			o->junit = optarg;
			break;
		case 'j':
			o->json = 1;
			o->json_path = optarg;	/* --json=FILE; --json alone: stdout */
			break;
		case 't':
			if (cli_parse_top(optarg, &o->top) < 0)
				return cli_usage("gate", "--top wants a number of sites, not '%s'", optarg);
			break;
		case 'g':
			if (cli_parse_seconds(optarg, &o->grace_ns) < 0)
				return cli_usage("gate", "--grace is a duration like 1s or 500ms, not '%s'",
						 optarg);
			break;
		case 'c':
			if (strcmp(optarg, "off") && strcmp(optarg, "sockets") &&
			    strcmp(optarg, "threads"))
				return cli_usage("gate", "--clients is off, sockets or threads, not '%s'",
						 optarg);
			o->clients = optarg;
			break;
		case 'u':
			if (add_str(&o->judge, &o->njudge, optarg) < 0)
				return cli_usage("gate", "out of memory");
			break;
		case 'a':
			o->judge_all = 1;
			break;
		case 'o':
			if (!*optarg)
				return cli_usage("gate", "-o wants a file name");
			o->out = optarg;
			break;
		case 'h':
			help_verb("gate", stdout);
			free(supp_files);
			return -1;
		default:
			free(supp_files);
			return cli_bad_option("gate", c, argv);
		}
		if (li >= 0) {
			if (cli_parse_size(optarg, &v) < 0) {
				free(supp_files);
				return cli_usage("gate", "--%s is a size like 0, 512KiB or 10MB, not '%s'",
						 gate_limit_opt[li], optarg);
			}
			o->max[li] = (double)v;
			o->max_text[li] = optarg;
			o->set[li] = 1;
		}
	}
	*dashdash = optind > 0 && optind <= argc && !strcmp(argv[optind - 1], "--");
	if (o->nbaselines && !o->set[L_INCREASE]) {
		o->set[L_INCREASE] = 1;	/* any increase fails, as pytest-memray does */
		o->max[L_INCREASE] = 0;
	}
	if (o->set[L_INCREASE] && !o->nbaselines) {
		free(supp_files);
		return cli_usage("gate", "--max-increase compares with a baseline: add --baseline DUMP or FILE");
	}
	/* no limit at all: no leaks, as LeakSanitizer */
	for (c = 0, li = 0; li < L_COUNT; li++)
		c |= o->set[li];
	if (!c) {
		o->set[L_LEAKED] = 1;
		o->max[L_LEAKED] = 0;
		o->max_text[L_LEAKED] = "0";
	}
	supp_init(&o->supp, o->builtins);
	for (i = 0; i < nsupp; i++) {
		if (supp_load_file(&o->supp, supp_files[i]) < 0) {
			free(supp_files);
			return CLI_USAGE;
		}
	}
	free(supp_files);
	return 0;
}

int cmd_gate(int argc, char **argv)
{
	struct gate_opts o;
	struct gate_run run;
	struct dumpset ds = { NULL, 0 };
	char tmpdir[PATH_MAX] = "";
	int rc, dashdash = 0, status = CLI_USAGE;
	size_t i;

	memset(&o, 0, sizeof(o));
	memset(&run, 0, sizeof(run));
	run.o = &o;
	rc = parse_opts(argc, argv, &o, &dashdash);
	if (rc) {
		status = rc < 0 ? 0 : rc;
		goto out;
	}
	if (optind >= argc) {
		cli_usage("gate", "what to judge? usage: heaptrail gate [LIMITS] -- CMD [ARGS...] or heaptrail gate [LIMITS] DUMP...");
		goto out;
	}
	if (o.nbaselines && load_baseline(&run) < 0)
		goto out;
	run.have_base = o.nbaselines > 0;

	if (dashdash) {
		rc = run_command(&run, argv + optind, &ds, tmpdir, sizeof(tmpdir));
		if (rc) {
			status = rc;
			goto out;
		}
	} else {
		for (i = (size_t)optind; i < (size_t)argc; i++) {
			if (!is_dump(argv[i])) {
				if (access(argv[i], R_OK) < 0)
					cli_error("cannot read '%s': %s", argv[i], strerror(errno));
				else
					cli_usage("gate", "'%s' is not a dump; to run a command, put '--' before it",
						  argv[i]);
				goto out;
			}
			if (dumpset_add(&ds, argv[i]) < 0) {
				cli_error("out of memory");
				goto out;
			}
		}
		if (o.out)
			cli_warn("-o names the dumps of a command the gate runs; ignored for dumps");
	}
	if (read_dumps(&o, &ds, &run.procs, &run.nprocs, &run.njudged) < 0)
		goto out;
	if (o.set[L_LOST]) {
		for (i = 0; i < run.nprocs; i++) {
			struct gate_entry *pr = &run.procs[i];

			if (pr->judged && pr->judge_leaks && !pr->p.have_reach) {
				cli_error("--max-lost needs a reachability scan, and '%s' (%s) has none: record with 'heaptrail record --reach' or HEAPTRAIL_REACH=exit%s",
					  pr->p.path, pr->p.name,
					  run.ran ? " (the gate asked for it: does this shim scan?)" : "");
				goto out;
			}
		}
	}
	for (i = 0; i < run.nprocs; i++) {
		if (run.procs[i].judged)
			baseline_add(&run.now, &run.procs[i].p);
		if (run.procs[i].judged)
			gate_proc_checks(&run, &run.procs[i]);
	}
	if (gate_merge_sites(&run) < 0) {
		cli_error("out of memory");
		goto out;
	}
	gate_tree_checks(&run);

	{
		size_t fail, pass, skip;

		gate_count_states(&run, &fail, &pass, &skip);
		status = gate_cmd_failed(&run) ? GATE_CMD_FAILED : fail ? GATE_FAIL : 0;
	}
	if (o.json && !o.json_path) {
		gate_json_report(&run, stdout, status);
	} else {
		gate_text_report(&run, stdout);
		if (o.json_path && write_json(&run, o.json_path, status) < 0)
			status = CLI_USAGE;
	}
	fflush(stdout);
	if (o.junit && gate_junit_report(&run) < 0)
		status = CLI_USAGE;
	if (o.save_baseline && baseline_save(&run.now, o.save_baseline) < 0)
		status = CLI_USAGE;
	if (o.out && run.ran && !(o.json && !o.json_path))
		for (i = 0; i < ds.n; i++)
			fprintf(stderr, "heaptrail: dump written to '%s'\n", ds.paths[i]);
out:
	if (tmpdir[0])
		rm_dir(tmpdir);
	for (i = 0; i < L_COUNT; i++)
		gate_check_free(&run.tree[i]);
	procs_free(run.procs, run.nprocs);
	free(run.merged);
	baseline_release(&run.base);
	baseline_release(&run.now);
	dumpset_free(&ds);
	supp_release(&o.supp);
	free(o.baselines);
	free(o.judge);
	return status;
}
