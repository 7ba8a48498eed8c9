/* config.c - reads the HEAPTRAIL_* environment once, reports bad values once */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct ht_config ht_cfg = {
	.depth = 64,
	.interval_ms = 100,
	.follow = 1,
	.unwind = HTR_UNWIND_LIBUNWIND,
	.mark_signal = 0,	/* opt-in: a signal's default action is the program's */
};

static void bad_value(const char *name, const char *value, const char *expect)
{
	char buf[512];
	struct ht_str s;

	str_init(&s, buf, sizeof(buf));
	str_add(&s, "ignoring ");
	str_add(&s, name);
	str_add(&s, "='");
	str_add(&s, value);
	str_add(&s, "': expected ");
	str_add(&s, expect);
	ht_msg(buf);
}

static void read_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
		     const char *expect)
{
	const char *v = getenv(name);
	uint64_t x;

	if (!v)
		return;
	if (ht_parse_u64(v, &x) < 0 || x < lo || x > hi) {
		bad_value(name, v, expect);
		return;
	}
	*out = x;
}

/* CPUs this process may run on (affinity, cpusets): no file to open. */
static int cpus_available(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	return CPU_COUNT(&set);
}

static int parse_signal(const char *v)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "SIGUSR1", SIGUSR1 },
		{ "SIGUSR2", SIGUSR2 }, { "0", 0 }, { "off", 0 }, { "none", 0 },
	};
	uint64_t n;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i].name))
			return names[i].sig;
	if (ht_parse_u64(v, &n) == 0 && n > 0 && n < 64 && n != SIGKILL &&
	    n != SIGSTOP)
		return (int)n;
	return -1;
}

void config_load(void)
{
	const char *v;
	uint64_t x;

	ht_cfg.quiet = getenv("HEAPTRAIL_QUIET") && strcmp(getenv("HEAPTRAIL_QUIET"), "0");

	v = getenv("HEAPTRAIL_OUT");
	if (v && *v && strlen(v) < sizeof(ht_cfg.out_pattern))
		strcpy(ht_cfg.out_pattern, v);
	else {
		if (v && *v)
			bad_value("HEAPTRAIL_OUT", "...", "a path shorter than 1024 bytes");
		strcpy(ht_cfg.out_pattern, "heaptrail.%e.%p.htr");
	}

	x = ht_cfg.depth;
	read_u64("HEAPTRAIL_DEPTH", 1, HTR_MAX_DEPTH, &x, "a number of frames from 1 to 256");
	ht_cfg.depth = (unsigned)x;

	x = ht_cfg.interval_ms;
	read_u64("HEAPTRAIL_INTERVAL_MS", 1, 60000, &x, "milliseconds from 1 to 60000");
	ht_cfg.interval_ms = (unsigned)x;

	v = getenv("HEAPTRAIL_FOLLOW");
	if (v) {
		if (!strcmp(v, "0") || !strcmp(v, "1"))
			ht_cfg.follow = v[0] == '1';
		else
			bad_value("HEAPTRAIL_FOLLOW", v, "0 or 1");
	}

	v = getenv("HEAPTRAIL_UNWIND");
	if (v) {
		if (!strcmp(v, "fp"))
			ht_cfg.unwind = HTR_UNWIND_FP;
		else if (!strcmp(v, "libunwind") || !strcmp(v, "dwarf"))
			ht_cfg.unwind = HTR_UNWIND_LIBUNWIND;
		else
			bad_value("HEAPTRAIL_UNWIND", v, "libunwind or fp");
	}

	/* Packing: by the spare CPU (packpolicy.c) unless set. */
	ht_cfg.cpus = (unsigned)cpus_available();
	ht_cfg.pack = HT_PACK_AUTO;
	v = getenv("HEAPTRAIL_PACK");
	if (v) {
		if (!strcmp(v, "1") || !strcmp(v, "on"))
			ht_cfg.pack = HT_PACK_ON;
		else if (!strcmp(v, "0") || !strcmp(v, "off"))
			ht_cfg.pack = HT_PACK_OFF;
		else if (strcmp(v, "auto"))
			bad_value("HEAPTRAIL_PACK", v, "auto, 1 or 0");
	}

	read_u64("HEAPTRAIL_SAMPLE", 0, (uint64_t)1 << 40, &ht_cfg.sample_bytes,
		 "a mean number of bytes between samples (0 = off)");

	v = getenv("HEAPTRAIL_CLIENTS");
	if (v) {
		if (!strcmp(v, "sockets"))
			ht_cfg.clients = HT_CLIENTS_SOCKETS;
		else if (!strcmp(v, "threads"))
			ht_cfg.clients = HT_CLIENTS_THREADS;
		else if (!strcmp(v, "off") || !strcmp(v, "0"))
			ht_cfg.clients = HT_CLIENTS_OFF;
		else
			bad_value("HEAPTRAIL_CLIENTS", v, "off, sockets or threads");
	}

	v = getenv("HEAPTRAIL_MARK_SIGNAL");
	if (v) {
		int sig = parse_signal(v);

		if (sig < 0)
			bad_value("HEAPTRAIL_MARK_SIGNAL", v, "USR1, USR2, a signal number or 0");
		else
			ht_cfg.mark_signal = sig;
	}

	v = getenv("HEAPTRAIL_REACH");
	if (v) {
		if (!strcmp(v, "exit"))
			ht_cfg.reach_at_exit = 1;
		else if (strcmp(v, "off") && strcmp(v, "0"))
			bad_value("HEAPTRAIL_REACH", v, "exit or off");
	}
}
