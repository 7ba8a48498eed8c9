/* dump_pipe.c - the reader's threads: frames read and unpacked ahead, batches produced ahead */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "dump.h"
#include "dump_internal.h"

/*
 * On a dump of THREAD_MIN_BYTES or more (dump_want_thread()) the producer
 * of dump.c runs on a thread of its own, NBATCHES batches ahead of the
 * caller at most, and a reader thread below it reads, decompresses and
 * unpacks the frames, NFETCH ahead of the producer.  This file holds those
 * two threads and their hand-offs (struct dump_pipe, dump_internal.h).
 */

/*
 * The reader thread's share of decoding (HTR_PF_PACKED): every packed chunk
 * of the frame unpacked into f->ubuf, for dump_enqueue_chunk() to take.
 * Only a help: it stops at anything it does not understand, and a chunk it
 * could not unpack is left to the cursor, which reports the damage where
 * the events reach it.
 */
static void pre_unpack(struct dump *d, struct frame *f, struct chunkunpack *u)
{
	struct rd r = { f->raw, f->raw + f->size, 0 };
	int units = !!(d->proc.flags & HTR_PF_PTR_UNITS);
	uint64_t n, i;
	size_t len;

	/*
	 * Frames stay until their chunks are replayed, and a dump whose
	 * watermarks are far apart holds many: past a budget their chunks are
	 * left packed, so that memory stays bounded as without the thread.
	 */
	if (__atomic_load_n(&d->ubytes, __ATOMIC_RELAXED) > PREUNPACK_BUDGET)
		return;

	while (r.p < r.end && !r.bad) {
		uint8_t type = *r.p++;

		switch (type) {
		case HTR_REC_PROCESS:
			for (i = 0; i < 5; i++)
				rd_u(&r);
			rd_bytes(&r, &len);
			rd_bytes(&r, &len);
			for (i = 0; i < 5; i++)
				rd_u(&r);
			break;
		case HTR_REC_MODULE_LOAD:
			rd_u(&r);
			rd_u(&r);
			rd_u(&r);
			rd_bytes(&r, &len);
			rd_bytes(&r, &len);
			n = rd_u(&r);
			for (i = 0; i < n && !r.bad; i++) {
				rd_u(&r);
				rd_u(&r);
			}
			break;
		case HTR_REC_MODULE_UNLOAD:
			rd_u(&r);
			rd_u(&r);
			break;
		case HTR_REC_CHUNK: {
			const uint8_t *q, *qe;
			const char *why;
			struct preunpacked *e;

			rd_u(&r);
			rd_u(&r);
			n = rd_u(&r);
			if (r.bad || n > (uint64_t)(r.end - r.p))
				return;
			q = r.p;
			qe = r.p + n;
			r.p += n;
			if (chunk_unpack(u, &q, &qe, units, &why))
				continue;	/* left to the cursor */
			if (dump_grow((void **)&f->pre, &f->cappre, f->npre + 1, sizeof *f->pre))
				return;
			e = &f->pre[f->npre];
			e->off = (size_t)(r.p - n - f->raw);
			e->len = (size_t)n;
			e->plen = (size_t)(qe - q);
			e->in_raw = q >= f->raw && q <= f->raw + f->size;
			if (e->in_raw) {
				e->uoff = (size_t)(q - f->raw);
			} else {
				if (dump_grow((void **)&f->ubuf, &f->ucap, f->ulen + e->plen + 1, 1))
					return;
				e->uoff = f->ulen;
				memcpy(f->ubuf + f->ulen, q, e->plen);
				f->ulen += e->plen;
			}
			f->npre++;
			continue;
		}
		case HTR_REC_SAMPLE:
			for (i = 0; i < 8; i++)
				rd_u(&r);
			break;
		case HTR_REC_WATERMARK:
			rd_u(&r);
			break;
		case HTR_REC_LOST:
			for (i = 0; i < 3; i++)
				rd_u(&r);
			break;
		case HTR_REC_END:
			for (i = 0; i < 5; i++)
				rd_u(&r);
			break;
		case HTR_REC_MARK:
			rd_u(&r);
			rd_bytes(&r, &len);
			break;
		case HTR_REC_REACH:
			rd_u(&r);
			rd_u(&r);
			n = rd_u(&r);
			for (i = 0; i < n && !r.bad; i++) {
				rd_u(&r);
				rd_u(&r);
			}
			break;
		default:
			return;
		}
	}
}

/* The reader thread: decompresses the frames ahead of the producer. */
static void *reader_main(void *arg)
{
	struct dump *d = arg;
	struct dump_pipe *p = d->pipe;
	uint64_t off = p->roff;

	for (;;) {
		struct fetch x;
		int stop;

		pthread_mutex_lock(&p->mu);
		while (p->nq == NFETCH && !p->stop)
			pthread_cond_wait(&p->cv_room, &p->mu);
		stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		dump_fetch_frame(d, off, &x);
		if (x.rf == RF_OK && (d->proc.flags & HTR_PF_PACKED)) {
			struct frame *f = x.f;

			pre_unpack(d, f, &p->unpack);
			/* held until its chunks are replayed: no slack */
			if (f->ubuf && f->ulen + 1 < f->ucap) {
				uint8_t *nb = realloc(f->ubuf, f->ulen + 1);

				if (nb) {
					f->ubuf = nb;
					f->ucap = f->ulen + 1;
				}
			}
			__atomic_add_fetch(&d->ubytes, f->ucap, __ATOMIC_RELAXED);
		}
		pthread_mutex_lock(&p->mu);
		p->fq[(p->qhead + p->nq) % NFETCH] = x;
		p->nq++;
		pthread_cond_signal(&p->cv_fetched);
		pthread_mutex_unlock(&p->mu);
		if (x.rf != RF_OK)
			return NULL;	/* nothing follows a bad or missing frame */
		off = x.next;
	}
}

