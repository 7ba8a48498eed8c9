/* cmd_replay.c - 'heaptrail replay': the recorded allocations on other allocators, RSS side by side */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "json.h"
#include "replay.h"
#include "replay_ops.h"
#include "replay_runner.h"

/*
 * Is it the program or the allocator?  The dump's heap operations (sizes,
 * order, lifetimes; one thread, in time order) are written to a temporary
 * operation stream (replay_ops.c) and performed by heaptrail-replay-child,
 * once on glibc's malloc and once on each allocator library preloaded.
 * The child touches each block's pages like a program filling it, and
 * reports its RSS before the first operation, at its highest and after
 * the last one.  Same operations, different allocators: differences in RSS
 * are the allocators'.
 */

#define MAX_ALLOCATORS 16

struct replaycmd {
	const char *path;
	int json;
	struct replay_alloc a[MAX_ALLOCATORS];
	size_t n;
	struct replay_ops_header h;
	uint64_t rec_peak_rss, rec_final_rss, rec_peak_live;
	unsigned threads;
};

static uint64_t heap(uint64_t rss, uint64_t baseline)
{
	return rss > baseline ? rss - baseline : 0;
}

static void replay_text(const struct replaycmd *rc)
{
	const struct replay_alloc *low = NULL, *high = NULL;
	size_t i;

	printf("replay of '%s': %s operations (%s allocations), %s live at most, %s at the end\n",
	       rc->path, cli_count(rc->h.ops), cli_count(rc->h.allocations),
	       cli_bytes(rc->h.peak_live_bytes), cli_bytes(rc->h.final_live_bytes));
	if (rc->rec_peak_rss)
		printf("recorded run: peak RSS %s, final RSS %s (the whole process, the shim included)\n",
		       cli_bytes(rc->rec_peak_rss), cli_bytes(rc->rec_final_rss));
	if (rc->threads > 1)
		printf("(recorded on %u threads, replayed on one in time order: per-thread caches and arenas are not reproduced)\n",
		       rc->threads);
	printf("\n%-10s %12s %12s %12s %12s  %s\n", "allocator", "peak RSS", "final RSS",
	       "peak heap", "final heap", "library");
	for (i = 0; i < rc->n; i++) {
		const struct replay_alloc *a = &rc->a[i];

		if (!a->ok) {
			printf("%-10s %12s %12s %12s %12s  %s\n", a->name, "-", "-", "-", "-",
			       a->error);
			continue;
		}
		printf("%-10s %12s %12s %12s %12s  %s\n", a->name, cli_bytes(a->peak_rss),
		       cli_bytes(a->final_rss), cli_bytes(heap(a->peak_rss, a->baseline_rss)),
		       cli_bytes(heap(a->final_rss, a->baseline_rss)),
		       a->lib[0] ? a->lib : "(libc)");
		if (!low || a->final_rss - a->baseline_rss < low->final_rss - low->baseline_rss)
			low = a;
		if (!high || a->final_rss - a->baseline_rss > high->final_rss - high->baseline_rss)
			high = a;
	}
	printf("\n\"heap\" is RSS less the replayer's own before the first operation.\n");
	if (!low || low == high)
		return;
	if (heap(low->final_rss, low->baseline_rss) * 2 < heap(high->final_rss, high->baseline_rss))
		printf("The allocator matters: %s ends with %s of heap, %s with %s.\n",
		       low->name, cli_bytes(heap(low->final_rss, low->baseline_rss)),
		       high->name, cli_bytes(heap(high->final_rss, high->baseline_rss)));
	else
		printf("Every allocator ends within a factor of two (%s to %s): the program's live blocks, not the allocator, hold the memory.\n",
		       cli_bytes(heap(low->final_rss, low->baseline_rss)),
		       cli_bytes(heap(high->final_rss, high->baseline_rss)));
}

