/* keptfile.c - the /proc and /sys files the shim re-reads, kept open at a high descriptor */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

/*
 * The writer re-reads a few files every round or so (the clocksource, the
 * machine's CPU times, the process's RSS).  Opening one each time would
 * take the lowest free descriptor for a moment, the number a program
 * thread may be about to get from open() or dup(), as POSIX promises it
 * (review finding 28).  So each stays open, moved to a high number, and is
 * read with pread() from its start.  Its identity is checked before each
 * read: the program may have closed it (closefrom) and reused the number.
 */

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
	nf = fcntl(f, F_DUPFD_CLOEXEC, above > 3 ? above : HT_KEPT_FD_MIN);
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
	return k->fd = f;
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
