/* gate_report.c - the gate's verdict as one screen of text, JSON or JUnit XML */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "gate.h"
#include "json.h"
#include "junit.h"

static int is_runtime(const char *module)
{
	const char *b = gate_base_name(module);

	return module && (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) ||
			  !strncmp(b, "ld-", 3));
}

/* "function file:line" of the top frame and the frame that called it. */
static void site_line(FILE *out, const struct gate_site *s, uint64_t bytes,
		      const struct gate_proc *p, int show_proc, const char *indent)
{
	char buf[1400];

	fprintf(out, "%s%9s  %s", indent, cli_bytes(bytes), s->label);
	/* the caller, unless it is the C runtime's start-up code calling main */
	if (s->nframes && s->top + 1 < s->nframes &&
	    !is_runtime(s->frames[s->top + 1].module)) {
		gate_frame_text(&s->frames[s->top + 1], buf, sizeof(buf));
		fprintf(out, "  <- %s", buf);
	}
	if (show_proc)
		fprintf(out, "  [%s]", p->name);
	fprintf(out, "\n");
}

/* "--max-leaked 10MB": the limit as the user wrote it, with its unit. */
static void limit_str(const struct gate_check *c, char *buf, size_t len)
{
	const char *t = c->limit_text;
	const char *unit = c->kind == L_INCREASE ? "%" : c->kind == L_GROWTH ? "/s" : "";
	size_t n = t ? strlen(t) : 0, u = strlen(unit);

	if (t && *unit && n >= u && !strcmp(t + n - u, unit))
		unit = "";
	if (t)
		snprintf(buf, len, "--%s %s%s", gate_limit_opt[c->kind], t, unit);
	else if (c->kind == L_INCREASE)
		snprintf(buf, len, "--%s %g%%", gate_limit_opt[c->kind], c->limit);
	else
		snprintf(buf, len, "--%s %s%s", gate_limit_opt[c->kind],
			 cli_bytes((uint64_t)c->limit), unit);
}

static void print_check(FILE *out, const struct gate_check *c, const char *who,
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
			gate_plural(c->nsites - (size_t)top, "site", "sites"));
}

static const char *gate_status_str(int wstatus)
{
	static char buf[64];

	if (WIFSIGNALED(wstatus))
		snprintf(buf, sizeof(buf), "was killed by %s", cli_signame(WTERMSIG(wstatus)));
	else
		snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(wstatus));
	return buf;
}



/*
 * The processes within one limit, in one line: a run of thirty tests must
 * fit on a screen.  Skipped checks get a line each, up to three.
 */
static void print_passed(FILE *out, struct gate_run *run, enum gate_limit k)
{
	const struct gate_entry *worst = NULL;
	size_t i, npass = 0, nskip = 0;
	char lim[96];

	for (i = 0; i < run->nprocs; i++) {
		const struct gate_entry *pr = &run->procs[i];
		const struct gate_check *c = &pr->checks[k];

		if (!pr->judged)
			continue;
		if (c->state == ST_PASS) {
			npass++;
			if (!worst || c->value > worst->checks[k].value)
				worst = pr;
		} else if (c->state == ST_SKIP && ++nskip <= 3) {
			print_check(out, c, pr->p.name, 0, 0);
		}
	}
	if (nskip > 3)
		fprintf(out, "skip --%s: %s more %s\n", gate_limit_opt[k], cli_count(nskip - 3),
			gate_plural(nskip - 3, "process", "processes"));
	if (!npass)
		return;
	if (npass == 1) {
		print_check(out, &worst->checks[k], worst->p.name, 0, 0);
		return;
	}
	limit_str(&worst->checks[k], lim, sizeof(lim));
	fprintf(out, "ok   %s: %s processes within it; the most: %s: %s\n", lim,
		cli_count(npass), worst->p.name, worst->checks[k].msg);
}

