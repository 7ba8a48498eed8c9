/* keptfile.c - the /proc and /sys files the shim reads: once, or again and again from a descriptor kept high */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

/*
 * The writer re-reads a few files every round or so (the clocksource, the
 * machine's CPU times, the process's RSS).  Opening one each time would
 * take the lowest free descriptor for a moment, the number a program
 * thread may be about to get from open() or dup(), as POSIX promises it
 * (review finding 28).  So each stays open, moved to a high number, and is
 * read with pread() from its start.  Like the dump's, these descriptors
 * survive the program's close(), close_range() and closefrom() (clients.c
 * asks ht_guarded_fd_in()): reopening one later, from the writer thread
 * while the program runs, would take the lowest free number for a moment
 * (review finding L2).  Its identity is still checked before each read: the
 * program may have dup2()ed over it.
 */

#define KEPT_MAX 6
static struct ht_kept_file *kept[KEPT_MAX];

static void remember(struct ht_kept_file *k)
{
	int i;

	for (i = 0; i < KEPT_MAX; i++)
		if (kept[i] == k)
			return;
	for (i = 0; i < KEPT_MAX; i++)
		if (!kept[i]) {
			kept[i] = k;
			return;
		}
}

/* 900, or below a low RLIMIT_NOFILE, where F_DUPFD at 900 would fail (review L3). */
static int kept_floor(void)
{
	struct rlimit rl;
	int want = HT_KEPT_FD_MIN;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)want + 128 > rl.rlim_cur)
		want = rl.rlim_cur > 256 ? (int)rl.rlim_cur - 128 : 10;
	return want;
}

int ht_guarded_fd_in(unsigned first, unsigned last)
{
	int best = -1, w = writer_fd(), i;

	if (ht_in_shim)
		return -1;
	if (w >= 0 && (unsigned)w >= first && (unsigned)w <= last)
		best = w;
	for (i = 0; i < KEPT_MAX; i++) {
		int f = kept[i] ? kept[i]->fd : -1;

		if (f >= 0 && (unsigned)f >= first && (unsigned)f <= last && (best < 0 || f < best))
			best = f;
	}
	return best;
}

static int ours(const struct ht_kept_file *k)
{
	struct stat st;

	return k->fd >= 0 && fstat(k->fd, &st) == 0 && st.st_dev == k->dev &&
	       st.st_ino == k->ino;
}

int kept_file_open(struct ht_kept_file *k, int above)
{
	struct stat st;
	int f, nf;

	if (ours(k))
		close(k->fd);
	k->fd = -1;
	f = open(k->path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	nf = fcntl(f, F_DUPFD_CLOEXEC, above > 3 ? above : kept_floor());
	if (nf >= 0) {
		close(f);
		f = nf;
	}
	if (fstat(f, &st) != 0) {
		close(f);
		return -1;
	}
	k->dev = st.st_dev;
	k->ino = st.st_ino;
	remember(k);
	return k->fd = f;
}

ssize_t ht_read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 || !cap) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

ssize_t kept_file_pread(struct ht_kept_file *k, char *buf, size_t n, off_t off)
{
	if (!ours(k) && kept_file_open(k, k->fd) < 0)
		return -1;
	return pread(k->fd, buf, n, off);
}

ssize_t kept_file_read(struct ht_kept_file *k, char *buf, size_t cap)
{
	ssize_t n;

	if (!cap)
		return -1;
	buf[0] = '\0';
	if (!ours(k) && kept_file_open(k, k->fd) < 0)
		return -1;
	n = pread(k->fd, buf, cap - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}
