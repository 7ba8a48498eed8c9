/* cmd_gate.c - 'heaptrail gate': runs a command (or reads dumps) and fails when it leaks past limits */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
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
#include "json.h"
#include "junit.h"
#include "launch.h"
#include "suppress.h"

/*
 * Exit status: 0 within the limits, 1 a limit exceeded, 2 usage or input
 * error, 3 the command itself failed (whatever the limits said).
 *
 * Every limit is judged per process and for the run as a whole: additive
 * figures (leaked, lost) are summed, per-site figures are summed over the
 * processes by symbol (so thirty runs of one test leaking at one line add
 * up), and the others (peak, growth, residue) take the worst process.
 *
 * A process is not judged for leaks when it ended by exec (its heap went
 * with the image, nobody could have freed it) or by a signal (it did not
 * finish).  Programs installed in system directories (shells, make,
 * compilers) are not judged at all when the run has other processes: they
 * are how the tests were started, not what is tested.
 */

#define GATE_FAIL 1
#define GATE_CMD_FAILED 3

enum limit_kind {
	L_LEAKED, L_PER_SITE, L_LOST, L_PEAK, L_GROWTH, L_RESIDUE, L_INCREASE,
	L_COUNT
};

static const char *const limit_opt[L_COUNT] = {
	[L_LEAKED] = "max-leaked", [L_PER_SITE] = "max-leaked-per-site",
	[L_LOST] = "max-lost", [L_PEAK] = "max-peak", [L_GROWTH] = "max-growth",
	[L_RESIDUE] = "max-residue-per-client", [L_INCREASE] = "max-increase",
};

enum { ST_PASS, ST_FAIL, ST_SKIP };

struct check {
	enum limit_kind kind;
	int state;
	double value, limit;	/* bytes, bytes/s, or percent for L_INCREASE */
	char msg[768];		/* what was measured, one line */
	/* offending sites (borrowed) with the process each belongs to */
	const struct gate_site **sites;
	const struct gate_proc **site_procs;
	uint64_t *site_bytes;	/* bytes that count for this check */
	size_t nsites;
};

struct proc {
	struct gate_proc p;
	int judged;		/* 0: not judged at all */
	int judge_leaks;	/* 0: ended by exec or by a signal */
	const char *why_not;
	struct check checks[L_COUNT];
	int nchecks;
};

struct opts {
	int set[L_COUNT];
	double max[L_COUNT];
	const char **baselines;
	size_t nbaselines;
	const char *save_baseline;
	const char *junit;
	const char *out;
	const char *clients;
	const char **judge;
	size_t njudge;
	int json, top, print_supp, builtins, target_supp, judge_all;
	uint64_t grace_ns;
	struct suppress supp;
};

struct run {
	struct opts *o;
	struct proc *procs;
	size_t nprocs, njudged;
	struct check tree[L_COUNT];
	int ntree;
	struct baseline base, now;
	int have_base;
	/* the command, when the gate ran one */
	char **argv;
	int ran, wstatus;
	double seconds;
	/* merged per-site figures of the whole run (L_PER_SITE) */
	struct merged *merged;
	size_t nmerged;
};

struct merged {
	const char *key;
	const struct gate_site *site;	/* the largest instance, for its frames */
	const struct gate_proc *proc;
	uint64_t bytes, blocks;
	size_t procs;
};

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

/* ---- which processes are judged -------------------------------------------- */

static int is_system_program(const char *exe)
{
	static const char *const dirs[] = {
		"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/lib/",
		"/usr/lib64/", "/usr/libexec/", "/lib/", "/lib64/",
	};
	size_t i;

	for (i = 0; exe && i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strncmp(exe, dirs[i], strlen(dirs[i])))
			return 1;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path ? path : "?";
}

static void choose_judged(struct opts *o, struct proc *v, size_t n,
			  size_t *njudged)
{
	size_t i, k, others = 0;

	for (i = 0; i < n; i++)
		others += !is_system_program(v[i].p.exe);
	*njudged = 0;
	for (i = 0; i < n; i++) {
		struct proc *pr = &v[i];

		pr->judged = 1;
		pr->judge_leaks = 1;
		pr->why_not = NULL;
		if (o->njudge) {
			pr->judged = 0;
			for (k = 0; k < o->njudge; k++)
				if (pr->p.exe &&
				    (!fnmatch(o->judge[k], pr->p.exe, 0) ||
				     !fnmatch(o->judge[k], base_name(pr->p.exe), 0)))
					pr->judged = 1;
			if (!pr->judged)
				pr->why_not = "not named by --judge";
		} else if (!o->judge_all && others && is_system_program(pr->p.exe)) {
			pr->judged = 0;
			pr->why_not = "a system program (--judge-all judges it too)";
		}
		if (pr->p.end_how == HTR_END_EXEC) {
			pr->judge_leaks = 0;
			pr->why_not = pr->judged ? "leaks not judged: it ended by exec" : pr->why_not;
		} else if (pr->p.end_how == HTR_END_SIGNAL) {
			pr->judge_leaks = 0;
			pr->why_not = pr->judged ? "leaks not judged: it was killed by a signal" :
				      pr->why_not;
		}
		*njudged += pr->judged;
	}
}

