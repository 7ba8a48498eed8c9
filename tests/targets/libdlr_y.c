/* libdlr_y.c - dlr_entry() with a frame-pointer frame (test_dl_fork 'swap'; see libdlr_x.c) */
#include "dlr_entry.h"

DLR_ENTRY("	pushq %rbp\n"
	  "	.cfi_def_cfa_offset 16\n"
	  "	.cfi_offset %rbp, -16\n"
	  "	movq %rsp, %rbp\n"
	  "	.cfi_def_cfa_register %rbp\n"
	  "	call *%rdi\n"
	  "	popq %rbp\n"
	  "	.cfi_def_cfa %rsp, 8\n");
