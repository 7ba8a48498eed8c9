/* rustdemangle.h - Rust v0 symbol names */
#ifndef HT_RUSTDEMANGLE_H
#define HT_RUSTDEMANGLE_H

/* The readable form of a "_R..." name (malloc'd), or NULL when it is not one this reads. */
char *rust_demangle_v0(const char *sym);
/*
 * dem, a C++ demangling of mangled: when mangled is a legacy Rust name
 * ("_ZN...17h<16 hex digits>E"), its hash part is dropped and its $LT$-style
 * escapes and ".." separators made readable, in place; 1 then, else 0.
 */
int rust_legacy_finish(const char *mangled, char *dem);

#endif
