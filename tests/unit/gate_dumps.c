/* gate_dumps.c - writes a synthetic dump with a reachability scan for the gate's test */
#include <stdio.h>
#include <stdlib.h>

#include "dumpgen.h"

/*
 * The shim does not scan for reachability yet on every platform, so
 * tests/e2e/test_gate.py checks 'gate --max-lost' on this dump, whose
 * figures are known exactly:
 *
 *   stack 1: 2 blocks of 100 bytes, definitely lost
 *   stack 2: 1 block of 300 bytes, still reachable
 *   stack 3: 1 block of 50 bytes, indirectly lost
 *   stack 4: 1 block of 70 bytes, possibly lost (interior pointers only)
 *
 * leaked 620 bytes, lost (definitely + indirectly) 250 bytes.
 *
 * usage: gate_dumps OUT.htr [exit|exec|signal]   (how the process ended)
 */

int main(int argc, char **argv)
{
	static const char *const args[] = { "./server", NULL };
	const struct dg_process proc = {
		.pid = 4242, .ppid = 1, .start_mono_ns = 1000000000ull,
		.start_realtime_ns = 1700000000000000000ull, .page_size = 4096,
		.exe = "/nonexistent/server", .argv = args, .max_depth = 64,
	};
	const uint64_t ips[4] = { 0x401000, 0x402000, 0x403000, 0x404000 };
	const uint64_t ptrs[5] = { 0x10000, 0x10100, 0x20000, 0x30000, 0x40000 };
	const uint8_t cls[5] = { HTR_REACH_LOST, HTR_REACH_LOST, HTR_REACH_REACHABLE,
				 HTR_REACH_INDIRECT, HTR_REACH_POSSIBLY };
	const char *how = argc > 2 ? argv[2] : "exit";
	struct dumpgen *g;
	uint32_t s;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: gate_dumps OUT.htr [exit|exec|signal]\n");
		return 2;
	}
	g = dg_create(argv[1], 0);
	if (!g)
		return 1;
	dg_process(g, &proc);
	dg_chunk_begin(g, 4242, 10);
	for (s = 1; s <= 4; s++)
		dg_stack(g, s, 1, &ips[s - 1]);
	dg_alloc(g, 10, HTR_API_MALLOC, ptrs[0], 100, 8, 1);
	dg_alloc(g, 11, HTR_API_MALLOC, ptrs[1], 100, 8, 1);
	dg_alloc(g, 12, HTR_API_MALLOC, ptrs[2], 300, 4, 2);
	dg_alloc(g, 13, HTR_API_MALLOC, ptrs[3], 50, 6, 3);
	dg_alloc(g, 14, HTR_API_MALLOC, ptrs[4], 70, 2, 4);
	dg_chunk_end(g);
	dg_watermark(g, 20);
	dg_reach(g, 30, 0, 5, ptrs, cls);
	if (how[0] == 's')
		dg_end(g, 40, HTR_END_SIGNAL, 9, 5, 0);
	else
		dg_end(g, 40, how[0] == 'e' && how[2] == 'e' ? HTR_END_EXEC : HTR_END_EXIT,
		       0, 5, 0);
	return dg_close(g) == 0 ? 0 : 1;
}
