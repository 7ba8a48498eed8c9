/* term_in_realloc.c - the main thread blocks inside realloc (its arena held by another thread) */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Proves (test_endrecord.py, 'TERM in a stuck realloc'): a SIGTERM that
 * finds a thread inside the real realloc, which will never return, still
 * ends the process (the shim once deferred it to the end of the realloc,
 * and the process ignored TERM for ever).
 *
 * A second thread calls malloc_stats(), which holds the main arena's lock
 * while it writes to stderr, here a pipe that is full and never read.
 * The main thread then reallocs a main-arena block and waits for that
 * lock.  Prints its pid, then "ready": the test then sends SIGTERM.
 */

static void *stats_on_full_pipe(void *arg)
{
	(void)arg;
	malloc_stats();		/* blocks in write(2) with the arena locked */
	return NULL;
}

int main(void)
{
	int fd[2];
	char junk[4096];
	pthread_t th;
	char *p = malloc(100);

	memset(junk, 'x', sizeof(junk));
	if (!p || pipe(fd))
		return 1;
	fcntl(fd[1], F_SETFL, O_NONBLOCK);
	while (write(fd[1], junk, sizeof(junk)) > 0)
		;
	while (write(fd[1], junk, 1) > 0)
		;
	fcntl(fd[1], F_SETFL, 0);
	dup2(fd[1], 2);
	/* stdout's buffer is allocated now: "ready" must not need the arena */
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (pthread_create(&th, NULL, stats_on_full_pipe, NULL))
		return 1;
	usleep(200000);
	printf("ready\n");
	fflush(stdout);
	p = realloc(p, 5000);	/* waits for the main arena's lock: for ever */
	printf("never\n");
	return p == NULL;
}
