/* cmd_record.c - 'heaptrail record': runs a command under the shim and names its dumps */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "launch.h"

#define DEFAULT_OUT "heaptrail.%e.%p.htr"	/* the shim's own default too */

/* ---- the dump names --------------------------------------------------- */

/* HEAPTRAIL_OUT as a glob: every %x becomes '*', glob's own specials escaped. */
static void out_glob(const char *pattern, char *out, size_t len)
{
	size_t o = 0;

	for (; *pattern && o + 3 < len; pattern++) {
		if (*pattern == '%' && pattern[1] == '%') {
			out[o++] = '%';
			pattern++;
		} else if (*pattern == '%' && pattern[1]) {
			if (!o || out[o - 1] != '*')
				out[o++] = '*';
			pattern++;
		} else {
			if (strchr("*?[]\\", *pattern))
				out[o++] = '\\';
			out[o++] = *pattern;
		}
	}
	out[o] = 0;
}

struct seen {
	char **names;
	struct stat *st;
	size_t n;
};

static void snapshot(const char *pat, struct seen *s)
{
	glob_t g;
	size_t i;

	memset(s, 0, sizeof(*s));
	if (glob(pat, 0, NULL, &g) != 0)
		return;
	s->names = calloc(g.gl_pathc, sizeof(*s->names));
	s->st = calloc(g.gl_pathc, sizeof(*s->st));
	for (i = 0; s->names && s->st && i < g.gl_pathc; i++) {
		if (stat(g.gl_pathv[i], &s->st[s->n]) < 0)
			continue;
		s->names[s->n] = strdup(g.gl_pathv[i]);
		if (s->names[s->n])
			s->n++;
	}
	globfree(&g);
}

static void seen_free(struct seen *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s->st);
}

static int unchanged(const struct seen *before, const char *name,
		     const struct stat *st)
{
	size_t i;

	for (i = 0; i < before->n; i++)
		if (!strcmp(before->names[i], name))
			return before->st[i].st_ino == st->st_ino &&
			       before->st[i].st_size == st->st_size &&
			       before->st[i].st_mtim.tv_sec == st->st_mtim.tv_sec &&
			       before->st[i].st_mtim.tv_nsec == st->st_mtim.tv_nsec;
	return 0;
}

/*
 * Names the dumps this run wrote, relative to the current directory if
 * under it; packs each first with pack_after (PACK_AFTER: --pack=after,
 * PACK_COMPACT: --pack=compact).
 */
enum { PACK_NONE, PACK_AFTER, PACK_COMPACT };

static void tell_dumps(const char *pat, const struct seen *before,
		       const char *cwd, int pack_after)
{
	struct seen after;
	size_t i, cl = strlen(cwd), k = 0;

	snapshot(pat, &after);
	for (i = 0; i < after.n; i++) {
		const char *name = after.names[i];
		int packed;

		if (unchanged(before, name, &after.st[i]))
			continue;
		/* a failure is said in its own line; the dump stays as written */
		packed = pack_after != PACK_NONE &&
			 pack_dump(name, NULL, pack_after == PACK_COMPACT ? COMPACT_DEFAULT_LEVEL :
					       PACK_DEFAULT_LEVEL,
				   pack_after == PACK_COMPACT, NULL) == 0;
		if (!strncmp(name, cwd, cl) && name[cl] == '/')
			name += cl + 1;
		fprintf(stderr, "heaptrail: dump written to '%s'%s\n", name,
			!packed ? "" : pack_after == PACK_COMPACT ? ", compacted" : ", packed");
		k++;
	}
	if (!k)
		cli_warn("no dump was written (expected a file matching '%s'); did the command start, and is the directory writable?",
			 pat);
	seen_free(&after);
}

/* ---- running it ------------------------------------------------------- */

/*
 * Can a dump be created at 'pattern'?  Checked before the run so that the
 * user reads one line, ours, instead of the shim's and then "no dump was
 * written".  0, or an errno.  A directory part with a '%' is left to the shim.
 */
static int out_unwritable(const char *pattern)
{
	char dir[PATH_MAX + 64];
	const char *slash = strrchr(pattern, '/');
	struct stat st;

	if (!stat(pattern, &st) && S_ISDIR(st.st_mode))
		return EISDIR;
	if (!slash)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - pattern), pattern);
	if (!dir[0] || strchr(dir, '%'))
		return 0;
	if (stat(dir, &st))
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	return access(dir, W_OK | X_OK) ? errno : 0;
}

struct record_opts {
	const char *out;
	const char *follow;
	const char *depth;
	const char *interval;
	const char *sample;
	const char *unwind;
	const char *clients;
	const char *pack;
	int reach;
};

