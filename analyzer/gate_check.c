/* gate_check.c - the gate's checks: who is judged, each limit per process and for the whole run */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "gate.h"

/*
 * Every limit is judged per process and for the run as a whole: additive
 * figures (leaked, lost) are summed, per-site figures are summed over the
 * processes by symbol (thirty runs of one test leaking at one line add up),
 * and the others (peak, growth, residue) take the worst process.
 *
 * A process is not judged for leaks when it ended by exec (its heap went
 * with the image, nobody could have freed it) or by a signal (it did not
 * finish).  Programs installed in system directories (shells, make,
 * compilers) are not judged at all when the run has other processes: they
 * are how the tests were started, not what is tested.
 */

const char *const gate_limit_opt[L_COUNT] = {
	[L_LEAKED] = "max-leaked", [L_PER_SITE] = "max-leaked-per-site",
	[L_LOST] = "max-lost", [L_PEAK] = "max-peak", [L_GROWTH] = "max-growth",
	[L_RESIDUE] = "max-residue-per-client", [L_INCREASE] = "max-increase",
};

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

const char *gate_base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path ? path : "?";
}

void gate_choose_judged(struct gate_opts *o, struct gate_entry *v, size_t n,
			  size_t *njudged)
{
	size_t i, k, others = 0;

	for (i = 0; i < n; i++)
		others += !is_system_program(v[i].p.exe);
	*njudged = 0;
	for (i = 0; i < n; i++) {
		struct gate_entry *pr = &v[i];

		pr->judged = 1;
		pr->judge_leaks = 1;
		pr->why_not = NULL;
		if (o->njudge) {
			pr->judged = 0;
			for (k = 0; k < o->njudge; k++)
				if (pr->p.exe &&
				    (!fnmatch(o->judge[k], pr->p.exe, 0) ||
				     !fnmatch(o->judge[k], gate_base_name(pr->p.exe), 0)))
					pr->judged = 1;
			if (!pr->judged)
				pr->why_not = "not named by --judge";
		} else if (!o->judge_all && others && is_system_program(pr->p.exe)) {
			pr->judged = 0;
			pr->why_not = "a system program (--judge-all judges it too)";
		}
		*njudged += pr->judged;
	}
}

void gate_judge_ends(struct gate_entry *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct gate_entry *pr = &v[i];

		if (!pr->judged)
			continue;
		if (pr->p.end_how == HTR_END_EXEC) {
			pr->judge_leaks = 0;
			pr->why_not = "leaks not judged: it ended by exec";
		} else if (pr->p.end_how == HTR_END_SIGNAL) {
			pr->judge_leaks = 0;
			pr->why_not = "leaks not judged: it was killed by a signal";
		}
	}
}

/* ---- checks --------------------------------------------------------------- */

