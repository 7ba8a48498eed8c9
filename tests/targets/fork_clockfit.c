/* fork_clockfit.c - forks while the shim's writer is halfway through its first clock fit */
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "truth.h"

/*
 * Run with HEAPTRAIL__CLOCK_STALL_MS=N (N well above 50): the writer stops
 * in the middle of its first clock update, 2.5 ms after it starts, for N
 * ms, as a writer preempted there would.  50 ms in, this program forks;
 * the child leaks 'child_blocks' blocks of 'child_block_bytes' at
 * leak_in_child and exits.  Every event reads the clock: a child that
 * waited for an update nobody will finish would never exit.  The parent
 * prints the child's exit status.
 */

#define CHILD_BLOCKS 100
#define CHILD_BYTES 1000

static __attribute__((noinline)) void leak_in_child(void)
{
	int i;

	for (i = 0; i < CHILD_BLOCKS; i++)
		truth_sink = T_MALLOC(CHILD_BYTES);
}

int main(void)
{
	struct timespec ts = { 0, 50 * 1000000L };
	int status = 0;
	pid_t pid;

	nanosleep(&ts, NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		leak_in_child();
		truth_write();
		return 0;
	}
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	printf("child_status %d\nchild_blocks %d\nchild_block_bytes %d\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1, CHILD_BLOCKS, CHILD_BYTES);
	return 0;
}
