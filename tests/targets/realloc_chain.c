/* realloc_chain.c - realloc growing a buffer, shrinking one, and starting from NULL */
#include <stdlib.h>
#include <string.h>

#include "truth.h"

/*
 * Proves: a realloc chain is one live block that moves: the leak is the
 * last size, reported at the realloc that made it; every realloc counts as
 * one allocation; shrinking in place, growing by moving and realloc(NULL, n)
 * are all followed; totals and the peak (old and new block never counted
 * twice) are exact.  heaptrack sees the same calls and is compared.
 */

#define noinline __attribute__((noinline))

/* Doubles a buffer from 16 bytes to 64 KiB and leaks the result. */
static noinline void grow_buffer(void)
{
	char *buf = T_MALLOC(16);
	size_t n;

	for (n = 32; n <= 65536; n *= 2) {
		buf = T_REALLOC(buf, n);
		memset(buf, 'g', n);
	}
	truth_sink = buf;
}

/* A large block shrunk to a small one: the shrink is the leaking site. */
static noinline void shrink_buffer(void)
{
	char *buf = T_MALLOC(200000);

	memset(buf, 's', 200000);
	buf = T_REALLOC(buf, 100);
	truth_sink = buf;
}

/* realloc(NULL, n) is malloc(n). */
static noinline void from_null(void)
{
	truth_sink = T_REALLOC(NULL, 4321);
}

/* Grown and then freed: no leak, but part of the peak. */
static noinline void grow_and_free(void)
{
	char *buf = T_MALLOC(1000);

	buf = T_REALLOC(buf, 300000);
	memset(buf, 'f', 300000);
	buf = T_REALLOC(buf, 50);
	T_FREE(buf);
}

int main(void)
{
	grow_buffer();
	shrink_buffer();
	from_null();
	grow_and_free();
	truth_write();
	return 0;
}
