/* packpolicy.c - whether the writer packs the next chunk: HEAPTRAIL_PACK=auto follows the idle CPU */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shim.h"

/*
 * Packing a chunk into columns (chunkpack.c) makes real programs' dumps a
 * third to a half smaller but costs the writer thread ~30 ns an event.
 * That is free while a CPU stands idle for the writer, and it is the
 * program's time when every CPU is busy: on two cores, a two-thread malloc
 * loop ran 1.4x longer packed, while sqlite3 and python3 (one busy thread)
 * ran exactly as fast.  So under 'auto' the writer looks, every 100 ms, at
 * how much CPU was left idle: on the machine (/proc/stat, kept open), and for this
 * process (the CPUs it may run on less the CPU time of all of its threads,
 * the writer's packing included); it packs while both leave at least
 * 0.6 of a CPU, and stops below 0.35.  The process's CPUs are those of its
 * affinity mask, or fewer under a CPU quota of its own cgroup (cgroup v2
 * cpu.max, v1 cpu.cfs_quota_us: a container given 2 CPUs of a 64-CPU
 * host is busy at 2).  A packed dump says so once
 * (HTR_PF_PACKED); each chunk then says whether it was packed
 * (HTR_PACK_COLUMNS) or left as it was (HTR_PACK_RAW).
 */

#define WINDOW_NS 100000000ull
#define ON_SPARE_MILLI 600
#define OFF_SPARE_MILLI 350

static uint64_t window_start_ns, window_start_cpu_ns;
static uint64_t window_idle, window_total;	/* /proc/stat jiffies */
static int packing;
static struct ht_kept_file proc_stat = HT_KEPT_FILE("/proc/stat");	/* keptfile.c */
static unsigned online_cpus;
static uint64_t cpus_milli;	/* CPUs the process may use, in thousandths */
/*
 * HEAPTRAIL__PACK_PROBE=FILE (tests only): the spare CPU, in thousandths,
 * is read from FILE instead of measured, so that a test can tell the
 * writer when to pack (tests/e2e/test_writer.py).
 */
static char probe[256];

static uint64_t process_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

