/* server_common.h - what the test servers share: listening, the per-client leak, sessions, the shared cache */
#ifndef SERVER_COMMON_H
#define SERVER_COMMON_H

/*
 * Included by server_threads.c and server_epoll.c (one translation unit
 * each).  The protocol: a client sends lines, the server answers each with
 * "ok\n"; the client closes when it has its answers.  Per connection the
 * server makes, with the truth bookkeeping of truth.h:
 *
 *   session_new()      SESSION_BYTES + NAME_BYTES when the connection is
 *                      accepted, freed after the socket is closed: no residue;
 *   leak_per_client()  LEAK_BYTES at the client's first request, never
 *                      freed: the residue every client leaves;
 *   cache_put()        CACHE_ENTRY_BYTES per request into a shared cache of
 *                      CACHE_SLOTS entries that evicts its oldest: residue
 *                      that stays bounded however many clients come;
 *   scratch            a temporary per request, freed at once.
 *
 * The server prints "listening PORT" (TCP, 127.0.0.1) or "listening unix"
 * on stdout once it accepts connections.
 */

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "truth.h"

#define LEAK_BYTES 1000
#define SESSION_BYTES 4096
#define NAME_BYTES 64
#define CACHE_SLOTS 4
#define CACHE_ENTRY_BYTES 512
#define SCRATCH_BYTES 200

struct session {
	int fd;
	int no;			/* the connection's number, from 0 */
	int requests;
	char *name;
	char inbuf[SESSION_BYTES - 64];
};

static void die(const char *what)
{
	fprintf(stderr, "server: %s: %s\n", what, strerror(errno));
	exit(3);
}

/* "tcp" (127.0.0.1, a free port) or "unix:PATH". */
static int listen_on(const char *where, int flags)
{
	int fd;

	if (!strcmp(where, "tcp")) {
		struct sockaddr_in a;
		socklen_t len = sizeof(a);
		int one = 1;

		fd = socket(AF_INET, SOCK_STREAM | flags, 0);
		if (fd < 0)
			die("socket");
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128) ||
		    getsockname(fd, (struct sockaddr *)&a, &len))
			die("bind 127.0.0.1");
		printf("listening %d\n", ntohs(a.sin_port));
	} else if (!strncmp(where, "unix:", 5)) {
		struct sockaddr_un a;

		fd = socket(AF_UNIX, SOCK_STREAM | flags, 0);
		if (fd < 0)
			die("socket");
		memset(&a, 0, sizeof(a));
		a.sun_family = AF_UNIX;
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", where + 5);
		unlink(a.sun_path);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128))
			die("bind unix");
		printf("listening unix\n");
	} else {
		fprintf(stderr, "server: listen on 'tcp' or 'unix:PATH', not '%s'\n", where);
		exit(2);
	}
	fflush(stdout);
	return fd;
}

static __attribute__((noinline)) struct session *session_new(int fd, int no)
{
	struct session *s = T_MALLOC(sizeof(struct session));

	s->fd = fd;
	s->no = no;
	s->requests = 0;
	s->name = T_MALLOC(NAME_BYTES);
	snprintf(s->name, NAME_BYTES, "client %d", no);
	return s;
}

static __attribute__((noinline)) void session_free(struct session *s)
{
	T_FREE(s->name);
	T_FREE(s);
}

/* The bug the test must find: every client leaves this behind. */
static __attribute__((noinline)) void leak_per_client(struct session *s)
{
	char *p = T_MALLOC(LEAK_BYTES);

	memset(p, s->no & 0xff, LEAK_BYTES);
	truth_sink = p;
	T_NO_TAILCALL();
}

/* A shared cache of the last CACHE_SLOTS requests: bounded, not a leak. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static char *cache[CACHE_SLOTS];
static unsigned cache_next;

static __attribute__((noinline)) void cache_put(struct session *s)
{
	char *e = T_MALLOC(CACHE_ENTRY_BYTES);
	char *old;

	memset(e, s->requests & 0xff, CACHE_ENTRY_BYTES);
	pthread_mutex_lock(&cache_lock);
	old = cache[cache_next % CACHE_SLOTS];
	cache[cache_next % CACHE_SLOTS] = e;
	cache_next++;
	pthread_mutex_unlock(&cache_lock);
	if (old)
		T_FREE(old);
	T_NO_TAILCALL();
}

static __attribute__((noinline)) void handle_request(struct session *s)
{
	char *scratch = T_MALLOC(SCRATCH_BYTES);

	snprintf(scratch, SCRATCH_BYTES, "%s request %d", s->name, s->requests);
	if (s->requests == 0)
		leak_per_client(s);
	cache_put(s);
	s->requests++;
	T_FREE(scratch);
}

/* Handles the complete lines of n new bytes; -1 when the client is gone. */
static int handle_input(struct session *s, const char *buf, ssize_t n)
{
	ssize_t i;

	for (i = 0; i < n; i++) {
		if (buf[i] != '\n')
			continue;
		handle_request(s);
		if (write(s->fd, "ok\n", 3) != 3)
			return -1;
	}
	return 0;
}

/* The truth the test compares with: facts, then the per-site bookkeeping. */
static void server_truth(int clients)
{
	truth_set_exact(0, 0);	/* threads, stdio and the runtime allocate too */
	truth_fact("clients", clients);
	truth_fact("leak_bytes", LEAK_BYTES);
	truth_fact("cache_slots", CACHE_SLOTS);
	truth_fact("cache_entry_bytes", CACHE_ENTRY_BYTES);
	truth_write();
}

#endif
