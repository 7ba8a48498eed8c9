/* rustdemangle.c - Rust's v0 symbol names ("_R...") made readable */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rustdemangle.h"

/*
 * The grammar of RFC 2603.  Printed as binutils' c++filt prints it (the
 * unit test's oracle), but without the crates' disambiguating hashes, as
 * Rust's own demangler leaves them out: impl paths left out, closures as
 * {closure#N}, integer constants as "10: usize".
 * Anything this does not know (punycode identifiers, constants other than
 * integers, bools and chars) and any malformed name gives NULL: the caller
 * shows the symbol as it is.
 */

#define MAX_DEPTH 64
#define MAX_OUT 4096	/* backrefs can nest: a name that would print longer is refused */

struct dm {
	const char *s;		/* the name after "_R" */
	size_t n, pos;
	char *out;
	size_t len, cap;
	int depth;
	uint64_t lifetimes;	/* bound by the binders around here */
	int bad;
};

static int peek(struct dm *d)
{
	return d->pos < d->n ? (unsigned char)d->s[d->pos] : 0;
}

static int eat(struct dm *d, int c)
{
	if (peek(d) != c)
		return 0;
	d->pos++;
	return 1;
}

static int next(struct dm *d)
{
	if (d->pos >= d->n) {
		d->bad = 1;
		return 0;
	}
	return (unsigned char)d->s[d->pos++];
}

static void put_n(struct dm *d, const char *p, size_t n)
{
	if (d->bad)
		return;
	if (d->len + n > MAX_OUT) {
		d->bad = 1;
		return;
	}
	if (d->len + n + 1 > d->cap) {
		size_t cap = (d->len + n + 1) * 2;
		char *o = realloc(d->out, cap);

		if (!o) {
			d->bad = 1;
			return;
		}
		d->out = o;
		d->cap = cap;
	}
	memcpy(d->out + d->len, p, n);
	d->len += n;
	d->out[d->len] = '\0';
}

static void put(struct dm *d, const char *p)
{
	put_n(d, p, strlen(p));
}

static void put_u64(struct dm *d, uint64_t v)
{
	char buf[24];
	int i = sizeof(buf);

	buf[--i] = '\0';
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(d, buf + i);
}

/* base-62-number: "_" is 0, digits then "_" are their value plus one. */
static uint64_t base62(struct dm *d)
{
	uint64_t v = 0;
	int c;

	if (eat(d, '_'))
		return 0;
	while ((c = next(d)) != '_') {
		int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 :
			c >= 'A' && c <= 'Z' ? c - 'A' + 36 : -1;

		if (x < 0 || v > (UINT64_MAX - 61) / 62) {
			d->bad = 1;
			return 0;
		}
		v = v * 62 + (uint64_t)x;
	}
	return v + 1;
}

/* A disambiguator ("s" base-62-number), or 0 when absent. */
static uint64_t disambiguator(struct dm *d)
{
	return eat(d, 's') ? base62(d) + 1 : 0;
}

static uint64_t decimal(struct dm *d)
{
	uint64_t v = 0;
	int c = peek(d);

	if (c < '0' || c > '9') {
		d->bad = 1;
		return 0;
	}
	if (c == '0') {
		d->pos++;
		return 0;
	}
	while ((c = peek(d)) >= '0' && c <= '9') {
		if (v > UINT64_MAX / 10 - 1) {
			d->bad = 1;
			return 0;
		}
		v = v * 10 + (uint64_t)(c - '0');
		d->pos++;
	}
	return v;
}

/* An undisambiguated identifier: its bytes (not copied); *len 0 when empty. */
static const char *ident(struct dm *d, size_t *len)
{
	const char *p;
	uint64_t n;

	if (eat(d, 'u')) {
		d->bad = 1;	/* punycode: not done */
		return NULL;
	}
	n = decimal(d);
	eat(d, '_');
	if (d->bad || n > d->n - d->pos) {
		d->bad = 1;
		return NULL;
	}
	p = d->s + d->pos;
	d->pos += n;
	*len = (size_t)n;
	return p;
}

static void path(struct dm *d, int in_value);
static void type(struct dm *d);
static const char *basic_type(int c);

/* Jumps to a backref's target (its "B" read): where to come back to, 0 when bad. */
static size_t backref_jump(struct dm *d)
{
	size_t here = d->pos - 1, target = (size_t)base62(d), after = d->pos;

	if (d->bad || target >= here) {
		d->bad = 1;
		return 0;
	}
	d->pos = target;
	return after;
}