/* The machine's idle and total jiffies so far (the "cpu" line); 0 when unknown. */
static int machine_jiffies(uint64_t *idle, uint64_t *total)
{
	char buf[512];
	int field = 0;
	const char *p;
	uint64_t v;

	if (kept_file_read(&proc_stat, buf, sizeof(buf)) < 5 || strncmp(buf, "cpu ", 4))
		return -1;
	*idle = *total = 0;
	/* cpu  user nice system idle iowait irq softirq steal guest guest_nice */
	for (p = buf + 3; *p && *p != '\n' && field < 8; field++) {
		while (*p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (v = 0; *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (uint64_t)(*p - '0');
		*total += v;
		if (field == 3 || field == 4)
			*idle += v;
	}
	return field == 8 ? 0 : -1;
}

/* A small file's first line, NUL-terminated; -1 when it cannot be read. */
static int read_line(const char *path, char *buf, size_t cap)
{
	char *nl;

	if (ht_read_file(path, buf, cap) <= 0)
		return -1;
	nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	return 0;
}

static uint64_t parse_u64(const char **p)
{
	uint64_t v = 0;

	while (**p >= '0' && **p <= '9')
		v = v * 10 + (uint64_t)(*(*p)++ - '0');
	return v;
}

/* mount + cgroup path ("/" is the mount itself) + file, without stdio; -1 when too long. */
static int cg_file(char *out, size_t cap, const char *mount, const char *cg, const char *file)
{
	struct ht_str s;

	str_init(&s, out, cap);
	str_add(&s, mount);
	if (strcmp(cg, "/"))
		str_add(&s, cg);
	str_add(&s, file);
	return s.len + 1 < cap ? 0 : -1;
}

/*
 * The CPU quota of the process's own cgroup, in thousandths of a CPU; 0
 * when none (or unknown).  Read once, when the writer starts: quotas set on
 * an ancestor cgroup only are not seen.
 */
static uint64_t cgroup_quota_milli(void)
{
	char line[512], path[768], val[64];
	const char *p;
	char buf[2048];
	char *l, *next;
	uint64_t quota, period;

	if (ht_read_file("/proc/self/cgroup", buf, sizeof(buf)) <= 0)
		return 0;
	for (l = buf; *l; l = next) {
		char *c1 = strchr(l, ':'), *c2;

		next = strchr(l, '\n');
		if (next)
			*next++ = '\0';
		else
			next = l + strlen(l);
		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		if (strlen(c2 + 1) >= sizeof(line))
			continue;
		strcpy(line, c2 + 1);
		if (c2 == c1 + 1) {
			/* v2: "0::/path", cpu.max holds "max PERIOD" or "QUOTA PERIOD" */
			if (cg_file(path, sizeof(path), "/sys/fs/cgroup", line, "/cpu.max") < 0 ||
			    read_line(path, val, sizeof(val)) < 0 || val[0] < '0' || val[0] > '9')
				continue;
			p = val;
			quota = parse_u64(&p);
			while (*p == ' ')
				p++;
			period = parse_u64(&p);
		} else {
			/* v1: "N:cpu,cpuacct:/path", mounted at /sys/fs/cgroup/cpu */
			const char *ctl = c1 + 1;

			if (strcmp(ctl, "cpu") && strncmp(ctl, "cpu,", 4) && !strstr(ctl, ",cpu,") &&
			    (strlen(ctl) < 4 || strcmp(ctl + strlen(ctl) - 4, ",cpu")))
				continue;
			if (cg_file(path, sizeof(path), "/sys/fs/cgroup/cpu", line,
				    "/cpu.cfs_quota_us") < 0 ||
			    read_line(path, val, sizeof(val)) < 0 || val[0] < '0' || val[0] > '9')
				continue;	/* "-1": no quota */
			p = val;
			quota = parse_u64(&p);
			if (cg_file(path, sizeof(path), "/sys/fs/cgroup/cpu", line,
				    "/cpu.cfs_period_us") < 0 ||
			    read_line(path, val, sizeof(val)) < 0)
				continue;
			p = val;
			period = parse_u64(&p);
		}
		if (quota && period)
			return quota * 1000 / period;
	}
	return 0;
}

static int probe_spare(int64_t *spare)
{
	char buf[32];
	const char *p = buf;

	if (read_line(probe, buf, sizeof(buf)) < 0 || *p < '0' || *p > '9')
		return -1;
	*spare = (int64_t)parse_u64(&p);
	return 0;
}

void pack_policy_start(void)
{
	long on = sysconf(_SC_NPROCESSORS_ONLN);
	const char *v = getenv("HEAPTRAIL__PACK_PROBE");

	if (ht_cfg.pack != HT_PACK_AUTO)
		return;		/* nothing to measure: no descriptor kept open */
	probe[0] = '\0';
	if (v && strlen(v) < sizeof(probe))
		strcpy(probe, v);

	online_cpus = on > 0 ? (unsigned)on : 1;
	cpus_milli = (uint64_t)ht_cfg.cpus * 1000;
	{
		uint64_t q = cgroup_quota_milli();

		if (q && q < cpus_milli)
			cpus_milli = q;
	}
	window_start_ns = ht_mono_ns();
	window_start_cpu_ns = process_cpu_ns();
	if (machine_jiffies(&window_idle, &window_total) < 0)
		window_total = 0;
	/* until the first window is measured: what the machine's size suggests */
	packing = cpus_milli >= 4000;
}

int pack_policy_now(void)
{
	uint64_t now, cpu, wall, idle, total;
	int64_t spare;

	if (ht_cfg.pack != HT_PACK_AUTO)
		return ht_cfg.pack == HT_PACK_ON;
	now = ht_mono_ns();
	wall = now - window_start_ns;
	if (wall < WINDOW_NS)
		return packing;
	/* CPUs this process left idle over the window, in thousandths */
	cpu = process_cpu_ns();
	spare = (int64_t)cpus_milli - (int64_t)((cpu - window_start_cpu_ns) * 1000 / wall);
	/* ... and the machine */
	if (machine_jiffies(&idle, &total) == 0 && window_total && total > window_total) {
		int64_t machine = (int64_t)((idle - window_idle) * online_cpus * 1000 /
					    (total - window_total));

		if (machine < spare)
			spare = machine;
		window_idle = idle;
		window_total = total;
	}
	if (probe[0])
		probe_spare(&spare);
	if (packing && spare < OFF_SPARE_MILLI)
		packing = 0;
	else if (!packing && spare >= ON_SPARE_MILLI)
		packing = 1;
	window_start_ns = now;
	window_start_cpu_ns = cpu;
	return packing;
}
