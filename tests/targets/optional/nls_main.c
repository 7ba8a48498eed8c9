/* nls_main.c - binds message domains after libnls_ctor.so's constructor did (test_faults) */
#include <libintl.h>
#include <stdio.h>

/*
 * When the shim cannot create its dump and said so through strerror(),
 * which takes the catalogs' lock again, the lock was left broken and the
 * next bindtextdomain() here waited for ever.  Prints "bound 3".
 */
int main(void)
{
	bindtextdomain("heaptrail-test-a", "/usr/share/locale");
	bindtextdomain("heaptrail-test-b", "/usr/share/locale");
	bindtextdomain("heaptrail-test-c", "/usr/share/locale");
	puts("bound 3");
	return 0;
}
