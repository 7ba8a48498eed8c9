/* realloc_unseen.c - a realloc whose new block lands where frees went unrecorded */
#include <stdio.h>
#include <stdlib.h>

/*
 * Proves: a compact dump keeps a realloc whole when its new block takes the
 * address of a block whose free the shim never saw (freed through glibc's
 * own __libc_free, as a library bound to libc directly would): the reader
 * sees an allocation over a live block, and it is still the realloc's
 * second half.
 *
 * Prints "reallocs 1".
 */

extern void __libc_free(void *);

int main(void)
{
	void *p[8], *q = malloc(16), *g = malloc(16), *r;
	int i;

	for (i = 0; i < 8; i++)
		p[i] = malloc(40);
	for (i = 0; i < 8; i++)
		__libc_free(p[i]);	/* unseen: the blocks stay live to the shim */
	r = realloc(q, 40);		/* moves into a freed 48-byte chunk */
	printf("reallocs 1\n");
	free(r);
	free(g);
	return 0;
}
