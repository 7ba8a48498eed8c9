/* cmd_clients.c - 'heaptrail clients': what each client leaves behind after it disconnects */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clients.h"
#include "commands.h"
#include "json.h"
#include "replay.h"
#include "site.h"
#include "symbolize.h"

/* The analysis is in clients.c; this file reads the options and prints. */

/* Callers printed under each top site, indented under its top frame. */
#define SITE_CALLERS 3
#define SITE_INDENT 48

struct view {
	const char *path;
	struct clients *c;
	struct site_ctx sc;
	int top;
};

/* Mean per judged client, rounded: a byte count, so an integer. */
static uint64_t per_client(const struct clients *c, uint64_t bytes)
{
	return c->judged ? (bytes + c->judged / 2) / c->judged : 0;
}

static const char *signed_bytes(int64_t v)
{
	static char buf[4][64];
	static int k;
	char *b = buf[k++ & 3];

	snprintf(b, 64, "%s%s", v < 0 ? "-" : "+",
		 cli_bytes(v < 0 ? (uint64_t)-v : (uint64_t)v));
	return b;
}

static const char *client_name(const struct client_info *ci, char *buf, size_t len)
{
	if (ci->label)
		return ci->label;
	snprintf(buf, len, "client %llu", (unsigned long long)ci->id);
	return buf;
}

static int by_client_residue(const void *pa, const void *pb)
{
	const struct client_info *a = *(struct client_info *const *)pa;
	const struct client_info *b = *(struct client_info *const *)pb;

	if (a->residue_bytes != b->residue_bytes)
		return a->residue_bytes < b->residue_bytes ? 1 : -1;
	return a->begin < b->begin ? -1 : a->begin > b->begin;
}

static void text_process(const struct clients *c)
{
	const struct clients_process *p = &c->proc;

	if (!p->have_before || !p->have_after)
		return;
	printf("\nwhole process:\n");
	printf("  %-38s %10s  (at %s)\n", "live heap before the first client",
	       cli_bytes(p->before_bytes), cli_at(p->before_time));
	printf("  %-38s %10s  (at %s)\n",
	       p->after_is_end ? "after the last disconnect (dump end)" :
				 "after the last disconnect + grace",
	       cli_bytes(p->after_bytes), cli_at(p->after_time));
	printf("  %-38s %10s\n", "difference", signed_bytes(p->growth_bytes));
	printf("    %-36s %10s\n", "left by disconnected clients", cli_bytes(p->attributed_bytes));
	if (p->connected_bytes)
		printf("    %-36s %10s\n", "held by clients still connected",
		       cli_bytes(p->connected_bytes));
	printf("    %-36s %10s\n", "unattributed growth", signed_bytes(p->unattributed_bytes));
}

