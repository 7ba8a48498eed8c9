/* gen_corpus.c - writes the dump reader's fuzz seed corpus: valid dumps and mutants */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dumpgen.h"

/*
 * Usage: gen_corpus DIR.  Deterministic (fixed seeds), a few hundred files:
 *
 *   valid-<k>-n<N>.htr   well-formed dumps of N events using every record
 *   trunc-*              a valid dump cut at frame edges and random bytes
 *   flip-*               random bits flipped anywhere in the file
 *   hdr-*                frame headers with wrong sizes (check recomputed,
 *                        so the reader has to catch them by other means),
 *                        bad magic, bad check
 *   rec-*                bytes flipped in the records before compression:
 *                        valid zstd around corrupt records
 *   raw-*                mode 0x01 inputs of fuzz_dump.c (raw frame
 *                        payloads the harness compresses), valid and mutated
 */

static const char *outdir;
static int nfiles;
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void die(const char *what)
{
	fprintf(stderr, "gen_corpus: %s: %s\n", what, strerror(errno));
	exit(2);
}

static const char *opath(const char *fmt, int a, int b)
{
	static char buf[1024];
	char name[256];

	snprintf(name, sizeof name, fmt, a, b);
	snprintf(buf, sizeof buf, "%s/%s", outdir, name);
	return buf;
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f))
		die(path);
	nfiles++;
}

static uint8_t *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *p;

	if (!f || fstat(fileno(f), &st))
		die(path);
	p = malloc((size_t)st.st_size + 1);
	if (!p || fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		die(path);
	fclose(f);
	*n = (size_t)st.st_size;
	return p;
}

/* ---- hooks ---- */

struct capture {		/* raw frames, for mode 0x01 seeds */
	uint8_t *p;
	size_t len, cap;
};

static void capture_raw(void *ctx, uint8_t *raw, size_t len)
{
	struct capture *c = ctx;

	if (c->len + len + 2 > c->cap) {
		c->cap = (c->len + len + 2) * 2;
		c->p = realloc(c->p, c->cap);
		if (!c->p)
			die("realloc");
	}
	c->p[c->len++] = (uint8_t)(len & 0xff);
	c->p[c->len++] = (uint8_t)(len >> 8);
	memcpy(c->p + c->len, raw, len);
	c->len += len;
}

