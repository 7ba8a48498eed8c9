/* symtarget_cpp.cpp - a namespaced template call site, for demangling in test_symbolize.c */
#include "symtarget.h"

namespace stns {

template <typename T> ST_NOIPA void *fetch(T v)
{
	void *r = st_capture(); /* @cpp */

	st_sink = r;
	(void)v;
	return r;
}

template void *fetch<int>(int);

}

extern "C" ST_NOIPA void *st_cpp_entry(void)
{
	void *r = stns::fetch<int>(7);

	st_sink = r;
	return r;
}
