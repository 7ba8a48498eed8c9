/* libdlr_x.c - dlr_entry() with a 48-byte frame and no frame pointer (test_dl_fork 'swap') */
#include "dlr_entry.h"

/*
 * libdlr_y.c defines the same function at the same offset, its call at the
 * same return address, with a frame-pointer frame instead: loaded where
 * this library was, its return address means other code, and a rule
 * learnt for this one would walk it wrong.  In assembly, so that the two
 * layouts, and the return address, are exactly these.
 */
DLR_ENTRY("	subq $40, %rsp\n"	/* 4 bytes, as push + mov in y */
	  "	.cfi_def_cfa_offset 48\n"
	  "	call *%rdi\n"
	  "	addq $40, %rsp\n"
	  "	.cfi_def_cfa_offset 8\n");
