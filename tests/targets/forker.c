/* forker.c - a process tree: forked children, a grandchild, and a child that execs */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves: every process of a tree gets its own dump with only its own
 * events (the parent's heap is empty when it forks, so nothing is
 * inherited); a child ending with exit() and one ending with _exit() both
 * leave complete dumps; a child that execs leaves a dump of its life before
 * the exec (the block live at exec counts as leaked there) and the new
 * image (exec_child) writes a dump of its own.  Each image appends its
 * truth line to $TRUTH_OUT; the test matches lines and dumps by pid.
 */

#define noinline __attribute__((noinline))

static noinline void leak_in_child(size_t n, int blocks)
{
	int i;

	for (i = 0; i < blocks; i++)
		truth_sink = T_MALLOC(n);
}

static noinline void leak_in_grandchild(void)
{
	truth_sink = T_MALLOC(7007);
}

static noinline void leak_in_parent(void)
{
	truth_sink = T_MALLOC(99);
}

static noinline void churn(int n)
{
	int i;

	for (i = 0; i < n; i++)
		T_FREE(T_MALLOC(64 + (size_t)i));
}

/* Path of a program next to this one, without malloc. */
static char *sibling(const char *name, char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		abort();
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash || (size_t)(slash + 1 - buf) + strlen(name) + 1 > len)
		abort();
	strcpy(slash + 1, name);
	return buf;
}

static noinline pid_t child_exit(void)
{
	pid_t pid = fork(), g;
	int st;

	if (pid)
		return pid;
	truth_reset();
	churn(10);
	leak_in_child(1000, 3);
	/* A grandchild: its dump too is named after its own pid. */
	g = fork();
	if (g == 0) {
		truth_reset();
		leak_in_grandchild();
		truth_write();
		exit(0);
	}
	waitpid(g, &st, 0);
	truth_fact("grandchild", g);
	truth_write();
	exit(0);
}

static noinline pid_t child_underscore_exit(void)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	truth_reset();
	leak_in_child(2000, 2);
	truth_write();
	_exit(0);
}

static noinline pid_t child_exec(void)
{
	static char path[4096];
	pid_t pid = fork();

	if (pid)
		return pid;
	truth_reset();
	leak_in_child(3000, 1);
	truth_fact("execs", 1);
	truth_write();
	sibling("exec_child", path, sizeof(path));
	execl(path, "exec_child", "from-forker", (char *)NULL);
	_exit(127);
}

int main(void)
{
	pid_t kids[3];
	int i, st, bad = 0;

	churn(5);
	kids[0] = child_exit();
	kids[1] = child_underscore_exit();
	kids[2] = child_exec();
	for (i = 0; i < 3; i++) {
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	leak_in_parent();
	truth_fact("child_exit", kids[0]);
	truth_fact("child_underscore_exit", kids[1]);
	truth_fact("child_exec", kids[2]);
	truth_write();
	return bad;
}
