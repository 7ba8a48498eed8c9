/* symbolize.h - turns recorded addresses into function, file:line and module */
#ifndef HT_SYMBOLIZE_H
#define HT_SYMBOLIZE_H

#include <stdint.h>
#include <stddef.h>

#include "dump.h"

/*
 * Uses elfutils libdwfl: each module of the dump is reported at its recorded
 * load bias; DWARF (also from separate debug files found by build-id) gives
 * file:line and inline frames, the ELF symbol table gives the function when
 * there is no DWARF.  C++ names are demangled.  A module whose file on disk
 * has another build-id than the one recorded is not read: its frames show
 * module+offset and sym_warnings() says so once per module.
 *
 * Results are cached per address; strings live until sym_free().
 */

struct sym_frame {
	const char *function;	/* NULL when unknown */
	const char *file;	/* NULL when unknown */
	int line;		/* 0 when unknown */
	const char *module;	/* path of the module, NULL when none */
	uint64_t offset;	/* address relative to the module */
	uint64_t ip;
	int inlined;		/* 1 for a frame inlined into the next one */
};

struct symbolizer;

struct symbolizer *sym_new(const struct dump *d);
void sym_free(struct symbolizer *s);

/*
 * The frames one captured address stands for, innermost (inlined) first.
 * Always at least one.  Return addresses are looked up at ip - 1.
 */
size_t sym_resolve(struct symbolizer *s, const struct dump_frame *f,
		   const struct sym_frame **out);

/*
 * Reads ahead, on a thread of its own, the debug info of the modules that
 * the stacks defined so far name near their top: libdw inflating a
 * library's compressed DWARF then overlaps the caller's replay instead of
 * following it.  Returns 1 when the thread started, 0 when there was
 * nothing to do (or no thread).  Meanwhile the caller may go on reading
 * the dump but must not use the symbolizer from another thread; every
 * sym_* call waits for the thread first.  Results and warnings are the
 * same as without it: a module opened ahead warns only once the caller
 * uses it.
 */
int sym_prewarm(struct symbolizer *s);

/* Warnings collected so far (build-id mismatches, missing files), or NULL. */
const char *sym_warnings(const struct symbolizer *s);

/* "heaptrail: warning: ..." lines to stderr, once. */
void sym_print_warnings(struct symbolizer *s);

/*
 * Per-stack memo kept with the symbolizer for site.c, so that a site's top
 * frame and label are worked out once and live exactly as long as the frames
 * they point into.  Zeroed on first use; 'label' (malloc'd by the caller) is
 * freed by sym_free().  NULL when out of memory.
 */
struct sym_memo {
	int done;
	uint32_t top_index;	/* frame of the stack holding the top frame */
	uint32_t top_sub;	/* its position among that frame's inline frames */
	const struct sym_frame *top;
	char *label;
};

struct sym_memo *sym_memo(struct symbolizer *s, uint32_t stack);

#endif
