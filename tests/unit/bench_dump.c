/* bench_dump.c - events per second through dump_next() on a generated typical dump */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "dumpgen.h"

/*
 * A dump shaped like a server's: THREADS threads making small allocations
 * and freeing them a little later, 1000 distinct stacks of 4-12 frames,
 * per-thread chunks of ~1000 events, a watermark after every round of
 * chunks, 256 KiB frames.  Usage: bench_dump [events] [threads] [file]
 * (the file is kept when given, else a temporary one is removed).
 */

#define NSTACKS 1000
#define LIVE 512

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* CPU time: the figure should not depend on what else the machine runs */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct thr {
	uint64_t t, live[LIVE], next_ptr;
	int nlive;
};

static uint64_t generate(const char *path, uint64_t events, int threads)
{
	static const char *const argv[] = { "bench", NULL };
	struct dg_process p = { .pid = 1, .exe = "/bin/bench", .argv = argv,
				.page_size = 4096, .max_depth = 64 };
	const uint64_t seg[] = { 0x555555554000ull, 0x555555600000ull };
	struct thr *th = calloc((size_t)threads, sizeof *th);
	uint8_t defined[NSTACKS + 1] = { 0 };
	struct dumpgen *g = dg_create(path, 0);
	uint64_t written = 0;
	int k;

	if (!g || !th) {
		perror(path);
		exit(2);
	}
	dg_set_frame_max(g, 256 << 10);
	dg_process(g, &p);
	dg_module_load(g, 0, 1, 0x555555554000ull, "/bin/bench", NULL, 0, 1, seg);
	for (k = 0; k < threads; k++) {
		th[k].t = 1000 + (uint64_t)k;
		th[k].next_ptr = 0x555555600000ull + 0x10000000ull * (uint64_t)k;
	}
	while (written < events) {
		uint64_t wm = UINT64_MAX;

		for (k = 0; k < threads && written < events; k++) {
			struct thr *t = &th[k];
			int i;

			dg_chunk_begin(g, (uint32_t)(100 + k), t->t);
			for (i = 0; i < 1000 && written < events; i++) {
				t->t += 50 + rnd() % 200;
				if (t->nlive == LIVE || (t->nlive && rnd() % 2)) {
					int j = (int)(rnd() % (uint64_t)t->nlive);

					dg_free(g, t->t, HTR_API_FREE, t->live[j]);
					t->live[j] = t->live[--t->nlive];
				} else {
					uint32_t s = 1 + (uint32_t)(rnd() % NSTACKS);
					uint64_t size = 8 + rnd() % 120;

					if (!defined[s]) {
						uint64_t ips[12];
						size_t d = 4 + s % 9, f;

						for (f = 0; f < d; f++)
							ips[f] = 0x555555560000ull + ((s * 7919ull + f * 131ull) % 0x90000);
						dg_stack(g, s, d, ips);
						defined[s] = 1;
					}
					t->next_ptr += 16 + (size + 15) / 16 * 16;
					dg_alloc(g, t->t, HTR_API_MALLOC, t->next_ptr, size,
						 (16 - size % 16) % 16, s);
					t->live[t->nlive++] = t->next_ptr;
				}
				written++;
			}
			dg_chunk_end(g);
		}
		for (k = 0; k < threads; k++)
			if (th[k].t + 1 < wm)
				wm = th[k].t + 1;
		dg_watermark(g, wm);
	}
	dg_end(g, UINT64_MAX / 2, HTR_END_EXIT, 0, written, 0);
	if (dg_close(g)) {
		perror(path);
		exit(2);
	}
	free(th);
	return written;
}

int main(int argc, char **argv)
{
	uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 0) : 20000000;
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	char tmp[] = "/tmp/htr-bench-dump.XXXXXX";
	const char *path = argc > 3 ? argv[3] : tmp;
	struct dump_event ev;
	struct dump *d;
	char err[1024];
	double t0, t1, best = 0;
	uint64_t n = 0, heap = 0;
	int round;

	if (threads < 1)
		threads = 1;
	if (argc <= 3) {
		int fd = mkstemp(tmp);

		if (fd < 0) {
			perror("mkstemp");
			return 2;
		}
		close(fd);
	}
	t0 = now();
	events = generate(path, events, threads);
	fprintf(stderr, "generated %llu events in %.1f s of CPU\n",
		(unsigned long long)events, now() - t0);
	for (round = 0; round < 3; round++) {
		d = dump_open(path, err, sizeof err);
		if (!d) {
			fprintf(stderr, "%s\n", err);
			return 2;
		}
		n = heap = 0;
		t0 = now();
		while (dump_next(d, &ev) == 1) {
			n++;
			heap += ev.kind <= DUMP_FREE;
		}
		t1 = now();
		if (dump_error(d) || dump_warning(d)) {
			fprintf(stderr, "%s\n", dump_error(d) ? dump_error(d) : dump_warning(d));
			return 1;
		}
		dump_close(d);
		if ((double)heap / (t1 - t0) > best)
			best = (double)heap / (t1 - t0);
		fprintf(stderr, "read %llu events (%llu heap) in %.3f s of CPU\n",
			(unsigned long long)n, (unsigned long long)heap, t1 - t0);
	}
	if (argc <= 3)
		unlink(path);
	printf("dump_next: %.1f million heap events/s (%d threads, best of 3)\n",
	       best / 1e6, threads);
	return heap == events ? 0 : 1;
}
