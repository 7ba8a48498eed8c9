/* exec_child.c - a program started by exec from a recorded process; leaks on its own */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves (with forker): an exec'd image is recorded into its own dump,
 * which holds this program's events only, symbolized against this binary.
 */

static __attribute__((noinline)) void leak_after_exec(int n)
{
	int i;

	for (i = 0; i < n; i++)
		truth_sink = T_MALLOC(5005);
}

int main(int argc, char **argv)
{
	leak_after_exec(argc > 1 && strcmp(argv[1], "from-forker") == 0 ? 2 : 1);
	truth_write();
	return 0;
}
