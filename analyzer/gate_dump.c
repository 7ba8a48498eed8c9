/* gate_dump.c - reads one dump for the gate: leaks after suppressions, peak, growth, residue */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clients.h"
#include "gate.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/*
 * One replay pass with two observers: ours (live heap at every sample for
 * the growth slope, the stacks of custom-pool blocks) and clients.c's (for
 * residue after disconnect).  Then the leaking sites are symbolized once,
 * run through the suppressions, and the rest kept as strings.
 */

/* ---- live heap growth --------------------------------------------------- */

/*
 * Least squares over (t, live bytes) at each sample.  Sums are taken
 * relative to the first sample, so a long run does not lose precision.
 */
struct growth {
	size_t n;
	double t0, y0;
	double st, sy, stt, sty;
};

static void growth_add(struct growth *g, double t, double y)
{
	if (!g->n) {
		g->t0 = t;
		g->y0 = y;
	}
	t -= g->t0;
	y -= g->y0;
	g->n++;
	g->st += t;
	g->sy += y;
	g->stt += t * t;
	g->sty += t * y;
}

static double growth_slope(const struct growth *g)
{
	double n = (double)g->n, den = n * g->stt - g->st * g->st;

	if (g->n < 2 || den <= 0)
		return 0;
	return (n * g->sty - g->st * g->sy) / den;
}

/* ---- the observer ------------------------------------------------------- */

struct reader {
	struct growth growth;
	uint8_t *pool_stack;	/* stack ids of custom-allocator blocks */
	size_t npool_stack;
	int oom;
};

static void mark_pool_stack(struct reader *rd, uint32_t stack)
{
	if (stack >= rd->npool_stack) {
		size_t n = rd->npool_stack ? rd->npool_stack : 256;
		uint8_t *nv;

		while (n <= stack)
			n *= 2;
		nv = realloc(rd->pool_stack, n);
		if (!nv) {
			rd->oom = 1;
			return;
		}
		memset(nv + rd->npool_stack, 0, n - rd->npool_stack);
		rd->pool_stack = nv;
		rd->npool_stack = n;
	}
	rd->pool_stack[stack] = 1;
}

static int is_pool_stack(const struct reader *rd, uint32_t stack)
{
	return stack < rd->npool_stack && rd->pool_stack[stack];
}

static void observe(void *ctx, struct replay *r, const struct dump_event *ev,
		    const struct replay_block *freed)
{
	struct reader *rd = ctx;

	switch (ev->kind) {
	case DUMP_SAMPLE:
		growth_add(&rd->growth, (double)ev->time / 1e9,
			   (double)replay_totals(r)->live_bytes);
		break;
	case DUMP_POOL_ALLOC:
		mark_pool_stack(rd, ev->stack);
		break;
	default:
		break;
	}
}

/* ---- symbolized sites --------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

void gate_frame_text(const struct gate_frame *f, char *buf, size_t len)
{
	if (f->function && f->file && f->line > 0)
		snprintf(buf, len, "%s %s:%d", f->function, base_name(f->file), f->line);
	else if (f->function && f->file)
		snprintf(buf, len, "%s %s", f->function, base_name(f->file));
	else if (f->function && f->module)
		snprintf(buf, len, "%s (%s)", f->function, base_name(f->module));
	else if (f->function)
		snprintf(buf, len, "%s", f->function);
	else if (f->module)
		snprintf(buf, len, "%s+0x%" PRIx64, base_name(f->module), f->offset);
	else
		snprintf(buf, len, "0x%" PRIx64, f->ip);
}

static char *dup_or_null(const char *s, int *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = 1;
	return d;
}

/* Appends to a growing string; sets *oom on failure. */
static void cat(char **s, size_t *len, size_t *cap, const char *add, int *oom)
{
	size_t n = strlen(add);

	if (*oom)
		return;
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 256;
		char *ns;

		while (*len + n + 1 > c)
			c *= 2;
		ns = realloc(*s, c);
		if (!ns) {
			*oom = 1;
			return;
		}
		*s = ns;
		*cap = c;
	}
	memcpy(*s + *len, add, n + 1);
	*len += n;
}

/*
 * The site's frames and its key: function, source file base name and line
 * of every frame (inline frames included), so that the same code in another
 * dump, from another build or another process, has the same key; a frame
 * without symbols contributes its module's base name and offset.
 */
