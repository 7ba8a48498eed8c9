/* growth_linear.c - one site grows at a steady, measured rate; a capped cache; churn */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'heaptrail growth' ranks the site whose live bytes rise linearly
 * first, with the slope the program measured itself (bytes per second from
 * its own clock, bytes per 1000 allocations from its own count); a cache
 * with a cap (least recently inserted evicted) is bounded; a site churning
 * temporaries (freed at once) is not growing; a table allocated at start-up
 * is bounded.
 *
 * Each round: one GROW_SIZE node onto a list that is never freed, one
 * cache insertion (evicting the oldest entry once CACHE_CAP are held),
 * CHURN temporaries, then a 1 ms sleep, so that growth happens in real time.
 * Runs GROWTH_SECONDS (default 1.2), and at least 3 x CACHE_CAP rounds (a
 * loaded machine runs fewer rounds a second: the cache must still spend most
 * of the run full), then marks "grown".  GROWTH_TEARDOWN=1 frees the list and
 * the cache before exiting, as a tidy program would: the growth happened
 * all the same.
 *
 * Facts: rounds, grow_bytes_per_second (over the program's own clock from
 * the first to the last growing allocation), grow_bytes_per_1000_allocations.
 */

#define noinline __attribute__((noinline))

#define GROW_SIZE 1024
#define CACHE_CAP 300
#define CACHE_SIZE 256
#define CHURN 20
#define STATIC_SIZE 8192
#define MIN_ROUNDS (3 * CACHE_CAP)

struct node {
	struct node *next;
	char payload[GROW_SIZE - sizeof(struct node *)];
};

static struct node *list;
static void *cache[CACHE_CAP];
static unsigned cache_head, cache_count;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static noinline void *make_table(void)
{
	return T_MALLOC(STATIC_SIZE);
}

static noinline void grow_one(void)
{
	struct node *n = T_MALLOC(GROW_SIZE);

	n->next = list;
	list = n;
}

static noinline void cache_insert(unsigned key)
{
	void *e;

	if (cache_count == CACHE_CAP) {
		/* evict the oldest */
		T_FREE(cache[cache_head]);
		cache_head = (cache_head + 1) % CACHE_CAP;
		cache_count--;
	}
	e = T_MALLOC(CACHE_SIZE);
	memset(e, (int)key, CACHE_SIZE);
	cache[(cache_head + cache_count) % CACHE_CAP] = e;
	cache_count++;
}

static noinline void churn_once(unsigned i)
{
	char *tmp = T_MALLOC(64 + i % 64);

	tmp[0] = (char)i;
	truth_sink = tmp;
	T_FREE(tmp);
}

int main(void)
{
	const char *env = getenv("GROWTH_SECONDS");
	const char *teardown = getenv("GROWTH_TEARDOWN");
	double seconds = env ? atof(env) : 1.2;
	struct timespec pause = { 0, 1000000 };
	double start, first = 0, last = 0;
	unsigned rounds = 0, k;
	void *table;

	table = make_table();
	memset(table, 1, STATIC_SIZE);
	start = now_s();
	do {
		grow_one();
		last = now_s();
		if (!rounds)
			first = last;
		cache_insert(rounds);
		for (k = 0; k < CHURN; k++)
			churn_once(k);
		rounds++;
		nanosleep(&pause, NULL);
	} while (now_s() - start < seconds || rounds < MIN_ROUNDS);
	heaptrail_mark("grown");

	truth_fact("rounds", rounds);
	truth_fact("grow_bytes_per_second",
		   (long long)((double)(rounds - 1) * GROW_SIZE / (last - first)));
	/* every round makes 1 + 1 + CHURN allocations, all of them counted */
	truth_fact("grow_bytes_per_1000_allocations",
		   (long long)(GROW_SIZE * 1000.0 / (2 + CHURN)));
	truth_fact("teardown", teardown && *teardown == '1');
	if (teardown && *teardown == '1') {
		while (list) {
			struct node *n = list->next;

			T_FREE(list);
			list = n;
		}
		while (cache_count) {
			T_FREE(cache[cache_head]);
			cache_head = (cache_head + 1) % CACHE_CAP;
			cache_count--;
		}
		T_FREE(table);
	}
	truth_write();
	return 0;
}