void gate_text_report(struct gate_run *run, FILE *out)
{
	struct gate_opts *o = run->o;
	size_t i, fail, pass, skip, nnot = 0;
	uint64_t supp_bytes = 0;
	int k;

	gate_count_states(run, &fail, &pass, &skip);
	fprintf(out, "heaptrail gate: %s: ", fail ? "FAILED" : "passed");
	if (fail)
		fprintf(out, "%s of %s %s exceeded", cli_count(fail), cli_count(fail + pass),
			gate_plural(fail + pass, "check", "checks"));
	else
		fprintf(out, "%s %s within the limits", cli_count(pass),
			gate_plural(pass, "check", "checks"));
	fprintf(out, " (%s %s judged", cli_count(run->njudged),
		gate_plural(run->njudged, "process", "processes"));
	if (run->nprocs > run->njudged)
		fprintf(out, " of %s", cli_count(run->nprocs));
	fprintf(out, ")\n");
	if (run->ran && gate_cmd_failed(run))
		fprintf(out, "FAIL the command %s\n", gate_status_str(run->wstatus));

	/* failures in full, the stacks included */
	for (i = 0; i < run->nprocs; i++) {
		struct gate_entry *pr = &run->procs[i];

		for (k = 0; pr->judged && k < L_COUNT; k++)
			if (o->set[k] && k != L_INCREASE && pr->checks[k].state == ST_FAIL)
				print_check(out, &pr->checks[k], pr->p.name, o->top, 0);
	}
	for (k = 0; k < L_COUNT; k++)
		if (o->set[k] && (k == L_INCREASE || run->njudged > 1) &&
		    run->tree[k].state == ST_FAIL)
			print_check(out, &run->tree[k], "whole run", o->top, 1);
	/* then one line per limit for the processes within it, and the skipped */
	for (k = 0; k < L_COUNT; k++) {
		if (o->set[k] && k != L_INCREASE)
			print_passed(out, run, (enum gate_limit)k);
	}
	if (o->set[L_INCREASE] && run->tree[L_INCREASE].state != ST_FAIL)
		print_check(out, &run->tree[L_INCREASE], "whole run", o->top, 1);
	for (i = 0; i < run->nprocs; i++) {
		struct gate_entry *pr = &run->procs[i];

		supp_bytes += pr->judged ? pr->p.suppressed_bytes : 0;
		if (!pr->judged && ++nnot <= 5)
			fprintf(out, "not judged: %s %s: %s\n", pr->p.name,
				pr->p.exe ? pr->p.exe : "", pr->why_not);
		if (pr->p.warning)
			fprintf(out, "warning: %s: %s\n", pr->p.name, pr->p.warning);
		else if (pr->judged && !pr->p.end_how)
			fprintf(out, "warning: %s: its dump has no end record (killed by SIGKILL, or it "
				"ended without the C library's exit(), as Go programs do): its last "
				"events may be missing\n", pr->p.name);
		if (pr->p.lost_events)
			fprintf(out, "warning: %s: %s lost (%s)\n", pr->p.name,
				cli_events_were(pr->p.lost_events), "leaks may be missing or spurious");
	}
	if (nnot > 5)
		fprintf(out, "not judged: %s more %s\n", cli_count(nnot - 5),
			gate_plural(nnot - 5, "process", "processes"));
	if (supp_bytes && !o->print_supp)
		fprintf(out, "suppressed: %s of the runtime's or known leaks (--print-suppressions shows them)\n",
			cli_bytes(supp_bytes));
	if (run->ran)
		fprintf(out, "command: %s\n", gate_status_str(run->wstatus));
	if (o->print_supp)
		supp_print(&o->supp, out);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_check(struct json *j, const struct gate_check *c, int top)
{
	size_t i;

	json_obj_begin(j);
	json_kv_str(j, "limit", gate_limit_opt[c->kind]);
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
		/* 'bytes': what counts for this limit; then the site's own figures */
		json_kv_u64(j, "bytes", c->site_bytes[i]);
		switch (c->kind) {
		case L_PEAK:
			json_kv_u64(j, "peak_bytes", s->peak_bytes);
			break;
		case L_RESIDUE:
			json_kv_u64(j, "residue_bytes", s->bytes);
			json_kv_u64(j, "residue_blocks", s->blocks);
			break;
		case L_LOST:
			json_kv_u64(j, "lost_bytes", s->lost_bytes);
			/* fall through */
		default:
			json_kv_u64(j, "leaked_bytes", s->bytes);
			json_kv_u64(j, "leaked_blocks", s->blocks);
			break;
		}
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

void gate_json_report(struct gate_run *run, FILE *out, int exit_status)
{
	struct gate_opts *o = run->o;
	struct json j;
	size_t i, fail, pass, skip;
	int k;

	gate_count_states(run, &fail, &pass, &skip);
	json_init(&j, out, 0);
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
		snprintf(key, sizeof(key), "%s_%s", gate_limit_opt[k],
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
		struct gate_entry *pr = &run->procs[i];
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

static char *check_details(const struct gate_check *c, int top, int show_proc)
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

static void junit_check(struct junit *ju, int suite, const struct gate_check *c,
			const char *classname, int top, int show_proc)
{
	char lim[96], msg[1024];
	int tc = junit_case(ju, suite, gate_limit_opt[c->kind], classname, 0);
	char *details;

	if (tc < 0)
		return;
	limit_str(c, lim, sizeof(lim));
	snprintf(msg, sizeof(msg), "%s: %s", lim, c->msg);
	if (c->state == ST_SKIP) {
		junit_skip(ju, suite, tc, msg);
	} else if (c->state == ST_FAIL) {
		details = check_details(c, top, show_proc);
		junit_fail(ju, suite, tc, gate_limit_opt[c->kind], msg, details);
		free(details);
	}
}

int gate_junit_report(struct gate_run *run)
{
	struct gate_opts *o = run->o;
	struct junit *ju = junit_new("heaptrail gate");
	char classname[512];
	size_t i;
	int k, s;

	if (!ju) {
		cli_error("cannot write '%s': out of memory", o->junit);
		return -1;
	}
	for (i = 0; i < run->nprocs; i++) {
		struct gate_entry *pr = &run->procs[i];

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
		snprintf(classname, sizeof(classname), "heaptrail.gate.%s", gate_base_name(pr->p.exe));
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
			if (tc >= 0 && gate_cmd_failed(run)) {
				snprintf(msg, sizeof(msg), "the command %s", gate_status_str(run->wstatus));
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
