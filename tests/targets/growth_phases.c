/* growth_phases.c - three phases between markers, with the program's own figures at each */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'snapshot --at MARKER' gives each site's live bytes and blocks at
 * that marker exactly as the program counted them; '--between phase1
 * phase2' gives per site the bytes allocated after phase1 and still live at
 * phase2 (the program keeps that figure itself, facts between_*); 'peak'
 * and repeated markers ('tick#2') resolve; a dump read while the program
 * still runs gives the figures up to the moment it was read.
 *
 * Truth lines: one after each of phase1, phase2 and phase3 (the program's
 * live bytes per site at that marker).  With READY_FILE and GO_FILE set,
 * the program creates READY_FILE after phase2 (and the marker tick#2) and
 * waits, idle, until GO_FILE exists: a test analyses the dump meanwhile,
 * and may send the marker signal (kill -USR2), which marks "signal".
 */

#define noinline __attribute__((noinline))

#define NA 100
#define NB 80
#define NC 30

/* The program's own record of when each block was allocated. */
struct blk {
	void *p;
	size_t size;
	int phase;		/* 0, 1 (after phase1), 2 (after phase2) */
};

static struct blk a[NA + 20], b[NB], c[NC];
static int na, nb, nc;

static noinline void *alloc_a(size_t n)
{
	return T_MALLOC(n);
}

static noinline void *alloc_b(size_t n)
{
	return T_MALLOC(n);
}

static noinline void *alloc_c(size_t n)
{
	return T_CALLOC(1, n);
}

static void add(struct blk *v, int *n, void *p, size_t size, int phase)
{
	v[*n].p = p;
	v[*n].size = size;
	v[*n].phase = phase;
	(*n)++;
}

static void drop(struct blk *v)
{
	if (v->p) {
		T_FREE(v->p);
		v->p = NULL;
	}
}

/* Bytes and blocks of phase 'phase' still live in v. */
static long long live_of(const struct blk *v, int n, int phase, long long *blocks)
{
	long long bytes = 0;
	int i;

	*blocks = 0;
	for (i = 0; i < n; i++) {
		if (v[i].p && v[i].phase == phase) {
			bytes += (long long)v[i].size;
			(*blocks)++;
		}
	}
	return bytes;
}

static void wait_for(const char *path)
{
	struct timespec pause = { 0, 2000000 };

	/* the marker signal interrupts the sleep: just go round again */
	while (access(path, F_OK) != 0)
		nanosleep(&pause, NULL);
}

int main(void)
{
	const char *ready = getenv("READY_FILE");
	const char *go = getenv("GO_FILE");
	long long bytes, blocks;
	int i, fd;

	/* phase 0: a and b */
	for (i = 0; i < NA; i++)
		add(a, &na, alloc_a(100 + (size_t)i), 100 + (size_t)i, 0);
	for (i = 0; i < NB / 2; i++)
		add(b, &nb, alloc_b(1000), 1000, 0);
	for (i = 0; i < NA; i += 2)
		drop(&a[i]);
	heaptrail_mark("tick");
	heaptrail_mark("phase1");
	truth_write();

	/* phase 1: c, more b, some old b and some new c freed */
	for (i = 0; i < NC; i++)
		add(c, &nc, alloc_c(2000 + (size_t)i), 2000 + (size_t)i, 1);
	for (i = 0; i < NB / 2; i++)
		add(b, &nb, alloc_b(500), 500, 1);
	for (i = 0; i < 10; i++)
		drop(&b[i]);
	for (i = 0; i < 5; i++)
		drop(&c[i * 3]);
	drop(&b[NB / 2 + 1]);
	heaptrail_mark("phase2");
	bytes = live_of(a, na, 1, &blocks);
	truth_fact("between_a_bytes", bytes);
	truth_fact("between_a_blocks", blocks);
	bytes = live_of(b, nb, 1, &blocks);
	truth_fact("between_b_bytes", bytes);
	truth_fact("between_b_blocks", blocks);
	bytes = live_of(c, nc, 1, &blocks);
	truth_fact("between_c_bytes", bytes);
	truth_fact("between_c_blocks", blocks);
	truth_write();
	heaptrail_mark("tick");

	if (ready && go) {
		fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			close(fd);
		wait_for(go);
	}

	/* phase 2: c goes away, a gets more */
	for (i = 0; i < nc; i++)
		drop(&c[i]);
	for (i = 0; i < 20; i++)
		add(a, &na, alloc_a(300), 300, 2);
	heaptrail_mark("phase3");
	truth_write();
	return 0;
}
