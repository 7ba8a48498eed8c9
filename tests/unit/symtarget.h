/* symtarget.h - call sites with known source lines, for test_symbolize.c */
#ifndef SYMTARGET_H
#define SYMTARGET_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Each function returns the return address of a call made at a line marked
 * "@name" in symtarget.c / symtarget_cpp.cpp, which the test reads back.
 */
void *st_capture(void);
void *st_outer(void);		/* @leaf inlined into @mid inlined into @outer */
void *st_plain(void);		/* @plain, no inlining */
void *st_call_hidden(void);	/* @hidden, in a function absent from .dynsym */
void *st_cpp_entry(void);	/* @cpp, in stns::fetch<int>(int) */

extern void *volatile st_sink;

#ifdef __cplusplus
}
#endif

#if defined(__clang__)
#define ST_NOIPA __attribute__((noinline, optnone))
#else
#define ST_NOIPA __attribute__((noipa))
#endif

#endif