static int text_out(struct view *vw)
{
	const struct clients *c = vw->c;
	struct client_info **order;
	uint64_t allocs = 0, bytes = 0, peak = 0;
	size_t i, shown;
	char name[64];

	if (!c->n) {
		printf("no clients in '%s'\n", vw->path);
		printf("(record with HEAPTRAIL_CLIENTS=sockets or threads, 'heaptrail record --clients=...', or mark clients with heaptrail.h)\n");
		return 0;
	}
	for (i = 0; i < c->n; i++) {
		allocs += c->v[i].allocations;
		bytes += c->v[i].allocated_bytes;
		peak += c->v[i].peak_bytes;
	}
	printf("%s client%s in '%s': %s disconnected, %s still connected at the end (grace %s)\n",
	       cli_count(c->n), c->n == 1 ? "" : "s", vw->path, cli_count(c->ended),
	       cli_count(c->connected), cli_duration(c->grace));
	printf("  per client (mean): %s allocations, %s allocated, peak %s live\n",
	       cli_count((allocs + c->n / 2) / c->n), cli_bytes((bytes + c->n / 2) / c->n),
	       cli_bytes((peak + c->n / 2) / c->n));
	if (c->ended > c->judged)
		printf("  %s disconnected less than the grace period before the dump ended: not judged\n",
		       cli_count(c->ended - c->judged));
	if (!c->judged) {
		printf("\nno client was judged: residue is only counted for clients that\n"
		       "disconnected at least the grace period before the dump ended\n");
		text_process(c);
		return 0;
	}
	printf("\nresidue (allocated for a client, still live after it disconnected + grace, and at the end):\n");
	printf("  %s in total from %s client%s; per client mean %s, median %s, max %s\n",
	       cli_bytes(c->residue_bytes), cli_count(c->judged), c->judged == 1 ? "" : "s",
	       cli_bytes(c->residue_mean), cli_bytes(c->residue_median),
	       cli_bytes(c->residue_max));

	if (c->nsites) {
		shown = vw->top && (size_t)vw->top < c->nsites ? (size_t)vw->top : c->nsites;
		printf("\ntop sites by residue:\n");
		printf("  %10s %11s %8s  %-8s %s\n", "residue", "per client", "clients",
		       "trend", "site");
		for (i = 0; i < shown; i++) {
			const struct client_site *s = c->sites[i];

			/* a few callers: the top frame alone is often an allocator wrapper */
			printf("  %10s %11s %8s  %-8s ", cli_bytes(s->residue_bytes),
			       cli_bytes(per_client(c, s->residue_bytes)),
			       cli_count(s->clients), clients_trend_name(s->trend));
			site_print(stdout, &vw->sc, s->stack, SITE_INDENT, SITE_CALLERS);
		}
		if (shown < c->nsites)
			printf("  ... and %s more site%s (--top 0 shows all)\n",
			       cli_count(c->nsites - shown), c->nsites - shown == 1 ? "" : "s");
		printf("  (trend: 'grows' rises with every client that leaves, 'bounded' levels off\n"
		       "   like a shared cache, 'unknown' with fewer than %d disconnects)\n",
		       CLIENTS_TREND_MIN);
	}
	text_process(c);

	order = malloc(c->n * sizeof(*order));
	if (!order) {
		cli_error("out of memory");
		return -1;
	}
	for (i = 0; i < c->n; i++)
		order[i] = &c->v[i];
	qsort(order, c->n, sizeof(*order), by_client_residue);
	shown = vw->top && (size_t)vw->top < c->n ? (size_t)vw->top : c->n;
	printf("\nclients with the most residue:\n");
	printf("  %-24s %10s %10s %12s %10s %10s\n", "client", "begin", "end",
	       "allocations", "peak", "residue");
	for (i = 0; i < shown; i++) {
		const struct client_info *ci = order[i];
		char end[32];

		if (ci->end == CLIENTS_NO_END)
			snprintf(end, sizeof(end), "-");
		else
			snprintf(end, sizeof(end), "%s", cli_at(ci->end));
		printf("  %-24s %10s %10s %12s %10s %10s\n", client_name(ci, name, sizeof(name)),
		       cli_at(ci->begin), end, cli_count(ci->allocations),
		       cli_bytes(ci->peak_bytes),
		       ci->judged ? cli_bytes(ci->residue_bytes) : "-");
	}
	if (shown < c->n)
		printf("  ... and %s more (--top 0 shows all)\n", cli_count(c->n - shown));
	free(order);
	return 0;
}

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

