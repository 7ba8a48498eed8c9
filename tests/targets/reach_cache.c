/* reach_cache.c - a global cache held to the end, nothing lost: gate --max-lost 0 passes */
#include "reach_truth.h"

/*
 * Proves: a program that keeps a hash table of entries (each with a value
 * block) in a global until exit, and frees every temporary, has only still
 * reachable memory: 'gate --max-lost 0' passes while 'gate --max-leaked 0'
 * fails.  With the argument 'lose' it also drops one block at lose_one,
 * and --max-lost 0 fails naming that line.
 */

#define NBUCKETS 64
#define NENTRIES 200

struct entry {
	struct entry *next;
	char key[24];
	char *value;
};

static struct entry *buckets[NBUCKETS];

static R_NOINLINE void cache_put(unsigned k)
{
	struct entry *e = R_ALLOC(sizeof(struct entry), "reachable");

	snprintf(e->key, sizeof(e->key), "key-%u", k);
	e->value = R_ALLOC(32 + k % 50, "reachable");
	e->next = buckets[k % NBUCKETS];
	buckets[k % NBUCKETS] = e;
}

static R_NOINLINE void churn(unsigned k)
{
	char *tmp = malloc(100 + k);

	snprintf(tmp, 100, "temporary %u", k);
	free(tmp);
}

static R_NOINLINE void lose_one(void)
{
	void *volatile p = R_ALLOC(777, "lost");

	(void)p;
}

int main(int argc, char **argv)
{
	unsigned k;

	for (k = 0; k < NENTRIES; k++) {
		cache_put(k);
		churn(k);
	}
	if (argc > 1 && !strcmp(argv[1], "lose"))
		lose_one();
	reach_scrub();
	reach_write("reach_cache");
	return 0;
}
