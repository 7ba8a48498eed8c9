/* pprof.c - a dump's sites as a pprof profile (profile.proto, gzip'd) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"
#include "frag_map.h"
#include "pprof.h"
#include "pprof_pb.h"

/*
 * Field numbers of github.com/google/pprof/proto/profile.proto.  The
 * profile is one message whose repeated fields may come in any order, so
 * locations and functions are appended as the samples first meet them and
 * the string table, complete only then, goes last.
 */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUETYPE_TYPE = 1, VALUETYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2 };
enum {
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4, MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
};
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4 };
enum { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum { FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4 };

#define NVALUES 4

struct pp {
	struct flame *f;
	struct pb prof;		/* the Profile message */
	struct pb msg, line, packed;	/* scratch for nested messages */
	/* string table: hash -> index (collisions probe the next hash) */
	char **strs;
	size_t nstrs, capstrs;
	struct fmap stridx;
	struct fmap locs;	/* frame key -> location id */
	struct fmap funcs;	/* (name << 32 | file) + 1 -> function id */
	uint64_t nlocs, nfuncs;
	uint64_t no_stack_loc;
	int err;
};

/* ---- tables ----------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The next slot to try after a collision of two strings' hashes; never 0. */
static uint64_t rehash(uint64_t h)
{
	h = h * 31 + 7;
	return h ? h : 1;
}

/* Index of 's' in the string table, added on first use; 0 is "". */
static int64_t str_id(struct pp *pp, const char *s)
{
	uint64_t h, *v;
	int found;

	if (!s || !*s)
		return 0;
	for (h = hash_str(s);; h = rehash(h)) {
		v = fmap_put(&pp->stridx, h, &found);
		if (!v)
			goto oom;
		if (!found)
			break;
		if (!strcmp(pp->strs[*v], s))
			return (int64_t)*v;
	}
	if (pp->nstrs == pp->capstrs) {
		size_t cap = pp->capstrs * 2 + 256;
		char **ns = realloc(pp->strs, cap * sizeof(*ns));

		if (!ns)
			goto undo;
		pp->strs = ns;
		pp->capstrs = cap;
	}
	pp->strs[pp->nstrs] = strdup(s);
	if (!pp->strs[pp->nstrs])
		goto undo;
	*v = pp->nstrs++;
	return (int64_t)*v;
undo:
	fmap_del(&pp->stridx, h);
oom:
	pp->err = -ENOMEM;
	return 0;
}

static void value_type(struct pp *pp, unsigned field, const char *type,
		       const char *unit)
{
	pb_reset(&pp->msg);
	pb_int(&pp->msg, VALUETYPE_TYPE, str_id(pp, type));
	pb_int(&pp->msg, VALUETYPE_UNIT, str_id(pp, unit));
	pb_sub(&pp->prof, field, &pp->msg);
}

static uint64_t function_id(struct pp *pp, const char *name, const char *file)
{
	int64_t n = str_id(pp, name), fl = str_id(pp, file);
	uint64_t key = ((uint64_t)n << 32 | (uint64_t)fl) + 1, *v;
	int found;

	v = fmap_put(&pp->funcs, key, &found);
	if (!v) {
		pp->err = -ENOMEM;
		return 0;
	}
	if (found)
		return *v;
	*v = ++pp->nfuncs;
	pb_reset(&pp->msg);
	pb_uint(&pp->msg, FUNCTION_ID, pp->nfuncs);
	pb_int(&pp->msg, FUNCTION_NAME, n);
	pb_int(&pp->msg, FUNCTION_SYSTEM_NAME, n);
	pb_int(&pp->msg, FUNCTION_FILENAME, fl);
	pb_sub(&pp->prof, PROFILE_FUNCTION, &pp->msg);
	return pp->nfuncs;
}

static void add_line(struct pp *pp, uint64_t fn, int line)
{
	pb_reset(&pp->line);
	pb_uint(&pp->line, LINE_FUNCTION_ID, fn);
	if (line > 0)
		pb_int(&pp->line, LINE_LINE, line);
	pb_sub(&pp->msg, LOCATION_LINE, &pp->line);
}

/* One location per captured address: module and offset, or the bare address. */
static uint64_t location_id(struct pp *pp, const struct dump_frame *df)
{
	uint64_t key = df->module >= 0 ?
		       ((uint64_t)(df->module + 2) << 48) ^ df->offset :
		       (1ull << 48) ^ df->ip;
	const struct sym_frame *fr;
	uint64_t *v, fns[64];
	size_t n, i;
	int found;
	char name[1024];

	v = fmap_put(&pp->locs, key ? key : 1, &found);
	if (!v) {
		pp->err = -ENOMEM;
		return 0;
	}
	if (found)
		return *v;
	*v = ++pp->nlocs;
	n = sym_resolve(pp->f->sc.sym, df, &fr);
	if (n > sizeof(fns) / sizeof(fns[0]))
		n = sizeof(fns) / sizeof(fns[0]);
	/* functions first: they are messages of their own, written to the profile */
	for (i = 0; i < n; i++)
		fns[i] = function_id(pp, flame_frame_name(&fr[i], 0, name, sizeof(name)),
				     fr[i].file);
	pb_reset(&pp->msg);
	pb_uint(&pp->msg, LOCATION_ID, pp->nlocs);
	if (df->module >= 0)
		pb_uint(&pp->msg, LOCATION_MAPPING_ID, (uint64_t)df->module + 1);
	pb_uint(&pp->msg, LOCATION_ADDRESS, df->ip);
	for (i = 0; i < n; i++)	/* innermost first: the last is the real caller */
		add_line(pp, fns[i], fr[i].line);
	pb_sub(&pp->prof, PROFILE_LOCATION, &pp->msg);
	return pp->nlocs;
}

/* ---- the profile ------------------------------------------------------ */

static void mappings(struct pp *pp)
{
	size_t n, i, k;
	const struct dump_module *m = dump_modules(pp->f->d, &n);
	char hex[2 * sizeof(m->build_id) + 1];

	for (i = 0; i < n; i++) {
		for (k = 0; k < m[i].build_id_len && k < sizeof(m->build_id); k++)
			snprintf(hex + 2 * k, 3, "%02x", m[i].build_id[k]);
		hex[2 * k] = 0;
		pb_reset(&pp->msg);
		pb_uint(&pp->msg, MAPPING_ID, i + 1);
		pb_uint(&pp->msg, MAPPING_MEMORY_START, m[i].lo);
		pb_uint(&pp->msg, MAPPING_MEMORY_LIMIT, m[i].hi);
		pb_uint(&pp->msg, MAPPING_FILE_OFFSET,
			m[i].lo >= m[i].load_bias ? m[i].lo - m[i].load_bias : 0);
		pb_int(&pp->msg, MAPPING_FILENAME, str_id(pp, m[i].path));
		pb_int(&pp->msg, MAPPING_BUILD_ID, str_id(pp, hex));
		/* symbolized here: pprof must not go looking for the binaries */
		pb_uint(&pp->msg, MAPPING_HAS_FUNCTIONS, 1);
		pb_uint(&pp->msg, MAPPING_HAS_FILENAMES, 1);
		pb_uint(&pp->msg, MAPPING_HAS_LINE_NUMBERS, 1);
		pb_uint(&pp->msg, MAPPING_HAS_INLINE_FRAMES, 1);
		pb_sub(&pp->prof, PROFILE_MAPPING, &pp->msg);
	}
}

static void sample(struct pp *pp, const struct site_stats *s)
{
	const struct dump_stack *st = dump_stack(pp->f->d, s->stack);
	uint64_t ids[HTR_MAX_DEPTH];
	int64_t v[NVALUES] = {
		(int64_t)s->allocations, (int64_t)s->allocated_bytes,
		(int64_t)s->live_blocks, (int64_t)s->live_bytes,
	};
	uint32_t k, n = 0;

	for (k = 0; st && k < st->depth && n < HTR_MAX_DEPTH; k++)
		ids[n++] = location_id(pp, &st->frames[k]);
	if (!n) {
		if (!pp->no_stack_loc) {
			pp->no_stack_loc = ++pp->nlocs;
			/* a location of its own: pprof shows the bytes as "[no stack]" */
			k = (uint32_t)function_id(pp, "[no stack]", NULL);
			pb_reset(&pp->msg);
			pb_uint(&pp->msg, LOCATION_ID, pp->no_stack_loc);
			add_line(pp, k, 0);
			pb_sub(&pp->prof, PROFILE_LOCATION, &pp->msg);
		}
		ids[n++] = pp->no_stack_loc;
	}
	pb_reset(&pp->msg);
	pb_reset(&pp->packed);
	for (k = 0; k < n; k++)
		pb_varint(&pp->packed, ids[k]);
	pb_sub(&pp->msg, SAMPLE_LOCATION_ID, &pp->packed);
	pb_reset(&pp->packed);
	for (k = 0; k < NVALUES; k++)
		pb_varint(&pp->packed, (uint64_t)v[k]);
	pb_sub(&pp->msg, SAMPLE_VALUE, &pp->packed);
	pb_sub(&pp->prof, PROFILE_SAMPLE, &pp->msg);
}

static void header(struct pp *pp)
{
	const struct dump_process *p = dump_process(pp->f->d);
	const struct replay_totals *t = replay_totals(pp->f->r);
	char buf[4096];
	char *cmd = cli_join_argv(p->argv);

	value_type(pp, PROFILE_SAMPLE_TYPE, "alloc_objects", "count");
	value_type(pp, PROFILE_SAMPLE_TYPE, "alloc_space", "bytes");
	value_type(pp, PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
	value_type(pp, PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
	pb_int(&pp->prof, PROFILE_DEFAULT_SAMPLE_TYPE, str_id(pp, "inuse_space"));
	value_type(pp, PROFILE_PERIOD_TYPE, "space", "bytes");
	/* a sampled dump took one allocation per sample_bytes: say so */
	pb_int(&pp->prof, PROFILE_PERIOD, p->sample_bytes ? (int64_t)p->sample_bytes : 1);
	pb_int(&pp->prof, PROFILE_TIME_NANOS, (int64_t)p->start_realtime_ns);
	pb_int(&pp->prof, PROFILE_DURATION_NANOS, (int64_t)t->duration);
	snprintf(buf, sizeof(buf), "heaptrail %s: %s", HEAPTRAIL_VERSION, pp->f->path);
	pb_int(&pp->prof, PROFILE_COMMENT, str_id(pp, buf));
	snprintf(buf, sizeof(buf), "command: %s (pid %u)",
		 cmd && *cmd ? cmd : p->exe ? p->exe : "?", p->pid);
	pb_int(&pp->prof, PROFILE_COMMENT, str_id(pp, buf));
	free(cmd);
}

static int gzip_out(const struct pb *p, FILE *out)
{
	uint8_t chunk[65536];
	z_stream z;
	int zrc;

	memset(&z, 0, sizeof(z));
	/* 15 + 16: a gzip header and trailer around the deflate stream */
	if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = p->buf;
	z.avail_in = (uInt)p->len;
	do {
		size_t have;

		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zrc = deflate(&z, Z_FINISH);
		if (zrc == Z_STREAM_ERROR)
			break;
		have = sizeof(chunk) - z.avail_out;
		if (have && fwrite(chunk, 1, have, out) != have) {
			deflateEnd(&z);
			return -EIO;
		}
	} while (zrc != Z_STREAM_END);
	deflateEnd(&z);
	return zrc == Z_STREAM_END ? 0 : -EIO;
}

int pprof_write(struct flame *f, FILE *out)
{
	struct pp pp;
	struct site_stats **sites;
	struct cli_progress prog;
	size_t n, i;
	int rc;

	memset(&pp, 0, sizeof(pp));
	pp.f = f;
	pb_init(&pp.prof);
	pb_init(&pp.msg);
	pb_init(&pp.line);
	pb_init(&pp.packed);
	if (fmap_init(&pp.stridx, 1024) < 0 || fmap_init(&pp.locs, 1024) < 0 ||
	    fmap_init(&pp.funcs, 1024) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	/* string 0 is "" by the format's rule */
	pp.strs = calloc(256, sizeof(*pp.strs));
	if (!pp.strs || !(pp.strs[0] = strdup(""))) {
		rc = -ENOMEM;
		goto out;
	}
	pp.capstrs = 256;
	pp.nstrs = 1;
	header(&pp);
	mappings(&pp);
	sites = replay_sites(f->r, &n);
	cli_progress_begin(&prog, "stacks");
	for (i = 0; i < n && !pp.err; i++) {
		if (sites[i]->allocations || sites[i]->live_blocks)
			sample(&pp, sites[i]);
		if ((i & 255) == 0)
			cli_progress_update(&prog, i, n);
	}
	cli_progress_end(&prog);
	for (i = 0; i < pp.nstrs; i++)
		pb_bytes(&pp.prof, PROFILE_STRING_TABLE, pp.strs[i], strlen(pp.strs[i]));
	rc = pp.err ? pp.err : pp.prof.err ? pp.prof.err : pp.msg.err ? pp.msg.err :
	     pp.packed.err ? pp.packed.err : pp.line.err;
	if (!rc)
		rc = gzip_out(&pp.prof, out);
out:
	for (i = 0; i < pp.nstrs; i++)
		free(pp.strs[i]);
	free(pp.strs);
	fmap_release(&pp.stridx);
	fmap_release(&pp.locs);
	fmap_release(&pp.funcs);
	pb_release(&pp.prof);
	pb_release(&pp.msg);
	pb_release(&pp.line);
	pb_release(&pp.packed);
	return rc;
}
