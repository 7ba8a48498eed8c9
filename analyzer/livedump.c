/* livedump.c - opens a dump for analysis, also while its process still writes it */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "livedump.h"

int live_writer_running(const struct dump *d, const char *path)
{
	const struct dump_process *p = dump_process(d);
	struct stat want, st;
	char dir[64], fd[320];
	struct dirent *e;
	DIR *dp;
	int found = 0;

	if (!p || !p->pid || stat(path, &want) < 0)
		return 0;
	snprintf(dir, sizeof(dir), "/proc/%u/fd", p->pid);
	dp = opendir(dir);
	if (!dp)	/* gone, or not ours to look at: read it as finished */
		return 0;
	while (!found && (e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(fd, sizeof(fd), "%s/%s", dir, e->d_name);
		/* stat follows the link to the open file itself */
		if (stat(fd, &st) == 0 && st.st_dev == want.st_dev &&
		    st.st_ino == want.st_ino)
			found = 1;
	}
	closedir(dp);
	return found;
}

struct dump *live_open(const char *path, int *live)
{
	struct dump *d = cli_open_dump(path);

	*live = 0;
	if (!d)
		return NULL;
	if (live_writer_running(d, path)) {
		*live = 1;
		dump_set_follow(d, 1);
	}
	return d;
}

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

void live_follow_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: the sleep returns at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int live_follow_stopped(void)
{
	return stop_flag != 0;
}

int live_follow_sleep(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (!stop_flag && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return stop_flag ? -1 : 0;
}

/* 1 when 'path' is a dump with its first frame written, 0 when not yet, -1 when no dump. */
static int dump_ready(const char *path)
{
	char magic[8], err[256];
	struct dump *d;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	n = pread(fd, magic, sizeof(magic), 0);
	close(fd);
	if (n < (ssize_t)sizeof(magic))
		return n < 0 ? -1 : 0;
	if (memcmp(magic, HTR_FILE_MAGIC, sizeof(magic)))
		return -1;
	d = dump_open(path, err, sizeof(err));
	if (!d)
		return 0;	/* the writer has not finished its first frame */
	dump_close(d);
	return 1;
}

int live_wait_for_file(const char *path, uint64_t ns)
{
	int said = 0, r;

	while ((r = dump_ready(path)) == 0) {
		if (!said++)
			fprintf(stderr, "heaptrail: waiting for '%s' to be written\n", path);
		if (live_follow_sleep(ns) < 0)
			return -1;
	}
	return 0;	/* a file that is no dump is reported by the caller */
}

int live_follow(const char *path, uint64_t ns, int text,
		int (*pass)(void *arg, int *ended), void *arg)
{
	int rc = 0;

	live_follow_signals();
	if (live_wait_for_file(path, ns) < 0)
		return 0;
	for (;;) {
		int ended = 0;

		if (text && isatty(STDOUT_FILENO))
			printf("\033[H\033[2J");
		rc = pass(arg, &ended);
		if (rc || ended || live_follow_sleep(ns) < 0)
			break;
		if (text)
			printf("\n");
	}
	return rc;
}
