/* clients.c - automatic client attribution: accepted sockets and threads (HEAPTRAIL_CLIENTS) */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "shim.h"

/*
 * HEAPTRAIL_CLIENTS=sockets.  A connection accept()ed on a listening socket
 * starts a client (CLIENT_BEGIN, labelled with the peer address), and the
 * accepting thread works for it at once: servers build their session right
 * after accept.  A thread that reads or writes a client's socket works for
 * that client (CLIENT_SET, written only when the client changes) until it
 * touches another client's socket; this covers thread-per-connection and
 * event-loop servers alike.  close() or shutdown() of the socket, or a dup2()
 * over it, ends the client (CLIENT_END); a thread working for it then works
 * for no client.
 *
 * The map fd -> client id is a plain array indexed by fd in its own mapping
 * (MAP_NORESERVE: only the pages of fds in use are ever touched), read
 * without locks.  A slot is cleared before the real close(), so the number
 * can only be handed out again by the kernel once its slot is free; a slot
 * still set when accept() returns its fd was closed where we cannot see it
 * (fclose of an fdopen'ed socket, a libc-internal close): that client ends
 * there.  Forked children inherit the map like the fds themselves.
 *
 * These wrappers sit on every read and write of the program: with the mode
 * off they cost one predictable branch; errno is always what the real call
 * left; nothing here allocates.
 *
 * HEAPTRAIL_CLIENTS=threads.  Each thread but the main one is a client for
 * its lifetime: thread.c calls clients_thread_start() when it registers a
 * thread (its first event) and clients_thread_exit() when it exits.
 *
 * Automatic ids live above the ids programs choose for heaptrail.h, so the
 * two never collide: 2^48 + n for sockets, 2^49 + n for threads (below 2^53,
 * exact in a JSON double).
 */

#define SOCKET_CLIENT_BASE (1ull << 48)
#define THREAD_CLIENT_BASE (1ull << 49)
#define FDTAB_MAX (1u << 20)	/* 8 MiB of address space at most */

struct fdtab {
	size_t len;
	_Atomic uint64_t ids[];
};

static struct fdtab *_Atomic fdtab;
static _Atomic uint64_t next_socket_client, next_thread_client;
static _Atomic int fdtab_state;	/* 0 none, 1 mapping, 2 done, 3 failed */

/* The thread's own client in threads mode (0 = none). */
static __thread uint64_t thread_own_client;

/* _FORTIFY_SOURCE builds call these when the buffer's size is known. */
HT_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
HT_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
HT_EXPORT ssize_t __recvfrom_chk(int fd, void *restrict buf, size_t n,
				 size_t buflen, int flags, __SOCKADDR_ARG addr,
				 socklen_t *restrict len);

/* ---- the real functions ------------------------------------------------ */

#define REAL_FUNCS(X)                                                       \
	X(accept) X(accept4) X(read) X(readv) X(recv) X(recvfrom) X(recvmsg)   \
	X(write) X(writev) X(send) X(sendto) X(sendmsg) X(sendfile)           \
	X(__read_chk) X(__recv_chk) X(__recvfrom_chk) X(close) X(shutdown)    \
	X(dup2) X(dup3) X(close_range) X(closefrom)

#define SLOT(name) static void *slot_##name;
REAL_FUNCS(SLOT)
#undef SLOT

static void *resolve(void **slot, const char *name)
{
	void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (HT_UNLIKELY(!p)) {
		p = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, p, __ATOMIC_RELEASE);
	}
	return p;
}

/* The next definition of 'name', with our own prototype. */
#define REAL(name) ((__typeof__(&name))resolve(&slot_##name, #name))

/*
 * Everything is looked up at load time, while the program is still one
 * thread: a first dlsym() later could fall between fork() and exec() in a
 * child (a shell's redirections are dup2 and close), where the loader's
 * lock may have been held by a thread that no longer exists.
 */
__attribute__((constructor)) static void resolve_all(void)
{
#define RESOLVE(name) resolve(&slot_##name, #name);
	REAL_FUNCS(RESOLVE)
#undef RESOLVE
}

#define MODE_SOCKETS() HT_UNLIKELY(ht_cfg.clients == HT_CLIENTS_SOCKETS)

/* ---- the fd map -------------------------------------------------------- */

static struct fdtab *fdtab_create(void)
{
	struct fdtab *t = atomic_load_explicit(&fdtab, memory_order_acquire);
	struct rlimit rl;
	size_t len = FDTAB_MAX;
	int expected = 0;
	void *p;

