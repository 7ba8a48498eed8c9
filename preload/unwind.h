/* unwind.h - the fast x86-64 stack walker of unwind.c */
#ifndef HT_UNWIND_H
#define HT_UNWIND_H

#include <stdint.h>

int unwind_init(void);
/* A module was unloaded: forget every cached rule. */
void unwind_forget(void);
/* The thread exits: its cache goes back to the pool (tpool.c). */
void unwind_thread_exit(void);
/* A forked child: the pool's lock and list start afresh. */
void unwind_after_fork(void);
/*
 * The caller's return addresses, innermost first, at most max, every frame
 * in [self_lo, self_hi) (the shim's text) left out; -1 when some frame
 * needs libunwind.
 */
int unwind_backtrace(uintptr_t *out, unsigned max, uintptr_t self_lo, uintptr_t self_hi,
		     uint64_t *tag);
/*
 * With tag, the walk is remembered, or found remembered: *tag is then what
 * unwind_memo_tag() last said of it (0 at first).  unwind_memo_tag() says
 * something of the walk this thread made or found last.
 */
void unwind_memo_tag(uint64_t tag);

#endif
