/* sample_sites.c - sites that keep known bytes, for checking sampled estimates */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/*
 * Five sites keep 76 MiB between them in blocks of very different sizes
 * (48 bytes to 64 KiB), 5% to 42% each, while a sixth churns a million
 * short-lived blocks.  Under HEAPTRAIL_SAMPLE every kept site must be
 * estimated within 15% and ranked as full tracing ranks it.  The blocks are
 * too many for truth.h's tables, so the program writes its own counts to
 * $TRUTH_OUT: {"keep_pages": bytes, ..., "allocations": n}.  It leaves
 * every kept block live at exit.
 */

static size_t kept[5];
static size_t allocations;

#define KEEP(fn, idx, size, total)                                             \
	__attribute__((noinline)) static void fn(void)                         \
	{                                                                      \
		size_t n = (size_t)(total) / (size), i;                        \
		for (i = 0; i < n; i++) {                                      \
			char *p = malloc(size);                                \
			if (!p)                                                \
				exit(3);                                       \
			memset(p, 1, 8);                                       \
			kept[idx] += (size);                                   \
			allocations++;                                         \
		}                                                              \
		__asm__ volatile("" ::: "memory");                             \
	}

KEEP(keep_pages, 0, 4000, 32u << 20)
KEEP(keep_records, 1, 200, 20u << 20)
KEEP(keep_buffers, 2, 65536, 12u << 20)
KEEP(keep_tiny, 3, 48, 8u << 20)
KEEP(keep_strings, 4, 1000, 4u << 20)

__attribute__((noinline)) static void churn(void)
{
	unsigned long s = 12345;
	int i;

	for (i = 0; i < 1000000; i++) {
		s = s * 6364136223846793005ul + 1442695040888963407ul;
		free(malloc(16 + (s >> 52)));
		allocations++;
	}
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	keep_pages();
	churn();
	keep_records();
	keep_buffers();
	keep_tiny();
	keep_strings();
	if (getenv("TRUTH_OUT")) {
		FILE *f = fopen(getenv("TRUTH_OUT"), "w");

		if (!f)
			return 2;
		fprintf(f, "{\"keep_pages\": %zu, \"keep_records\": %zu, \"keep_buffers\": %zu, "
			"\"keep_tiny\": %zu, \"keep_strings\": %zu, \"allocations\": %zu}\n",
			kept[0], kept[1], kept[2], kept[3], kept[4], allocations);
		fclose(f);
	}
	return 0;
}