static int gate_check_add_site(struct gate_check *c, const struct gate_site *s,
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

void gate_check_free(struct gate_check *c)
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

static void judge_size(struct gate_check *c, double value, double limit)
{
	c->value = value;
	c->limit = limit;
	c->state = value > limit ? ST_FAIL : ST_PASS;
}

const char *gate_plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

void gate_proc_checks(struct gate_run *run, struct gate_entry *pr)
{
	struct gate_opts *o = run->o;
	struct gate_proc *p = &pr->p;
	size_t i;
	int k;

	pr->nchecks = 0;
	for (k = 0; k < L_COUNT; k++) {
		struct gate_check *c = &pr->checks[k];

		memset(c, 0, sizeof(*c));
		c->kind = (enum gate_limit)k;
		if (!o->set[k] || k == L_INCREASE)
			continue;
		c->limit = o->max[k];
		c->limit_text = o->max_text[k];
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
				 gate_plural(p->leaked_blocks, "block", "blocks"),
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->nsites; i++)
				gate_check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
			break;
		case L_PER_SITE: {
			size_t nover = 0;

			judge_size(c, p->nsites ? (double)p->sites[0].bytes : 0, o->max[k]);
			for (i = 0; i < p->nsites; i++) {
				if ((double)p->sites[i].bytes <= o->max[k])
					break;
				nover++;
				gate_check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
			}
			if (c->state == ST_FAIL)
				snprintf(c->msg, sizeof(c->msg), "%s %s leaked more, the largest %s (%s)",
					 cli_count(nover), gate_plural(nover, "site", "sites"),
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
					gate_check_add_site(c, &p->sites[i], p, p->sites[i].lost_bytes);
			break;
		case L_PEAK:
			judge_size(c, (double)p->peak_bytes, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "peak of live heap %s%s%s",
				 cli_bytes(p->peak_bytes), c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->npeak_sites; i++)
				gate_check_add_site(c, &p->peak_sites[i], p, p->peak_sites[i].peak_bytes);
			break;
		case L_GROWTH:
			if (p->growth_samples < 3) {
				c->state = ST_SKIP;
				snprintf(c->msg, sizeof(c->msg),
					 "too short to measure growth (%zu heap %s; it takes 3)",
					 p->growth_samples, gate_plural(p->growth_samples, "sample", "samples"));
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
				gate_check_add_site(c, &p->sites[i], p, p->sites[i].bytes);
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
				 gate_plural(p->clients_ended, "client", "clients"),
				 cli_bytes(p->residue_max_bytes),
				 p->residue_max_label ? p->residue_max_label : "no label",
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < p->nresidue_sites; i++)
				gate_check_add_site(c, &p->residue_sites[i], p,
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
	const struct gate_merged *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

static int by_merged_bytes(const void *pa, const void *pb)
{
	const struct gate_merged *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	return strcmp(a->key, b->key);
}

/* Every judged leaking site of the run, the same code in several processes summed. */
int gate_merge_sites(struct gate_run *run)
{
	size_t i, k, n = 0, m = 0;
	struct gate_merged *v;

	for (i = 0; i < run->nprocs; i++)
		if (run->procs[i].judged && run->procs[i].judge_leaks)
			n += run->procs[i].p.nsites;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return -1;
	for (i = 0; i < run->nprocs; i++) {
		struct gate_entry *pr = &run->procs[i];

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
			struct gate_merged *t = &v[k - 1];

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

void gate_tree_checks(struct gate_run *run)
{
	struct gate_opts *o = run->o;
	size_t i, worst;
	int k;

	run->ntree = 0;
	for (k = 0; k < L_COUNT; k++) {
		struct gate_check *c = &run->tree[k];
		uint64_t sum = 0;
		double best = -INFINITY;
		size_t nproc = 0, nskip = 0;

		memset(c, 0, sizeof(*c));
		c->kind = (enum gate_limit)k;
		if (!o->set[k])
			continue;
		c->limit = o->max[k];
		c->limit_text = o->max_text[k];
		run->ntree++;
		worst = (size_t)-1;
		for (i = 0; i < run->nprocs; i++) {
			struct gate_entry *pr = &run->procs[i];
			struct gate_check *pc = &pr->checks[k];

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
			if (k == L_LEAKED)
				sum += pr->p.leaked_bytes;
			else if (k == L_LOST)
				sum += pr->p.lost_bytes;
		}
		switch (k) {
		case L_LEAKED:
		case L_LOST:
			judge_size(c, (double)sum, o->max[k]);
			snprintf(c->msg, sizeof(c->msg), "%s %s in %s %s%s%s",
				 k == L_LEAKED ? "leaked" : "lost", cli_bytes(sum),
				 cli_count(nproc), gate_plural(nproc, "process", "processes"),
				 c->state == ST_FAIL ? ", " : "",
				 c->state == ST_FAIL ? over(c->value, c->limit) : "");
			for (i = 0; i < run->nprocs; i++) {
				struct gate_check *pc = &run->procs[i].checks[k];

				if (run->procs[i].judged && pc->nsites && pc->state != ST_SKIP)
					gate_check_add_site(c, pc->sites[0], pc->site_procs[0],
						       pc->site_bytes[0]);
			}
			break;
		case L_PER_SITE: {
			size_t nover = 0;

			judge_size(c, run->nmerged ? (double)run->merged[0].bytes : 0, o->max[k]);
			for (i = 0; i < run->nmerged && (double)run->merged[i].bytes > o->max[k]; i++) {
				nover++;
				gate_check_add_site(c, run->merged[i].site, run->merged[i].proc,
					       run->merged[i].bytes);
			}
			snprintf(c->msg, sizeof(c->msg),
				 "%s %s over the limit, summed over the processes; the largest leaked %s",
				 cli_count(nover), gate_plural(nover, "site", "sites"),
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
				gate_check_add_site(c, run->procs[worst].checks[k].sites[i],
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
				 "leaked %s (baseline %s, %s), peak %s (baseline %s, %s)",
				 cli_bytes(run->now.leaked_bytes), cli_bytes(run->base.leaked_bytes),
				 pct_str(pl), cli_bytes(run->now.peak_bytes),
				 cli_bytes(run->base.peak_bytes), pct_str(pp));
			break;
		}
		default:
			break;
		}
	}
}

int gate_cmd_failed(const struct gate_run *run)
{
	return run->ran && (WIFSIGNALED(run->wstatus) || WEXITSTATUS(run->wstatus));
}

void gate_count_states(const struct gate_run *run, size_t *fail, size_t *pass,
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
