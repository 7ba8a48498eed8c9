/* writer_lowfd.c - the lowest free descriptor stays the program's while the shim runs */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/*
 * Proves (test_writer.py, review finding 28): POSIX gives open() and dup()
 * the lowest free descriptor, and programs count on it (a daemon reopening
 * 0, 1 and 2).  While the program runs, the shim's writer thread must not
 * take low numbers, not even for a moment (reading /proc files for its
 * samples).
 *
 *   writer_lowfd MILLISECONDS [closefrom]
 *
 * With "closefrom", first closes every descriptor from 3 up, as daemons do
 * (review finding L2: the files the writer keeps open must survive it, not
 * be reopened later at a low number).
 * For that long, dup(2) again and again and check that it returns the
 * lowest number that was free at the start.  Prints "checks N" and
 * "misses M" (dups that returned another number).
 */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	unsigned long checks = 0, misses = 0;
	double end;
	int lowest;

	if (argc < 2) {
		fprintf(stderr, "usage: writer_lowfd MILLISECONDS [closefrom]\n");
		return 2;
	}
	if (argc > 2)
		closefrom(3);
	end = now_ms() + atof(argv[1]);
	lowest = dup(2);
	if (lowest < 0)
		return 1;
	close(lowest);
	while (now_ms() < end) {
		int f = dup(2);

		checks++;
		if (f != lowest)
			misses++;
		if (f >= 0)
			close(f);
	}
	printf("checks %lu\nmisses %lu\n", checks, misses);
	return 0;
}
