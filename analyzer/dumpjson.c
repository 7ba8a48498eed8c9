/* dumpjson.c - a dump's process, totals and site figures as JSON, shared by the verbs */
#include "dumpjson.h"
#include "reachclass.h"

static double seconds(uint64_t ns)
{
	return (double)ns / 1e9;
}

const char *dumpjson_end_name(int how)
{
	switch (how) {
	case HTR_END_EXIT:
		return "exit";
	case HTR_END_SIGNAL:
		return "signal";
	case HTR_END_EXEC:
		return "exec";
	case HTR_END_UNKNOWN:
		return "unknown";
	default:
		return NULL;
	}
}

void dumpjson_process(struct json *j, const struct dump_process *p, unsigned flags)
{
	int i;

	json_key(j, "process");
	json_obj_begin(j);
	json_kv_u64(j, "pid", p->pid);
	json_kv_u64(j, "ppid", p->ppid);
	json_kv_str(j, "exe", p->exe);
	json_key(j, "argv");
	json_arr_begin(j);
	for (i = 0; p->argv && p->argv[i]; i++)
		json_str(j, p->argv[i]);
	json_arr_end(j);
	if (flags & DUMPJSON_START)
		json_kv_double(j, "start_unix_seconds", seconds(p->start_realtime_ns));
	json_kv_u64(j, "sample_bytes", p->sample_bytes);
	if (flags & DUMPJSON_START)
		json_kv_u64(j, "page_size", p->page_size);
	json_key(j, "forked_child");
	json_bool(j, !!(p->flags & HTR_PF_FOLLOWED_FORK));
	json_obj_end(j);
}

void dumpjson_totals(struct json *j, struct replay *r,
		     const struct replay_totals *t, unsigned flags)
{
	json_key(j, "totals");
	json_obj_begin(j);
	json_kv_u64(j, "allocations", t->allocations);
	json_kv_u64(j, "frees", t->frees);
	json_kv_u64(j, "recorded_events", t->recorded_events);
	json_kv_u64(j, "reallocs", t->reallocs);
	json_kv_u64(j, "allocated_bytes", t->allocated_bytes);
	json_kv_u64(j, "peak_live_bytes", t->peak_live_bytes);
	json_kv_double(j, "peak_time_seconds", seconds(t->peak_time));
	json_kv_u64(j, "leaked_bytes", t->live_bytes);
	json_kv_u64(j, "leaked_blocks", t->live_blocks);
	json_kv_u64(j, "peak_rss_bytes", t->peak_rss_bytes);
	if (flags & DUMPJSON_RSS_TIME)
		json_kv_double(j, "peak_rss_time_seconds", seconds(t->peak_rss_time));
	json_kv_u64(j, "last_rss_bytes", t->last_rss_bytes);
	json_kv_double(j, "duration_seconds", seconds(t->duration));
	json_kv_u64(j, "temporary", t->temporary);
	json_kv_u64(j, "unknown_frees", t->unknown_frees);
	json_kv_u64(j, "mismatches", t->mismatches);
	json_kv_u64(j, "lost_events", t->lost_events);
	json_kv_u64(j, "pool_allocations", t->pool_allocations);
	json_kv_u64(j, "pool_live_bytes", t->pool_live_bytes);
	if (flags & DUMPJSON_REACH) {
		json_key(j, "reach_scan");
		json_bool(j, t->have_reach);
		if (t->have_reach) {
			uint64_t bytes[4];

			reach_class_totals(r, bytes);
			reach_class_json_fields(j, bytes);
		}
	}
	json_key(j, "end");
	json_obj_begin(j);
	json_kv_str(j, "how", dumpjson_end_name(t->end_how));
	json_key(j, "status");
	if (t->end_how == HTR_END_EXIT || t->end_how == HTR_END_SIGNAL)
		json_i64(j, t->end_status);
	else
		json_null(j);
	json_obj_end(j);
	json_obj_end(j);
}

void dumpjson_site_figures(struct json *j, const struct site_stats *s)
{
	json_kv_u64(j, "leaked_bytes", s->live_bytes);
	json_kv_u64(j, "leaked_blocks", s->live_blocks);
	json_kv_u64(j, "peak_bytes", s->peak_bytes);
	json_kv_u64(j, "max_live_bytes", s->max_live_bytes);
	json_kv_u64(j, "allocations", s->allocations);
	json_kv_u64(j, "allocated_bytes", s->allocated_bytes);
	json_kv_u64(j, "frees", s->frees);
	json_kv_u64(j, "temporary", s->temporary);
	json_kv_u64(j, "mismatches", s->mismatches);
}

void dumpjson_sample(struct json *j, const struct dump_sample *s)
{
	json_kv_u64(j, "rss_bytes", s->rss_bytes);
	json_kv_u64(j, "arena_bytes", s->arena_bytes);
	json_kv_u64(j, "mmap_bytes", s->mmap_bytes);
	json_kv_u64(j, "in_use_bytes", s->in_use_bytes);
	json_kv_u64(j, "free_bytes", s->free_bytes);
	json_kv_u64(j, "top_releasable_bytes", s->top_releasable_bytes);
	json_kv_u64(j, "shim_bytes", s->shim_bytes);
}