/* Prints what a backref points at with fn, and comes back. */
static void backref(struct dm *d, void (*fn)(struct dm *, int), int arg)
{
	size_t after = backref_jump(d);

	if (d->bad)
		return;
	fn(d, arg);
	d->pos = after;
}

static void type_arg(struct dm *d, int unused)
{
	(void)unused;
	type(d);
}

/* Lifetime i (1 = the innermost bound) as 'a, 'b, ...; 0 is an erased one. */
static void put_lifetime(struct dm *d, uint64_t i)
{
	uint64_t depth;

	if (i == 0) {
		put(d, "'_");
		return;
	}
	if (i > d->lifetimes) {
		d->bad = 1;
		return;
	}
	depth = d->lifetimes - i;
	if (depth < 26) {
		char name[3] = { '\'', (char)('a' + depth), 0 };

		put(d, name);
	} else {
		put(d, "'_");
		put_u64(d, depth);
	}
}

static void lifetime(struct dm *d)
{
	put_lifetime(d, base62(d));
}

/* A binder ("G" base-62-number): prints for<'a, ...> and binds them; how many. */
static uint64_t binder(struct dm *d)
{
	uint64_t n = eat(d, 'G') ? base62(d) + 1 : 0, i;

	if (!n || d->bad)
		return 0;
	if (n > 64) {
		d->bad = 1;
		return 0;
	}
	put(d, "for<");
	for (i = 0; i < n; i++) {
		if (i)
			put(d, ", ");
		d->lifetimes++;
		put_lifetime(d, 1);
	}
	put(d, "> ");
	return n;
}

static void konst(struct dm *d, int unused)
{
	int t, neg;
	uint64_t v = 0;
	int c;

	(void)unused;
	if (eat(d, 'p')) {
		put(d, "_");
		return;
	}
	if (eat(d, 'B')) {
		backref(d, konst, 0);
		return;
	}
	t = next(d);
	neg = eat(d, 'n');
	while ((c = next(d)) != '_') {
		int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (x < 0 || v >> 60) {
			d->bad = 1;
			return;
		}
		v = v << 4 | (uint64_t)x;
	}
	if (strchr("hmytjosilxna", t) && t) {	/* integers */
		if (neg)
			put(d, "-");
		put_u64(d, v);
		put(d, ": ");
		put(d, basic_type(t));
	} else if (t == 'b' && v <= 1) {
		put(d, v ? "true" : "false");
	} else if (t == 'c' && v >= 0x20 && v < 0x7f && v != '\'' && v != '\\') {
		char q[4] = { '\'', (char)v, '\'', 0 };

		put(d, q);
	} else {
		d->bad = 1;
	}
}

static void generic_arg(struct dm *d)
{
	if (eat(d, 'L'))
		lifetime(d);
	else if (eat(d, 'K'))
		konst(d, 0);
	else
		type(d);
}

static const char *basic_type(int c)
{
	switch (c) {
	case 'a': return "i8";
	case 'b': return "bool";
	case 'c': return "char";
	case 'd': return "f64";
	case 'e': return "str";
	case 'f': return "f32";
	case 'h': return "u8";
	case 'i': return "isize";
	case 'j': return "usize";
	case 'l': return "i32";
	case 'm': return "u32";
	case 'n': return "i128";
	case 'o': return "u128";
	case 's': return "i16";
	case 't': return "u16";
	case 'u': return "()";
	case 'v': return "...";
	case 'x': return "i64";
	case 'y': return "u64";
	case 'z': return "!";
	case 'p': return "_";
	default: return NULL;
	}
}

/* fn-sig: [binder] ["U"] ["K" abi] {type} "E" type */
static void fn_sig(struct dm *d)
{
	int first = 1;
	uint64_t bound = binder(d);

	if (eat(d, 'U'))
		put(d, "unsafe ");
	if (eat(d, 'K')) {
		if (eat(d, 'C')) {
			put(d, "extern \"C\" ");
		} else {
			size_t len;
			const char *abi = ident(d, &len);
			size_t i;

			if (d->bad)
				return;
			put(d, "extern \"");
			for (i = 0; i < len; i++)
				put_n(d, abi[i] == '_' ? "-" : abi + i, 1);
			put(d, "\" ");
		}
	}
	put(d, "fn(");
	while (!d->bad && !eat(d, 'E')) {
		if (!first)
			put(d, ", ");
		first = 0;
		type(d);
	}
	put(d, ")");
	if (!eat(d, 'u')) {	/* 'u': returns (), not printed */
		put(d, " -> ");
		type(d);
	}
	d->lifetimes -= bound;
}

