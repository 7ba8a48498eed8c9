/* interpose_ns.c - unshare() and setns() into a user namespace, which the kernel refuses to threaded processes */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * The shim's writer thread makes every traced process threaded, and the
 * kernel refuses CLONE_NEWUSER (unshare, setns) to a threaded process with
 * EINVAL: tools such as unshare(1), bwrap or a browser's sandbox would fail
 * under the shim.  When the call fails so and the writer is the reason, it
 * is tried again with the writer paused (its buffered events stay with
 * their threads; nothing is lost).  A program that is threaded itself gets
 * EINVAL as it would without us.
 */

enum ns_call { NS_UNSHARE, NS_SETNS };

/* The real call; ENOSYS when it cannot be found. */
static int real_call(enum ns_call which, int a, int b)
{
	static int (*real_unshare)(int);
	static int (*real_setns)(int, int);

	if (which == NS_UNSHARE) {
		if (!real_unshare)
			real_unshare = (int (*)(int))dlsym(RTLD_NEXT, "unshare");
		if (real_unshare)
			return real_unshare(a);
	} else {
		if (!real_setns)
			real_setns = (int (*)(int, int))dlsym(RTLD_NEXT, "setns");
		if (real_setns)
			return real_setns(a, b);
	}
	errno = ENOSYS;
	return -1;
}

/* The call; when it may have failed because of our writer thread, again without it. */
static int call_alone_if_needed(enum ns_call which, int a, int b, int user_ns)
{
	int ret = real_call(which, a, b), saved, tries;

	if (ret == 0 || errno != EINVAL || !user_ns || ht_in_shim || !writer_running() ||
	    atomic_load(&ht_phase) != HT_ON || writer_pause() != 0)
		return ret;
	/*
	 * pthread_join() returns when the kernel has cleared the writer's tid,
	 * a moment before the thread leaves the thread group (under load, 1
	 * unshare in 70 still saw it): try again for up to 10 ms.  A program
	 * threaded itself waits that long for its EINVAL.
	 */
	for (tries = 0; tries < 200; tries++) {
		struct timespec ts = { 0, 50000 };

		ret = real_call(which, a, b);
		if (ret == 0 || errno != EINVAL)
			break;
		syscall(SYS_nanosleep, &ts, NULL);	/* raw: not a cancellation point */
	}
	saved = errno;
	writer_resume();
	errno = saved;
	return ret;
}

HT_EXPORT int unshare(int flags)
{
	return call_alone_if_needed(NS_UNSHARE, flags, 0, !!(flags & CLONE_NEWUSER));
}

/* nstype 0 accepts any kind of namespace, a user namespace among them. */
HT_EXPORT int setns(int nsfd, int nstype)
{
	return call_alone_if_needed(NS_SETNS, nsfd, nstype, !nstype || (nstype & CLONE_NEWUSER));
}
