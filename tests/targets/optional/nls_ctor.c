/* nls_ctor.c - a library whose constructor's first allocation is inside bindtextdomain() (test_faults) */
#include <libintl.h>

/*
 * As libgpg-error's does (curl, wget, gpg and postgres link it): the C
 * library allocates inside bindtextdomain() holding the lock of its message
 * catalogs, so the shim starts there, in a malloc() under that lock.  Built
 * by test_faults.py as libnls_ctor.so, with nls_main.c linked against it.
 */
__attribute__((constructor)) static void nls_ctor_init(void)
{
	bindtextdomain("heaptrail-test-first", "/usr/share/locale");
}