static void fill_site(struct site_ctx *sc, uint32_t stack, struct gate_site *gs,
		      int keep_frames, int *oom)
{
	const struct dump_stack *st = dump_stack(sc->dump, stack);
	const struct sym_frame *top = site_top_frame(sc, stack);
	char *key = NULL, buf[1400];
	size_t klen = 0, kcap = 0, nf = 0, cap = 0;
	uint32_t i;

	gs->top = 0;
	for (i = 0; st && i < st->depth; i++) {
		const struct sym_frame *fr;
		size_t n = sym_resolve(sc->sym, &st->frames[i], &fr), k;

		for (k = 0; k < n; k++) {
			const struct sym_frame *f = &fr[k];

			if (f->function || f->file)
				snprintf(buf, sizeof(buf), "%s%s:%s:%d", klen ? ";" : "",
					 f->function ? f->function : "?",
					 f->file ? base_name(f->file) : "?", f->line);
			else
				snprintf(buf, sizeof(buf), "%s%s+0x%" PRIx64, klen ? ";" : "",
					 f->module ? base_name(f->module) : "?",
					 f->module ? f->offset : f->ip);
			cat(&key, &klen, &kcap, buf, oom);
			if (f == top)
				gs->top = nf;
			if (keep_frames) {
				struct gate_frame *gf;

				if (nf == cap) {
					size_t c = cap ? cap * 2 : 16;
					struct gate_frame *nv = realloc(gs->frames, c * sizeof(*nv));

					if (!nv) {
						*oom = 1;
						continue;
					}
					gs->frames = nv;
					cap = c;
				}
				gf = &gs->frames[nf];
				gf->function = dup_or_null(f->function, oom);
				gf->file = dup_or_null(f->file, oom);
				gf->module = dup_or_null(f->module, oom);
				gf->line = f->line;
				gf->ip = f->ip;
				gf->offset = f->offset;
				gf->inlined = f->inlined;
			}
			nf++;
		}
	}
	gs->nframes = keep_frames ? nf : 0;
	if (gs->top >= nf)
		gs->top = 0;
	gs->key = key ? key : strdup("(no stack)");
	if (top) {
		struct gate_frame tf = {
			.function = (char *)top->function, .file = (char *)top->file,
			.module = (char *)top->module, .line = top->line,
			.ip = top->ip, .offset = top->offset,
		};

		gate_frame_text(&tf, buf, sizeof(buf));
	} else {
		snprintf(buf, sizeof(buf), "(no stack)");
	}
	gs->label = strdup(buf);
	if (!gs->key || !gs->label)
		*oom = 1;
}

char *gate_stack_key(struct site_ctx *sc, uint32_t stack, char **label)
{
	struct gate_site gs;
	int oom = 0;

	memset(&gs, 0, sizeof(gs));
	fill_site(sc, stack, &gs, 0, &oom);
	if (label)
		*label = gs.label;
	else
		free(gs.label);
	if (oom) {
		free(gs.key);
		if (label) {
			free(*label);
			*label = NULL;
		}
		return NULL;
	}
	return gs.key;
}

/* A kept frame as the symbolizer gave it, for site.c's JSON writers. */
static struct sym_frame sym_frame_of(const struct gate_frame *f)
{
	struct sym_frame fr = {
		.function = f->function,
		.file = f->file,
		.line = f->line,
		.module = f->module,
		.offset = f->offset,
		.ip = f->ip,
		.inlined = f->inlined,
	};

	return fr;
}

/* The fields of site_json_fields() (docs/json.md), from the kept strings. */
void gate_site_json(struct json *j, const struct gate_site *s)
{
	size_t i;

	if (s->nframes) {
		struct sym_frame top = sym_frame_of(&s->frames[s->top]);

		site_json_top(j, &top);
	} else {
		site_json_top(j, NULL);
	}
	json_key(j, "stack");
	json_arr_begin(j);
	for (i = 0; i < s->nframes; i++) {
		struct sym_frame fr = sym_frame_of(&s->frames[i]);

		site_json_frame(j, &fr);
	}
	json_arr_end(j);
}

static int by_bytes(const void *pa, const void *pb)
{
	const struct gate_site *a = pa, *b = pb;

	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	if (a->blocks != b->blocks)
		return a->blocks < b->blocks ? 1 : -1;
	return strcmp(a->key ? a->key : "", b->key ? b->key : "");
}

/* ---- one dump ------------------------------------------------------------ */

static char *proc_name(const struct dump_process *dp)
{
	char *s = NULL;
	const char *b = dp->exe && *dp->exe ? base_name(dp->exe) :
			dp->argc > 0 ? base_name(dp->argv[0]) : "?";

	if (asprintf(&s, "%s (pid %u)", b, dp->pid) < 0)
		return NULL;
	return s;
}

/*
 * Which process the dump is of, for gate_dump_peek() and gate_dump_read().
 * Out of memory leaves path or name NULL, or sets *oom for exe.
 */