/* ---- checks --------------------------------------------------------------- */

static int check_add_site(struct check *c, const struct gate_site *s,
			  const struct gate_proc *p, uint64_t bytes)
{
	size_t n = c->nsites + 1;
	const struct gate_site **a = realloc(c->sites, n * sizeof(*a));
	const struct gate_proc **b;
	uint64_t *d;

	if (!a)
		return -1;
	c->sites = a;
	b = realloc(c->site_procs, n * sizeof(*b));
	if (!b)
		return -1;
	c->site_procs = b;
	d = realloc(c->site_bytes, n * sizeof(*d));
	if (!d)
		return -1;
	c->site_bytes = d;
	a[c->nsites] = s;
	b[c->nsites] = p;
	d[c->nsites] = bytes;
	c->nsites++;
	return 0;
}

static void check_free(struct check *c)
{
	free(c->sites);
	free(c->site_procs);
	free(c->site_bytes);
}

/* "X over" for a failed check. */
static const char *over_unit(double value, double limit, const char *unit)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s%s over", cli_bytes((uint64_t)(value - limit)), unit);
	return buf;
}

static const char *over(double value, double limit)
{
	return over_unit(value, limit, "");
}

static void judge_size(struct check *c, double value, double limit)
{
	c->value = value;
	c->limit = limit;
	c->state = value > limit ? ST_FAIL : ST_PASS;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void proc_checks(struct run *run, struct proc *pr)
{
	struct opts *o = run->o;
	struct gate_proc *p = &pr->p;
	size_t i;
	int k;

	pr->nchecks = 0;
	for (k = 0; k < L_COUNT; k++) {
		struct check *c = &pr->checks[k];

		memset(c, 0, sizeof(*c));
		c->kind = (enum limit_kind)k;
		if (!o->set[k] || k == L_INCREASE)
			continue;
		pr->nchecks++;
		if (!pr->judge_leaks && (k == L_LEAKED || k == L_PER_SITE || k == L_LOST ||
					 k == L_RESIDUE)) {
			c->state = ST_SKIP;
			snprintf(c->msg, sizeof(c->msg), "%s", pr->why_not);
			continue;
		}
		switch (k) {
		case L_LEAKED:
			judge_size(c, (double)p->leaked_bytes, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "leaked %s in %s %s%s%s",
				 cli_bytes(p->leaked_bytes), cli_count(p->leaked_blocks),
				 plural(p->leaked_blocks, "block", "blocks"),
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->nsites; i++)
				check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
			break;
		case L_PER_SITE: {
			size_t nover = 0;

			judge_size(c, p->nsites ? (double)p->sites[0].bytes : 0, o->max[k]);
			for (i = 0; i < p->nsites; i++) {
				if ((double)p->sites[i].bytes <= o->max[k])
					break;
				nover++;
				check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
			}
			if (c->state == ST_FAIL)
				snprintf(c->msg, sizeof(c->msg), "%s %s leaked more, the largest %s (%s)",
					 cli_count(nover), plural(nover, "site", "sites"),
					 cli_bytes(p->sites[0].bytes), over(c->value, c->limit));
			else
				snprintf(c->msg, sizeof(c->msg), "largest site leaked %s",
					 cli_bytes(p->nsites ? p->sites[0].bytes : 0));
			break;
		}
		case L_LOST:
			judge_size(c, (double)p->lost_bytes, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "definitely and indirectly lost %s%s%s",
				 cli_bytes(p->lost_bytes), c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->nsites; i++)
				if (p->sites[i].lost_bytes)
					check_add_site(c, &p->sites[i], p, p->sites[i].lost_bytes);
			break;
		case L_PEAK:
			judge_size(c, (double)p->peak_bytes, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "peak of live heap %s%s%s",
				 cli_bytes(p->peak_bytes), c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->npeak_sites; i++)
				check_add_site(c, &p->peak_sites[i], p, p->peak_sites[i].peak_bytes);
			break;
		case L_GROWTH:
			if (p->growth_samples < 3) {
				c->state = ST_SKIP;
				snprintf(c->msg, sizeof(c->msg),
					 "too short to measure growth (%zu heap %s; it takes 3)",
					 p->growth_samples, plural(p->growth_samples, "sample", "samples"));
				break;
			}
			judge_size(c, p->growth_bps, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "live heap grew %s%s/s over %s%s%s",
				 p->growth_bps < 0 ? "-" : "",
				 cli_bytes((uint64_t)fabs(p->growth_bps)),
				 cli_duration(p->duration_ns),
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over_unit(c->value, c->limit, "/s") : "");
			for (i = 0; i < p->nsites; i++)
				check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
			break;
		case L_RESIDUE: {
			double per;

			if (!p->clients_ended) {
				c->state = ST_SKIP;
				snprintf(c->msg, sizeof(c->msg),
					 "no client disconnected (clients come from heaptrail.h calls or --clients)");
				break;
			}
			per = (double)p->residue_bytes / (double)p->clients_ended;
			judge_size(c, per, o->max[k]);
			snprintf(c->msg, sizeof(c->msg),
				 "%s per client on average over %s %s that disconnected, the worst %s ('%s')%s%s",
				 cli_bytes((uint64_t)per), cli_count(p->clients_ended),
				 plural(p->clients_ended, "client", "clients"),
				 cli_bytes(p->residue_max_bytes),
				 p->residue_max_label ? p->residue_max_label : "no label",
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->nresidue_sites; i++)
				check_add_site(c, &p->residue_sites[i], p,
					       p->residue_sites[i].bytes / p->clients_ended);
			break;
		}
		default:
			break;
		}
	}
}

static int by_key(const void *pa, const void *pb)
{
	const struct merged *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

static int by_merged_bytes(const void *pa, const void *pb)
{
	const struct merged *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	return strcmp(a->key, b->key);
}

/* Every judged leaking site of the run, the same code in several processes summed. */
static int merge_sites(struct run *run)
{
	size_t i, k, n = 0, m = 0;
	struct merged *v;

	for (i = 0; i < run->nprocs; i++)
		if (run->procs[i].judged && run->procs[i].judge_leaks)
			n += run->procs[i].p.nsites;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return -1;
	for (i = 0; i < run->nprocs; i++) {
		struct proc *pr = &run->procs[i];

		if (!pr->judged || !pr->judge_leaks)
			continue;
		for (k = 0; k < pr->p.nsites; k++) {
			v[m].key = pr->p.sites[k].key;
			v[m].site = &pr->p.sites[k];
			v[m].proc = &pr->p;
			v[m].bytes = pr->p.sites[k].bytes;
			v[m].blocks = pr->p.sites[k].blocks;
			v[m].procs = 1;
			m++;
		}
	}
	qsort(v, m, sizeof(*v), by_key);
	for (i = 0, k = 0; i < m; i++) {
		if (k && !strcmp(v[k - 1].key, v[i].key)) {
			struct merged *t = &v[k - 1];

			/* keep the instance with frames for printing */
			if (!t->site->nframes && v[i].site->nframes) {
				t->site = v[i].site;
				t->proc = v[i].proc;
			}
			t->bytes += v[i].bytes;
			t->blocks += v[i].blocks;
			t->procs++;
			continue;
		}
		v[k++] = v[i];
	}
	qsort(v, k, sizeof(*v), by_merged_bytes);
	run->merged = v;
	run->nmerged = k;
	return 0;
}

static double increase_pct(uint64_t now, uint64_t base)
{
	if (now <= base)
		return now == base ? 0 : -100.0 * (double)(base - now) / (double)base;
	if (!base)
		return INFINITY;
	return 100.0 * (double)(now - base) / (double)base;
}

static const char *pct_str(double pct)
{
	static char buf[2][32];
	static int i;

	i ^= 1;
	if (isinf(pct))
		snprintf(buf[i], sizeof(buf[i]), "new");
	else
		snprintf(buf[i], sizeof(buf[i]), "%+.1f%%", pct);
	return buf[i];
}

static void tree_checks(struct run *run)
{
	struct opts *o = run->o;
	size_t i, worst;
	int k;

	run->ntree = 0;
	for (k = 0; k < L_COUNT; k++) {
		struct check *c = &run->tree[k];
		uint64_t sum = 0, blocks = 0;
		double best = -INFINITY;
		size_t nproc = 0, nskip = 0;

		memset(c, 0, sizeof(*c));
		c->kind = (enum limit_kind)k;
		if (!o->set[k])
			continue;
		run->ntree++;
		worst = (size_t)-1;
		for (i = 0; i < run->nprocs; i++) {
			struct proc *pr = &run->procs[i];
			struct check *pc = &pr->checks[k];

			if (!pr->judged || k == L_INCREASE)
				continue;
			if (pc->state == ST_SKIP) {
				nskip++;
				continue;
			}
			nproc++;
			if (pc->value > best) {
				best = pc->value;
				worst = i;
			}
			if (k == L_LEAKED) {
				sum += pr->p.leaked_bytes;
				blocks += pr->p.leaked_blocks;
			} else if (k == L_LOST) {
				sum += pr->p.lost_bytes;
			}
		}
		switch (k) {
		case L_LEAKED:
		case L_LOST:
			judge_size(c, (double)sum, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "%s %s in %s %s%s%s",
				 k == L_LEAKED ? "leaked" : "lost", cli_bytes(sum),
				 cli_count(nproc), plural(nproc, "process", "processes"),
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < run->nprocs; i++) {
				struct check *pc = &run->procs[i].checks[k];

				if (run->procs[i].judged && pc->nsites && pc->state != ST_SKIP)
					check_add_site(c, pc->sites[0], pc->site_procs[0],
						       pc->site_bytes[0]);
			}
			break;
		case L_PER_SITE: {
			size_t nover = 0;

			judge_size(c, run->nmerged ? (double)run->merged[0].bytes : 0, o->max[k]);
			for (i = 0; i < run->nmerged && (double)run->merged[i].bytes > o->max[k]; i++) {
				nover++;
				check_add_site(c, run->merged[i].site, run->merged[i].proc,
					       run->merged[i].bytes);
			}
			snprintf(c->msg, sizeof(c->msg),
				 "%s %s over the limit, summed over the processes; the largest leaked %s",
				 cli_count(nover), plural(nover, "site", "sites"),
				 cli_bytes(run->nmerged ? run->merged[0].bytes : 0));
			break;
		}
		case L_PEAK:
		case L_GROWTH:
		case L_RESIDUE:
			if (worst == (size_t)-1) {
				c->state = ST_SKIP;
				snprintf(c->msg, sizeof(c->msg), "no process could be judged%s",
					 nskip ? " (see the processes)" : "");
				break;
			}
			judge_size(c, best, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "worst: %s: %s",
				 run->procs[worst].p.name, run->procs[worst].checks[k].msg);
			for (i = 0; i < run->procs[worst].checks[k].nsites; i++)
				check_add_site(c, run->procs[worst].checks[k].sites[i],
					       run->procs[worst].checks[k].site_procs[i],
					       run->procs[worst].checks[k].site_bytes[i]);
			break;
		case L_INCREASE: {
			double pl = increase_pct(run->now.leaked_bytes, run->base.leaked_bytes);
			double pp = increase_pct(run->now.peak_bytes, run->base.peak_bytes);

			c->limit = o->max[k];
			c->value = pl > pp ? pl : pp;
			c->state = pl > o->max[k] || pp > o->max[k] ? ST_FAIL : ST_PASS;
			snprintf(c->msg, sizeof(c->msg),
				 "leaked %s (baseline %s, %s), peak %s (baseline %s, %s); limit +%g%%",
				 cli_bytes(run->now.leaked_bytes), cli_bytes(run->base.leaked_bytes),
				 pct_str(pl), cli_bytes(run->now.peak_bytes),
				 cli_bytes(run->base.peak_bytes), pct_str(pp), o->max[k]);
			break;
		}
		default:
			break;
		}
	}
}

/* ---- text ------------------------------------------------------------------- */

/* "function file:line" of the top frame and the frame that called it. */
static void site_line(FILE *out, const struct gate_site *s, uint64_t bytes,
		      const struct gate_proc *p, int show_proc, const char *indent)
{
	char buf[1400];

	fprintf(out, "%s%9s  %s", indent, cli_bytes(bytes), s->label);
	if (s->nframes && s->top + 1 < s->nframes) {
		gate_frame_text(&s->frames[s->top + 1], buf, sizeof(buf));
		fprintf(out, "  <- %s", buf);
	}
	if (show_proc)
		fprintf(out, "  [%s]", p->name);
	fprintf(out, "\n");
}

static void limit_str(const struct check *c, char *buf, size_t len)
{
	if (c->kind == L_INCREASE)
		snprintf(buf, len, "--%s %g%%", limit_opt[c->kind], c->limit);
	else if (c->kind == L_GROWTH)
		snprintf(buf, len, "--%s %s/s", limit_opt[c->kind],
			 cli_bytes((uint64_t)c->limit));
	else
		snprintf(buf, len, "--%s %s", limit_opt[c->kind],
			 cli_bytes((uint64_t)c->limit));
}

static void print_check(FILE *out, const struct check *c, const char *who,
			int top, int show_proc)
{
	char lim[96];
	size_t i;

	limit_str(c, lim, sizeof(lim));
	fprintf(out, "%s %s: %s: %s\n",
		c->state == ST_FAIL ? "FAIL" : c->state == ST_SKIP ? "skip" : "ok  ",
		who, lim, c->msg);
	if (c->state != ST_FAIL)
		return;
	for (i = 0; i < c->nsites && (top <= 0 || i < (size_t)top); i++)
		site_line(out, c->sites[i], c->site_bytes[i], c->site_procs[i],
			  show_proc, "       ");
	if (top > 0 && c->nsites > (size_t)top)
		fprintf(out, "       ... %s more %s (--top 0 shows all)\n",
			cli_count(c->nsites - (size_t)top),
			plural(c->nsites - (size_t)top, "site", "sites"));
}

static const char *status_str(int wstatus)
{
	static char buf[64];

	if (WIFSIGNALED(wstatus))
		snprintf(buf, sizeof(buf), "was killed by %s", cli_signame(WTERMSIG(wstatus)));
	else
		snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(wstatus));
	return buf;
}

static int cmd_failed(const struct run *run)
{
	return run->ran && (WIFSIGNALED(run->wstatus) || WEXITSTATUS(run->wstatus));
}

static void count_states(const struct run *run, size_t *fail, size_t *pass,
			 size_t *skip)
{
	size_t i;
	int k;

	*fail = *pass = *skip = 0;
	for (i = 0; i < run->nprocs; i++) {
		if (!run->procs[i].judged)
			continue;
		for (k = 0; k < L_COUNT; k++) {
			if (!run->o->set[k] || k == L_INCREASE)
				continue;
			*fail += run->procs[i].checks[k].state == ST_FAIL;
			*pass += run->procs[i].checks[k].state == ST_PASS;
			*skip += run->procs[i].checks[k].state == ST_SKIP;
		}
	}
	for (k = 0; k < L_COUNT; k++) {
		if (!run->o->set[k] || (k != L_INCREASE && run->njudged < 2))
			continue;
		*fail += run->tree[k].state == ST_FAIL;
		*pass += run->tree[k].state == ST_PASS;
		*skip += run->tree[k].state == ST_SKIP;
	}
}

static void text_report(struct run *run, FILE *out)
{
	struct opts *o = run->o;
	size_t i, fail, pass, skip, nsupp = 0;
	uint64_t supp_bytes = 0;
	int k;

	count_states(run, &fail, &pass, &skip);
	fprintf(out, "heaptrail gate: %s: ", fail ? "FAILED" : "passed");
	if (fail)
		fprintf(out, "%s of %s %s exceeded", cli_count(fail), cli_count(fail + pass),
			plural(fail + pass, "check", "checks"));
	else
		fprintf(out, "%s %s within the limits", cli_count(pass),
			plural(pass, "check", "checks"));
	fprintf(out, " (%s %s judged", cli_count(run->njudged),
		plural(run->njudged, "process", "processes"));
	if (run->nprocs > run->njudged)
		fprintf(out, " of %s", cli_count(run->nprocs));
	fprintf(out, ")\n");
	if (run->ran && cmd_failed(run))
		fprintf(out, "FAIL the command %s\n", status_str(run->wstatus));

	/* failures first, in full; then one line per passing check */
	for (int pass_no = 0; pass_no < 2; pass_no++) {
		for (i = 0; i < run->nprocs; i++) {
			struct proc *pr = &run->procs[i];

			if (!pr->judged)
				continue;
			for (k = 0; k < L_COUNT; k++) {
				struct check *c = &pr->checks[k];

				if (!o->set[k] || k == L_INCREASE ||
				    (c->state == ST_FAIL) != (pass_no == 0))
					continue;
				/* one process passing everything: one line per check is plenty */
				print_check(out, c, pr->p.name, o->top, 0);
			}
		}
		for (k = 0; k < L_COUNT; k++) {
			struct check *c = &run->tree[k];

			if (!o->set[k] || (k != L_INCREASE && run->njudged < 2) ||
			    (c->state == ST_FAIL) != (pass_no == 0))
				continue;
			print_check(out, c, "whole run", o->top, 1);
		}
	}
	for (i = 0; i < run->nprocs; i++) {
		struct proc *pr = &run->procs[i];

		supp_bytes += pr->judged ? pr->p.suppressed_bytes : 0;
		if (!pr->judged)
			fprintf(out, "not judged: %s %s: %s\n", pr->p.name,
				pr->p.exe ? pr->p.exe : "", pr->why_not);
		if (pr->p.warning)
			fprintf(out, "warning: %s: %s\n", pr->p.name, pr->p.warning);
		if (pr->p.lost_events)
			fprintf(out, "warning: %s: %s events were lost (%s)\n", pr->p.name,
				cli_count(pr->p.lost_events), "leaks may be missing or spurious");
	}
	for (i = 0; i < o->supp.n; i++)
		nsupp += o->supp.rules[i].sites != 0;
	if (supp_bytes && !o->print_supp)
		fprintf(out, "suppressed: %s by %s %s (--print-suppressions shows them)\n",
			cli_bytes(supp_bytes), cli_count(nsupp), plural(nsupp, "rule", "rules"));
	if (run->ran)
		fprintf(out, "command: %s\n", status_str(run->wstatus));
	if (o->print_supp)
		supp_print(&o->supp, out);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_check(struct json *j, const struct check *c, int top)
{
	size_t i;

	json_obj_begin(j);
	json_kv_str(j, "limit", limit_opt[c->kind]);
	json_kv_str(j, "result", c->state == ST_FAIL ? "fail" : c->state == ST_SKIP ?
		    "skipped" : "pass");
	json_key(j, "passed");
	json_bool(j, c->state != ST_FAIL);
	if (c->kind == L_INCREASE) {
		json_kv_double(j, "limit_percent", c->limit);
		json_kv_double(j, "value_percent", isinf(c->value) ? 1e308 : c->value);
	} else if (c->kind == L_GROWTH) {
		json_kv_double(j, "limit_bytes_per_second", c->limit);
		if (c->state == ST_SKIP) {
			json_key(j, "value_bytes_per_second");
			json_null(j);
		} else {
			json_kv_double(j, "value_bytes_per_second", c->value);
		}
	} else {
		json_kv_u64(j, "limit_bytes", (uint64_t)c->limit);
		json_key(j, "value_bytes");
		if (c->state == ST_SKIP)
			json_null(j);
		else
			json_u64(j, (uint64_t)(c->value + 0.5));
	}
	json_kv_str(j, "message", c->msg);
	json_key(j, "sites");
	json_arr_begin(j);
	for (i = 0; c->state == ST_FAIL && i < c->nsites &&
		    (top <= 0 || i < (size_t)top); i++) {
		const struct gate_site *s = c->sites[i];

		if (!s->nframes)
			continue;	/* only the largest sites keep frames */
		json_obj_begin(j);
		gate_site_json(j, s);
		json_kv_u64(j, "bytes", c->site_bytes[i]);
		json_kv_u64(j, "leaked_bytes", s->bytes);
		json_kv_u64(j, "leaked_blocks", s->blocks);
		json_kv_u64(j, "pid", c->site_procs[i]->pid);
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

static const char *end_str(int how)
{
	switch (how) {
	case HTR_END_EXIT:
		return "exit";
	case HTR_END_SIGNAL:
		return "signal";
	case HTR_END_EXEC:
		return "exec";
	default:
		return NULL;
	}
}

static void json_report(struct run *run, int exit_status)
{
	struct opts *o = run->o;
	struct json j;
	size_t i, fail, pass, skip;
	int k;

	count_states(run, &fail, &pass, &skip);
	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "result", exit_status == GATE_CMD_FAILED ? "command_failed" :
		    fail ? "fail" : "pass");
	json_kv_i64(&j, "exit_status", exit_status);
	json_key(&j, "command");
	if (run->ran) {
		json_obj_begin(&j);
		json_key(&j, "argv");
		json_arr_begin(&j);
		for (i = 0; run->argv[i]; i++)
			json_str(&j, run->argv[i]);
		json_arr_end(&j);
		json_key(&j, "exit_code");
		if (WIFEXITED(run->wstatus))
			json_i64(&j, WEXITSTATUS(run->wstatus));
		else
			json_null(&j);
		json_key(&j, "signal");
		if (WIFSIGNALED(run->wstatus))
			json_i64(&j, WTERMSIG(run->wstatus));
		else
			json_null(&j);
		json_obj_end(&j);
	} else {
		json_null(&j);
	}
	json_key(&j, "limits");
	json_obj_begin(&j);
	for (k = 0; k < L_COUNT; k++) {
		char key[64];

		if (!o->set[k])
			continue;
		snprintf(key, sizeof(key), "%s_%s", limit_opt[k],
			 k == L_INCREASE ? "percent" : k == L_GROWTH ? "bytes_per_second" : "bytes");
		for (char *c = key; *c; c++)
			if (*c == '-')
				*c = '_';
		json_kv_double(&j, key, o->max[k]);
	}
	json_obj_end(&j);
	json_kv_u64(&j, "checks_failed", fail);
	json_kv_u64(&j, "checks_passed", pass);
	json_kv_u64(&j, "checks_skipped", skip);
	json_key(&j, "processes");
	json_arr_begin(&j);
	for (i = 0; i < run->nprocs; i++) {
		struct proc *pr = &run->procs[i];
		struct gate_proc *p = &pr->p;

		json_obj_begin(&j);
		json_kv_u64(&j, "pid", p->pid);
		json_kv_u64(&j, "ppid", p->ppid);
		json_kv_str(&j, "exe", p->exe);
		json_kv_str(&j, "command", p->cmdline);
		json_kv_str(&j, "dump", o->out || !run->ran ? p->path : NULL);
		json_key(&j, "judged");
		json_bool(&j, pr->judged);
		json_kv_str(&j, "not_judged_because", pr->why_not);
		json_kv_str(&j, "end", end_str(p->end_how));
		json_key(&j, "end_status");
		if (p->end_how == HTR_END_EXIT || p->end_how == HTR_END_SIGNAL)
			json_i64(&j, p->end_status);
		else
			json_null(&j);
		json_kv_u64(&j, "leaked_bytes", p->leaked_bytes);
		json_kv_u64(&j, "leaked_blocks", p->leaked_blocks);
		json_kv_u64(&j, "suppressed_bytes", p->suppressed_bytes);
		json_kv_u64(&j, "suppressed_blocks", p->suppressed_blocks);
		json_key(&j, "lost_bytes");
		if (p->have_reach)
			json_u64(&j, p->lost_bytes);
		else
			json_null(&j);
		json_kv_u64(&j, "peak_bytes", p->peak_bytes);
		json_key(&j, "growth_bytes_per_second");
		if (p->growth_samples >= 3)
			json_double(&j, p->growth_bps);
		else
			json_null(&j);
		json_kv_u64(&j, "clients_disconnected", p->clients_ended);
		json_key(&j, "residue_per_client_bytes");
		if (p->clients_ended)
			json_u64(&j, p->residue_bytes / p->clients_ended);
		else
			json_null(&j);
		json_key(&j, "checks");
		json_arr_begin(&j);
		for (k = 0; pr->judged && k < L_COUNT; k++)
			if (o->set[k] && k != L_INCREASE)
				json_check(&j, &pr->checks[k], o->top);
		json_arr_end(&j);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_key(&j, "whole_run");
	json_obj_begin(&j);
	json_kv_u64(&j, "leaked_bytes", run->now.leaked_bytes);
	json_kv_u64(&j, "peak_bytes", run->now.peak_bytes);
	json_key(&j, "checks");
	json_arr_begin(&j);
	for (k = 0; k < L_COUNT; k++)
		if (o->set[k])
			json_check(&j, &run->tree[k], o->top);
	json_arr_end(&j);
	json_obj_end(&j);
	json_key(&j, "suppressions");
	supp_json(&o->supp, &j);
	json_obj_end(&j);
	json_finish(&j);
}

/* ---- JUnit ---------------------------------------------------------------- */

static char *check_details(const struct check *c, int top, int show_proc)
{
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "%s\n", c->msg);
	for (i = 0; i < c->nsites && (top <= 0 || i < (size_t)top); i++)
		site_line(f, c->sites[i], c->site_bytes[i], c->site_procs[i], show_proc, "  ");
	fclose(f);
	return buf;
}

static void junit_check(struct junit *ju, int suite, const struct check *c,
			const char *classname, int top, int show_proc)
{
	char lim[96], msg[1024];
	int tc = junit_case(ju, suite, limit_opt[c->kind], classname, 0);
	char *details;

	if (tc < 0)
		return;
	limit_str(c, lim, sizeof(lim));
	snprintf(msg, sizeof(msg), "%s: %s", lim, c->msg);
	if (c->state == ST_SKIP) {
		junit_skip(ju, suite, tc, msg);
	} else if (c->state == ST_FAIL) {
		details = check_details(c, top, show_proc);
		junit_fail(ju, suite, tc, limit_opt[c->kind], msg, details);
		free(details);
	}
}

static int junit_report(struct run *run)
{
	struct opts *o = run->o;
	struct junit *ju = junit_new("heaptrail gate");
	char classname[512];
	size_t i;
	int k, s;

	if (!ju) {
		cli_error("cannot write '%s': out of memory", o->junit);
		return -1;
	}
	for (i = 0; i < run->nprocs; i++) {
		struct proc *pr = &run->procs[i];

		if (!pr->judged)
			continue;
		s = junit_suite(ju, pr->p.name, "heaptrail.gate",
				(double)pr->p.duration_ns / 1e9, NULL);
		if (s < 0)
			continue;
		junit_property(ju, s, "command", pr->p.cmdline);
		junit_property(ju, s, "exe", pr->p.exe);
		if (o->out || !run->ran)
			junit_property(ju, s, "dump", pr->p.path);
		snprintf(classname, sizeof(classname), "heaptrail.gate.%s", base_name(pr->p.exe));
		for (k = 0; k < L_COUNT; k++)
			if (o->set[k] && k != L_INCREASE)
				junit_check(ju, s, &pr->checks[k], classname, o->top, 0);
	}
	s = junit_suite(ju, "whole run", "heaptrail.gate", run->seconds, NULL);
	if (s >= 0) {
		if (run->ran) {
			int tc = junit_case(ju, s, "command", "heaptrail.gate.run", run->seconds);
			char *cmd = cli_join_argv(run->argv), msg[128];

			junit_property(ju, s, "command", cmd);
			if (tc >= 0 && cmd_failed(run)) {
				snprintf(msg, sizeof(msg), "the command %s", status_str(run->wstatus));
				junit_fail(ju, s, tc, "command", msg, cmd);
			}
			free(cmd);
		}
		for (k = 0; k < L_COUNT; k++)
			if (o->set[k] && (k == L_INCREASE || run->njudged > 1))
				junit_check(ju, s, &run->tree[k], "heaptrail.gate.run", o->top, 1);
	}
	k = junit_write(ju, o->junit);
	junit_free(ju);
	return k;
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

/*
 * The dumps of the run: OUT for the first process, OUT.PID for the others,
 * OUT.PID.N for exec'd images; with -o in a directory of the user's, only
 * those written since 'since' (files of an earlier run may lie there).
 */
static int find_dumps(const char *out, time_t since, struct dumpset *ds)
{
	char dir[PATH_MAX + 64], *slash;
	const char *base;
	size_t blen;
	DIR *d;
	struct dirent *e;

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
		return -1;
	while ((e = readdir(d))) {
		char path[PATH_MAX + 640];
		struct stat st;
		const char *rest = e->d_name + blen;

		if (strncmp(e->d_name, base, blen) ||
		    (*rest && (*rest != '.' || !strchr("0123456789", rest[1]))))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_mtime < since || !is_dump(path))
			continue;
		if (dumpset_add(ds, path) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
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
static int run_command(struct run *run, char **argv, struct dumpset *ds,
		       char *tmpdir, size_t tmplen)
{
	struct opts *o = run->o;
	char path[PATH_MAX], out[PATH_MAX + 32], cwd[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	time_t since = time(NULL) - 1;
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
	t0 = now_s();
	rc = launch_run(path, argv, &run->wstatus);
	run->seconds = now_s() - t0;
	if (rc)
		return rc;
	run->ran = 1;
	run->argv = argv;
	if (find_dumps(out, o->out ? since : 0, ds) < 0) {
		cli_error("cannot list the dumps '%s*': %s", out, strerror(errno));
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

/* ---- putting it together ----------------------------------------------------- */

static int read_dumps(struct opts *o, struct dumpset *ds, struct proc **out,
		      size_t *n)
{
	struct gate_dump_opts go = {
		.supp = &o->supp, .read_target_suppressions = o->target_supp,
		.grace_ns = o->grace_ns,
		.keep_frames_sites = o->top > 0 ? (size_t)o->top + 5 : 64,
	};
	struct proc *v = calloc(ds->n + 1, sizeof(*v));
	size_t i;

	if (!v) {
		cli_error("out of memory");
		return -1;
	}
	for (i = 0; i < ds->n; i++) {
		if (gate_dump_read(ds->paths[i], &go, &v[i].p) < 0) {
			while (i-- > 0)
				gate_proc_release(&v[i].p);
			free(v);
			return -1;
		}
	}
	*out = v;
	*n = ds->n;
	return 0;
}

static void procs_free(struct proc *v, size_t n)
{
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		for (k = 0; k < L_COUNT; k++)
			check_free(&v[i].checks[k]);
		gate_proc_release(&v[i].p);
	}
	free(v);
}

/* The baseline: a file of --save-baseline, or dumps read like the run's. */
static int load_baseline(struct run *run)
{
	struct opts *o = run->o;
	struct dumpset ds = { NULL, 0 };
	struct proc *v = NULL;
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
	rc = read_dumps(o, &ds, &v, &n);
	dumpset_free(&ds);
	if (rc < 0)
		return -1;
	choose_judged(o, v, n, &nj);
	for (i = 0; i < n; i++)
		if (v[i].judged)
			baseline_add(&run->base, &v[i].p);
	procs_free(v, n);
	run->base.source = strdup(o->baselines[0]);
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o, int *dashdash)
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
		{ "json", no_argument, NULL, 'j' },
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
			break;
		case 'I':
			if (parse_percent(optarg, &o->max[L_INCREASE]) < 0)
				return cli_usage("gate", "--max-increase is a percentage like 10 or 2.5%%, not '%s'",
						 optarg);
			o->set[L_INCREASE] = 1;
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
						 limit_opt[li], optarg);
			}
			o->max[li] = (double)v;
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
	struct opts o;
	struct run run;
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
	if (read_dumps(&o, &ds, &run.procs, &run.nprocs) < 0)
		goto out;
	choose_judged(&o, run.procs, run.nprocs, &run.njudged);
	if (o.set[L_LOST]) {
		for (i = 0; i < run.nprocs; i++) {
			struct proc *pr = &run.procs[i];

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
			proc_checks(&run, &run.procs[i]);
	}
	if (merge_sites(&run) < 0) {
		cli_error("out of memory");
		goto out;
	}
	tree_checks(&run);

	{
		size_t fail, pass, skip;

		count_states(&run, &fail, &pass, &skip);
		status = cmd_failed(&run) ? GATE_CMD_FAILED : fail ? GATE_FAIL : 0;
	}
	if (o.json)
		json_report(&run, status);
	else
		text_report(&run, stdout);
	fflush(stdout);
	if (o.junit && junit_report(&run) < 0)
		status = CLI_USAGE;
	if (o.save_baseline && baseline_save(&run.now, o.save_baseline) < 0)
		status = CLI_USAGE;
	if (o.out && run.ran && !o.json)
		for (i = 0; i < ds.n; i++)
			fprintf(stderr, "heaptrail: dump written to '%s'\n", ds.paths[i]);
out:
	if (tmpdir[0])
		rm_dir(tmpdir);
	for (i = 0; i < L_COUNT; i++)
		check_free(&run.tree[i]);
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
