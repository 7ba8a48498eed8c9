/* gate_grow.c - live heap that grows steadily for a while, then exits */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "truth.h"

/*
 * Proves: 'gate --max-growth' fails a program whose live heap keeps
 * growing (64 KiB every 10 ms, never freed: about 6 MiB/s) and passes it
 * with a limit far above that rate.
 */

#define noinline __attribute__((noinline))

static noinline void grow(void)
{
	char *p = T_MALLOC(65536);

	memset(p, 1, 65536);
	truth_sink = p;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 60, i;
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	for (i = 0; i < steps; i++) {
		grow();
		nanosleep(&ts, NULL);
	}
	truth_write();
	return 0;
}