	if (t || atomic_load(&fdtab_state) == 3)
		return t;
	if (!atomic_compare_exchange_strong(&fdtab_state, &expected, 1)) {
		/* another thread is mapping it: its accept started first */
		while (atomic_load(&fdtab_state) == 1)
			;
		return atomic_load_explicit(&fdtab, memory_order_acquire);
	}
	/* the hard limit bounds every fd the program can ever have */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < FDTAB_MAX)
		len = rl.rlim_max;
	p = mmap(NULL, sizeof(*t) + len * sizeof(t->ids[0]), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		atomic_fetch_add(&ht_lost[HTR_LOST_MEMORY], 1);
		ht_msg("cannot map the socket table: connections are not attributed to clients");
		atomic_store(&fdtab_state, 3);
		return NULL;
	}
	t = p;
	t->len = len;
	atomic_store_explicit(&fdtab, t, memory_order_release);
	atomic_store(&fdtab_state, 2);
	return t;
}

/* The client of fd, 0 when it is none's. */
static inline uint64_t fd_client(int fd)
{
	struct fdtab *t = atomic_load_explicit(&fdtab, memory_order_acquire);

	if (!t || (unsigned)fd >= t->len)
		return 0;
	return atomic_load_explicit(&t->ids[fd], memory_order_relaxed);
}

/* Takes fd out of the map; returns the client it belonged to, or 0. */
static uint64_t fd_forget(int fd)
{
	struct fdtab *t = atomic_load_explicit(&fdtab, memory_order_acquire);

	if (!t || (unsigned)fd >= t->len ||
	    !atomic_load_explicit(&t->ids[fd], memory_order_relaxed))
		return 0;
	return atomic_exchange(&t->ids[fd], 0);
}

/* ---- events (callers hold the guard) ----------------------------------- */

static void switch_client(uint64_t id)
{
	if (ht_self && thread_client(ht_self) == id)
		return;
	ev_control(HTR_SUB_CLIENT_SET, id, 0, NULL);
	if (ht_self)
		thread_set_client(ht_self, id);
}

static void end_client(uint64_t id)
{
	if (ht_self && thread_client(ht_self) == id)
		switch_client(0);
	ev_control(HTR_SUB_CLIENT_END, id, 0, NULL);
}

/* "10.0.0.7:5512", "[::1]:5512", "unix:/path", "unix:@abstract", "unix". */
static void peer_label(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct ht_str s;
	char addr[INET6_ADDRSTRLEN];

	str_init(&s, buf, len);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
		str_add(&s, "unknown");
		return;
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		if (inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr)))
			str_add(&s, addr);
		str_add(&s, ":");
		str_add_u64(&s, ntohs(in->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		str_add(&s, "[");
		if (inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr)))
			str_add(&s, addr);
		str_add(&s, "]:");
		str_add_u64(&s, ntohs(in6->sin6_port));
	} else if (ss.ss_family == AF_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		size_t off = offsetof(struct sockaddr_un, sun_path);
		size_t n = sl > off ? sl - off : 0;

		if (n > sizeof(un->sun_path))
			n = sizeof(un->sun_path);
		str_add(&s, "unix");
		if (n && un->sun_path[0]) {
			str_add(&s, ":");
			str_add_n(&s, un->sun_path, strnlen(un->sun_path, n));
		} else if (n > 1) {
			str_add(&s, ":@");	/* abstract name */
			str_add_n(&s, un->sun_path + 1, n - 1);
		}
	} else {
		str_add(&s, "family ");
		str_add_u64(&s, ss.ss_family);
	}
}

/* ---- slow paths (out of line: the wrappers stay small) ----------------- */

static __attribute__((noinline)) void touched(int fd)
{
	uint64_t id;
	int saved;

	if (ht_in_shim)
		return;
	id = fd_client(fd);
	if (HT_LIKELY(!id) || (ht_self && thread_client(ht_self) == id))
		return;
	saved = errno;
	if (ht_tracing()) {
		ht_in_shim = 1;
		switch_client(id);
		ht_in_shim = 0;
	}
	errno = saved;
}

