/* gate_leak.c - leaks the gate must catch: N blocks at one line, a strdup, a FILE; a peak */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves (tests/e2e/test_gate.py): 'gate' fails each limit these leaks
 * exceed and names the leaking function and line the program counted; a
 * suppression of that site makes it pass; a block leaked through a libc
 * function (strdup) or a FILE left open is the program's and is never
 * hidden by the built-in suppressions; the peak is the program's own.
 *
 *   gate_leak blocks N   N blocks of 1000 bytes at leak_block, and a 1 MiB
 *                        temporary buffer (the peak)
 *   gate_leak strdup     one strdup() at dup_leak, nothing else
 *   gate_leak fopen      a FILE opened at leak_file and never closed
 *   gate_leak none       nothing leaked (stdout is used all the same)
 *   gate_leak rawexit N  N blocks at leak_block, then the exit_group system
 *                        call straight away, as Go's runtime ends a program:
 *                        the C library's exit (and the shim's) never runs
 */

#define noinline __attribute__((noinline))

static noinline void leak_block(void)
{
	truth_sink = T_MALLOC(1000);
}

static noinline void peak_buffer(void)
{
	char *p = T_MALLOC(1 << 20);

	memset(p, 1, 1 << 20);
	T_FREE(p);
}

static noinline void dup_leak(const char *s)
{
	truth_sink = T_TRACK(strdup(s), strlen(s) + 1);
}

static noinline void leak_file(void)
{
	FILE *f = fopen("/dev/null", "w");	/* its FILE is what leaks */

	truth_fact("fopen_line", __LINE__ - 2);
	if (f)
		fprintf(f, "written, never closed\n");
	truth_sink = f;
	truth_set_exact(0, 0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "none";
	int i, n = argc > 2 ? atoi(argv[2]) : 1;

	printf("gate_leak %s\n", mode);
	if (!strcmp(mode, "blocks")) {
		peak_buffer();
		for (i = 0; i < n; i++)
			leak_block();
	} else if (!strcmp(mode, "strdup")) {
		dup_leak("a string the program forgot");
	} else if (!strcmp(mode, "fopen")) {
		leak_file();
	} else if (!strcmp(mode, "rawexit")) {
		for (i = 0; i < n; i++)
			leak_block();
		truth_write();
		fflush(stdout);
		syscall(SYS_exit_group, 0);
	}
	truth_write();
	return 0;
}
