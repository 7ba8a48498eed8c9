/* stackbounds.c - where the calling thread's stack lies, read from /proc/self/maps */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shim.h"

/*
 * The stack walks read only inside the thread's own stack, so they need
 * its bounds, once per thread.  pthread_getattr_np() would give them, but
 * it holds the thread's own lock while it allocates (the main thread's
 * answer comes from reading /proc/self/maps with stdio, every thread's
 * CPU set from realloc): a program inside pthread_getattr_np() for itself
 * (Rust's runtime, at the start of main and of every thread) reached the
 * shim's first capture of that thread with the lock held, and the shim's
 * own pthread_getattr_np() then waited for it for ever.
 *
 * So the shim reads the mapping that holds the thread's frame from
 * /proc/self/maps itself: no allocation, no lock, the file kept open at a
 * high descriptor (keptfile.c; opened again in a forked child, whose maps
 * differ).  A thread's stack is the whole mapping; the main thread's
 * ("[stack]") may grow down to its limit (RLIMIT_STACK) but not into the
 * mapping below it, as glibc computes it.  A thread whose first capture
 * comes on a signal's alternate stack learns its bounds at the next one;
 * one whose first comes on a stack of its own making (swapcontext) keeps
 * that one, and its captures elsewhere go to libunwind.
 */

static struct ht_kept_file maps = HT_KEPT_FILE("/proc/self/maps");
static int no_maps;	/* /proc not mounted: every walk goes to libunwind, without asking again */
__thread uintptr_t ht_stack_lo __attribute__((tls_model("initial-exec")));
__thread uintptr_t ht_stack_hi __attribute__((tls_model("initial-exec")));

void stackbounds_open(void)
{
	no_maps = kept_file_open(&maps, 0) < 0;
}

struct mapping {
	uintptr_t start, end, below;	/* below: the end of the mapping before it */
	int is_stack;			/* the main thread's "[stack]" */
};

/*
 * One pass over the file in small pieces: this may run on a thread whose
 * whole stack is 16 KiB.  Each line is "start-end perms offset dev inode
 * path"; only the two numbers and the line's last 7 characters matter.
 */
struct scan {
	uintptr_t num[2];	/* start, end */
	int field;		/* 0, 1: in a number; 2: the rest of the line */
	char tail[8];		/* the line's last characters */
};

static int hexdigit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* 1: the line just ended holds addr; -1: addr lies before it (not mapped); 0: go on */
static int line_end(struct scan *sc, uintptr_t addr, struct mapping *m)
{
	uintptr_t start = sc->num[0], end = sc->num[1];

	if (addr >= start && addr < end) {
		m->start = start;
		m->end = end;
		m->is_stack = !memcmp(sc->tail, "[stack]", 7);
		return 1;
	}
	if (start > addr)
		return -1;	/* the lines are in address order */
	m->below = end;
	return 0;
}

static int find_mapping(uintptr_t addr, struct mapping *m)
{
	char buf[256];
	struct scan sc;
	off_t off = 0;

	memset(&sc, 0, sizeof(sc));
	m->below = 0;
	for (;;) {
		ssize_t n = kept_file_pread(&maps, buf, sizeof(buf), off), i;

		if (n <= 0)
			return -1;
		off += n;
		for (i = 0; i < n; i++) {
			char c = buf[i];
			int d;

			if (c == '\n') {
				int r = line_end(&sc, addr, m);

				if (r)
					return r > 0 ? 0 : -1;
				memset(&sc, 0, sizeof(sc));
				continue;
			}
			if (sc.field < 2 && (d = hexdigit(c)) >= 0) {
				sc.num[sc.field] = sc.num[sc.field] << 4 | (uintptr_t)d;
				continue;
			}
			if (sc.field < 2)
				sc.field++;	/* the '-', then the blank after the end */
			memmove(sc.tail, sc.tail + 1, 6);
			sc.tail[6] = c;
		}
	}
}

int ht_thread_stack_learn(uintptr_t *lo, uintptr_t *hi)
{
	struct mapping m;
	struct rlimit rl;
	stack_t ss;

	if (no_maps)
		return -1;
	/* on a signal's alternate stack: not the thread's (the walk stops there) */
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		return -1;
	if (find_mapping((uintptr_t)__builtin_frame_address(0), &m) != 0)
		return -1;
	*lo = m.start;
	if (m.is_stack) {
		*lo = m.below;
		if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur < m.end - m.below)
			*lo = m.end - rl.rlim_cur;
	}
	*hi = m.end;
	ht_stack_lo = *lo;
	ht_stack_hi = *hi;
	return 0;
}