/*
 * A path whose generic arguments stay open when it has some (a dyn trait's
 * associated types go inside them): 1 when they are open.
 */
static int path_open(struct dm *d)
{
	int n = 0;

	if (eat(d, 'B')) {
		size_t after = backref_jump(d);
		int open;

		if (d->bad)
			return 0;
		open = path_open(d);
		d->pos = after;
		return open;
	}
	if (!eat(d, 'I')) {
		path(d, 0);
		return 0;
	}
	path(d, 0);
	put(d, "<");
	while (!d->bad && !eat(d, 'E')) {
		if (n++)
			put(d, ", ");
		generic_arg(d);
	}
	return 1;
}

/* dyn-bounds: [binder] {path {"p" ident type}} "E" "L" lifetime */
static void dyn_bounds(struct dm *d)
{
	int first = 1;
	uint64_t bound, lt;

	put(d, "dyn ");
	bound = binder(d);
	while (!d->bad && !eat(d, 'E')) {
		int open;

		if (!first)
			put(d, " + ");
		first = 0;
		open = path_open(d);
		while (!d->bad && eat(d, 'p')) {
			size_t len;
			const char *name = ident(d, &len);

			if (d->bad)
				return;
			put(d, open ? ", " : "<");
			open = 1;
			put_n(d, name, len);
			put(d, " = ");
			type(d);
		}
		if (open)
			put(d, ">");
	}
	d->lifetimes -= bound;
	/* the object's lifetime: an erased one is not printed */
	if (!eat(d, 'L')) {
		d->bad = 1;
		return;
	}
	lt = base62(d);
	if (lt) {
		put(d, " + ");
		put_lifetime(d, lt);
	}
}

static void type(struct dm *d)
{
	const char *b;
	int c = peek(d);

	if (++d->depth > MAX_DEPTH) {
		d->bad = 1;
		return;
	}
	if ((b = basic_type(c)) != NULL) {
		d->pos++;
		put(d, b);
	} else if (eat(d, 'A')) {
		put(d, "[");
		type(d);
		put(d, "; ");
		konst(d, 0);
		put(d, "]");
	} else if (eat(d, 'S')) {
		put(d, "[");
		type(d);
		put(d, "]");
	} else if (eat(d, 'T')) {
		int n = 0;

		put(d, "(");
		while (!d->bad && !eat(d, 'E')) {
			if (n++)
				put(d, ", ");
			type(d);
		}
		put(d, n == 1 ? ",)" : ")");
	} else if (eat(d, 'R') || eat(d, 'Q')) {
		int mut = d->s[d->pos - 1] == 'Q';

		put(d, "&");
		if (eat(d, 'L')) {
			uint64_t lt = base62(d);

			if (lt) {
				put_lifetime(d, lt);
				put(d, " ");
			}
		}
		if (mut)
			put(d, "mut ");
		type(d);
	} else if (eat(d, 'P')) {
		put(d, "*const ");
		type(d);
	} else if (eat(d, 'O')) {
		put(d, "*mut ");
		type(d);
	} else if (eat(d, 'F')) {
		fn_sig(d);
	} else if (eat(d, 'D')) {
		dyn_bounds(d);
	} else if (eat(d, 'B')) {
		backref(d, type_arg, 0);
	} else {
		path(d, 0);
	}
	d->depth--;
}

static void path_arg(struct dm *d, int in_value)
{
	path(d, in_value);
}

static void path(struct dm *d, int in_value)
{
	int c;

	if (++d->depth > MAX_DEPTH) {
		d->bad = 1;
		return;
	}
	c = next(d);
	if (c == 'C') {
		size_t len;
		const char *name;

		disambiguator(d);	/* the crate's hash: left out */
		name = ident(d, &len);
		if (!d->bad)
			put_n(d, name, len);
	} else if (c == 'N') {
		int ns = next(d);
		size_t len;
		const char *name;
		uint64_t dis;

		path(d, in_value);
		dis = disambiguator(d);
		name = ident(d, &len);
		if (d->bad)
			return;
		if (ns >= 'A' && ns <= 'Z') {
			put(d, "::{");
			if (ns == 'C')
				put(d, "closure");
			else if (ns == 'S')
				put(d, "shim");
			else
				put_n(d, (char[]){ (char)ns }, 1);
			if (len) {
				put(d, ":");
				put_n(d, name, len);
			}
			put(d, "#");
			put_u64(d, dis);
			put(d, "}");
		} else if (len) {
			put(d, "::");
			put_n(d, name, len);
		}
	} else if (c == 'M' || c == 'X' || c == 'Y') {
		size_t mark;

		if (c != 'Y') {
			/* the impl's own path: left out, as rustc-demangle does */
			disambiguator(d);
			mark = d->len;
			path(d, 0);
			d->len = mark;
			if (d->out)
				d->out[mark] = '\0';
		}
		put(d, "<");
		type(d);
		if (c != 'M') {
			put(d, " as ");
			path(d, 0);
		}
		put(d, ">");
	} else if (c == 'I') {
		int n = 0;

		path(d, in_value);
		put(d, in_value ? "::<" : "<");
		while (!d->bad && !eat(d, 'E')) {
			if (n++)
				put(d, ", ");
			generic_arg(d);
		}
		put(d, ">");
	} else if (c == 'B') {
		backref(d, path_arg, in_value);
	} else {
		d->bad = 1;
	}
	d->depth--;
}