static void identify(struct gate_proc *p, const char *path,
		     const struct dump_process *dp, int *oom)
{
	p->path = strdup(path);
	p->pid = dp->pid;
	p->ppid = dp->ppid;
	p->exe = dup_or_null(dp->exe, oom);
	p->cmdline = dp->argv ? cli_join_argv(dp->argv) : NULL;
	p->name = proc_name(dp);
	p->flags = dp->flags;
}

int gate_dump_peek(const char *path, struct gate_proc *p)
{
	struct dump *d = cli_open_dump(path);
	const struct dump_process *dp;
	int oom = 0;

	memset(p, 0, sizeof(*p));
	if (!d)
		return -1;
	dp = dump_process(d);
	identify(p, path, dp, &oom);
	dump_close(d);
	if (oom || !p->path || !p->name) {
		cli_error("cannot read '%s': out of memory", path);
		gate_proc_release(p);
		return -1;
	}
	return 0;
}

int gate_dump_read(const char *path, const struct gate_dump_opts *o,
		   struct gate_proc *p)
{
	struct reader rd;
	struct dump *d;
	struct replay *r = NULL;
	struct site_ctx sc = { NULL, NULL };
	struct supp_scope *scope = NULL;
	struct clients *cl = NULL;
	const struct replay_totals *t;
	const struct dump_process *dp;
	struct site_stats **all;
	size_t n, i;
	int oom = 0, rc = -1;

	memset(p, 0, sizeof(*p));
	memset(&rd, 0, sizeof(rd));
	d = cli_open_dump(path);
	if (!d)
		return -1;
	r = replay_new(d);
	if (!r) {
		cli_error("cannot read '%s': out of memory", path);
		goto out;
	}
	replay_observe(r, observe, &rd);
	cl = clients_new(r, o->grace_ns);
	if (!cl) {
		cli_error("cannot read '%s': out of memory", path);
		goto out;
	}
	if (cli_replay_run(r) < 0)
		goto out;
	t = replay_totals(r);
	dp = dump_process(d);

	identify(p, path, dp, &oom);
	p->end_how = t->end_how;
	p->end_status = t->end_status;
	p->warning = dup_or_null(dump_warning(d), &oom);
	p->lost_events = t->lost_events;
	p->duration_ns = t->duration;
	p->peak_bytes = t->peak_live_bytes;
	p->allocations = t->allocations;
	p->have_reach = t->have_reach;
	p->growth_samples = rd.growth.n;
	p->growth_bps = growth_slope(&rd.growth);
	if (!p->path || !p->name)
		oom = 1;

	if (o->read_target_suppressions && o->supp)
		supp_load_target(o->supp, dp->exe);
	sc.dump = d;
	sc.sym = sym_new(d);
	if (!sc.sym) {
		oom = 1;
		goto out;
	}
	if (o->supp) {
		scope = supp_scope_new(o->supp, &sc, r);
		if (!scope) {
			oom = 1;
			goto out;
		}
	}

	all = replay_sites(r, &n);
	p->sites = calloc(n + 1, sizeof(*p->sites));
	if (!p->sites) {
		oom = 1;
		goto out;
	}
	for (i = 0; i < n; i++) {
		const struct site_stats *s = all[i];
		struct supp_rule *rule;
		uint64_t lost;

		if (!s->live_blocks || is_pool_stack(&rd, s->stack))
			continue;
		lost = s->reach_bytes[HTR_REACH_LOST] + s->reach_bytes[HTR_REACH_INDIRECT];
		rule = scope ? supp_scope_match(scope, s->stack) : NULL;
		if (rule) {
			char label[1024];
			struct gate_site tmp;

			/* the label as the gate prints sites: "function file:line" */
			memset(&tmp, 0, sizeof(tmp));
			fill_site(&sc, s->stack, &tmp, 0, &oom);
			snprintf(label, sizeof(label), "%s", tmp.label ? tmp.label : "?");
			free(tmp.key);
			free(tmp.label);
			supp_count(rule, label, s->live_blocks, s->live_bytes);
			p->suppressed_bytes += s->live_bytes;
			p->suppressed_blocks += s->live_blocks;
			continue;
		}
		p->leaked_bytes += s->live_bytes;
		p->leaked_blocks += s->live_blocks;
		p->lost_bytes += lost;
		p->sites[p->nsites].bytes = s->live_bytes;
		p->sites[p->nsites].blocks = s->live_blocks;
		p->sites[p->nsites].lost_bytes = lost;
		p->sites[p->nsites].peak_bytes = s->peak_bytes;
		p->sites[p->nsites].max_live_bytes = s->max_live_bytes;
		p->sites[p->nsites].allocations = s->allocations;
		p->sites[p->nsites].allocated_bytes = s->allocated_bytes;
		/* stash the stack id in 'top' until the sites are sorted */
		p->sites[p->nsites].top = s->stack;
		p->nsites++;
	}
	/* sort by bytes before symbolizing: only the largest keep frames */
	{
		struct gate_site *v = p->sites;

		for (i = 0; i < p->nsites; i++)
			v[i].key = (char *)"";
		qsort(v, p->nsites, sizeof(*v), by_bytes);
		for (i = 0; i < p->nsites; i++) {
			uint32_t stack = (uint32_t)v[i].top;

			v[i].key = NULL;
			fill_site(&sc, stack, &v[i], i < o->keep_frames_sites, &oom);
		}
		/* equal bytes are now ordered by key, which is stable across runs */
		qsort(v, p->nsites, sizeof(*v), by_bytes);
	}

