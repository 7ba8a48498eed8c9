/* fmt.c - string building and messages without stdio or malloc */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

void str_init(struct ht_str *s, char *buf, size_t cap)
{
	s->buf = buf;
	s->len = 0;
	s->cap = cap;
	if (cap)
		buf[0] = '\0';
}

void str_add_n(struct ht_str *s, const char *text, size_t n)
{
	if (!s->cap)
		return;
	if (n > s->cap - 1 - s->len)
		n = s->cap - 1 - s->len;
	memcpy(s->buf + s->len, text, n);
	s->len += n;
	s->buf[s->len] = '\0';
}

void str_add(struct ht_str *s, const char *text)
{
	str_add_n(s, text, strlen(text));
}

void str_add_u64(struct ht_str *s, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	str_add_n(s, tmp + i, sizeof(tmp) - (size_t)i);
}

void ht_msg(const char *text)
{
	char buf[1200];
	struct ht_str s;
	int saved = errno;
	size_t off = 0;

	if (ht_cfg.quiet)
		return;
	str_init(&s, buf, sizeof(buf));
	str_add(&s, "heaptrail: ");
	str_add(&s, text);
	str_add(&s, "\n");
	while (off < s.len) {
		ssize_t n = write(2, s.buf + off, s.len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	errno = saved;
}

int ht_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

const char *ht_status_field(const char *text, const char *key)
{
	size_t len = strlen(key);
	const char *p = text;

	/* at the start of a line only: never inside another key or a value */
	while (p && strncmp(p, key, len) != 0) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p || p[len] != ':')
		return NULL;
	for (p += len + 1; *p == ' ' || *p == '\t'; p++)
		;
	return p;
}
