/* gate_tree.c - a process tree of three children, one of which leaks */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves: 'gate -- gate_tree' judges each process of the tree: the child
 * that leaks (child 1) fails the gate and is named by its pid, which it
 * writes into its truth line; the parent and the other children are clean.
 */

#define noinline __attribute__((noinline))

static noinline void child_leak(void)
{
	truth_sink = T_MALLOC(4321);
}

static noinline void child_clean(int i)
{
	T_FREE(T_MALLOC(100 + (size_t)i));
}

int main(void)
{
	pid_t pids[3];
	int i, st;

	for (i = 0; i < 3; i++) {
		fflush(stdout);
		pids[i] = fork();
		if (pids[i] == 0) {
			truth_reset();
			if (i == 1)
				child_leak();
			else
				child_clean(i);
			truth_fact("child", i);
			truth_write();
			exit(0);
		}
	}
	for (i = 0; i < 3; i++)
		if (pids[i] > 0)
			waitpid(pids[i], &st, 0);
	T_FREE(T_MALLOC(10));
	truth_fact("children", 3);
	truth_write();
	return 0;
}