static __attribute__((noinline)) void accepted(int fd)
{
	struct fdtab *t;
	uint64_t id, old;
	char label[160];
	int saved = errno;

	if (!ht_tracing())
		goto out;
	ht_in_shim = 1;
	t = fdtab_create();
	if (t && (unsigned)fd < t->len) {
		peer_label(fd, label, sizeof(label));
		id = SOCKET_CLIENT_BASE + atomic_fetch_add(&next_socket_client, 1) + 1;
		old = atomic_exchange(&t->ids[fd], id);
		if (old)	/* its close went unseen */
			end_client(old);
		ev_control(HTR_SUB_CLIENT_BEGIN, id, 0, label);
		switch_client(id);
	}
	ht_in_shim = 0;
out:
	errno = saved;
}

static __attribute__((noinline)) void ended(uint64_t id)
{
	int saved = errno;

	if (ht_tracing()) {
		ht_in_shim = 1;
		end_client(id);
		ht_in_shim = 0;
	}
	errno = saved;
}

static __attribute__((noinline)) void forget_range(unsigned first, unsigned last)
{
	struct fdtab *t = atomic_load_explicit(&fdtab, memory_order_acquire);
	unsigned fd;
	uint64_t id;

	if (!t)
		return;
	for (fd = first; fd <= last && fd < t->len; fd++) {
		id = fd_forget((int)fd);
		if (id)
			ended(id);
	}
}

/* ---- the interposed functions ------------------------------------------ */

HT_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
	int c = REAL(accept)(fd, addr, len);

	if (MODE_SOCKETS() && c >= 0)
		accepted(c);
	return c;
}

HT_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *restrict len,
		      int flags)
{
	int c = REAL(accept4)(fd, addr, len, flags);

	if (MODE_SOCKETS() && c >= 0)
		accepted(c);
	return c;
}

/* A thread about to use fd works for its client from now on. */
#define TOUCH(fd)                 \
	do {                      \
		if (MODE_SOCKETS()) \
			touched(fd); \
	} while (0)

HT_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	TOUCH(fd);
	return REAL(read)(fd, buf, n);
}

HT_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	TOUCH(fd);
	return REAL(readv)(fd, iov, iovcnt);
}

HT_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	TOUCH(fd);
	return REAL(recv)(fd, buf, n, flags);
}

HT_EXPORT ssize_t recvfrom(int fd, void *restrict buf, size_t n, int flags,
			   __SOCKADDR_ARG addr, socklen_t *restrict len)
{
	TOUCH(fd);
	return REAL(recvfrom)(fd, buf, n, flags, addr, len);
}

HT_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	TOUCH(fd);
	return REAL(recvmsg)(fd, msg, flags);
}

HT_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	TOUCH(fd);
	return REAL(write)(fd, buf, n);
}

HT_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	TOUCH(fd);
	return REAL(writev)(fd, iov, iovcnt);
}

HT_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	TOUCH(fd);
	return REAL(send)(fd, buf, n, flags);
}

HT_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	TOUCH(fd);
	return REAL(sendto)(fd, buf, n, flags, addr, len);
}

HT_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	TOUCH(fd);
	return REAL(sendmsg)(fd, msg, flags);
}

HT_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	TOUCH(out_fd);
	return REAL(sendfile)(out_fd, in_fd, offset, count);
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	TOUCH(fd);
	return REAL(__read_chk)(fd, buf, n, buflen);
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	TOUCH(fd);
	return REAL(__recv_chk)(fd, buf, n, buflen, flags);
}

ssize_t __recvfrom_chk(int fd, void *restrict buf, size_t n, size_t buflen,
		       int flags, __SOCKADDR_ARG addr, socklen_t *restrict len)
{
	TOUCH(fd);
	return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, len);
}

HT_EXPORT int close(int fd)
{
	uint64_t id = 0;
	int ret;

	if (ht_guards_fd(fd))
		return 0;	/* our dump: it stays open, the program sees success */
	/* before the real close: after it the kernel may hand fd out again */
	if (MODE_SOCKETS())
		id = fd_forget(fd);
	ret = REAL(close)(fd);
	if (HT_UNLIKELY(id))
		ended(id);
	return ret;
}

HT_EXPORT int shutdown(int fd, int how)
{
	uint64_t id = 0;
	int ret;

	if (MODE_SOCKETS())
		id = fd_forget(fd);
	ret = REAL(shutdown)(fd, how);
	if (HT_UNLIKELY(id))
		ended(id);
	return ret;
}

