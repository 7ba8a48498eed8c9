/* writer.c - the writer thread: drains buffers, compresses frames, writes the dump */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "chunkpack.h"
#include "shim.h"

/*
 * One thread owns the file.  Every interval it takes a round:
 *   sample -> module changes -> W = now -> take every thread's partial
 *   buffer -> drain the full queue and pending records -> watermark W ->
 *   compress and write the frame.
 * Full buffers wake it early (futex), so a busy program streams continuously.
 * Its own memory (frame buffers, zstd's context) comes from a region, all of
 * it taken at start: zstd works in a fixed workspace (a static context) and
 * never allocates after that, however the frame sizes come and go.
 */

#define RAW_LIMIT HTR_FRAME_RAW_MAX
/*
 * A busy program's frames are cut at this size between rounds: small
 * enough that a process killed mid-run loses little (the frame being
 * written), large enough for zstd to find what repeats.
 */
#define FLUSH_BYTES (512u << 10)
#define PENDING_BYTES (256u << 10)
/* the packer's streams: a chunk's events, and a quarter for re-encoded values */
#define PACK_STREAM_BYTES (CHUNKPACK_MAX_BYTES + CHUNKPACK_MAX_BYTES / 4)

static struct ht_region writer_region;
static uint8_t *raw;
static size_t raw_len;
static uint8_t *zout;
static size_t zout_cap;
static ZSTD_CCtx *cctx;
static struct chunkpack packer;	/* the columns of a chunk being packed */
#define ZSTD_LEVEL 1
/*
 * The dump's descriptor, kept away from the program's own numbers.  A
 * program thread may move it (writer_move_fd) while the writer uses it:
 * fd_busy names the number a system call of the writer is using, and the
 * mover waits until that is no longer the old one before giving it up.
 */
static _Atomic int fd = -1;
static _Atomic int fd_busy = -1;
static atomic_flag move_lock = ATOMIC_FLAG_INIT;
static char path[PATH_MAX];
static pthread_t thread;
static _Atomic int running;	/* the writer thread exists */
static _Atomic int tid;		/* its tid (HEAPTRAIL_REACH leaves it running) */
static _Atomic uint32_t wake_word;
static _Atomic int writer_asleep;	/* in futex_wait on wake_word, or about to be */
static _Atomic int stop_how;	/* != 0: final round requested */
static _Atomic int pause_req;	/* writer_pause(): a round, then the thread ends */
static int stop_status;
static _Atomic int finished;	/* final round written */
static _Atomic uint64_t round_requested, round_done;
static _Atomic uint32_t progress_word;	/* bumped after each round, futex */
static _Atomic int round_end_how;	/* != 0: the next round ends with an END record */
static _Atomic uint64_t allocator_since;	/* the writer entered mallinfo2() then, or 0 */
enum { ALLOC_IDLE, ALLOC_INSIDE, ALLOC_TAKEN };
static _Atomic int alloc_state;	/* the writer in mallinfo2(), or taken over there */
/*
 * mallinfo2() walks every free chunk of every arena, holding each arena's
 * lock: on a large, fragmented heap (python3's) that took milliseconds, a
 * stall of the program's malloc calls every round.  So a round reads the
 * allocator's figures (and writes a SAMPLE) only when at least 100 times
 * the last call's duration has passed since it, keeping it under 1% of the
 * time; on small heaps that is every round, as before.  A marker, and the
 * final round, always get a fresh sample ('frag --at MARK' reads it).
 */
static uint64_t allocator_next_ns;
static _Atomic int marked;	/* a marker was queued since the last sample */
static int disk_failed;
static int zstd_failed;		/* said once: a frame could not be compressed */
static int initial_modules;	/* a forked child's first round lists the modules */
static uint64_t file_off;	/* end of the last whole frame on disk */
static uint64_t frame_events;	/* events in the frame being built */
/*
 * The last frames written (where each began, how many events it held), so
 * that a full disk can give one back to make room for the frame that says
 * recording stopped; and where that marker frame begins (0: none yet).
 */
#define FRAME_HISTORY 4
static struct { uint64_t start, events; } written[FRAME_HISTORY];
static unsigned nwritten;
static uint64_t marker_off;
static int final_round;	/* the last round is being written: a marker carries END */
static int after_exec;		/* an earlier image of this pid wrote a dump */
static uint64_t events_written;
static uint64_t last_lost_total;

/* Top-level records from other threads (module loads, marks). */
static atomic_flag pending_lock = ATOMIC_FLAG_INIT;
static uint8_t *pending;
static size_t pending_len;

/* The dump's descriptor for one system call; fd_put() right after it. */
static int fd_get(void)
{
	int f;

	do {
		f = atomic_load(&fd);
		atomic_store(&fd_busy, f);
	} while (atomic_load(&fd) != f);
	return f;
}

static void fd_put(void)
{
	atomic_store(&fd_busy, -1);
}

static int write_all(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd_get(), p, len);

		fd_put();

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint64_t lost_total(void);

/* Cut the file back to its last whole frame: a partial one would read as damage. */
static void take_back(void)
{
	int f = fd_get();

	if (ftruncate(f, (off_t)file_off) == 0)
		lseek(f, (off_t)file_off, SEEK_SET);
	fd_put();
}

static size_t zstd_error;	/* the last compression error, for the message */

