/* pprof_pb.c - a protocol buffers wire-format writer, just enough for profile.proto */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_pb.h"

void pb_init(struct pb *p)
{
	memset(p, 0, sizeof(*p));
}

void pb_release(struct pb *p)
{
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

void pb_reset(struct pb *p)
{
	p->len = 0;
}

static int reserve(struct pb *p, size_t n)
{
	uint8_t *nb;
	size_t cap;

	if (p->err)
		return -1;
	if (p->len + n <= p->cap)
		return 0;
	cap = p->cap ? p->cap : 256;
	while (cap < p->len + n)
		cap *= 2;
	nb = realloc(p->buf, cap);
	if (!nb) {
		p->err = -ENOMEM;
		return -1;
	}
	p->buf = nb;
	p->cap = cap;
	return 0;
}

void pb_varint(struct pb *p, uint64_t v)
{
	if (reserve(p, 10) < 0)
		return;
	while (v >= 0x80) {
		p->buf[p->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p->buf[p->len++] = (uint8_t)v;
}

static void tag(struct pb *p, unsigned field, enum pb_wire wire)
{
	pb_varint(p, ((uint64_t)field << 3) | (unsigned)wire);
}

void pb_uint(struct pb *p, unsigned field, uint64_t v)
{
	tag(p, field, PB_VARINT);
	pb_varint(p, v);
}

void pb_int(struct pb *p, unsigned field, int64_t v)
{
	pb_uint(p, field, (uint64_t)v);
}

void pb_bytes(struct pb *p, unsigned field, const void *data, size_t len)
{
	tag(p, field, PB_LEN);
	pb_varint(p, len);
	if (len && reserve(p, len) == 0) {
		memcpy(p->buf + p->len, data, len);
		p->len += len;
	}
}

void pb_sub(struct pb *p, unsigned field, const struct pb *sub)
{
	if (sub->err && !p->err)
		p->err = sub->err;
	pb_bytes(p, field, sub->buf, sub->len);
}