/* dup2/dup3 over a client's socket close it. */
HT_EXPORT int dup2(int oldfd, int newfd)
{
	int ret;

	if (newfd >= 0 && newfd == writer_fd() && !ht_in_shim && oldfd != newfd)
		writer_move_fd();	/* the dump's; a kept file's is reopened (keptfile.c) */
	ret = REAL(dup2)(oldfd, newfd);
	uint64_t id;

	if (MODE_SOCKETS() && ret >= 0 && oldfd != newfd) {
		int saved = errno;

		id = fd_forget(newfd);
		if (id)
			ended(id);
		errno = saved;
	}
	return ret;
}

HT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int ret;

	if (newfd >= 0 && newfd == writer_fd() && !ht_in_shim && oldfd != newfd)
		writer_move_fd();	/* the dump's; a kept file's is reopened (keptfile.c) */
	ret = REAL(dup3)(oldfd, newfd, flags);
	uint64_t id;

	if (MODE_SOCKETS() && ret >= 0) {
		int saved = errno;

		id = fd_forget(newfd);
		if (id)
			ended(id);
		errno = saved;
	}
	return ret;
}

HT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	int ours = first <= last ? ht_guarded_fd_in(first, last) : -1;

	/* Close around our descriptors (the dump's, the files the writer re-reads). */
	if (ours >= 0) {
		int r1 = 0, r2 = 0;

		if ((unsigned)ours > first)
			r1 = close_range(first, (unsigned)ours - 1, flags);
		if ((unsigned)ours < last)
			r2 = close_range((unsigned)ours + 1, last, flags);
		return r1 < 0 ? r1 : r2;
	}
	if (MODE_SOCKETS() && !(flags & CLOSE_RANGE_CLOEXEC)) {
		int saved = errno;

		forget_range(first, last);
		errno = saved;
	}
	if (!REAL(close_range)) {	/* a C library older than 2.34 */
		errno = ENOSYS;
		return -1;
	}
	return REAL(close_range)(first, last, flags);
}

HT_EXPORT void closefrom(int lowfd)
{
	int ours;

	/* around our descriptors, lowest first */
	while (lowfd >= 0 && (ours = ht_guarded_fd_in((unsigned)lowfd, ~0u)) >= 0) {
		if (ours > lowfd)
			close_range((unsigned)lowfd, (unsigned)ours - 1, 0);
		lowfd = ours + 1;
	}
	if (MODE_SOCKETS() && lowfd >= 0) {
		int saved = errno;

		forget_range((unsigned)lowfd, ~0u);
		errno = saved;
	}
	if (REAL(closefrom))
		REAL(closefrom)(lowfd);
}

/* ---- threads mode (called by thread.c) ---------------------------------- */

/* One control event written into the thread's open buffer (BUSY held). */
static void put_control(struct ht_thread *t, unsigned sub, uint64_t id,
			const char *text)
{
	uint8_t *p = thread_pos(t);

	*p++ = HTR_EV_BYTE(HTR_EV_CONTROL, 0);
	p = htr_put_u64(p, thread_delta(t, ht_now()));
	p = htr_put_u64(p, sub);
	p = htr_put_u64(p, id);
	if (text) {
		size_t n = strlen(text);

		p = htr_put_u64(p, n);
		memcpy(p, text, n);
		p += n;
	}
	thread_commit(t, p, thread_last_ptr(t));
}

void clients_thread_start(struct ht_thread *t)
{
	char label[48];
	struct ht_str s;
	pid_t tid;
	uint64_t id;

	if (ht_cfg.clients != HT_CLIENTS_THREADS)
		return;
	tid = (pid_t)syscall(SYS_gettid);
	if (tid == getpid())
		return;	/* the main thread serves no request */
	id = THREAD_CLIENT_BASE + atomic_fetch_add(&next_thread_client, 1) + 1;
	str_init(&s, label, sizeof(label));
	str_add(&s, "thread ");
	str_add_u64(&s, (uint64_t)tid);
	/* the caller left room for far more than these two small events */
	put_control(t, HTR_SUB_CLIENT_BEGIN, id, label);
	put_control(t, HTR_SUB_CLIENT_SET, id, NULL);
	thread_set_client(t, id);
	thread_own_client = id;
}

void clients_thread_exit(void)
{
	uint64_t id = thread_own_client;

	if (!id)
		return;
	thread_own_client = 0;
	/* THREAD_EXIT, written next, resets the thread's client in the dump */
	if (ht_self)
		thread_set_client(ht_self, 0);
	ev_control(HTR_SUB_CLIENT_END, id, 0, NULL);
}
