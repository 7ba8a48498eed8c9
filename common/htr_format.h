/* htr_format.h - the heaptrail dump format (.htr), shared by shim and analyzer */
#ifndef HTR_FORMAT_H
#define HTR_FORMAT_H

#include <stdint.h>

/*
 * A dump is a fixed file header followed by independent frames.
 *
 *   file header   struct htr_file_header, little endian, uncompressed
 *   frame*        struct htr_frame_header + one zstd frame (with checksum)
 *
 * Each frame decompresses on its own into a run of records, so a dump cut off
 * anywhere (SIGKILL, OOM killer, full disk) reads up to its last complete
 * frame.  A frame never splits a record.
 *
 * Every record starts with one type byte (enum htr_rec) followed by LEB128
 * varints (htr_varint.h); "s" marks a zigzag-encoded signed varint, "str" a
 * varint length followed by that many bytes (no terminating NUL), "bytes" the
 * same for binary data.
 *
 * The first record of the first frame is the HTR_REC_PROCESS record; a dump
 * holds exactly one.
 *
 * Times are nanoseconds of CLOCK_MONOTONIC since the process record's
 * start_mono_ns ("dump time").
 *
 * Ordering.  Heap events are buffered per thread and reach the file in chunks
 * (HTR_REC_CHUNK); chunks of different threads interleave out of time order.
 * The writer guarantees: when a HTR_REC_WATERMARK with time W has been read,
 * every event with time < W has already been read.  A reader merges the
 * chunks it holds by event time and replays everything older than the last
 * watermark; at equal times, frees sort before allocations.  Top-level timed
 * records (samples, module loads, marks) obey the same watermark rule.
 * After the last frame (or at the end record) everything left is replayed.
 *
 * Shim frames were taken at the moment of the event: an allocation's time is
 * read after the allocator returned, a free's time before the block is handed
 * back, so a block freed in one thread and reused by another always has its
 * free ordered first.
 */

#define HTR_FILE_MAGIC "HTRDUMP\n"	/* 8 bytes */
#define HTR_FORMAT_VERSION 1
#define HTR_FRAME_MAGIC 0x52465448u	/* "HTFR" little endian */

/* Largest decompressed frame a writer produces and a reader accepts. */
#define HTR_FRAME_RAW_MAX (4u << 20)
/* Longest stack a dump carries. */
#define HTR_MAX_DEPTH 256

struct htr_file_header {
	char magic[8];		/* HTR_FILE_MAGIC */
	uint32_t version;	/* HTR_FORMAT_VERSION */
	uint32_t header_size;	/* sizeof(struct htr_file_header) */
	uint32_t pid;		/* writer's pid, read by later writers to avoid clobbering */
	uint32_t flags;		/* reserved, 0 */
	uint64_t start_realtime_ns;	/* CLOCK_REALTIME at start */
	uint8_t reserved[32];
};

struct htr_frame_header {
	uint32_t magic;		/* HTR_FRAME_MAGIC */
	uint32_t compressed_size;	/* bytes of zstd data that follow */
	uint32_t raw_size;	/* decompressed bytes, <= HTR_FRAME_RAW_MAX */
	uint32_t check;		/* htr_frame_check() of the three fields above */
};

static inline uint32_t htr_frame_check(const struct htr_frame_header *h)
{
	uint32_t x = h->magic * 0x9e3779b1u;

	x ^= h->compressed_size + 0x7f4a7c15u + (x << 6) + (x >> 2);
	x ^= h->raw_size + 0x7f4a7c15u + (x << 6) + (x >> 2);
	return x;
}

