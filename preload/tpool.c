/* tpool.c - per-thread blocks kept outside static TLS, recycled when threads exit */
#include <string.h>

#include "shim.h"

/*
 * The unwinder's and the stack table's per-thread caches are kilobytes.  In
 * static TLS (__thread) they would be carved out of every thread's stack:
 * glibc then refuses a thread whose stack is smaller than the TLS plus a
 * little (pthread_create() fails with EINVAL at PTHREAD_STACK_MIN, 16 KiB),
 * and a program that works alone would not work under the shim.  So a
 * thread takes its block from a pool on its first stack capture, keeps a
 * pointer in TLS, and gives it back when it exits (thread_exiting()).
 *
 * The pool is a region (bounded: a program whose threads never say they
 * exit cannot take more) and a free list under a spinlock, taken only with
 * the thread's guard held, never by a signal handler of the same thread.
 * A thread that exits after giving its block back, or finds the region
 * spent, does without (the caller falls back to its slow path).
 */

int tpool_init(struct ht_tpool *p, size_t block, size_t reserve)
{
	p->block = (block + 63) & ~(size_t)63;
	p->free = NULL;
	atomic_flag_clear(&p->lock);
	return region_reserve(&p->region, reserve);
}

void *tpool_get(struct ht_tpool *p)
{
	void **b;

	if (ht_thread_gone)
		return NULL;
	ht_spin_lock(&p->lock);
	b = p->free;
	if (b)
		p->free = *b;
	ht_spin_unlock(&p->lock);
	if (!b) {
		/* a fresh block is zero already (anonymous mapping) */
		return region_alloc(&p->region, p->block);
	}
	memset(b, 0, p->block);
	return b;
}

void tpool_put(struct ht_tpool *p, void *block)
{
	void **b = block;

	if (!b)
		return;
	ht_spin_lock(&p->lock);
	*b = p->free;
	p->free = b;
	ht_spin_unlock(&p->lock);
}

void tpool_after_fork(struct ht_tpool *p)
{
	/*
	 * Another thread may have been in the middle of the list: drop it.  The
	 * dead threads' blocks stay taken (bounded by the region).
	 */
	atomic_flag_clear(&p->lock);
	p->free = NULL;
}
