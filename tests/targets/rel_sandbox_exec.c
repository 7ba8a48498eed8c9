/* rel_sandbox_exec.c - start a program already inside a sandbox that kills on membarrier() */
/* test-ldflags: -static */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * usage: rel_sandbox_exec PROGRAM [ARGS...]
 *
 * Installs a seccomp filter under which membarrier() kills the process,
 * then execs PROGRAM.  Linked statically, so that LD_PRELOAD does not
 * trace this launcher: the shim first starts in PROGRAM, with the filter
 * already in force, and must see it there and fence its threads another
 * way (fence.c), or the program dies of SIGSYS.  With tests/targets/
 * rel_sandbox "started": the same output and events as without the shim.
 */

int main(int argc, char **argv)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (argc < 2) {
		fprintf(stderr, "usage: rel_sandbox_exec PROGRAM [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		perror("seccomp");
		return 1;
	}
	execv(argv[1], argv + 1);
	perror("execv");
	return 127;
}
