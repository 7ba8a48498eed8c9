/* server_threads.c - thread-per-connection test server (TCP or Unix socket) with a known per-client leak */
#include "server_common.h"

/*
 * usage: server_threads tcp|unix:PATH NCLIENTS
 *
 * The main thread accept()s NCLIENTS connections, builds each session right
 * after accept (so that the accepting thread works for the new client) and
 * hands it to a thread of its own, which reads, answers, closes the socket
 * and frees the session.  Then it joins the threads and exits, keeping the
 * leaked blocks and the shared cache.  See server_common.h for what each
 * client allocates.
 */

#define MAX_CLIENTS 4096

static void *worker(void *arg)
{
	struct session *s = arg;
	ssize_t n;

	for (;;) {
		n = read(s->fd, s->inbuf, sizeof(s->inbuf));
		if (n <= 0 || handle_input(s, s->inbuf, n) < 0)
			break;
	}
	close(s->fd);
	session_free(s);
	return NULL;
}

int main(int argc, char **argv)
{
	static pthread_t threads[MAX_CLIENTS];
	int fd, n, i;

	if (argc != 3 || (n = atoi(argv[2])) < 1 || n > MAX_CLIENTS) {
		fprintf(stderr, "usage: server_threads tcp|unix:PATH NCLIENTS\n");
		return 2;
	}
	truth_runtime_caller("main");	/* pthread_create's own blocks */
	fd = listen_on(argv[1], 0);
	for (i = 0; i < n; i++) {
		int c = accept(fd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR) {
				i--;
				continue;
			}
			die("accept");
		}
		if (pthread_create(&threads[i], NULL, worker, session_new(c, i)))
			die("pthread_create");
	}
	for (i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	close(fd);
	if (!strncmp(argv[1], "unix:", 5))
		unlink(argv[1] + 5);
	server_truth(n);
	return 0;
}