/* The next frame from the reader thread: 0, or -1 without a reader. */
int dump_take_fetched(struct dump *d, struct fetch *x)
{
	struct dump_pipe *p = d->pipe;

	if (!p->reading)
		return -1;
	pthread_mutex_lock(&p->mu);
	while (!p->nq && !p->stop)
		pthread_cond_wait(&p->cv_fetched, &p->mu);
	if (p->nq) {
		*x = p->fq[p->qhead];
		p->qhead = (p->qhead + 1) % NFETCH;
		p->nq--;
		pthread_cond_signal(&p->cv_room);
	} else {	/* closing */
		memset(x, 0, sizeof *x);
		x->rf = RF_ERROR;
		snprintf(x->why, sizeof x->why, "closed");
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}

static void *producer_main(void *arg)
{
	struct dump *d = arg;
	struct dump_pipe *p = d->pipe;

	for (;;) {
		struct batch *b = d->pb;
		int st = dump_produce(d);

		b->status = st;
		b->off = d->off;
		b->fsize = d->pfsize;
		pthread_mutex_lock(&p->mu);
		p->full[(p->fhead + p->nfull) % NBATCHES] = b;
		p->nfull++;
		d->pb = NULL;
		/* the caller is woken once half the batches are full: fewer wake-ups */
		if (p->nfull == NBATCHES / 2 || st != BS_MORE)
			pthread_cond_signal(&p->cv_cons);
		/* after the last batch the producer touches nothing more */
		if (st != BS_MORE) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		/* woken once half the batches are free: fewer wake-ups */
		while (p->nfree < NBATCHES / 2 && !p->stop)
			pthread_cond_wait(&p->cv_prod, &p->mu);
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		b = p->freeb[p->frhead];
		p->frhead = (p->frhead + 1) % NBATCHES;
		p->nfree--;
		pthread_mutex_unlock(&p->mu);
		dump_batch_reset(b);
		d->pb = b;
	}
}

int dump_want_thread(const struct dump *d)
{
	if (d->follow || d->thread_mode == 0)
		return 0;
	if (d->thread_mode == 1)
		return 1;
	return d->fsize >= THREAD_MIN_BYTES && sysconf(_SC_NPROCESSORS_ONLN) > 1;
}

/* Starts the producer thread; 0, or -1 to go on without one. */
int dump_pipe_start(struct dump *d)
{
	struct dump_pipe *p = calloc(1, sizeof *p);
	int i;

	if (!p)
		return -1;
	p->all[0] = d->pb;
	for (i = 1; i < NBATCHES; i++) {
		p->all[i] = dump_batch_new();
		if (!p->all[i])
			goto fail;
		p->freeb[(p->frhead + p->nfree++) % NBATCHES] = p->all[i];
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_prod, NULL);
	pthread_cond_init(&p->cv_cons, NULL);
	pthread_cond_init(&p->cv_fetched, NULL);
	pthread_cond_init(&p->cv_room, NULL);
	d->pfollow = 0;
	d->pipe = p;
	/* the reader first: the producer asks it for every frame once it runs */
	if (!d->final && !d->stopped) {
		p->roff = d->off;
		d->flock = &p->mu;
		p->reading = pthread_create(&p->rth, NULL, reader_main, d) == 0;
		if (!p->reading)
			d->flock = NULL;
	}
	if (pthread_create(&p->th, NULL, producer_main, d) == 0)
		return 0;
	if (p->reading) {
		pthread_mutex_lock(&p->mu);
		p->stop = 1;
		pthread_cond_broadcast(&p->cv_room);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->rth, NULL);
		d->flock = NULL;
		for (; p->nq; p->nq--, p->qhead = (p->qhead + 1) % NFETCH)
			if (p->fq[p->qhead].f)
				dump_frame_put(d, p->fq[p->qhead].f);
		chunkunpack_free(&p->unpack);
	}
	d->pipe = NULL;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_prod);
	pthread_cond_destroy(&p->cv_cons);
	pthread_cond_destroy(&p->cv_fetched);
	pthread_cond_destroy(&p->cv_room);
fail:
	for (i = 1; i < NBATCHES; i++)
		dump_batch_free(p->all[i]);
	free(p);
	return -1;
}

void dump_pipe_stop(struct dump *d)
{
	struct dump_pipe *p = d->pipe;
	int i;

	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv_prod);
	pthread_cond_broadcast(&p->cv_fetched);
	pthread_cond_broadcast(&p->cv_room);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	if (p->reading) {
		pthread_join(p->rth, NULL);
		/* frames read ahead and never taken */
		d->flock = NULL;
		for (; p->nq; p->nq--, p->qhead = (p->qhead + 1) % NFETCH)
			if (p->fq[p->qhead].f)
				dump_frame_put(d, p->fq[p->qhead].f);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_prod);
	pthread_cond_destroy(&p->cv_cons);
	pthread_cond_destroy(&p->cv_fetched);
	pthread_cond_destroy(&p->cv_room);
	chunkunpack_free(&p->unpack);
	for (i = 0; i < NBATCHES; i++)
		dump_batch_free(p->all[i]);
	free(p);
	d->pipe = NULL;
	d->pb = d->cb = NULL;
}