static void json_out(struct view *vw)
{
	const struct clients *c = vw->c;
	const struct clients_process *p = &c->proc;
	struct json j;
	size_t i, shown;

	json_init(&j, stdout, 0);
	json_obj_begin(&j);
	json_kv_str(&j, "dump", vw->path);
	json_kv_double(&j, "grace_seconds", seconds(c->grace));
	json_kv_u64(&j, "clients", c->n);
	json_kv_u64(&j, "disconnected", c->ended);
	json_kv_u64(&j, "judged", c->judged);
	json_kv_u64(&j, "connected_at_end", c->connected);
	json_kv_u64(&j, "residue_bytes", c->residue_bytes);
	json_kv_u64(&j, "residue_per_client_bytes", c->residue_mean);
	json_kv_u64(&j, "residue_median_bytes", c->residue_median);
	json_kv_u64(&j, "residue_max_bytes", c->residue_max);

	json_key(&j, "sites");
	json_arr_begin(&j);
	shown = vw->top && (size_t)vw->top < c->nsites ? (size_t)vw->top : c->nsites;
	for (i = 0; i < shown; i++) {
		const struct client_site *s = c->sites[i];

		json_obj_begin(&j);
		site_json_fields(&j, &vw->sc, s->stack);
		json_kv_u64(&j, "residue_bytes", s->residue_bytes);
		json_kv_u64(&j, "residue_blocks", s->residue_blocks);
		json_kv_u64(&j, "residue_per_client_bytes", per_client(c, s->residue_bytes));
		json_kv_u64(&j, "clients_with_residue", s->clients);
		json_kv_str(&j, "trend", clients_trend_name(s->trend));
		json_obj_end(&j);
	}
	json_arr_end(&j);

	json_key(&j, "process");
	json_obj_begin(&j);
	if (p->have_before && p->have_after) {
		json_kv_u64(&j, "before_first_client_bytes", p->before_bytes);
		json_kv_double(&j, "before_first_client_seconds", seconds(p->before_time));
		json_kv_u64(&j, "after_last_disconnect_bytes", p->after_bytes);
		json_kv_double(&j, "after_last_disconnect_seconds", seconds(p->after_time));
		json_kv_i64(&j, "growth_bytes", p->growth_bytes);
		json_kv_u64(&j, "attributed_residue_bytes", p->attributed_bytes);
		json_kv_u64(&j, "connected_bytes", p->connected_bytes);
		json_kv_i64(&j, "unattributed_growth_bytes", p->unattributed_bytes);
	} else {
		static const char *const keys[] = {
			"before_first_client_bytes", "before_first_client_seconds",
			"after_last_disconnect_bytes", "after_last_disconnect_seconds",
			"growth_bytes", "attributed_residue_bytes", "connected_bytes",
			"unattributed_growth_bytes",
		};

		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			json_key(&j, keys[i]);
			json_null(&j);
		}
	}
	json_obj_end(&j);

	json_key(&j, "per_client");
	json_arr_begin(&j);
	for (i = 0; i < c->n; i++) {
		const struct client_info *ci = &c->v[i];

		json_obj_begin(&j);
		json_kv_u64(&j, "id", ci->id);
		json_kv_str(&j, "label", ci->label);
		json_kv_double(&j, "begin_seconds", seconds(ci->begin));
		json_key(&j, "end_seconds");
		if (ci->end == CLIENTS_NO_END)
			json_null(&j);
		else
			json_double(&j, seconds(ci->end));
		json_kv_u64(&j, "allocations", ci->allocations);
		json_kv_u64(&j, "allocated_bytes", ci->allocated_bytes);
		json_kv_u64(&j, "peak_bytes", ci->peak_bytes);
		json_kv_u64(&j, "live_bytes", ci->live_bytes);
		json_key(&j, "judged");
		json_bool(&j, ci->judged);
		json_kv_u64(&j, "residue_bytes", ci->residue_bytes);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	json_obj_end(&j);
	json_finish(&j);
}

int cmd_clients(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "grace", required_argument, NULL, 'g' },
		{ "top", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct view vw;
	struct dump *d;
	struct replay *r;
	uint64_t grace = 1000000000ull;
	int c, json = 0, rc = 0;

	memset(&vw, 0, sizeof(vw));
	vw.top = 10;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (cli_parse_seconds(optarg, &grace) < 0)
				return cli_usage("clients", "--grace wants a duration like 1s or 500ms, not '%s'",
						 optarg);
			break;
		case 't':
			if (cli_parse_top(optarg, &vw.top) < 0)
				return cli_usage("clients", "--top wants a number of sites, not '%s'",
						 optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			help_verb("clients", stdout);
			return 0;
		default:
			return cli_bad_option("clients", c, argv);
		}
	}
	if (cli_one_dump("clients", argc, argv, "heaptrail clients DUMP [--grace S] [--top N] [--json]") < 0)
		return CLI_USAGE;
	vw.path = argv[optind];
	d = cli_open_dump(vw.path);
	if (!d)
		return CLI_USAGE;
	r = replay_new(d);
	vw.c = r ? clients_new(r, grace) : NULL;
	if (!vw.c) {
		cli_error("out of memory");
		replay_free(r);
		dump_close(d);
		return CLI_USAGE;
	}
	if (cli_replay_run(r) < 0) {
		rc = CLI_USAGE;
		goto out;
	}
	if (clients_finish(vw.c, r) < 0) {
		cli_error("out of memory");
		rc = CLI_USAGE;
		goto out;
	}
	vw.sc.dump = d;
	vw.sc.sym = sym_new(d);
	if (!vw.sc.sym) {
		cli_error("out of memory");
		rc = CLI_USAGE;
		goto out;
	}
	if (json)
		json_out(&vw);
	else if (text_out(&vw) < 0)
		rc = CLI_USAGE;
	fflush(stdout);
	if (replay_totals(r)->lost_events)
		cli_warn("%s lost: figures may be incomplete",
			 cli_events_were(replay_totals(r)->lost_events));
	sym_print_warnings(vw.sc.sym);
out:
	sym_free(vw.sc.sym);
	clients_free(vw.c);
	replay_free(r);
	dump_close(d);
	return rc;
}
