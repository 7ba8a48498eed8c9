/* ctor_atexit.c - allocations before main (constructor) and after it (atexit, destructor) */
#include <stdlib.h>

#include "truth.h"

/*
 * Proves: the shim records from the first allocation a constructor of the
 * program makes to the last one in a destructor, after main returned and
 * the atexit handlers ran; a block allocated in a constructor and freed in
 * an atexit handler is no leak.  The truth is written by the destructor,
 * the last code of the program to run.
 */

static void *held;

__attribute__((constructor)) static void early_alloc(void)
{
	truth_sink = T_MALLOC(1111);
	held = T_MALLOC(2222);
}

static void atexit_leak(void)
{
	truth_sink = T_MALLOC(3333);
}

static void atexit_free(void)
{
	T_FREE(held);
}

__attribute__((destructor)) static void late_alloc(void)
{
	truth_sink = T_MALLOC(4444);
	truth_write();
}

int main(void)
{
	/* atexit handlers run in reverse: atexit_leak, then atexit_free. */
	atexit(atexit_free);
	atexit(atexit_leak);
	truth_sink = T_MALLOC(55);
	return 0;
}