/* HEAPTRAIL_* settings for the options (LD_PRELOAD is launch_prepare's). */
static int apply_opts(const struct record_opts *o, char *pattern, size_t plen)
{
	const char *out = o->out ? o->out : getenv("HEAPTRAIL_OUT");
	char cwd[PATH_MAX];
	uint64_t v;
	int n;

	if (!out || !*out)
		out = DEFAULT_OUT;
	if (out[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		snprintf(pattern, plen, "%s", out);
	else
		snprintf(pattern, plen, "%s/%s", cwd, out);
	if (launch_setenv("HEAPTRAIL_OUT", pattern) < 0)
		return -1;
	if (o->follow && launch_setenv("HEAPTRAIL_FOLLOW", o->follow) < 0)
		return -1;
	if (o->depth && launch_setenv("HEAPTRAIL_DEPTH", o->depth) < 0)
		return -1;
	if (o->interval && launch_setenv("HEAPTRAIL_INTERVAL_MS", o->interval) < 0)
		return -1;
	if (o->sample) {
		char num[32];

		if (cli_parse_size(o->sample, &v) < 0)
			return -1;
		n = snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
		if (n < 0 || launch_setenv("HEAPTRAIL_SAMPLE", num) < 0)
			return -1;
	}
	if (o->unwind && launch_setenv("HEAPTRAIL_UNWIND", o->unwind) < 0)
		return -1;
	if (o->clients && launch_setenv("HEAPTRAIL_CLIENTS", o->clients) < 0)
		return -1;
	if (o->pack && launch_setenv("HEAPTRAIL_PACK", o->pack) < 0)
		return -1;
	if (o->reach && launch_setenv("HEAPTRAIL_REACH", "exit") < 0)
		return -1;
	return 0;
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "follow-forks", required_argument, NULL, 'f' },
		{ "depth", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		{ "sample", required_argument, NULL, 's' },
		{ "unwind", required_argument, NULL, 'u' },
		{ "clients", required_argument, NULL, 'c' },
		{ "reach", no_argument, NULL, 'r' },
		{ "pack", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct record_opts o;
	char path[PATH_MAX], pattern[PATH_MAX + 64];
	char glob_pat[2 * PATH_MAX], cwd[PATH_MAX];
	struct seen before;
	uint64_t v;
	int c, x, rc, status, pack_after = PACK_NONE;

	memset(&o, 0, sizeof(o));
	optind = 0;
	opterr = 0;
	/* '+': options end at CMD, whose own options are its business */
	while ((c = getopt_long(argc, argv, "+:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!*optarg)
				return cli_usage("record", "-o wants a file name");
			o.out = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				return cli_usage("record", "--follow-forks is 0 or 1, not '%s'", optarg);
			o.follow = optarg;
			break;
		case 'd':
			if (cli_parse_int(optarg, 1, HTR_MAX_DEPTH, &x) < 0)
				return cli_usage("record", "--depth is a number of frames from 1 to %d, not '%s'",
						 HTR_MAX_DEPTH, optarg);
			o.depth = optarg;
			break;
		case 'i':
			if (cli_parse_int(optarg, 1, 60000, &x) < 0)
				return cli_usage("record", "--interval is in milliseconds, from 1 to 60000, not '%s'",
						 optarg);
			o.interval = optarg;
			break;
		case 's':
			if (cli_parse_size(optarg, &v) < 0 || v > (UINT64_C(1) << 40))
				return cli_usage("record", "--sample is a size like 4096, 64KiB or 1MiB (up to 1 TiB), not '%s'",
						 optarg);
			o.sample = optarg;
			break;
		case 'u':
			if (strcmp(optarg, "libunwind") && strcmp(optarg, "fp"))
				return cli_usage("record", "--unwind is libunwind or fp, not '%s'", optarg);
			o.unwind = optarg;
			break;
		case 'c':
			if (strcmp(optarg, "off") && strcmp(optarg, "sockets") &&
			    strcmp(optarg, "threads"))
				return cli_usage("record", "--clients is off, sockets or threads, not '%s'",
						 optarg);
			o.clients = optarg;
			break;
		case 'r':
			o.reach = 1;
			break;
		case 'p':
			if (!strcmp(optarg, "after") || !strcmp(optarg, "compact")) {
				/* full speed while it runs, packed once it has ended */
				o.pack = "0";
				pack_after = optarg[0] == 'a' ? PACK_AFTER : PACK_COMPACT;
				break;
			}
			if (strcmp(optarg, "auto") && strcmp(optarg, "1") && strcmp(optarg, "0"))
				return cli_usage("record", "--pack is auto, 1, 0, after or compact, "
						 "not '%s'", optarg);
			o.pack = optarg;
			pack_after = PACK_NONE;
			break;
		case 'h':
			help_verb("record", stdout);
			return 0;
		default:
			return cli_bad_option("record", c, argv);
		}
	}
	if (optind >= argc)
		return cli_usage("record", "which command? usage: heaptrail record [-o FILE] [OPTIONS] -- CMD [ARGS...]");

	rc = launch_prepare(argv[optind], path, sizeof(path));
	if (rc)
		return rc;
	if (apply_opts(&o, pattern, sizeof(pattern)) < 0) {
		cli_error("cannot set up the environment: %s", strerror(errno ? errno : ENOMEM));
		return CLI_USAGE;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	x = out_unwritable(pattern);
	if (x) {
		/* the command still runs, as it would without us; the shim stays quiet */
		fprintf(stderr, "heaptrail: cannot create '%s': %s: running the command untraced\n",
			pattern, strerror(x));
		if (launch_setenv("HEAPTRAIL_QUIET", "1") < 0 ||
		    launch_setenv("HEAPTRAIL_OUT", "/dev/null/unwritable") < 0)
			return CLI_USAGE;
		rc = launch_run(path, argv + optind, &status);
		return rc ? rc : launch_exit_code(status);
	}
	out_glob(pattern, glob_pat, sizeof(glob_pat));
	snapshot(glob_pat, &before);
	rc = launch_run(path, argv + optind, &status);
	tell_dumps(glob_pat, &before, cwd, pack_after);
	seen_free(&before);
	return rc ? rc : launch_exit_code(status);
}