/* Top-level records. */
enum htr_rec {
	/*
	 * pid, ppid, start_mono_ns, start_realtime_ns, page_size,
	 * exe str, cmdline bytes (NUL-separated arguments),
	 * sample_bytes (0 = every event recorded), unwinder (enum htr_unwind),
	 * max_depth, flags (HTR_PF_*), fork_generation (0 for the root image)
	 */
	HTR_REC_PROCESS = 1,
	/*
	 * time, module_id, load_bias, path str, build_id bytes, nseg,
	 * nseg x (start, end) absolute address ranges of the PT_LOAD segments
	 */
	HTR_REC_MODULE_LOAD = 2,
	HTR_REC_MODULE_UNLOAD = 3,	/* time, module_id */
	/*
	 * tid, base_time, nbytes, then nbytes of events (enum htr_ev) of one
	 * thread in time order.  The first event's time delta is relative to
	 * base_time, each next one to the previous event.  Pointers are
	 * zigzag deltas from the previous pointer in the same chunk (the first
	 * from 0).  Per-thread state (current client) carries over from the
	 * thread's previous chunk; THREAD_EXIT resets it (a tid may be
	 * reused).  HTR_EV_STACK carries no time: it defines a stack for the
	 * events after it and is resolved against the modules loaded at the
	 * time of the next timed event of its chunk.
	 */
	HTR_REC_CHUNK = 4,
	/*
	 * time, rss_bytes, arena_bytes (mallinfo2 arena), mmap_bytes (hblkhd),
	 * in_use_bytes (uordblks), free_bytes (fordblks),
	 * top_releasable_bytes (keepcost), shim_bytes (the shim's own mappings)
	 */
	HTR_REC_SAMPLE = 5,
	HTR_REC_WATERMARK = 6,	/* time */
	/*
	 * time, events_lost, reason (enum htr_lost): events that could not be
	 * recorded.  Cumulative: a later record replaces an earlier one.
	 */
	HTR_REC_LOST = 7,
	/*
	 * time, how (enum htr_end), status (exit code or signal number),
	 * events_written, events_lost
	 */
	HTR_REC_END = 8,
	/* time, label str: a marker (heaptrail_mark, the marker signal) */
	HTR_REC_MARK = 9,
	/*
	 * time, scan kind (0 = at exit, 1 = live snapshot), nblocks,
	 * nblocks x (ptr delta s from the previous ptr, class enum htr_reach):
	 * the result of a reachability scan, listing every live block.  A scan
	 * too large for one frame is written as several REACH records with the
	 * same time and kind; together they list every live block.
	 */
	HTR_REC_REACH = 10,
};

/* Events inside a chunk.  The first byte is (api << 3) | type. */
enum htr_ev {
	/* dt, ptr s, size, usable_extra (usable size - size), stack_id */
	HTR_EV_ALLOC = 1,
	/* dt, ptr s */
	HTR_EV_FREE = 2,
	/*
	 * dt (time before the call), dt2 (time after, relative to dt),
	 * old ptr s, new ptr s (relative to old), size, usable_extra, stack_id:
	 * old was freed at the first time and new allocated at the second.
	 * The next event's dt is relative to the second time and its pointer
	 * delta to the new pointer.
	 * realloc(NULL, n) is written as HTR_EV_ALLOC and a realloc(p, 0)
	 * that frees as HTR_EV_FREE, both with api HTR_API_REALLOC.
	 */
	HTR_EV_REALLOC = 3,
	/* stack_id, depth, depth x ip (first absolute, then s deltas) */
	HTR_EV_STACK = 4,
	/*
	 * dt, sub (enum htr_sub), then per sub:
	 *  THREAD_START: parent_tid; THREAD_EXIT: -; THREAD_NAME: name str;
	 *  CLIENT_BEGIN: client_id, label str; CLIENT_END: client_id;
	 *  CLIENT_SET: client_id (0 = none): later allocations of this thread
	 *  are made on behalf of that client;
	 *  POOL_CREATE: pool_id, label str; POOL_DESTROY: pool_id;
	 *  POOL_ALLOC: pool_id, ptr s, size, stack_id; POOL_FREE: pool_id, ptr s
	 */
	HTR_EV_CONTROL = 5,
};

#define HTR_EV_TYPE(b) ((b) & 7)
#define HTR_EV_API(b) ((b) >> 3)
#define HTR_EV_BYTE(type, api) ((uint8_t)(((api) << 3) | (type)))

enum htr_sub {
	HTR_SUB_THREAD_START = 1,
	HTR_SUB_THREAD_EXIT = 2,
	HTR_SUB_THREAD_NAME = 3,
	HTR_SUB_CLIENT_BEGIN = 4,
	HTR_SUB_CLIENT_END = 5,
	HTR_SUB_CLIENT_SET = 6,
	HTR_SUB_POOL_CREATE = 7,
	HTR_SUB_POOL_DESTROY = 8,
	HTR_SUB_POOL_ALLOC = 9,
	HTR_SUB_POOL_FREE = 10,
};

