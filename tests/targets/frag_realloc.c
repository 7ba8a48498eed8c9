/* frag_realloc.c - message buffers grown to exact fit next to buffers grown geometrically */
#include <stdlib.h>
#include <string.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'heaptrail frag' flags the sites that grow blocks to exact fit,
 * by realloc (append_exact) and by a new block, a copy and a free
 * (copy_exact), as "exact-fit", and the sites that double the capacity
 * (append_doubling, copy_doubling) as "geometric".  Every buffer receives
 * the same messages (20 to 109 bytes), round-robin over the buffers, as a
 * server appends to its clients' pending output.
 *
 * Truth: facts name the number of growth steps each site made
 * ("<function>_grows"); the sites' lines are in the truth's site list.
 */

#define noinline __attribute__((noinline))

#define NBUF 16
#define NMSG 150

struct buf {
	char *p;
	size_t len, cap;
};

static struct buf exact[NBUF], doubling[NBUF], cexact[NBUF], cdoubling[NBUF];
static long long grows_exact, grows_doubling, grows_cexact, grows_cdoubling;

static size_t msg_len(int k)
{
	return 20 + (size_t)(k * 37 % 90);
}

static noinline void append_exact(struct buf *b, const char *msg, size_t n)
{
	if (b->p)
		grows_exact++;
	b->p = T_REALLOC(b->p, b->len + n);
	memcpy(b->p + b->len, msg, n);
	b->len += n;
	b->cap = b->len;
}

static noinline void append_doubling(struct buf *b, const char *msg, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;

		while (cap < b->len + n)
			cap *= 2;
		if (b->p)
			grows_doubling++;
		b->p = T_REALLOC(b->p, cap);
		b->cap = cap;
	}
	memcpy(b->p + b->len, msg, n);
	b->len += n;
}

static noinline void copy_exact(struct buf *b, const char *msg, size_t n)
{
	char *p = T_MALLOC(b->len + n);

	if (b->p) {
		memcpy(p, b->p, b->len);
		T_FREE(b->p);
		grows_cexact++;
	}
	b->p = p;
	memcpy(b->p + b->len, msg, n);
	b->len += n;
}

static noinline void copy_doubling(struct buf *b, const char *msg, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = T_MALLOC(cap);
		if (b->p) {
			memcpy(p, b->p, b->len);
			T_FREE(b->p);
			grows_cdoubling++;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, msg, n);
	b->len += n;
}

int main(void)
{
	char msg[128];
	int k, i;

	memset(msg, 'm', sizeof(msg));
	for (k = 0; k < NMSG; k++) {
		for (i = 0; i < NBUF; i++) {
			size_t n = msg_len(k + i);

			append_exact(&exact[i], msg, n);
			append_doubling(&doubling[i], msg, n);
			copy_exact(&cexact[i], msg, n);
			copy_doubling(&cdoubling[i], msg, n);
		}
	}
	heaptrail_mark("grown");
	for (i = 0; i < NBUF; i++) {
		T_FREE(exact[i].p);
		T_FREE(doubling[i].p);
		T_FREE(cexact[i].p);
		T_FREE(cdoubling[i].p);
	}
	truth_fact("append_exact_grows", grows_exact);
	truth_fact("append_doubling_grows", grows_doubling);
	truth_fact("copy_exact_grows", grows_cexact);
	truth_fact("copy_doubling_grows", grows_cdoubling);
	truth_write();
	return 0;
}
