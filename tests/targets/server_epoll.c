/* server_epoll.c - single-threaded epoll test server (TCP or Unix socket) with a known per-client leak */
#include <sys/epoll.h>

#include "heaptrail.h"
#include "server_common.h"

/*
 * usage: server_epoll tcp|unix:PATH NCLIENTS [api]
 *
 * One thread serves every connection from an epoll loop (non-blocking
 * sockets from accept4), so it switches between clients from one read to
 * the next.  It exits once NCLIENTS connections have been served and closed.
 * With "api" the server marks its clients itself through heaptrail.h
 * (client_begin at accept, client_enter before each read, client_end at
 * close), for a run without HEAPTRAIL_CLIENTS.  See server_common.h for what
 * each client allocates.
 */

#define MAX_FDS 65536

static struct session *sessions[MAX_FDS];
static int use_api;

/* Explicit ids: any non-zero number of the program's choosing. */
static uint64_t api_id(const struct session *s)
{
	return 1000 + (uint64_t)s->no;
}

static void drop(int ep, struct session *s)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
	sessions[s->fd] = NULL;
	close(s->fd);
	if (use_api)
		heaptrail_client_end(api_id(s));
	session_free(s);
}

int main(int argc, char **argv)
{
	struct epoll_event ev, evs[64];
	int lfd, ep, n, accepted = 0, done = 0, i;

	if (argc < 3 || argc > 4 || (n = atoi(argv[2])) < 1 ||
	    (argc == 4 && strcmp(argv[3], "api"))) {
		fprintf(stderr, "usage: server_epoll tcp|unix:PATH NCLIENTS [api]\n");
		return 2;
	}
	use_api = argc == 4;
	lfd = listen_on(argv[1], SOCK_NONBLOCK);
	ep = epoll_create1(0);
	if (ep < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl");
	while (done < n) {
		int k = epoll_wait(ep, evs, 64, -1);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (i = 0; i < k; i++) {
			int fd = evs[i].data.fd;
			struct session *s;
			ssize_t got;

			if (fd == lfd) {
				int c;

				while (accepted < n &&
				       (c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					if (c >= MAX_FDS)
						die("fd too large");
					if (use_api)
						heaptrail_client_begin(1000 + (uint64_t)accepted,
								       "api client");
					s = session_new(c, accepted++);
					sessions[c] = s;
					ev.events = EPOLLIN;
					ev.data.fd = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev))
						die("epoll_ctl");
				}
				continue;
			}
			s = sessions[fd];
			if (!s)
				continue;
			if (use_api)
				heaptrail_client_enter(api_id(s));
			for (;;) {
				got = read(fd, s->inbuf, sizeof(s->inbuf));
				if (got > 0) {
					if (handle_input(s, s->inbuf, got) < 0) {
						got = 0;
						break;
					}
					continue;
				}
				break;
			}
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
				drop(ep, s);
				done++;
			}
			if (use_api)
				heaptrail_client_leave();
		}
	}
	close(ep);
	close(lfd);
	if (!strncmp(argv[1], "unix:", 5))
		unlink(argv[1] + 5);
	server_truth(n);
	return 0;
}
