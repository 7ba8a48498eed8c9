/* dlr_entry.h - dlr_entry() in assembly, around the frame each library gives it (libdlr_x.c, libdlr_y.c) */
#ifndef DLR_ENTRY_H
#define DLR_ENTRY_H

/*
 * void *dlr_entry(void *(*callback)(void)): returns callback().  BODY sets
 * up the frame, calls *%rdi and takes the frame down, with its CFI; the
 * call's return address must be at the same offset in both libraries.
 */
#define DLR_ENTRY(body)                                 \
	__asm__("	.text\n"                         \
		"	.globl dlr_entry\n"              \
		"	.type dlr_entry, @function\n"    \
		"	.p2align 4\n"                    \
		"dlr_entry:\n"                           \
		"	.cfi_startproc\n"                \
		body                                     \
		"	ret\n"                           \
		"	.cfi_endproc\n"                  \
		"	.size dlr_entry, .-dlr_entry\n")

#endif