static void flip_raw(void *ctx, uint8_t *raw, size_t len)
{
	int i, n = 1 + (int)(rnd() % 3);

	(void)ctx;
	if (!len || rnd() % 2)
		return;
	for (i = 0; i < n; i++)
		raw[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
}

struct hdr_mut {
	int frame, what, n;
};

static void mutate_header(void *ctx, struct htr_frame_header *h)
{
	struct hdr_mut *m = ctx;

	if (m->n++ != m->frame)
		return;
	switch (m->what) {
	case 0:
		h->check ^= 0x100;
		break;
	case 1:
		h->magic ^= 1;
		h->check = htr_frame_check(h);
		break;
	case 2:
		h->compressed_size += 1 + (uint32_t)(rnd() % 64);
		h->check = htr_frame_check(h);
		break;
	case 3:
		h->compressed_size = h->compressed_size > 8 ? h->compressed_size / 2 : 1;
		h->check = htr_frame_check(h);
		break;
	case 4:
		h->raw_size = (uint32_t)rnd();
		h->check = htr_frame_check(h);
		break;
	case 5:
		h->raw_size = h->raw_size ? h->raw_size - 1 : 1;
		h->check = htr_frame_check(h);
		break;
	case 6:
		h->compressed_size = 0xffffffffu;
		h->check = htr_frame_check(h);
		break;
	}
}

/* ---- valid dumps ---- */

/*
 * Writes one well-formed dump of variant k; returns the number of events a
 * reader delivers.  Frames are small so that every dump has several.
 */
static unsigned long build(const char *path, int k, struct capture *cap,
			   struct hdr_mut *hm, int flip)
{
	static const char *const argv[] = { "./t", "-x", NULL };
	struct dg_process p = { .pid = 77, .ppid = 1, .page_size = 4096,
				.exe = "/t", .argv = argv, .max_depth = 32 };
	const uint64_t seg[] = { 0x400000, 0x401000, 0x600000, 0x602000 };
	const uint64_t seg2[] = { 0x7f0000000000ull, 0x7f0000010000ull };
	const uint8_t bid[20] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct dumpgen *g = dg_create(path, 0);
	unsigned long n = 0;
	int threads = 1 + k % 4, round, t, i;
	uint64_t now = 0, live[4][16];
	int nlive[4] = { 0 };
	uint32_t nstacks = 0;

	if (!g)
		die(path);
	if (cap)
		dg_set_raw_hook(g, capture_raw, cap);
	if (flip)
		dg_set_raw_hook(g, flip_raw, NULL);
	if (hm)
		dg_set_header_hook(g, mutate_header, hm);
	dg_set_frame_max(g, 200 + (size_t)(k % 3) * 150);
	dg_process(g, &p);
	dg_module_load(g, 0, 1, 0x400000, "/t", bid, sizeof bid, 2, seg);
	n++;
	if (k % 2) {
		dg_module_load(g, 1, 2, 0x7f0000000000ull, "/lib/libx.so", bid, 20, 1, seg2);
		n++;
	}
	for (round = 0; round < 6 + k % 5; round++) {
		for (t = 0; t < threads; t++) {
			uint64_t tt = now + (uint64_t)t;

			dg_chunk_begin(g, (uint32_t)(500 + t), tt);
			if (round == 0) {
				dg_thread_start(g, tt, 1);
				dg_thread_name(g, tt, "worker");
				n += 2;
			}
			if (round == 1 && t == 0) {
				dg_client_begin(g, tt, 42 + (uint64_t)k, "peer");
				dg_client_set(g, tt, 42 + (uint64_t)k);
				dg_pool_create(g, tt, 3, "pool");
				n += 2;
			}
			for (i = 0; i < 6; i++) {
				uint64_t et = tt + (uint64_t)i * 8;
				uint64_t r = rnd() % 10;

				if (r < 4 || !nlive[t]) {
					uint64_t ptr = 0x10000 * (uint64_t)(t + 1) + (rnd() % 256) * 32;
					uint32_t s = 0;

					if (nlive[t] == 16) {
						dg_free(g, et, HTR_API_FREE, live[t][--nlive[t]]);
						n++;
						continue;
					}
					if (rnd() % 3 && nstacks < 40) {
						uint64_t ips[6];
						size_t d = 1 + rnd() % 6, j;

						for (j = 0; j < d; j++)
							ips[j] = (j % 2 ? 0x7f0000000100ull : 0x400100) + rnd() % 0x800;
						s = ++nstacks;
						dg_stack(g, s, d, ips);
					} else if (nstacks) {
						s = 1 + (uint32_t)(rnd() % nstacks);
					}
					dg_alloc(g, et, 1 + (unsigned)(rnd() % 11), ptr, rnd() % 300, rnd() % 16, s);
					live[t][nlive[t]++] = ptr;
				} else if (r < 7) {
					dg_free(g, et, HTR_API_FREE + (unsigned)(rnd() % 3), live[t][--nlive[t]]);
				} else if (r < 9) {
					uint64_t np = live[t][nlive[t] - 1] + 64;

					dg_realloc(g, et, et + 3, HTR_API_REALLOC, live[t][nlive[t] - 1],
						   np, rnd() % 1000, 0, 0);
					live[t][nlive[t] - 1] = np;
					n++;
				} else {
					dg_pool_alloc(g, et, 3, 0x900000 + (uint64_t)i * 64, 64, 0);
				}
				n++;
			}
			dg_chunk_end(g);
		}
		now += 64;
		if (round % 2 == 0)
			dg_watermark(g, now);
		if (round == 2) {
			dg_sample(g, now, (const uint64_t[7]){ 8192, 4096, 0, 3000, 1096, 100, 65536 });
			dg_mark(g, now, "checkpoint");
			n += 2;
		}
		if (round == 3 && k % 2) {
			dg_module_unload(g, now, 2);
			n++;
		}
	}
	dg_lost(g, now, 3, HTR_LOST_REENTRANT);
	{
		const uint64_t ptrs[] = { 0x10000, 0x10040, 0x20000 };
		const uint8_t cls[] = { 0, 3, 2 };

		dg_reach(g, now, 0, 3, ptrs, cls);
	}
	dg_end(g, now + 1, HTR_END_EXIT, 0, 100, 3);
	n += 3;
	if (dg_close(g))
		die(path);
	nfiles++;
	return n;
}

int main(int argc, char **argv)
{
	int k, i;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0777) && errno != EEXIST)
		die(outdir);
	for (k = 0; k < 8; k++) {
		struct capture cap = { 0 };
		char vname[64];
		const char *vp;
		unsigned long n;
		uint8_t *buf, *mut;
		size_t size;

		rng = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
		snprintf(vname, sizeof vname, "valid-%d-n%%d.htr", k);
		/* the event count is known only after writing: write, then rename */
		{
			char tmp[1024];

			snprintf(tmp, sizeof tmp, "%s", opath("tmp-%d.htr", k, 0));
			n = build(tmp, k, &cap, NULL, 0);
			vp = opath(vname, (int)n, 0);
			if (rename(tmp, vp))
				die(vp);
		}
		buf = read_file(vp, &size);
		mut = malloc(size + 1);
		if (!mut)
			die("malloc");

		/* truncations: random cuts, and the file header's edges */
		for (i = 0; i < 16; i++)
			write_file(opath("trunc-%d-%d.htr", k, i), buf,
				   i == 0 ? 64 : i == 1 ? 80 : (size_t)(rnd() % size));
		/* bit flips anywhere */
		for (i = 0; i < 12; i++) {
			int j, nf = 1 + (int)(rnd() % 4);

			memcpy(mut, buf, size);
			for (j = 0; j < nf; j++)
				mut[rnd() % size] ^= (uint8_t)(1u << (rnd() % 8));
			write_file(opath("flip-%d-%d.htr", k, i), mut, size);
		}
		/* frame header mutations, on the first, second and a later frame */
		for (i = 0; i < 7 * 3; i++) {
			struct hdr_mut hm = { i / 7 == 2 ? 3 + k % 3 : i / 7, i % 7, 0 };

			rng += (uint64_t)i;
			build(opath("hdr-%d-%d.htr", k, i), k, NULL, &hm, 0);
		}
		/* record mutations inside well-formed zstd frames */
		for (i = 0; i < 12; i++) {
			rng = 0x51ed270b27ull * (uint64_t)(k * 100 + i + 1);
			build(opath("rec-%d-%d.htr", k, i), k, NULL, NULL, 1);
		}
		/* mode 0x01 seeds: the raw frames, intact and mutated */
		mut = realloc(mut, cap.len + 1);
		if (!mut)
			die("realloc");
		mut[0] = 0x01;
		memcpy(mut + 1, cap.p, cap.len);
		write_file(opath("raw-%d-%d.bin", k, 0), mut, cap.len + 1);
		for (i = 1; i < 8; i++) {
			int j;

			mut[0] = 0x01;
			memcpy(mut + 1, cap.p, cap.len);
			for (j = 0; j < 3; j++)
				mut[1 + 2 + rnd() % (cap.len - 2)] ^= (uint8_t)(1u << (rnd() % 8));
			write_file(opath("raw-%d-%d.bin", k, i), mut, cap.len + 1);
		}
		free(cap.p);
		free(buf);
		free(mut);
	}
	/* a few odd ones */
	write_file(opath("empty-%d%d", 0, 0), (const uint8_t *)"", 0);
	write_file(opath("text-%d%d", 0, 0), (const uint8_t *)"hello, world\n", 13);
	write_file(opath("magic-only-%d%d", 0, 0), (const uint8_t *)HTR_FILE_MAGIC, 8);
	printf("gen_corpus: %d files in %s\n", nfiles, outdir);
	return 0;
}
