/* symtarget.c - a library with known call sites, some inlined, for test_symbolize.c */
#include "symtarget.h"

/* Every call's result is stored before returning: no tail calls. */
void *volatile st_sink;

ST_NOIPA void *st_capture(void)
{
	void *ra = __builtin_return_address(0);

	st_sink = ra;
	return ra;
}

static inline __attribute__((always_inline)) void *st_leaf(void)
{
	void *r = st_capture(); /* @leaf */

	st_sink = r;
	return r;
}

static inline __attribute__((always_inline)) void *st_mid(void)
{
	void *r = st_leaf(); /* @mid */

	st_sink = r;
	return r;
}

ST_NOIPA void *st_outer(void)
{
	void *r = st_mid(); /* @outer */

	st_sink = r;
	return r;
}

ST_NOIPA void *st_plain(void)
{
	void *r = st_capture(); /* @plain */

	st_sink = r;
	return r;
}

/* Hidden: a stripped copy has no symbol for it at all. */
__attribute__((visibility("hidden"))) ST_NOIPA void *st_hidden(void)
{
	void *r = st_capture(); /* @hidden */

	st_sink = r;
	return r;
}

ST_NOIPA void *st_call_hidden(void)
{
	void *r = st_hidden();

	st_sink = r;
	return r;
}
