/* daemon_leak.c - a program that daemon()s: the parent ends inside daemon(), the child lives on
 *
 * usage: daemon_leak LEAKS OUT [nochdir] [noclose]
 * Leaks LEAKS blocks of 100 bytes at leak_before() (printed "leaked N"),
 * then calls daemon(nochdir, noclose): the parent ends there, with exit
 * status 0 (glibc's daemon() calls _exit(0) itself).  The child (the
 * daemon) leaks LEAKS more blocks at leak_in_daemon(), writes what it
 * finds to the file OUT (an absolute path): daemon()'s return, its working
 * directory, whether it leads a new session, where descriptors 0-2 go;
 * then its pid to OUT.pid, and exits with status 7.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[2000];

static __attribute__((noinline)) void *leak_before(void)
{
	return malloc(100);
}

static __attribute__((noinline)) void *leak_in_daemon(void)
{
	return malloc(100);
}

static void where(FILE *f, int fd)
{
	char link[64], target[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		fprintf(f, "fd %d closed\n", fd);
	else
		fprintf(f, "fd %d %s\n", fd,
			strncmp(target, "/dev/null", (size_t)n) == 0 && n == 9 ? "/dev/null" :
			"elsewhere");
}

int main(int argc, char **argv)
{
	int n, i, rc, nochdir = 0, noclose = 0;
	char cwd[PATH_MAX], pidfile[PATH_MAX + 8];
	FILE *f;

	if (argc < 3 || argv[2][0] != '/')
		return 2;
	n = atoi(argv[1]);
	for (i = 3; i < argc; i++) {
		nochdir |= !strcmp(argv[i], "nochdir");
		noclose |= !strcmp(argv[i], "noclose");
	}
	for (i = 0; i < n && i < 1000; i++)
		keep[i] = leak_before();
	printf("leaked %d\n", n);
	fflush(stdout);
	rc = daemon(nochdir, noclose);
	/* only the daemon comes here */
	for (i = 0; i < n && i < 1000; i++)
		keep[1000 + i] = leak_in_daemon();
	f = fopen(argv[2], "w");
	if (!f)
		return 3;
	fprintf(f, "daemon returned %d\n", rc);
	fprintf(f, "cwd %s\n", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
	fprintf(f, "session leader %d\n", getsid(0) == getpid());
	for (i = 0; i < 3; i++)
		where(f, i);
	fclose(f);
	snprintf(pidfile, sizeof(pidfile), "%s.pid", argv[2]);
	f = fopen(pidfile, "w");
	if (!f)
		return 3;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	exit(7);
}
