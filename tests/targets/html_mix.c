/* html_mix.c - a program with something to show on every page of the HTML report */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'heaptrail html', 'flame' and 'pprof' show a program's known
 * sites with the right figures.  Single-threaded, so the truth's totals
 * and peak are exact.
 *
 *   leak_config      CONFIG_BLOCKS x CONFIG_SIZE bytes, never freed
 *   grow_history     one HISTORY_SIZE block every ROUND_MS for ROUNDS
 *                    rounds, never freed: grows steadily to the end
 *   serve/client_residue  CLIENTS clients (heaptrail.h), one every other
 *                    round; each keeps RESIDUE bytes at client_residue
 *                    after it disconnects, its 4096-byte session is freed
 *   peak_buffer      PEAK_BLOCKS x PEAK_SIZE bytes (below glibc's mmap
 *                    threshold) live together once, then freed: the peak
 *                    of live heap, the other live sites at that moment
 *                    being leak_config and what grow_history and the
 *                    clients kept so far
 *   make_temp        TEMPS allocations freed at once (temporaries)
 *   keep_pinned      a KEEP-byte block kept after each of PINS
 *                    PIN_TEMP-byte temporaries, which are freed: the
 *                    keepers pin the freed memory below them
 * Markers "start", "peak" (just before the peak buffers are freed), "end",
 * and MARK_NASTY, whose label must not break the page that shows it.
 */

#define noinline __attribute__((noinline))

#define CONFIG_BLOCKS 3
#define CONFIG_SIZE 10000
#define HISTORY_SIZE 2000
#define ROUNDS 40
#define ROUND_MS 15
#define CLIENTS 8
#define RESIDUE 1500
#define PEAK_BLOCKS 64
#define PEAK_SIZE 65536
#define TEMPS 1000
#define TEMP_SIZE 100
#define PINS 200
#define PIN_TEMP 16000
#define KEEP 64
#define MARK_NASTY "a<b & \"c\" </script><!--"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static noinline void leak_config(void)
{
	int i;

	for (i = 0; i < CONFIG_BLOCKS; i++) {
		char *p = T_MALLOC(CONFIG_SIZE);

		memset(p, 'c', CONFIG_SIZE);
		truth_sink = p;
	}
}

static noinline void grow_history(void)
{
	char *p = T_MALLOC(HISTORY_SIZE);

	memset(p, 'h', HISTORY_SIZE);
	truth_sink = p;
}

static noinline void client_residue(void)
{
	char *p = T_MALLOC(RESIDUE);

	memset(p, 'r', RESIDUE);
	truth_sink = p;
}

static noinline void serve(uint64_t id)
{
	char *session;

	heaptrail_client_begin(id, NULL);
	session = T_MALLOC(4096);
	memset(session, 's', 4096);
	client_residue();
	T_FREE(session);
	heaptrail_client_end(id);
}

static noinline void peak_buffer(void)
{
	static char *blocks[PEAK_BLOCKS];
	int i;

	for (i = 0; i < PEAK_BLOCKS; i++) {
		blocks[i] = T_MALLOC(PEAK_SIZE);
		memset(blocks[i], 'p', PEAK_SIZE);
	}
	heaptrail_mark("peak");
	for (i = 0; i < PEAK_BLOCKS; i++)
		T_FREE(blocks[i]);
}

static noinline void make_temp(void)
{
	int i;

	for (i = 0; i < TEMPS; i++) {
		char *p = T_MALLOC(TEMP_SIZE);

		p[0] = (char)i;
		T_FREE(p);
	}
}

static noinline void keep_pinned(void)
{
	static char *tmp[PINS];
	int i;

	for (i = 0; i < PINS; i++) {
		tmp[i] = T_MALLOC(PIN_TEMP);
		memset(tmp[i], 't', PIN_TEMP);
		truth_sink = T_MALLOC(KEEP);
	}
	for (i = 0; i < PINS; i++)
		T_FREE(tmp[i]);
}

int main(void)
{
	int r;
	uint64_t next_client = 1;

	heaptrail_mark("start");
	leak_config();
	make_temp();
	for (r = 0; r < ROUNDS; r++) {
		grow_history();
		if (r % 2 == 1 && next_client <= CLIENTS)
			serve(next_client++);
		if (r == ROUNDS / 2)
			peak_buffer();
		sleep_ms(ROUND_MS);
	}
	keep_pinned();
	/* past the clients' grace (1 s) is not needed: the process exits */
	heaptrail_mark("end");
	heaptrail_mark(MARK_NASTY);
	truth_fact("clients", CLIENTS);
	truth_fact("residue", RESIDUE);
	truth_fact("peak_buffer_bytes", (long long)PEAK_BLOCKS * PEAK_SIZE);
	truth_fact("temps", TEMPS);
	truth_write();
	return 0;
}
