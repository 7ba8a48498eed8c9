/* writer_dup2.c - a thread dup2()s onto the dump's descriptor while another allocates */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Proves (test_writer.py, review finding 27): a program that dup2()s a file
 * of its own onto the number the shim's dump happens to use, again and
 * again while the writer streams frames, never receives a byte of the dump
 * in its file, and the dump misses no event.
 *
 *   writer_dup2 DUMP VICTIM ITERATIONS
 *
 * DUMP is the dump's path (to find its descriptor by inode), VICTIM a file
 * this program creates empty and dup2()s onto that descriptor.  Prints
 * "allocations N" (the blocks churn_alloc made), "moves M" (dup2 calls onto
 * the dump's number) and "victim_bytes B" (the victim's size at the end:
 * this program never writes to it).  It lowers its descriptor limit to a
 * little above the dump's number first, so the shim soon finds no higher
 * number to move to.
 */

#define noinline __attribute__((noinline))

static _Atomic int done;
static unsigned long iterations;
static void *volatile sink;

static noinline void *churn_alloc(size_t n)
{
	void *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	return p;
}

static void *churn(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	void *ring[256] = { 0 };
	unsigned long i;

	(void)arg;
	for (i = 0; i < iterations; i++) {
		unsigned slot;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		slot = (unsigned)(rng % 256);
		free(ring[slot]);
		ring[slot] = churn_alloc(16 + (size_t)(rng >> 20) % 3000);
		if (!ring[slot])
			abort();
		sink = ring[slot];
	}
	for (i = 0; i < 256; i++)
		free(ring[i]);
	atomic_store(&done, 1);
	return NULL;
}

/*
 * The descriptor open on the dump's inode, or -1 (probes from where it was
 * last seen: the shim moves it up, out of the way).
 */
static int dump_fd(dev_t dev, ino_t ino)
{
	static int last = 3;
	struct stat st;
	int i;

	for (i = 0; i < 4096; i++) {
		int f = 3 + (last - 3 + i) % 4093;

		if (fstat(f, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
			return last = f;
	}
	return -1;
}

int main(int argc, char **argv)
{
	struct stat dump, vst;
	unsigned long moves = 0;
	pthread_t th;
	int victim, tries;

	if (argc != 4) {
		fprintf(stderr, "usage: writer_dup2 DUMP VICTIM ITERATIONS\n");
		return 2;
	}
	iterations = strtoul(argv[3], NULL, 10);
	victim = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (victim < 0 || stat(argv[1], &dump) != 0) {
		perror("writer_dup2");
		return 1;
	}
	{
		int f = dump_fd(dump.st_dev, dump.st_ino);
		struct rlimit rl;

		if (f >= 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && (rlim_t)f + 64 < rl.rlim_cur) {
			rl.rlim_cur = (rlim_t)f + 64;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (pthread_create(&th, NULL, churn, NULL))
		return 3;
	for (tries = 0; !atomic_load(&done); tries++) {
		int f = dump_fd(dump.st_dev, dump.st_ino);

		if (f < 0 || f == victim)
			continue;
		if (dup2(victim, f) == f) {
			moves++;
			close(f);
		}
	}
	pthread_join(th, NULL);
	fstat(victim, &vst);
	printf("allocations %lu\nmoves %lu\nvictim_bytes %lld\n", iterations, moves,
	       (long long)vst.st_size);
	return 0;
}