static void replay_json(const struct replaycmd *rc)
{
	struct json j;
	size_t i;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", rc->path);
	json_kv_u64(&j, "operations", rc->h.ops);
	json_kv_u64(&j, "allocations", rc->h.allocations);
	json_kv_u64(&j, "peak_live_bytes", rc->h.peak_live_bytes);
	json_kv_u64(&j, "final_live_bytes", rc->h.final_live_bytes);
	json_kv_u64(&j, "threads", rc->threads);
	json_key(&j, "recorded");
	json_obj_begin(&j);
	json_kv_u64(&j, "peak_rss_bytes", rc->rec_peak_rss);
	json_kv_u64(&j, "final_rss_bytes", rc->rec_final_rss);
	json_obj_end(&j);
	json_key(&j, "allocators");
	json_arr_begin(&j);
	for (i = 0; i < rc->n; i++) {
		const struct replay_alloc *a = &rc->a[i];

		json_obj_begin(&j);
		json_kv_str(&j, "name", a->name);
		json_kv_str(&j, "library", a->lib[0] ? a->lib : NULL);
		json_key(&j, "ok");
		json_bool(&j, a->ok);
		json_kv_str(&j, "error", a->ok ? NULL : a->error);
		json_kv_str(&j, "malloc_from", a->malloc_from[0] ? a->malloc_from : NULL);
		json_kv_u64(&j, "baseline_rss_bytes", a->baseline_rss);
		json_kv_u64(&j, "peak_rss_bytes", a->peak_rss);
		json_kv_u64(&j, "final_rss_bytes", a->final_rss);
		json_kv_u64(&j, "peak_heap_bytes", heap(a->peak_rss, a->baseline_rss));
		json_kv_u64(&j, "final_heap_bytes", heap(a->final_rss, a->baseline_rss));
		json_kv_u64(&j, "operations", a->ops);
		json_kv_u64(&j, "failed_allocations", a->failed);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

/* Counts the threads that allocated, for the one-thread caveat. */
struct thread_count {
	uint32_t tids[64];
	unsigned n;
};

static void count_threads(void *ctx, struct replay *r, const struct dump_event *ev,
			  const struct replay_block *freed)
{
	struct thread_count *tc = ctx;
	unsigned i;

	(void)r;
	(void)freed;
	if (ev->kind != DUMP_ALLOC || tc->n >= 64)
		return;
	for (i = 0; i < tc->n; i++)
		if (tc->tids[i] == ev->tid)
			return;
	tc->tids[tc->n++] = ev->tid;
}

/* Writes the operation stream of 'path' to 'out'.  0, or -1 after printing why. */
static int write_ops(struct replaycmd *rc, FILE *out, const char *tmp)
{
	struct thread_count tc = { { 0 }, 0 };
	struct replay_ops *o = NULL;
	struct replay *r = NULL;
	struct dump *d;
	int ret = -1, err;

	d = cli_open_dump(rc->path);
	if (!d)
		return -1;
	r = replay_new(d);
	o = r ? replay_ops_new(r, out) : NULL;
	if (!o) {
		cli_error("cannot write '%s': %s", tmp, strerror(errno ? errno : ENOMEM));
		goto out;
	}
	replay_observe(r, count_threads, &tc);
	if (cli_replay_run(r) < 0)
		goto out;
	err = replay_ops_finish(o, &rc->h);
	if (err < 0) {
		cli_error("cannot write '%s': %s", tmp, strerror(-err));
		goto out;
	}
	rc->rec_peak_rss = replay_totals(r)->peak_rss_bytes;
	rc->rec_final_rss = replay_totals(r)->last_rss_bytes;
	rc->threads = tc.n;
	ret = 0;
out:
	replay_ops_free(o);
	replay_free(r);
	dump_close(d);
	return ret;
}

static int add_allocator(struct replaycmd *rc, const char *spec)
{
	struct replay_alloc a;
	size_t i;

	if (replay_alloc_resolve(spec, &a) < 0)
		return -1;
	for (i = 0; i < rc->n; i++)
		if (!strcmp(rc->a[i].lib, a.lib))
			return 0;	/* named twice */
	if (rc->n == MAX_ALLOCATORS) {
		cli_error("at most %d allocators at once", MAX_ALLOCATORS);
		return -1;
	}
	rc->a[rc->n++] = a;
	return 0;
}

int cmd_replay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "allocator", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct replaycmd rc;
	const char *specs[MAX_ALLOCATORS];
	size_t nspecs = 0, i;
	char child[PATH_MAX], tmp[PATH_MAX];
	const char *tmpdir = getenv("TMPDIR");
	FILE *out;
	int c, fd, failed = 0;

	memset(&rc, 0, sizeof(rc));
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ha:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (nspecs == MAX_ALLOCATORS)
				return cli_usage("replay", "at most %d allocators at once",
						 MAX_ALLOCATORS);
			specs[nspecs++] = optarg;
			break;
		case 'j':
			rc.json = 1;
			break;
		case 'h':
			help_verb("replay", stdout);
			return 0;
		default:
			return cli_bad_option("replay", c, argv);
		}
	}
	if (cli_one_dump("replay", argc, argv, "heaptrail replay DUMP [--allocator LIB]... [--json]") < 0)
		return CLI_USAGE;
	rc.path = argv[optind];

	/* glibc first, as the reference; with no --allocator every known one installed */
	if (!nspecs) {
		rc.n = replay_alloc_defaults(rc.a, MAX_ALLOCATORS);
	} else {
		if (add_allocator(&rc, "glibc") < 0)
			return CLI_USAGE;
		for (i = 0; i < nspecs; i++)
			if (add_allocator(&rc, specs[i]) < 0)
				return CLI_USAGE;
	}
	if (replay_child_find(child, sizeof(child)) < 0)
		return CLI_USAGE;

	snprintf(tmp, sizeof(tmp), "%s/heaptrail-replay.XXXXXX",
		 tmpdir && *tmpdir ? tmpdir : "/tmp");
	fd = mkstemp(tmp);
	out = fd >= 0 ? fdopen(fd, "w+") : NULL;
	if (!out) {
		cli_error("cannot create '%s': %s (set TMPDIR to a writable directory)", tmp,
			  strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return CLI_USAGE;
	}
	if (write_ops(&rc, out, tmp) < 0) {
		fclose(out);
		unlink(tmp);
		return CLI_USAGE;
	}
	fclose(out);
	for (i = 0; i < rc.n; i++) {
		if (replay_alloc_run(child, tmp, &rc.a[i]) < 0) {
			unlink(tmp);
			return CLI_USAGE;
		}
		if (!rc.a[i].ok)
			failed = 1;
	}
	unlink(tmp);
	if (rc.json)
		replay_json(&rc);
	else
		replay_text(&rc);
	fflush(stdout);
	for (i = 0; i < rc.n; i++)
		if (!rc.a[i].ok)
			cli_warn("the replay on %s failed: %s", rc.a[i].name, rc.a[i].error);
	return failed;
}
