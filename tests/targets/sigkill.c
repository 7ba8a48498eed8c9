/* sigkill.c - leaks in three phases, then kills itself with SIGKILL */
#include <signal.h>
#include <time.h>

#include "truth.h"

/*
 * Proves: a process killed by SIGKILL (no exit handler runs) leaves a dump
 * readable up to its last complete frame: everything it did at least one
 * flush interval (HEAPTRAIL_INTERVAL_MS, default 100 ms) before it died is
 * in the report, which warns that the dump has no end record.  The phases
 * are separated by 300 ms, so the dump has several frames.  The truth line
 * of each phase is appended; the last one holds the final state.
 */

#define noinline __attribute__((noinline))

static noinline void leak_phase1(void) { truth_sink = T_MALLOC(10000); }
static noinline void leak_phase2(void) { truth_sink = T_MALLOC(20000); }
static noinline void leak_phase3(void) { truth_sink = T_MALLOC(30000); }

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(void)
{
	leak_phase1();
	truth_write();
	pause_ms(300);
	leak_phase2();
	truth_write();
	pause_ms(300);
	leak_phase3();
	truth_write();
	pause_ms(300);
	raise(SIGKILL);
	return 0;
}