/*
 * Compress and write one frame: 0, FRAME_ZSTD when zstd failed (nothing
 * written), or a negative errno when the disk did (the file is cut back to
 * its last whole frame).
 */
#define FRAME_ZSTD 1
static int write_frame(const uint8_t *data, size_t len)
{
	struct htr_frame_header h;
	size_t z;
	int ret;

	z = ZSTD_compress2(cctx, zout, zout_cap, data, len);
	if (ZSTD_isError(z)) {
		zstd_error = z;
		return FRAME_ZSTD;
	}
	h.magic = HTR_FRAME_MAGIC;
	h.compressed_size = (uint32_t)z;
	h.raw_size = (uint32_t)len;
	h.check = htr_frame_check(&h);
	ret = write_all(&h, sizeof(h));
	if (!ret)
		ret = write_all(zout, z);
	if (ret) {
		take_back();
		return ret;
	}
	file_off += sizeof(h) + z;
	return 0;
}

/*
 * The frame that says recording stopped: LOST with every event not written,
 * and with 'end' the END record too.  It must reach the disk: when even it
 * does not fit, the last data frames are given back one by one (their
 * events counted as lost) until it does.  An earlier marker is replaced.
 */
static void write_marker(int end)
{
	int ret;

	for (;;) {
		uint8_t rec[96], *q = rec;

		*q++ = HTR_REC_LOST;
		q = htr_put_u64(q, ht_now());
		q = htr_put_u64(q, lost_total());
		q = htr_put_u64(q, HTR_LOST_DISK);
		if (end) {
			*q++ = HTR_REC_END;
			q = htr_put_u64(q, ht_now());
			q = htr_put_u64(q, (uint64_t)atomic_load(&stop_how));
			q = htr_put_u64(q, (uint64_t)stop_status);
			q = htr_put_u64(q, events_written);
			q = htr_put_u64(q, lost_total());
		}
		if (marker_off) {
			file_off = marker_off;	/* this one replaces it */
			take_back();
		}
		marker_off = file_off;
		ret = write_frame(rec, (size_t)(q - rec));
		/* room is made only on a full disk (not a pipe, not zstd: review L7) */
		if (ret == 0 || !nwritten || (ret != -ENOSPC && ret != -EDQUOT && ret != -EFBIG)) {
			if (file_off == marker_off)
				marker_off = 0;		/* not written: nothing to replace */
			return;
		}
		marker_off = 0;
		nwritten--;
		file_off = written[nwritten].start;
		take_back();
		events_written -= written[nwritten].events;
		atomic_fetch_add(&ht_lost[HTR_LOST_DISK], written[nwritten].events);
	}
}

/*
 * The disk is full (or the file otherwise unwritable): stop writing, count
 * what cannot be written as lost, and leave a small frame that says so.
 * The target runs on.
 */
static void disk_failure(void)
{
	disk_failed = 1;
	events_written -= frame_events;
	atomic_fetch_add(&ht_lost[HTR_LOST_DISK], frame_events);
	ht_msg("cannot write the dump (disk full?): recording stops; the target keeps running");
	write_marker(final_round);	/* the final round's own flush failed: END too (review L6) */
}

/*
 * zstd failed on a frame (it cannot run out of memory in its fixed
 * workspace, so this is not expected): the frame's events are lost, counted
 * apart from the disk's, and recording goes on with the next frame.
 */
static void compress_failure(void)
{
	events_written -= frame_events;
	atomic_fetch_add(&ht_lost[HTR_LOST_MEMORY], frame_events);
	if (!zstd_failed) {
		char msg[192];
		struct ht_str s;

		zstd_failed = 1;
		str_init(&s, msg, sizeof(msg));
		str_add(&s, "cannot compress a frame of the dump (zstd: ");
		str_add(&s, ZSTD_getErrorName(zstd_error));
		str_add(&s, "): its events are counted as lost; recording goes on");
		ht_msg(msg);
	}
}

static void flush_frame(void)
{
	uint64_t start;
	int ret;

	if (!raw_len)
		return;
	if (disk_failed || atomic_load(&fd) < 0) {
		atomic_fetch_add(&ht_lost[HTR_LOST_DISK], frame_events);
		frame_events = 0;
		raw_len = 0;
		return;
	}
	start = file_off;
	ret = write_frame(raw, raw_len);
	if (ret == FRAME_ZSTD) {
		compress_failure();
	} else if (ret < 0) {
		disk_failure();
	} else if (start > sizeof(struct htr_file_header)) {
		/* (the first frame, the process record, is never given back) */
		if (nwritten == FRAME_HISTORY) {
			memmove(written, written + 1, sizeof(written) - sizeof(written[0]));
			nwritten--;
		}
		written[nwritten].start = start;
		written[nwritten].events = frame_events;
		nwritten++;
	}
	frame_events = 0;
	raw_len = 0;
}

static uint8_t *room(size_t need)
{
	if (raw_len + need > RAW_LIMIT)
		flush_frame();
	return raw + raw_len;
}

/* A CHUNK record's head, with room after it for a body of up to 'body' bytes. */
static uint8_t *chunk_head(uint32_t tid, uint64_t base_time, size_t body)
{
	uint8_t *p = room(40 + body);

	*p++ = HTR_REC_CHUNK;
	p = htr_put_u64(p, tid);
	return htr_put_u64(p, base_time);
}

