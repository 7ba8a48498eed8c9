/* flame.h - per-site costs and root-first stacks: what flame graphs and profiles are drawn from */
#ifndef HT_FLAME_H
#define HT_FLAME_H

#include <stdint.h>
#include <stddef.h>

#include "clients.h"
#include "frag.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/*
 * One replay pass over a dump with the clients analysis (for residue) and,
 * when asked, the fragmentation analysis attached; then every site's cost
 * under each measure, and its stack symbolized root first with inline
 * frames expanded - the order of folded stacks ("main;parse;xstrdup 96").
 *
 * The costs are the figures of 'heaptrail report' (and 'clients' for
 * residue), so that a flame graph of a cost adds up to the report's total:
 *
 *   leaked       live bytes at the end                 = report leaked_bytes
 *   peak         live bytes at the peak of live heap   = report peak_live_bytes
 *   allocations  allocation events                     = report allocations
 *   temporary    allocations freed right away          = report temporary
 *   residue      bytes left by disconnected clients    = clients residue_bytes
 *   allocated    bytes allocated in total              = report allocated_bytes
 *
 * Blocks of custom pools (heaptrail_pool_alloc) count in their sites'
 * figures but not in the report's heap totals; a dump with pools adds them
 * on top (report's pool_live_bytes, pool_allocations).
 */

enum flame_cost {
	FLAME_LEAKED,
	FLAME_PEAK,
	FLAME_ALLOCATIONS,
	FLAME_TEMPORARY,
	FLAME_RESIDUE,
	FLAME_ALLOCATED,
	FLAME_NCOSTS
};

/* "leaked", "peak", ... */
const char *flame_cost_name(enum flame_cost c);
/* 0, or -EINVAL for a name that is no cost. */
int flame_cost_parse(const char *s, enum flame_cost *c);
/* 1 when the cost counts bytes, 0 when it counts allocations. */
int flame_cost_is_bytes(enum flame_cost c);

#define FLAME_DEFAULT_GRACE 1000000000ull	/* ns, as 'heaptrail clients' */

struct flame {
	const char *path;
	struct dump *d;
	struct replay *r;
	struct clients *clients;
	struct frag *frag;	/* NULL unless flame_open() was asked for it */
	struct site_ctx sc;
	uint64_t *residue;	/* residue bytes by stack id */
	uint32_t nresidue;
	const struct sym_frame **frames;	/* flame_stack()'s buffer */
	size_t capframes;
};

#define FLAME_WITH_FRAG 1	/* also the fragmentation figures at the end */
#define FLAME_NO_WARNING 2	/* a damaged dump's warning was printed already */

/*
 * Replays 'path' to the end (with a progress line on a terminal) and
 * finishes the analyses, as 'flags' ask.  0, or -1 after printing why (the
 * caller still flame_close()s).
 */
int flame_open(struct flame *f, const char *path, uint64_t grace_ns,
	       unsigned flags);
void flame_close(struct flame *f);

uint64_t flame_site_cost(const struct flame *f, const struct site_stats *s,
			 enum flame_cost c);

/*
 * The frames of a stack, root (outermost caller) first, each captured
 * address expanded into its inline frames; *out points into a buffer valid
 * until the next call.  Returns the count (0 for no stack).
 */
size_t flame_stack(struct flame *f, uint32_t stack,
		   const struct sym_frame *const **out);

/*
 * A frame as a flame graph names it: the function, "module+0xoff" when
 * the function is unknown, and with 'lines' also " (file.c:12)".  ';' and
 * line breaks, which folded stacks cannot carry, become ','.  Returns buf.
 */
const char *flame_frame_name(const struct sym_frame *fr, int lines, char *buf,
			     size_t len);

#endif