	/* the largest shares of the peak, leaking or not */
	{
		size_t want = o->keep_frames_sites, m = 0;
		struct gate_site *v = calloc(n + 1, sizeof(*v));

		if (!v) {
			oom = 1;
			goto out;
		}
		for (i = 0; i < n; i++) {
			if (!all[i]->peak_bytes || is_pool_stack(&rd, all[i]->stack))
				continue;
			v[m].bytes = all[i]->peak_bytes;	/* the sort key */
			v[m].blocks = 0;
			v[m].peak_bytes = all[i]->peak_bytes;
			v[m].max_live_bytes = all[i]->max_live_bytes;
			v[m].allocations = all[i]->allocations;
			v[m].allocated_bytes = all[i]->allocated_bytes;
			v[m].top = all[i]->stack;
			v[m].key = (char *)"";
			m++;
		}
		qsort(v, m, sizeof(*v), by_bytes);
		if (m > want)
			m = want;
		for (i = 0; i < m; i++) {
			uint32_t stack = (uint32_t)v[i].top;

			v[i].key = NULL;
			v[i].bytes = 0;
			fill_site(&sc, stack, &v[i], 1, &oom);
		}
		p->peak_sites = v;
		p->npeak_sites = m;
	}

	/*
	 * Residue per client (clients.c): of the clients it judged, the mean
	 * less what suppressions hide, and the worst client.
	 */
	if (cl) {
		if (clients_finish(cl, r) < 0) {
			oom = 1;
			goto out;
		}
		p->clients_ended = cl->judged;
		for (i = 0; i < cl->nsites; i++) {
			const struct client_site *cs = cl->sites[i];

			if (scope && supp_scope_match(scope, cs->stack))
				continue;
			p->residue_bytes += cs->residue_bytes;
		}
		p->residue_sites = calloc(cl->nsites + 1, sizeof(*p->residue_sites));
		if (!p->residue_sites) {
			oom = 1;
			goto out;
		}
		for (i = 0; i < cl->nsites && p->nresidue_sites < o->keep_frames_sites; i++) {
			const struct client_site *cs = cl->sites[i];
			struct gate_site *gs = &p->residue_sites[p->nresidue_sites];

			if (scope && supp_scope_match(scope, cs->stack))
				continue;
			gs->bytes = cs->residue_bytes;
			gs->blocks = cs->residue_blocks;
			fill_site(&sc, cs->stack, gs, 1, &oom);
			p->nresidue_sites++;
		}
		p->residue_max_bytes = cl->residue_max;
		for (i = 0; i < cl->n; i++) {
			if (cl->v[i].judged && cl->v[i].residue_bytes == cl->residue_max) {
				p->residue_max_client = cl->v[i].id;
				p->residue_max_label = dup_or_null(cl->v[i].label, &oom);
				break;
			}
		}
	}
	if (rd.oom)
		oom = 1;
	rc = 0;
out:
	if (oom) {
		cli_error("cannot read '%s': out of memory", path);
		rc = -1;
	}
	if (rc < 0)
		gate_proc_release(p);
	supp_scope_free(scope);
	if (sc.sym) {
		sym_print_warnings(sc.sym);
		sym_free(sc.sym);
	}
	if (cl)
		clients_free(cl);
	free(rd.pool_stack);
	replay_free(r);
	dump_close(d);
	return rc;
}

static void sites_free(struct gate_site *v, size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		struct gate_site *s = &v[i];

		for (k = 0; k < s->nframes; k++) {
			free(s->frames[k].function);
			free(s->frames[k].file);
			free(s->frames[k].module);
		}
		free(s->frames);
		free(s->key);
		free(s->label);
	}
	free(v);
}

void gate_proc_release(struct gate_proc *p)
{
	sites_free(p->sites, p->nsites);
	sites_free(p->peak_sites, p->npeak_sites);
	sites_free(p->residue_sites, p->nresidue_sites);
	free(p->path);
	free(p->exe);
	free(p->cmdline);
	free(p->name);
	free(p->warning);
	free(p->residue_max_label);
	memset(p, 0, sizeof(*p));
}
