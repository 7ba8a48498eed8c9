/* interpose_ns.c - unshare() and setns() into a user namespace, which the kernel refuses to threaded processes */
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>

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

typedef int (*unshare_fn)(int);
typedef int (*setns_fn)(int, int);

static int retry_alone(int ret)
{
	return ret < 0 && errno == EINVAL && !ht_in_shim && writer_running() &&
	       atomic_load(&ht_phase) == HT_ON;
}

HT_EXPORT int unshare(int flags)
{
	static unshare_fn real;
	int ret, saved;

	if (!real)
		real = (unshare_fn)dlsym(RTLD_NEXT, "unshare");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	ret = real(flags);
	if (!retry_alone(ret) || !(flags & CLONE_NEWUSER) || writer_pause() != 0)
		return ret;
	ret = real(flags);
	saved = errno;
	writer_resume();
	errno = saved;
	return ret;
}

HT_EXPORT int setns(int nsfd, int nstype)
{
	static setns_fn real;
	int ret, saved;

	if (!real)
		real = (setns_fn)dlsym(RTLD_NEXT, "setns");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	ret = real(nsfd, nstype);
	if (!retry_alone(ret) || (nstype && !(nstype & CLONE_NEWUSER)) || writer_pause() != 0)
		return ret;
	ret = real(nsfd, nstype);
	saved = errno;
	writer_resume();
	errno = saved;
	return ret;
}
