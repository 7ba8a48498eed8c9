/* report_mix.c - temporaries, mismatched frees, an unknown free, a moving peak, exit codes */
/* test-ldflags: -lstdc++ */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves ('heaptrail report', tests/e2e/test_report.py):
 *  - temporaries: 50 blocks freed right after they were made count 50 at
 *    their site; blocks with another allocation or a free in between do not;
 *  - mismatches: new then free, new[] then delete, malloc then delete[] each
 *    count one at the allocating site, and the blocks are freed (no leak);
 *  - a free of a block the shim never saw (from __libc_malloc) is an unknown
 *    free, not an error;
 *  - peak per site: two blocks live together make the peak; a block made
 *    after they were freed is the leak but has nothing at the peak;
 *  - exit status 3 comes back through 'record'; mode "signal" dies of
 *    SIGTERM (record exits 143); mode "wait FILE" writes FILE and waits for
 *    a signal (forwarding through 'record').
 *
 * The operators are called by their mangled names from C, so that no C++
 * compiler warns about the mismatches made on purpose.
 */

#define noinline __attribute__((noinline))

void *_Znwm(size_t n);		/* operator new(size_t) */
void *_Znam(size_t n);		/* operator new[](size_t) */
void _ZdlPv(void *p);		/* operator delete(void *) */
void _ZdaPv(void *p);		/* operator delete[](void *) */
void *__libc_malloc(size_t n);	/* glibc's own entry: not interposed */

#define TEMPORARIES 50

static noinline void make_temps(void)
{
	int i;

	for (i = 0; i < TEMPORARIES; i++) {
		char *p = T_MALLOC(40);

		p[0] = 1;
		T_FREE(p);
	}
}

static noinline void not_temps(void)
{
	int i;

	for (i = 0; i < 20; i++) {
		char *a = T_MALLOC(16);
		char *b = T_MALLOC(16);

		truth_sink = a;
		truth_sink = b;
		T_FREE(a);	/* b came between: not temporary */
		T_FREE(b);	/* a free came between: not temporary */
	}
}

static noinline void mismatch_new_free(void)
{
	void *p = T_TRACK(_Znwm(24), 24);

	truth_untrack(p);
	free(p);
}

static noinline void mismatch_newarr_delete(void)
{
	void *p = T_TRACK(_Znam(48), 48);

	truth_untrack(p);
	_ZdlPv(p);
}

static noinline void mismatch_malloc_deletearr(void)
{
	void *p = T_MALLOC(8);

	truth_untrack(p);
	_ZdaPv(p);
}

static noinline void matched_new_delete(void)
{
	void *p = T_TRACK(_Znwm(32), 32);
	void *q = T_TRACK(_Znam(64), 64);

	truth_untrack(p);
	_ZdlPv(p);
	truth_untrack(q);
	_ZdaPv(q);
}

static noinline void unknown_free(void)
{
	void *p = __libc_malloc(64);

	free(p);
}

static noinline void *peak_a(void)
{
	return T_MALLOC(300000);
}

static noinline void *peak_b(void)
{
	return T_MALLOC(200000);
}

static noinline void leak_after_peak(void)
{
	truth_sink = T_MALLOC(100000);
}

static void wait_mode(const char *ready)
{
	FILE *f;

	truth_sink = T_MALLOC(777);
	truth_write();
	f = fopen(ready, "w");
	if (f) {
		fputs("ready\n", f);
		fclose(f);
	}
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	void *a, *b;

	/* libstdc++'s start-up pool is the runtime's, not ours */
	truth_set_exact(0, 1);
	if (argc > 2 && !strcmp(argv[1], "wait"))
		wait_mode(argv[2]);
	make_temps();
	not_temps();
	mismatch_new_free();
	mismatch_newarr_delete();
	mismatch_malloc_deletearr();
	matched_new_delete();
	unknown_free();
	a = peak_a();
	b = peak_b();
	truth_sink = a;
	truth_sink = b;
	T_FREE(b);
	T_FREE(a);
	leak_after_peak();
	truth_fact("temporaries", TEMPORARIES);
	truth_fact("mismatches", 3);
	truth_fact("unknown_frees", 1);
	truth_write();
	if (argc > 1 && !strcmp(argv[1], "signal"))
		raise(SIGTERM);	/* the default action: the shim sees it die */
	return 3;
}