char *rust_demangle_v0(const char *sym)
{
	struct dm d;

	if (!sym || sym[0] != '_' || sym[1] != 'R')
		return NULL;
	memset(&d, 0, sizeof(d));
	d.s = sym + 2;
	d.n = strlen(d.s);
	/* a vendor suffix ('.' or '$' and what follows) is not part of the name */
	d.n = strcspn(d.s, ".$");
	if (peek(&d) >= '0' && peek(&d) <= '9')
		decimal(&d);	/* the encoding version: only 0 (absent) exists */
	if (peek(&d) < 'A' || peek(&d) > 'Z')
		d.bad = 1;
	else
		path(&d, 1);
	/* an instantiating crate may follow: not printed */
	if (!d.bad && d.pos < d.n && (peek(&d) < 'A' || peek(&d) > 'Z'))
		d.bad = 1;
	if (d.bad || !d.out) {
		free(d.out);
		return NULL;
	}
	return d.out;
}

/* One $...$ escape of a legacy name (without its dollars), or 0. */
static int legacy_escape(const char *e, size_t n)
{
	static const struct {
		const char *name;
		char c;
	} named[] = {
		{ "SP", '@' }, { "BP", '*' }, { "RF", '&' }, { "LT", '<' },
		{ "GT", '>' }, { "LP", '(' }, { "RP", ')' }, { "C", ',' },
	};
	unsigned v = 0;
	size_t i;

	for (i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (strlen(named[i].name) == n && !memcmp(named[i].name, e, n))
			return named[i].c;
	if (n < 2 || n > 3 || e[0] != 'u')
		return 0;
	for (i = 1; i < n; i++) {
		int x = e[i] >= '0' && e[i] <= '9' ? e[i] - '0' : e[i] >= 'a' && e[i] <= 'f' ?
			e[i] - 'a' + 10 : -1;

		if (x < 0)
			return 0;
		v = v << 4 | (unsigned)x;
	}
	return v >= 0x20 && v < 0x7f ? (int)v : 0;
}

static void legacy_unescape(char *name)
{
	char *r = name, *w = name;
	int start = 1;	/* at the start of a path component */

	while (*r) {
		if (start && r[0] == '_' && r[1] == '$')
			r++;
		start = 0;
		if (r[0] == ':' && r[1] == ':') {
			*w++ = *r++;
			*w++ = *r++;
			start = 1;
		} else if (r[0] == '.' && r[1] == '.') {
			*w++ = ':';
			*w++ = ':';
			r += 2;
		} else if (r[0] == '$') {
			char *end = strchr(r + 1, '$');
			int c = end ? legacy_escape(r + 1, (size_t)(end - r - 1)) : 0;

			if (!c) {
				*w++ = *r++;	/* not an escape: as it is */
				continue;
			}
			*w++ = (char)c;
			r = end + 1;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

/*
 * A legacy Rust name is a C++ one ending in "17h" and 16 hex digits, the
 * hash of the crate's build: demangled, it prints as a last "::h..." part,
 * which is left out, and its '<', ' ', '{' ... as $LT$, $u20$, $u7b$ ...,
 * which are decoded (as Rust's own demangler does).
 */
int rust_legacy_finish(const char *mangled, char *dem)
{
	size_t m = strlen(mangled), n = strlen(dem), i;

	if (m < 21 || strncmp(mangled + m - 20, "17h", 3) || mangled[m - 1] != 'E' ||
	    n < 19 || strncmp(dem + n - 19, "::h", 3))
		return 0;
	for (i = n - 16; i < n; i++)
		if (!isxdigit((unsigned char)dem[i]))
			return 0;
	dem[n - 19] = '\0';
	legacy_unescape(dem);
	return 1;
}
