/* flame.c - per-site costs and root-first stacks: what flame graphs and profiles are drawn from */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "flame.h"
#include "htr_compact.h"

static const char *const cost_names[FLAME_NCOSTS] = {
	"leaked", "peak", "allocations", "temporary", "residue", "allocated",
};

const char *flame_cost_name(enum flame_cost c)
{
	return (unsigned)c < FLAME_NCOSTS ? cost_names[c] : "?";
}

int flame_cost_parse(const char *s, enum flame_cost *c)
{
	unsigned i;

	for (i = 0; s && i < FLAME_NCOSTS; i++) {
		if (!strcmp(s, cost_names[i])) {
			*c = (enum flame_cost)i;
			return 0;
		}
	}
	return -EINVAL;
}

int flame_cost_is_bytes(enum flame_cost c)
{
	return c != FLAME_ALLOCATIONS && c != FLAME_TEMPORARY;
}

/* ---- the pass --------------------------------------------------------- */

/* Residue by stack id, so that a site's cost is one index away. */
static int index_residue(struct flame *f)
{
	const struct clients *c = f->clients;
	uint32_t max = 0;
	size_t i;

	for (i = 0; i < c->nsites; i++)
		if (c->sites[i]->stack > max)
			max = c->sites[i]->stack;
	f->nresidue = max + 1;
	f->residue = calloc(f->nresidue, sizeof(*f->residue));
	if (!f->residue)
		return -ENOMEM;
	for (i = 0; i < c->nsites; i++)
		f->residue[c->sites[i]->stack] += c->sites[i]->residue_bytes;
	return 0;
}

/* cli_replay_run(), but for its warning about a damaged dump, which another pass may have given */
static int run(struct flame *f, int warn)
{
	struct cli_progress p;
	uint64_t n = 0;
	int rc;

	if (warn)
		return cli_replay_run(f->r);
	cli_progress_begin(&p, dump_path(f->d));
	while ((rc = replay_step(f->r, NULL)) > 0)
		if ((++n & 0xffff) == 0)
			cli_progress_update(&p, dump_offset(f->d), dump_file_size(f->d));
	cli_progress_end(&p);
	if (rc < 0) {
		const char *why = replay_error(f->r);

		cli_error("cannot read '%s': %s", dump_path(f->d), why ? why : "read error");
		return -1;
	}
	return 0;
}

int flame_open(struct flame *f, const char *path, uint64_t grace_ns,
	       unsigned flags)
{
	int with_frag = !!(flags & FLAME_WITH_FRAG);

	memset(f, 0, sizeof(*f));
	f->path = path;
	f->d = cli_open_dump(path);
	if (!f->d)
		return -1;
	if (dump_process(f->d)->flags & HTR_PF_COMPACT)
		with_frag = 0;	/* no addresses to place blocks with (f->frag stays NULL) */
	f->r = replay_new(f->d);
	f->clients = f->r ? clients_new(f->r, grace_ns) : NULL;
	if (f->clients && with_frag)
		f->frag = frag_new(f->r);
	if (!f->clients || (with_frag && !f->frag))
		goto oom;
	if (run(f, !(flags & FLAME_NO_WARNING)) < 0)
		return -1;
	if (clients_finish(f->clients, f->r) < 0 || index_residue(f) < 0)
		goto oom;
	if (f->frag && (frag_snapshot(f->frag, replay_totals(f->r)->duration) < 0 ||
			frag_finish(f->frag) < 0))
		goto oom;
	f->sc.dump = f->d;
	f->sc.sym = sym_new(f->d);
	if (!f->sc.sym)
		goto oom;
	return 0;
oom:
	cli_error("out of memory");
	return -1;
}

void flame_close(struct flame *f)
{
	free(f->frames);
	free(f->residue);
	sym_free(f->sc.sym);
	frag_free(f->frag);
	clients_free(f->clients);
	replay_free(f->r);
	dump_close(f->d);
	memset(f, 0, sizeof(*f));
}

uint64_t flame_site_cost(const struct flame *f, const struct site_stats *s,
			 enum flame_cost c)
{
	switch (c) {
	case FLAME_LEAKED:
		return s->live_bytes;
	case FLAME_PEAK:
		return s->peak_bytes;
	case FLAME_ALLOCATIONS:
		return s->allocations;
	case FLAME_TEMPORARY:
		return s->temporary;
	case FLAME_RESIDUE:
		return s->stack < f->nresidue ? f->residue[s->stack] : 0;
	case FLAME_ALLOCATED:
		return s->allocated_bytes;
	default:
		return 0;
	}
}

/* ---- stacks ----------------------------------------------------------- */

size_t flame_stack(struct flame *f, uint32_t stack,
		   const struct sym_frame *const **out)
{
	const struct dump_stack *st = dump_stack(f->d, stack);
	size_t n = 0, i;
	uint32_t k;

	*out = NULL;
	if (!st)
		return 0;
	/* innermost first as captured, each address's inline frames innermost first */
	for (k = 0; k < st->depth; k++) {
		const struct sym_frame *fr;
		size_t m = sym_resolve(f->sc.sym, &st->frames[k], &fr);

		if (n + m > f->capframes) {
			size_t cap = (n + m) * 2 + 64;
			const struct sym_frame **nf = realloc(f->frames, cap * sizeof(*nf));

			if (!nf)
				break;	/* the stack cut short rather than nothing */
			f->frames = nf;
			f->capframes = cap;
		}
		for (i = 0; i < m; i++)
			f->frames[n++] = &fr[i];
	}
	for (i = 0; i < n / 2; i++) {
		const struct sym_frame *t = f->frames[i];

		f->frames[i] = f->frames[n - 1 - i];
		f->frames[n - 1 - i] = t;
	}
	*out = f->frames;
	return n;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

const char *flame_frame_name(const struct sym_frame *fr, int lines, char *buf,
			     size_t len)
{
	size_t n;
	char *p;

	if (fr->function)
		n = (size_t)snprintf(buf, len, "%s", fr->function);
	else if (fr->module)
		n = (size_t)snprintf(buf, len, "%s+0x%" PRIx64, base_name(fr->module),
				     fr->offset);
	else
		n = (size_t)snprintf(buf, len, "0x%" PRIx64, fr->ip);
	if (lines && fr->file && n < len) {
		if (fr->line > 0)
			snprintf(buf + n, len - n, " (%s:%d)", base_name(fr->file), fr->line);
		else
			snprintf(buf + n, len - n, " (%s)", base_name(fr->file));
	}
	for (p = buf; *p; p++)
		if (*p == ';' || *p == '\n' || *p == '\r')
			*p = ',';
	return buf;
}
