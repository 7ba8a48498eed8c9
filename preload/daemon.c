/* daemon.c - daemon(3), whose parent must end through the shim's _exit */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "shim.h"

/*
 * glibc's daemon() forks and ends the parent with its internal _exit(0),
 * which we do not see: the parent's dump had no end record and lacked the
 * writer's last round.  This one does what glibc 2.36's does, step for
 * step, with the same results and error returns, but the parent leaves
 * through our _exit() (end record "exit status 0"):
 *   fork: -1 is returned as is (errno from fork); the parent _exit(0)s;
 *   the child: setsid, -1 returned when it fails; chdir("/") unless
 *   nochdir (its failure ignored); unless noclose, /dev/null opened
 *   read-write, and when it is the character device 1:3, dup2'd onto 0, 1
 *   and 2 and closed when above 2; when it is something else, closed and
 *   -1 with ENODEV; when it cannot be opened or fstat'ed, -1 with the
 *   errno of that failure.
 * Like glibc's, the open and the closes on the error paths are not
 * cancellation points (raw system calls; the error-path close leaves
 * errno alone).  dup2 and close go through the shim's own wrappers, which
 * keep the program off the dump's descriptor.
 */

static void close_quietly(int fd)
{
	int saved = errno;

	syscall(SYS_close, fd);
	errno = saved;
}

HT_EXPORT int daemon(int nochdir, int noclose)
{
	struct stat st;
	int fd;

	switch (fork()) {
	case -1:
		return -1;
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() == -1)
		return -1;
	if (!nochdir && chdir("/") != 0) {
		/* ignored, as glibc does */
	}
	if (noclose)
		return 0;
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR, 0);
	if (fd == -1 || fstat(fd, &st) != 0) {
		close_quietly(fd);
		return -1;
	}
	if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
		close_quietly(fd);
		errno = ENODEV;
		return -1;
	}
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > 2)
		close(fd);
	return 0;
}