/* Ends the record whose n body bytes were written HTR_VARINT_MAX bytes after p. */
static void chunk_tail(uint8_t *p, size_t n, uint32_t nevents)
{
	uint8_t len[HTR_VARINT_MAX];
	size_t ln = (size_t)(htr_put_u64(len, n) - len);

	memmove(p + ln, p + HTR_VARINT_MAX, n);
	memcpy(p, len, ln);
	raw_len = (size_t)(p + ln + n - raw);
	frame_events += nevents;
	events_written += nevents;
}

/* One buffer's events as the thread wrote them (marked so in a packed dump). */
static void append_buffer(struct ht_buf *b)
{
	uint8_t *p;
	size_t n = 0;

	if (disk_failed) {
		atomic_fetch_add(&ht_lost[HTR_LOST_DISK], b->nevents);
		return;
	}
	p = chunk_head(b->tid, b->base_time, 1 + b->len + HTR_VARINT_MAX);
	if (ht_cfg.pack != HT_PACK_OFF)
		p[HTR_VARINT_MAX + n++] = HTR_PACK_RAW;	/* (packpolicy.c) */
	memcpy(p + HTR_VARINT_MAX + n, b->data, b->len);
	chunk_tail(p, n + b->len, b->nevents);
}

/*
 * Consecutive buffers of one thread, packed into as few chunks as will
 * take them (chunkpack.h).  Buffers the packer cannot take, or a chunk
 * that packing would not make smaller, are written as they are.
 */
static void append_packed(struct ht_buf **g, int n)
{
	int i = 0, j;

	while (i < n) {
		uint32_t nevents = 0;
		uint8_t *p;
		size_t len;

		if (disk_failed) {
			append_buffer(g[i++]);	/* counted lost */
			continue;
		}
		chunkpack_begin(&packer, 1, HTR_TICK_SHIFT);
		for (j = i; j < n; j++) {
			if (chunkpack_add(&packer, g[j]->data, g[j]->len, g[j]->base_time) != 0)
				break;
			nevents += g[j]->nevents;
		}
		if (j == i) {
			append_buffer(g[i++]);
			continue;
		}
		p = chunk_head(g[i]->tid, g[i]->base_time,
			       (size_t)chunkpack_plain_len(&packer) + CHUNKPACK_SLACK +
			       HTR_VARINT_MAX);
		len = chunkpack_finish(&packer, p + HTR_VARINT_MAX);
		if (!len) {
			for (; i < j; i++)
				append_buffer(g[i]);
			continue;
		}
		chunk_tail(p, len, nevents);
		i = j;
	}
}

#define GROUP_MAX 64	/* buffers packed together at most */

static void drain_full(void)
{
	struct ht_buf *b = threads_take_full(), *g[GROUP_MAX], **pp;
	int packing;

	if (!b)
		return;
	packing = ht_cfg.pack != HT_PACK_OFF && pack_policy_now();
	threads_set_wake_after(packing ? 32 : 4);
	while (b) {
		size_t bytes;
		uint32_t events;
		int n = 1, i;

		g[0] = b;
		b = b->next;
		if (!packing) {
			append_buffer(g[0]);
			threads_recycle(g[0]);
			continue;
		}
		/* the thread's next buffers, in its order, as many as one chunk takes */
		bytes = g[0]->len;
		events = g[0]->nevents;
		for (pp = &b; *pp && n < GROUP_MAX;) {
			struct ht_buf *c = *pp;

			if (c->tid != g[0]->tid) {
				pp = &c->next;
				continue;
			}
			if (bytes + c->len > CHUNKPACK_MAX_BYTES ||
			    events + c->nevents > CHUNKPACK_MAX_EVENTS)
				break;
			bytes += c->len;
			events += c->nevents;
			*pp = c->next;
			g[n++] = c;
		}
		append_packed(g, n);
		for (i = 0; i < n; i++)
			threads_recycle(g[i]);
	}
}

static void lock_pending(void)
{
	ht_spin_lock(&pending_lock);
}

static void unlock_pending(void)
{
	atomic_flag_clear_explicit(&pending_lock, memory_order_release);
}

static void drain_pending(void)
{
	lock_pending();
	if (pending_len) {
		memcpy(room(pending_len), pending, pending_len);
		raw_len += pending_len;
		pending_len = 0;
	}
	unlock_pending();
}

/*
 * Queue a top-level record built by another thread.  The caller holds its
 * thread BUSY while it reads the record's time and calls this, which keeps
 * the record inside the watermark rule.
 */
static int pending_add(const uint8_t *rec, size_t len)
{
	int ret = -ENOSPC;

	lock_pending();
	if (pending && pending_len + len <= PENDING_BYTES) {
		memcpy(pending + pending_len, rec, len);
		pending_len += len;
		ret = 0;
	}
	unlock_pending();
	return ret;
}

static uint64_t lost_total(void)
{
	uint64_t n = 0;
	int i;

	for (i = 1; i < 5; i++)
		n += atomic_load(&ht_lost[i]);
	return n;
}

