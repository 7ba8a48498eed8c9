/* libdlr_y.c - dlr_entry() with a frame-pointer frame (test_dl_fork 'swap'; see libdlr_x.c) */

/* void *dlr_entry(void *(*callback)(void)): returns callback(). */
__asm__(
	"	.text\n"
	"	.globl dlr_entry\n"
	"	.type dlr_entry, @function\n"
	"	.p2align 4\n"
	"dlr_entry:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	movq %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	call *%rdi\n"
	"	popq %rbp\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.size dlr_entry, .-dlr_entry\n");
