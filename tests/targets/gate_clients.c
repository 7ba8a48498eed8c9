/* gate_clients.c - N client sessions, each leaving a known number of bytes behind */
#include <stdio.h>
#include <stdlib.h>

#include "heaptrail.h"
#include "truth.h"

/*
 * Proves: 'gate --max-residue-per-client' judges the bytes each client
 * leaves behind after it disconnected (heaptrail.h sessions): every client
 * keeps RESIDUE bytes at remember_client; its session buffer is freed.
 *
 *   gate_clients N RESIDUE   (default 5 clients, 1500 bytes)
 */

#define noinline __attribute__((noinline))

static noinline void remember_client(size_t n)
{
	truth_sink = T_MALLOC(n);
}

static noinline void serve(uint64_t id, size_t residue)
{
	char label[32], *session;

	snprintf(label, sizeof(label), "client-%llu", (unsigned long long)id);
	heaptrail_client_begin(id, label);
	session = T_MALLOC(4096);
	session[0] = 1;
	remember_client(residue);
	T_FREE(session);
	heaptrail_client_end(id);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5, i;
	size_t residue = argc > 2 ? (size_t)atol(argv[2]) : 1500;

	for (i = 1; i <= n; i++)
		serve((uint64_t)i, residue);
	truth_fact("clients", n);
	truth_fact("residue", (long long)residue);
	truth_write();
	return 0;
}