static void append_lost(uint64_t now)
{
	uint64_t total = lost_total();
	int reason = HTR_LOST_MEMORY, i;
	uint64_t most = 0;
	uint8_t *p;

	if (total == last_lost_total)
		return;
	last_lost_total = total;
	for (i = 1; i < 5; i++) {
		if (atomic_load(&ht_lost[i]) > most) {
			most = atomic_load(&ht_lost[i]);
			reason = i;
		}
	}
	p = room(40);
	*p++ = HTR_REC_LOST;
	p = htr_put_u64(p, now);
	p = htr_put_u64(p, total);
	p = htr_put_u64(p, (uint64_t)reason);
	raw_len = (size_t)(p - raw);
}

static int do_round(int final, int allocator_stats)
{
	struct mallinfo2 mi;
	uint8_t *p;
	uint64_t w, sample_time;
	int complete, fresh, mark_seen;

	clock_calibrate((uint64_t)ht_cfg.interval_ms * 1000000u);
	/*
	 * The sample's time is read before the allocator's figures: they then
	 * show every free the program finished before it.  Read after them
	 * (and after room(), which may compress a frame), a program's frees
	 * and its marker could fall between the figures and their time, and
	 * the sample after the marker showed the heap before the frees
	 * (test_frag's frag_pinned, once, under load).
	 */
	final_round = final;
	/* a marker queued before this is dated before the sample (review L4) */
	mark_seen = atomic_exchange(&marked, 0);
	sample_time = ht_now();
	/*
	 * The final round may run while a thread that holds an arena lock
	 * waits for it (a fatal signal, _exit from a handler): it takes RSS
	 * but not the allocator's figures.
	 */
	fresh = allocator_stats && (final || mark_seen ||
				    ht_mono_ns() >= allocator_next_ns);
	if (fresh) {
		/*
		 * mallinfo2() takes the arena locks.  A thread that holds one
		 * may be waiting for us (_exit from a signal handler that
		 * interrupted malloc): writer_finish() then writes the last
		 * frame itself, and this thread must touch nothing after.
		 */
		int inside = ALLOC_INSIDE;

		uint64_t t0 = ht_mono_ns();

		atomic_store(&allocator_since, t0);
		atomic_store(&alloc_state, ALLOC_INSIDE);
		mi = mallinfo2();
		if (!atomic_compare_exchange_strong(&alloc_state, &inside, ALLOC_IDLE))
			return -1;	/* writer_finish() took over meanwhile */
		atomic_store(&allocator_since, 0);
		allocator_next_ns = t0 + 101 * (ht_mono_ns() - t0);
	}
	if (fresh || !allocator_stats) {
		p = room(128);
		raw_len += sampler_record(p, 128, sample_time, fresh ? &mi : NULL);
	}
	if (initial_modules || modules_changed()) {
		p = room(256u << 10);
		raw_len += modules_sync(p, 256u << 10, initial_modules ? 0 : ht_now());
		initial_modules = 0;
	}

	/* on a tick boundary: events are timed in ticks, rounded down */
	w = ht_now() >> HTR_TICK_SHIFT << HTR_TICK_SHIFT;
	complete = threads_steal_all(ht_mono_ns() + (final ? 200000000ull : 20000000ull)) == 0;
	threads_reap();
	drain_full();
	drain_pending();
	append_lost(w);
	if (complete) {
		p = room(16);
		*p++ = HTR_REC_WATERMARK;
		p = htr_put_u64(p, w);
		raw_len = (size_t)(p - raw);
	}
	if (final && disk_failed)
		write_marker(1);	/* the marker frame, now with the dump's end */
	if (final || atomic_load(&round_end_how)) {
		int how = final ? atomic_load(&stop_how) : atomic_exchange(&round_end_how, 0);

		p = room(64);
		*p++ = HTR_REC_END;
		p = htr_put_u64(p, ht_now());
		p = htr_put_u64(p, (uint64_t)how);
		p = htr_put_u64(p, final ? (uint64_t)stop_status : 0);
		p = htr_put_u64(p, events_written);
		p = htr_put_u64(p, lost_total());
		raw_len = (size_t)(p - raw);
	}
	flush_frame();
	return 0;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void announce_progress(void)
{
	atomic_fetch_add(&progress_word, 1);
	syscall(SYS_futex, &progress_word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/*
 * A system call only when the writer sleeps: a busy writer sees the word
 * move before it sleeps again.  (Both sides write, then read the other's
 * word, sequentially consistent: one of them sees the other's write.)
 */
void writer_wake(void)
{
	atomic_fetch_add(&wake_word, 1);
	if (atomic_load(&writer_asleep))
		syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *writer_main(void *arg)
{
	uint64_t interval = (uint64_t)ht_cfg.interval_ms * 1000000u;
	uint64_t next = ht_mono_ns() + interval;
	uint64_t fit_at = ht_mono_ns() + 2500000;	/* clock.c: 2 ms of baseline */

	(void)arg;
	ht_in_shim = HT_GUARD_WRITER;	/* anything this thread allocates is not traced */
	atomic_store(&tid, (int)syscall(SYS_gettid));
	for (;;) {
		uint32_t seen = atomic_load(&wake_word);
		uint64_t now = ht_mono_ns();
		uint64_t req;

		if (atomic_load(&stop_how)) {
			if (do_round(1, 1) < 0)
				return NULL;	/* taken over while in mallinfo2() */
			atomic_store(&finished, 1);
			announce_progress();
			break;
		}
		if (atomic_load(&pause_req)) {
			do_round(0, 1);
			return NULL;	/* 'running' stays: producers wait for the resume */
		}
		req = atomic_load(&round_requested);
		if (now >= next || req != atomic_load(&round_done)) {
			if (do_round(0, 1) < 0)
				return NULL;	/* taken over while in mallinfo2() */
			atomic_store(&round_done, req);
			announce_progress();
			next = now + interval;
			continue;
		}
		if (fit_at && now >= fit_at) {
			if (clock_fit_pending())
				clock_calibrate(interval);
			fit_at = clock_fit_pending() ? now + 1000000 : 0;
		}
		drain_full();
		/* earlier than the next watermark is always in order (a REACH scan fills it) */
		drain_pending();
		if (raw_len > FLUSH_BYTES)
			flush_frame();
		atomic_store(&writer_asleep, 1);
		if (atomic_load(&wake_word) == seen)
			futex_wait(&wake_word, seen, (fit_at && fit_at < next ? fit_at : next) - now);
		atomic_store(&writer_asleep, 0);
	}
	atomic_store(&running, 0);
	return NULL;
}

/* ---- the file ---- */

static int pid_alive(uint32_t pid)
{
	return pid && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/*
 * Who writes a dump file: the process that holds flock(LOCK_EX) on it, from
 * before it truncates the file until it exits (the lock goes with the last
 * descriptor of the open file; ours is close-on-exec).  Taking a name is
 * open without O_TRUNC, lock, then truncate: two processes started at the
 * same moment with the same name cannot both get it, and a starter never
 * cuts a live writer's dump, even one that has not written its header yet.
 *
 * Returns the descriptor, the lock held and the file empty; -EBUSY when
 * the name is taken (*holder: the pid in its header, 0 when unknown); or
 * another negative errno.  A dump written by an earlier image of this pid
 * (before exec) is taken too: the new image writes a file of its own.
 */
static int take_name(const char *p, uint32_t *holder)
{
	struct htr_file_header h;
	struct stat st;
	int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	int locked = 1, dump;
	ssize_t n;

	*holder = 0;
	if (f < 0 && errno == EACCES)
		f = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return -errno;
	if (flock(f, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EWOULDBLOCK) {
			n = pread(f, &h, sizeof(h), 0);
			if (n == (ssize_t)sizeof(h) && !memcmp(h.magic, HTR_FILE_MAGIC, 8))
				*holder = h.pid;
			close(f);
			return -EBUSY;
		}
		locked = 0;	/* no locks on this file system: the pid says it alone */
	}
	n = pread(f, &h, sizeof(h), 0);
	dump = n == (ssize_t)sizeof(h) && !memcmp(h.magic, HTR_FILE_MAGIC, 8);
	if (dump && (ht_earlier_image(h.pid, h.start_realtime_ns) || (!locked && pid_alive(h.pid)))) {
		if (ht_earlier_image(h.pid, h.start_realtime_ns))
			after_exec = 1;		/* our own image before exec */
		*holder = h.pid;
		close(f);
		return -EBUSY;
	}
	/*
	 * A dump whose writer is gone, or not a dump at all (the user named
	 * it): cut it.  To one byte, which the header then overwrites, not to
	 * none, and not at all when it is empty (a new file, a device, a
	 * pipe): ext4 takes a truncation to zero for a file being replaced
	 * (its auto_da_alloc) and, when the file is closed, starts writing its
	 * dirty pages back from the closing process, so the program's exit
	 * waited 3-12 ms for its dump to go to the disk.
	 */
	if (fstat(f, &st) == 0 && st.st_size > 0)
		(void)!ftruncate(f, 1);
	return f;
}

/* Is pid this process's parent, grandparent, ...? */
static int is_ancestor(uint32_t pid)
{
	uint32_t p = (uint32_t)getppid();
	int depth;

	for (depth = 0; depth < 64 && p > 1; depth++) {
		char path[64], buf[512];
		struct ht_str s;
		uint32_t ppid = 0;
		char *q;

		if (p == pid)
			return 1;
		str_init(&s, path, sizeof(path));
		str_add(&s, "/proc/");
		str_add_u64(&s, p);
		str_add(&s, "/stat");
		if (ht_read_file(path, buf, sizeof(buf)) <= 0)
			return 0;
		/* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
		q = strrchr(buf, ')');
		if (!q || q[1] != ' ' || !q[2] || q[3] != ' ')
			return 0;
		for (q += 4; *q >= '0' && *q <= '9'; q++)
			ppid = ppid * 10 + (uint32_t)(*q - '0');
		p = ppid;
	}
	return p == pid;
}

/*
 * A process that is not of the holder's tree found the name taken: it is
 * not what the user expects, so say where this dump goes instead.
 */
static void announce_other_name(const char *taken, uint32_t holder)
{
	char msg[2 * PATH_MAX + 128];
	struct ht_str s;

	str_init(&s, msg, sizeof(msg));
	str_add(&s, "'");
	str_add(&s, taken);
	str_add(&s, "' is being written by ");
	if (holder) {
		str_add(&s, "process ");
		str_add_u64(&s, holder);
	} else {
		str_add(&s, "another process");
	}
	str_add(&s, "; this one (pid ");
	str_add_u64(&s, (uint64_t)getpid());
	str_add(&s, ") writes '");
	str_add(&s, path);
	str_add(&s, "'");
	ht_msg(msg);
}

static void expand(struct ht_str *s, const char *pat, int *has_pid)
{
	char exe[256] = "";
	char link[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", link, sizeof(link) - 1);

	if (n > 0) {
		const char *base;

		link[n] = '\0';
		base = strrchr(link, '/');
		base = base ? base + 1 : link;
		{
			struct ht_str e;

			str_init(&e, exe, sizeof(exe));
			str_add(&e, base);
		}
	}
	*has_pid = 0;
	for (; *pat; pat++) {
		if (pat[0] == '%' && pat[1] == 'p') {
			str_add_u64(s, (uint64_t)getpid());
			*has_pid = 1;
			pat++;
		} else if (pat[0] == '%' && pat[1] == 'e') {
			str_add(s, exe[0] ? exe : "unknown");
			pat++;
		} else if (pat[0] == '%' && pat[1] == '%') {
			str_add(s, "%");
			pat++;
		} else {
			str_add_n(s, pat, 1);
		}
	}
}

static int open_dump(int forked)
{
	char base[PATH_MAX], asked[PATH_MAX] = "";
	struct ht_str s;
	uint32_t holder, other = 0;
	int has_pid, n;

	str_init(&s, base, sizeof(base));
	expand(&s, ht_cfg.out_pattern, &has_pid);
	if (forked && !has_pid) {
		str_add(&s, ".");
		str_add_u64(&s, (uint64_t)getpid());
		has_pid = 1;
	}
	/*
	 * Candidates: the name itself; when another live process holds it,
	 * NAME.PID; when an earlier image of this pid (before exec) holds
	 * that, NAME.PID.1, NAME.PID.2, ...  A process of the holder's tree
	 * (its child, grandchild, ...) takes NAME.PID silently, as documented;
	 * any other says so once.
	 */
	strcpy(path, base);
	for (n = 0; n < 1000; n++) {
		int f = take_name(path, &holder);

		if (f >= 0) {
			if (asked[0])
				announce_other_name(asked, other);
			return f;
		}
		if (f != -EBUSY)
			return f;
		if (!has_pid) {
			if (holder != (uint32_t)getpid() && !is_ancestor(holder)) {
				strcpy(asked, base);
				other = holder;
			}
			str_add(&s, ".");	/* s still builds base */
			str_add_u64(&s, (uint64_t)getpid());
			has_pid = 1;
			strcpy(path, base);
			n--;
			continue;
		}
		str_init(&s, path, sizeof(path));
		str_add(&s, base);
		str_add(&s, ".");
		str_add_u64(&s, (uint64_t)n + 1);
	}
	return -EEXIST;
}

static size_t read_file(const char *p, uint8_t *out, size_t cap)
{
	int f = open(p, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (f < 0)
		return 0;
	while (len < cap) {
		ssize_t n = read(f, out + len, cap - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(f);
	return len;
}

static void append_process(unsigned flags, unsigned generation)
{
	uint8_t cmd[16384];
	char exe[PATH_MAX];
	ssize_t en = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t clen = read_file("/proc/self/cmdline", cmd, sizeof(cmd));
	uint8_t *p = room(64 + sizeof(exe) + sizeof(cmd));
	struct timespec rt;

	if (en < 0)
		en = 0;
	clock_gettime(CLOCK_REALTIME, &rt);
	*p++ = HTR_REC_PROCESS;
	p = htr_put_u64(p, (uint64_t)getpid());
	p = htr_put_u64(p, (uint64_t)getppid());
	p = htr_put_u64(p, ht_start_ns);
	p = htr_put_u64(p, (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec);
	p = htr_put_u64(p, (uint64_t)sysconf(_SC_PAGESIZE));
	p = htr_put_u64(p, (uint64_t)en);
	memcpy(p, exe, (size_t)en);
	p += en;
	p = htr_put_u64(p, clen);
	memcpy(p, cmd, clen);
	p += clen;
	p = htr_put_u64(p, ht_cfg.sample_bytes);
	p = htr_put_u64(p, (uint64_t)ht_cfg.unwind);
	p = htr_put_u64(p, ht_cfg.depth);
	p = htr_put_u64(p, flags);
	p = htr_put_u64(p, generation);
	raw_len = (size_t)(p - raw);
}

/*
 * Everything the writer needs, taken once.  zstd's context lives in a
 * fixed workspace sized for the largest frame at our level
 * (ZSTD_estimateCCtxSize covers every input size): a context that zstd
 * would otherwise shrink after a run of small frames and grow again for
 * the next large one never asks for memory, so no pattern of quiet spells
 * and bursts can exhaust the region.
 */
static int setup_memory(void)
{
	size_t ws = ZSTD_estimateCCtxSize(ZSTD_LEVEL);
	void *work;

	if (!writer_region.base && region_reserve(&writer_region, 24u << 20))
		return -ENOMEM;
	raw = region_alloc(&writer_region, RAW_LIMIT);
	zout_cap = ZSTD_compressBound(RAW_LIMIT);
	zout = region_alloc(&writer_region, zout_cap);
	pending = region_alloc(&writer_region, PENDING_BYTES);
	work = region_alloc(&writer_region, ws);
	cctx = work ? ZSTD_initStaticCCtx(work, ws) : NULL;
	/*
	 * A stream never holds more than the chunk, plus a byte per value
	 * re-encoded (rarely: usable sizes unlike glibc's); a fuller one is
	 * not packed.
	 */
	work = region_alloc(&writer_region, chunkpack_size(PACK_STREAM_BYTES));
	if (!raw || !zout || !pending || !cctx || !work)
		return -ENOMEM;
	chunkpack_init(&packer, work, PACK_STREAM_BYTES);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	return 0;
}

/*
 * Programs close or reuse low descriptors freely (daemons close all of them,
 * shells dup2 onto small numbers).  Ours moves up, out of their way; the
 * close wrappers (clients.c) also refuse to close it for them.
 */
static int high_floor(void)
{
	struct rlimit rl;
	int want = 1000;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)want + 64 > rl.rlim_cur)
		want = rl.rlim_cur > 128 ? (int)rl.rlim_cur - 64 : 10;
	return want;
}

static int move_high(int f)
{
	int nf = fcntl(f, F_DUPFD_CLOEXEC, high_floor());

	if (nf < 0)
		return f;
	close(f);
	return nf;
}

int writer_fd(void)
{
	return atomic_load(&fd);
}

/*
 * The program is about to dup2() onto our descriptor: move ours first, to
 * a higher number if there is one, else to any free one but this.  The
 * writer may have read the old number for a system call it has not made
 * yet: it announces that in fd_busy, and we wait (bounded: a write to a
 * stalled pipe may never end) until it has moved on before closing the old
 * number, which the program is about to reuse.  Once inside the system
 * call the kernel holds the file itself, so a write already running ends
 * on our file whatever happens to the number.
 */
void writer_move_fd(void)
{
	int nf, old;

	ht_spin_lock(&move_lock);
	old = atomic_load(&fd);
	if (old >= 0) {
		nf = fcntl(old, F_DUPFD_CLOEXEC, old + 1);
		if (nf < 0)
			nf = fcntl(old, F_DUPFD_CLOEXEC, high_floor());
		if (nf < 0)
			nf = fcntl(old, F_DUPFD_CLOEXEC, 3);
		if (nf >= 0) {
			uint64_t until = ht_mono_ns() + 1000000000ull;

			atomic_store(&fd, nf);
			while (atomic_load(&fd_busy) == old && ht_mono_ns() < until)
				sched_yield();
			close(old);
		}
	}
	atomic_flag_clear_explicit(&move_lock, memory_order_release);
}

static int open_and_begin(int forked, unsigned flags, unsigned generation)
{
	struct htr_file_header h;
	struct timespec rt;
	int ret;

	ret = setup_memory();
	if (ret) {
		ht_msg("cannot map memory for the writer: running untraced");
		return ret;
	}
	ret = open_dump(forked);
	if (ret >= 0)
		ret = move_high(ret);
	if (ret < 0) {
		char msg[PATH_MAX + 128];
		struct ht_str s;

		str_init(&s, msg, sizeof(msg));
		str_add(&s, "cannot create '");
		str_add(&s, path);
		str_add(&s, "': ");
		/*
		 * Not strerror(): it translates, under the lock of the C
		 * library's message catalogs, and the shim may be starting
		 * inside bindtextdomain() (a library's constructor) with that
		 * lock held: it would be taken twice, and the program hang.
		 */
		str_add(&s, strerrordesc_np(-ret) ? strerrordesc_np(-ret) : "unknown error");
		str_add(&s, " (set HEAPTRAIL_OUT to a writable path); running untraced");
		ht_msg(msg);
		atomic_store(&fd, -1);
		return -1;
	}
	atomic_store(&fd, ret);
	/* the samples' /proc file stays open, above the dump (no low number later) */
	sampler_open(ret + 1);
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HTR_FILE_MAGIC, 8);
	h.version = HTR_FORMAT_VERSION;
	h.header_size = sizeof(h);
	h.pid = (uint32_t)getpid();
	clock_gettime(CLOCK_REALTIME, &rt);
	h.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	file_off = sizeof(h);
	if (write_all(&h, sizeof(h)) < 0) {
		ht_msg("cannot write the dump header: running untraced");
		/* not the byte take_name() left: an empty file says nothing was written */
		(void)!ftruncate(atomic_load(&fd), 0);
		close(atomic_exchange(&fd, -1));
		return -1;
	}
	append_process(flags | (after_exec ? HTR_PF_AFTER_EXEC : 0) |
		       HTR_PF_TIME_TICKS | HTR_PF_PTR_UNITS |
		       (ht_cfg.pack != HT_PACK_OFF ? HTR_PF_PACKED : 0u),
		       generation);
	/*
	 * A forked child is still inside fork's handlers: another thread of
	 * the parent may have held the loader's lock at the fork, and
	 * dl_iterate_phdr() would wait for it forever here, in the program's
	 * thread.  The writer thread lists the modules in its first round
	 * instead (dated 0: they were there from the start).
	 */
	if (forked)
		initial_modules = 1;
	else
		raw_len += modules_sync(raw + raw_len, (256u << 10), 0);
	flush_frame();
	return 0;
}

int writer_start_thread(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int ret;

	if (atomic_load(&fd) < 0)
		return -1;
	/* a small stack: the program may be short of address space */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	pack_policy_start();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_store(&running, 1);
	ret = pthread_create(&thread, &attr, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret) {
		atomic_store(&running, 0);
		ht_msg("cannot start the writer thread: running untraced");
		close(atomic_exchange(&fd, -1));
		return -1;
	}
	return 0;
}

/*
 * A moment without the writer thread, for a call the kernel refuses to a
 * threaded process (unshare(CLONE_NEWUSER)).  Producers that run out of
 * buffers meanwhile wait, as for a slow writer.  0 when it was paused.
 */
int writer_pause(void)
{
	if (!atomic_load(&running) || atomic_load(&stop_how) ||
	    pthread_equal(pthread_self(), thread))
		return -1;
	atomic_store(&pause_req, 1);
	writer_wake();
	pthread_join(thread, NULL);
	return 0;
}

void writer_resume(void)
{
	atomic_store(&pause_req, 0);
	if (writer_start_thread() != 0)
		atomic_store(&ht_phase, HT_STOPPED);
}

int writer_open(void)
{
	return open_and_begin(0, 0, 0);
}

int writer_restart_in_child(unsigned generation)
{
	if (open_and_begin(1, HTR_PF_FOLLOWED_FORK, generation))
		return -1;
	return writer_start_thread();
}

void writer_reset_after_fork(void)
{
	/* The parent's writer thread, context and file are not ours. */
	int old = atomic_exchange(&fd, -1);

	if (old >= 0)
		close(old);
	atomic_store(&fd_busy, -1);
	atomic_store(&writer_asleep, 0);	/* no writer to wake until the child's starts */
	atomic_flag_clear(&move_lock);
	zstd_failed = 0;
	atomic_store(&running, 0);
	atomic_store(&stop_how, 0);
	atomic_store(&finished, 0);
	atomic_store(&round_requested, 0);
	atomic_store(&round_done, 0);
	atomic_store(&allocator_since, 0);
	atomic_store(&alloc_state, ALLOC_IDLE);
	atomic_flag_clear(&pending_lock);
	pending_len = 0;
	raw_len = 0;
	disk_failed = 0;
	after_exec = 0;
	atomic_store(&round_end_how, 0);
	file_off = 0;
	nwritten = 0;
	marker_off = 0;
	allocator_next_ns = 0;
	atomic_store(&marked, 0);
	frame_events = 0;
	events_written = 0;
	last_lost_total = 0;
	region_reset(&writer_region);
	cctx = NULL;
}

/* Wait (bounded) for the writer to reach a state; it wakes us after rounds. */
static void wait_for(int (*cond)(void), uint64_t max_ns)
{
	uint64_t end = ht_mono_ns() + max_ns;

	for (;;) {
		uint32_t seen = atomic_load(&progress_word);
		uint64_t now;

		if (cond())
			return;
		now = ht_mono_ns();
		if (now >= end)
			return;
		writer_wake();
		futex_wait(&progress_word, seen, end - now < 10000000 ? end - now : 10000000);
	}
}

static int is_finished(void)
{
	return atomic_load(&finished) || !atomic_load(&running);
}

static int round_caught_up(void)
{
	return atomic_load(&round_done) >= atomic_load(&round_requested) ||
	       !atomic_load(&running);
}

/* Finished, or stuck for 100 ms inside mallinfo2() (see do_round()). */
static int is_finished_or_stuck(void)
{
	uint64_t since = atomic_load(&allocator_since);

	return is_finished() || (since && ht_mono_ns() - since > 100000000ull);
}

void writer_finish(int how, int status)
{
	int expected = 0;

	if (!atomic_load(&running) || pthread_equal(pthread_self(), thread))
		return;
	stop_status = status;
	if (!atomic_compare_exchange_strong(&stop_how, &expected, how))
		return;
	wait_for(is_finished_or_stuck, 5000000000ull);
	if (!is_finished()) {
		expected = ALLOC_INSIDE;
		if (atomic_compare_exchange_strong(&alloc_state, &expected, ALLOC_TAKEN)) {
			/* the writer is parked in mallinfo2(): its state is ours now */
			do_round(1, 0);
			atomic_store(&finished, 1);
		}
	}
}

/*
 * Before exec: everything so far on disk, closed by an END "exec" record.
 * If the exec fails the process goes on and a later END replaces it.
 */
void writer_sync_exec(void)
{
	if (!atomic_load(&running) || pthread_equal(pthread_self(), thread))
		return;
	atomic_store(&round_end_how, HTR_END_EXEC);
	writer_sync();
}

void writer_sync(void)
{
	if (!atomic_load(&running) || pthread_equal(pthread_self(), thread))
		return;
	atomic_fetch_add(&round_requested, 1);
	wait_for(round_caught_up, 2000000000ull);
}

int writer_running(void)
{
	return atomic_load(&running);
}

const char *writer_path(void)
{
	return path;
}

int writer_tid(void)
{
	return atomic_load(&running) ? atomic_load(&tid) : 0;
}

int writer_top_record(const uint8_t *rec, size_t len)
{
	int ret = pending_add(rec, len);

	if (ret == 0 && len && rec[0] == HTR_REC_MARK)
		atomic_store(&marked, 1);	/* the next round samples afresh */
	if (ret == 0 && pending_len > PENDING_BYTES / 2)
		writer_wake();
	return ret;
}