/* Which entry point made an event; at most 31. */
enum htr_api {
	HTR_API_MALLOC = 1,
	HTR_API_CALLOC = 2,
	HTR_API_REALLOC = 3,
	HTR_API_REALLOCARRAY = 4,
	HTR_API_POSIX_MEMALIGN = 5,
	HTR_API_ALIGNED_ALLOC = 6,
	HTR_API_MEMALIGN = 7,
	HTR_API_VALLOC = 8,
	HTR_API_PVALLOC = 9,
	HTR_API_NEW = 10,	/* operator new, every variant but array */
	HTR_API_NEW_ARRAY = 11,	/* operator new[], every variant */
	HTR_API_FREE = 12,
	HTR_API_DELETE = 13,	/* operator delete, every variant but array */
	HTR_API_DELETE_ARRAY = 14,
	HTR_API_COUNT
};

/* Allocation families, for mismatch reports (new[] freed with free, ...). */
enum htr_family { HTR_FAMILY_MALLOC, HTR_FAMILY_NEW, HTR_FAMILY_NEW_ARRAY };

static inline enum htr_family htr_api_family(unsigned api)
{
	if (api == HTR_API_NEW || api == HTR_API_DELETE)
		return HTR_FAMILY_NEW;
	if (api == HTR_API_NEW_ARRAY || api == HTR_API_DELETE_ARRAY)
		return HTR_FAMILY_NEW_ARRAY;
	return HTR_FAMILY_MALLOC;
}

enum htr_unwind { HTR_UNWIND_LIBUNWIND = 0, HTR_UNWIND_FP = 1 };

/* HTR_REC_PROCESS flags */
#define HTR_PF_FOLLOWED_FORK 1u	/* this image is a forked child */
#define HTR_PF_AFTER_EXEC 2u	/* this image replaced an earlier one (exec) */
/*
 * Compact chunk encodings (the shim sets both; a dump without them uses the
 * plain ones above):
 * HTR_PF_TIME_TICKS: every time delta inside a chunk (dt, dt2) counts ticks
 *   of 1 << HTR_TICK_SHIFT ns; a chunk's base_time stays in ns and is a
 *   multiple of the tick.  Event times are rounded down to the tick; a
 *   tick is far shorter than any hand-over of a block between threads.
 * HTR_PF_PTR_UNITS: every pointer delta inside a chunk ("ptr s" fields of
 *   events and pool control events) is htr_put_ptr()'s encoding: 16-byte
 *   units when the delta is a multiple of 16, bytes otherwise.
 */
#define HTR_PF_TIME_TICKS 4u
#define HTR_PF_PTR_UNITS 8u
/*
 * HTR_PF_PACKED: every CHUNK's nbytes hold its events packed into columns
 * by the writer (htr_chunkpack.h); a reader unpacks them first.
 */
#define HTR_PF_PACKED 16u
#define HTR_TICK_SHIFT 6

enum htr_lost {
	HTR_LOST_DISK = 1,	/* the output could not be written (disk full, I/O error) */
	HTR_LOST_MEMORY = 2,	/* the shim could not map memory */
	HTR_LOST_REENTRANT = 3,	/* made inside the shim (signal handler during an event) */
	HTR_LOST_STACKS = 4,	/* stack table full: events kept, stacks truncated */
};

enum htr_end {
	HTR_END_EXIT = 1,	/* exit(status) or return from main */
	HTR_END_SIGNAL = 2,	/* killed by signal 'status' */
	HTR_END_EXEC = 3,	/* replaced by exec; the next image has its own dump */
	HTR_END_UNKNOWN = 4,	/* the shim was unloaded without seeing how */
};

enum htr_reach {
	HTR_REACH_REACHABLE = 0,
	HTR_REACH_POSSIBLY = 1,	/* reached only through interior pointers */
	HTR_REACH_INDIRECT = 2,	/* reachable only from lost blocks */
	HTR_REACH_LOST = 3,	/* definitely lost */
};

/* Stack id 0 means "no stack" (unwinding failed or was not attempted). */
#define HTR_STACK_NONE 0

#endif
