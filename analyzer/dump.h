/* dump.h - reads a .htr dump and streams its events in time order */
#ifndef HT_DUMP_H
#define HT_DUMP_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "../common/htr_format.h"

/*
 * The reader decompresses one frame at a time, merges the per-thread chunks
 * by event time under the watermark rule (see htr_format.h) and hands out
 * decoded events one by one.  Its memory is bounded by what lies between two
 * watermarks, never by the length of the dump.  Stacks and modules are kept
 * (they are small and needed to print sites).
 *
 * On a dump of 4 MiB or more (not in follow mode) the reading, decompressing
 * and merging run on threads of their own, a few batches ahead of the
 * caller; HEAPTRAIL_READER_THREAD=0 or 1 turns that off or on for every
 * dump.  The caller sees the same events in the same order either way, and
 * the accessors below (stacks, modules, time) change only as dump_next()
 * hands the events out: call them from the thread that calls dump_next().
 *
 * A realloc is delivered as two events: DUMP_FREE of the old block (api
 * HTR_API_REALLOC) at the time before the call, then DUMP_ALLOC of the new
 * block (api HTR_API_REALLOC, 'old_ptr' = the old block; the replay knows
 * its size) at the time after.
 *
 * Errors: dump_open() returns NULL and fills 'err' with one readable line for
 * a missing, foreign or unreadable file.  dump_next() returns 1 for an event,
 * 0 at the end, and -1 on a hard error (message in dump_error()).  A
 * truncated or corrupt frame after at least one good frame is not a hard
 * error: the reader stops there, dump_next() returns 0 and dump_warning()
 * says what happened ("truncated frame at byte N: the first 3.2 s were read").
 */

enum dump_kind {
	DUMP_ALLOC = 1,		/* ptr, size, usable, stack, client, api, old_ptr (realloc) */
	DUMP_FREE,		/* ptr, api */
	DUMP_SAMPLE,		/* sample */
	DUMP_MARK,		/* text = label */
	DUMP_MODULE_LOAD,	/* module = index into dump_modules() */
	DUMP_MODULE_UNLOAD,	/* module */
	DUMP_THREAD_START,	/* tid, parent_tid in 'id' */
	DUMP_THREAD_EXIT,	/* tid */
	DUMP_THREAD_NAME,	/* tid, text = name */
	DUMP_CLIENT_BEGIN,	/* id = client, text = label */
	DUMP_CLIENT_END,	/* id = client */
	DUMP_POOL_CREATE,	/* id = pool, text = label */
	DUMP_POOL_DESTROY,	/* id = pool */
	DUMP_POOL_ALLOC,	/* id = pool, ptr, size, stack, client */
	DUMP_POOL_FREE,		/* id = pool, ptr */
	DUMP_REACH,		/* reach: classification of live blocks */
	DUMP_LOST,		/* lost_events, lost_reason (cumulative) */
	DUMP_END,		/* end_how, end_status */
};

struct dump_sample {
	uint64_t rss_bytes;
	uint64_t arena_bytes;
	uint64_t mmap_bytes;
	uint64_t in_use_bytes;
	uint64_t free_bytes;
	uint64_t top_releasable_bytes;
	uint64_t shim_bytes;
};

struct dump_reach_entry {
	uint64_t ptr;
	uint8_t cls;		/* enum htr_reach */
};

/* Fields not listed for an event's kind are unspecified. */
struct dump_event {
	enum dump_kind kind;
	uint64_t time;		/* ns since start */
	uint32_t tid;
	uint8_t api;		/* enum htr_api, for ALLOC / FREE */
	uint64_t ptr;
	uint64_t old_ptr;	/* realloc: the block this one replaced, else 0 */
	uint64_t size;
	uint64_t usable;	/* usable size (>= size) */
	uint32_t stack;		/* stack id, HTR_STACK_NONE when unknown */
	/*
	 * ALLOC / FREE: the reader's number for the block while it lives, small
	 * and reused (see dump_internal.h); UINT32_MAX for a free of a pointer
	 * not live, 0 for none (ptr 0)
	 */
	uint32_t handle;
	uint64_t client;	/* client the thread worked for, 0 = none (program ids are 64-bit) */
	/* DUMP_FREE: a realloc's free half, whose allocation half is the thread's next event */
	int realloc_pair;
	uint64_t id;		/* client / pool / parent tid / module index */
	const char *text;	/* valid until the next dump_next() */
	struct dump_sample sample;
	/* DUMP_REACH: entries valid until the next dump_next() */
	const struct dump_reach_entry *reach;
	size_t nreach;
	int reach_kind;		/* 0 at exit, 1 live snapshot */
	/* DUMP_LOST */
	uint64_t lost_events;
	int lost_reason;
	/* DUMP_END */
	int end_how;
	int end_status;
	uint64_t events_written;
};

struct dump_process {
	uint32_t pid, ppid;
	uint64_t start_mono_ns;
	uint64_t start_realtime_ns;
	uint64_t page_size;
	char *exe;
	char **argv;		/* NULL-terminated */
	int argc;
	uint64_t sample_bytes;	/* 0 = full tracing */
	int unwinder;		/* enum htr_unwind */
	unsigned max_depth;
	unsigned flags;		/* HTR_PF_* */
	unsigned fork_generation;
};

struct dump_module {
	uint32_t id;		/* id in the dump */
	uint64_t load_bias;
	char *path;
	uint8_t build_id[64];
	size_t build_id_len;
	uint64_t lo, hi;	/* lowest and highest address of its segments */
	const uint64_t *segs;	/* its segments as recorded: nsegs x (start, end) */
	size_t nsegs;
	uint64_t loaded_at, unloaded_at;	/* dump time; unloaded_at = UINT64_MAX if never */
};

/* One frame of a recorded stack, as captured (before symbolization). */
struct dump_frame {
	uint64_t ip;		/* absolute address at recording time */
	int module;		/* index into dump_modules(), -1 when none */
	uint64_t offset;	/* ip - module load bias (file-relative vaddr) */
};

struct dump_stack {
	uint32_t depth;
	struct dump_frame *frames;	/* [0] is the allocating function's caller */
};

struct dump;

struct dump *dump_open(const char *path, char *err, size_t errlen);
int dump_next(struct dump *d, struct dump_event *ev);
void dump_close(struct dump *d);

const char *dump_path(const struct dump *d);
const char *dump_error(const struct dump *d);
/* NULL when the dump was read cleanly so far */
const char *dump_warning(const struct dump *d);
/* Valid after dump_open(). */
const struct dump_process *dump_process(const struct dump *d);
/*
 * Stack by id, NULL for HTR_STACK_NONE or an id the dump never defined
 * (a truncated dump).  Frames are resolved against the modules loaded when
 * the stack was first recorded.  Valid until dump_close().
 */
const struct dump_stack *dump_stack(const struct dump *d, uint32_t id);
/* Number of stack ids defined so far (ids are 1..n). */
uint32_t dump_stack_count(const struct dump *d);
/* Every module loaded so far, in load order; valid until the next dump_next(). */
const struct dump_module *dump_modules(const struct dump *d, size_t *n);
/* Time of the last event read so far (the dump's duration at the end). */
uint64_t dump_time(const struct dump *d);
/* Bytes of the file consumed so far and its size, for progress output. */
uint64_t dump_offset(const struct dump *d);
uint64_t dump_file_size(const struct dump *d);

/*
 * Follow mode: at the end of the file dump_next() returns 0 but a later call
 * may return more events once the writer appended frames.  Off by default.
 */
void dump_set_follow(struct dump *d, int follow);

#endif
