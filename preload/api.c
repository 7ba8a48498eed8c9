/* api.c - the entry points behind heaptrail.h: marks, clients, pools */
#include <errno.h>

#include "shim.h"

/*
 * Each runs under the guard, keeps errno, and does nothing when not tracing.
 * heaptrail.h finds them with dlsym(), so their names are the contract.
 */

#define API_BEGIN                                 \
	int saved_errno = errno;                  \
	if (!ht_tracing())                        \
		return;                           \
	ht_in_shim = 1
#define API_END                                   \
	ht_in_shim = 0;                           \
	errno = saved_errno

HT_EXPORT int heaptrail__active(void);
HT_EXPORT void heaptrail__mark(const char *label);
HT_EXPORT void heaptrail__client_begin(uint64_t id, const char *label);
HT_EXPORT void heaptrail__client_end(uint64_t id);
HT_EXPORT void heaptrail__client_enter(uint64_t id);
HT_EXPORT void heaptrail__client_leave(void);
HT_EXPORT void heaptrail__pool_create(uint64_t pool, const char *label);
HT_EXPORT void heaptrail__pool_destroy(uint64_t pool);
HT_EXPORT void heaptrail__pool_alloc(uint64_t pool, const void *ptr, size_t size);
HT_EXPORT void heaptrail__pool_free(uint64_t pool, const void *ptr);
HT_EXPORT void heaptrail__reach_snapshot(void);

int heaptrail__active(void)
{
	return atomic_load(&ht_phase) == HT_ON;
}

void heaptrail__mark(const char *label)
{
	API_BEGIN;
	ev_mark(label ? label : "");
	API_END;
}

/* Switch the calling thread's client, writing the change only when it is one. */
static void set_client(uint64_t id)
{
	struct ht_thread *t = ht_self;

	if (t && thread_client(t) == id)
		return;
	ev_control(HTR_SUB_CLIENT_SET, id, 0, NULL);
	if (ht_self)
		thread_set_client(ht_self, id);
}

void heaptrail__client_begin(uint64_t id, const char *label)
{
	API_BEGIN;
	ev_control(HTR_SUB_CLIENT_BEGIN, id, 0, label ? label : "");
	set_client(id);
	API_END;
}

void heaptrail__client_end(uint64_t id)
{
	API_BEGIN;
	if (ht_self && thread_client(ht_self) == id)
		set_client(0);
	ev_control(HTR_SUB_CLIENT_END, id, 0, NULL);
	API_END;
}

void heaptrail__client_enter(uint64_t id)
{
	API_BEGIN;
	set_client(id);
	API_END;
}

void heaptrail__client_leave(void)
{
	API_BEGIN;
	set_client(0);
	API_END;
}

void heaptrail__pool_create(uint64_t pool, const char *label)
{
	API_BEGIN;
	ev_control(HTR_SUB_POOL_CREATE, pool, 0, label ? label : "");
	API_END;
}

void heaptrail__pool_destroy(uint64_t pool)
{
	API_BEGIN;
	ev_control(HTR_SUB_POOL_DESTROY, pool, 0, NULL);
	API_END;
}

void heaptrail__pool_alloc(uint64_t pool, const void *ptr, size_t size)
{
	struct ht_capture c;

	API_BEGIN;
	stacks_capture(&c);
	ev_pool_alloc(pool, ptr, size, &c);
	API_END;
}

void heaptrail__pool_free(uint64_t pool, const void *ptr)
{
	API_BEGIN;
	ev_control(HTR_SUB_POOL_FREE, pool, (uintptr_t)ptr, NULL);
	API_END;
}

void heaptrail__reach_snapshot(void)
{
	API_BEGIN;
	reach_snapshot();
	API_END;
}
