/* libhugector.c - a library whose constructor asks for SIZE_MAX bytes, perhaps before the shim is ready */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Proves (review finding S2): preloaded after the shim, this constructor
 * may run before the shim's own; a thread's countdown then starts at 0 and
 * a request of 2^63 bytes or more once counted as a negative size, passed
 * the countdown and called the real malloc the shim had not looked up yet
 * (a crash).  The request must fail cleanly and the next one succeed.
 */

static void *volatile sink;

__attribute__((constructor)) static void ask_for_everything(void)
{
	volatile size_t all = SIZE_MAX;

	sink = malloc(all);
	if (sink)
		_exit(3);
	sink = calloc(all / 2 + 2, 2);
	if (sink)
		_exit(4);
	sink = malloc(16);
	if (!sink)
		_exit(5);
	free(sink);
}
