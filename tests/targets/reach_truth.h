/* reach_truth.h - what a reach_* target knows of its blocks' reachability */
#ifndef REACH_TRUTH_H
#define REACH_TRUTH_H

/*
 * tests/lib/truth.h keeps every tracked block's address in a table, which
 * would make every block reachable; the reach_* targets keep no address
 * anywhere but where the test wants one.  Each allocation the test judges
 * is made with R_ALLOC on one line, so the line of the call is the line the
 * expectation names; reach_write() appends one JSON line to $TRUTH_OUT:
 *
 *   {"image":"reach_basic","sites":[{"function":"make_lost","line":40,
 *     "class":"lost","bytes":2000,"blocks":1}, ...]}
 *
 * Classes are memcheck's: "reachable", "possibly", "indirect", "lost".
 * Blocks are calloc'd so that no stale pointer left in reused memory can
 * reach anything.  reach_scrub() overwrites the stack below the caller, where
 * dead frames may still hold copies of pointers the program dropped.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define R_NOINLINE __attribute__((noinline))
#define R_UNUSED __attribute__((unused))
#define R_MAX_SITES 64

struct r_site {
	const char *function, *cls;
	int line;
	unsigned long bytes, blocks;
};

static struct r_site r_sites[R_MAX_SITES];
static int r_nsites;

/* Count a block of 'size' bytes expected in class 'cls', made at function:line. */
R_UNUSED static void r_expect(const char *function, int line, const char *cls, size_t size)
{
	int i;

	for (i = 0; i < r_nsites; i++) {
		if (r_sites[i].line == line && !strcmp(r_sites[i].function, function) &&
		    !strcmp(r_sites[i].cls, cls)) {
			r_sites[i].bytes += size;
			r_sites[i].blocks++;
			return;
		}
	}
	if (r_nsites == R_MAX_SITES)
		abort();
	r_sites[r_nsites].function = function;
	r_sites[r_nsites].cls = cls;
	r_sites[r_nsites].line = line;
	r_sites[r_nsites].bytes = size;
	r_sites[r_nsites].blocks = 1;
	r_nsites++;
}

/* Expands on one line: __LINE__ is the line of the calloc. */
#define R_ALLOC(n, cls) (r_expect(__func__, __LINE__, (cls), (n)), calloc(1, (n)))

R_UNUSED static R_NOINLINE void reach_scrub(void)
{
	volatile char pad[64 << 10];

	memset((char *)pad, 0, sizeof(pad));
	__asm__ volatile("" ::"r"(pad) : "memory");
}

/* The JSON line, with 'extra' (",\"key\":value..." or "") before its end. */
R_UNUSED static void reach_write_extra(const char *image, const char *extra)
{
	static char buf[1 << 14];
	const char *path = getenv("TRUTH_OUT");
	size_t len = 0;
	int i, fd;

	if (!path)
		return;
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "{\"image\":\"%s\",\"sites\":[", image);
	for (i = 0; i < r_nsites; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					"%s{\"function\":\"%s\",\"line\":%d,\"class\":\"%s\","
					"\"bytes\":%lu,\"blocks\":%lu}", i ? "," : "",
					r_sites[i].function, r_sites[i].line, r_sites[i].cls,
					r_sites[i].bytes, r_sites[i].blocks);
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "]%s}\n", extra);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, buf, len) < 0)
			abort();
		close(fd);
	}
}

R_UNUSED static void reach_write(const char *image)
{
	reach_write_extra(image, "");
}

#endif
