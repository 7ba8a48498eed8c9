/* dlopen_leak.c - leaks from a dlopen'ed library that is dlclose'd before exit */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "truth.h"

/*
 * Proves: a leak made by code of a library that was unloaded long before
 * the end is still symbolized (function, file, line, module libtleak.so)
 * from the module records of the dump; a block the library allocated and
 * the program freed after the unload is released.  What dlopen, dlsym and
 * dlclose allocate for themselves is the runtime's (runtime callers).
 */

#define noinline __attribute__((noinline))

static noinline void *do_dlopen(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	T_NO_TAILCALL();
	return h;
}

static noinline void *do_dlsym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	T_NO_TAILCALL();
	return p;
}

static noinline void do_dlclose(void *h)
{
	dlclose(h);
	T_NO_TAILCALL();
}

/* Is a file named 'name' still mapped?  Reads /proc/self/maps without malloc. */
static int mapped(const char *name)
{
	static char buf[1 << 16];
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY);

	if (fd < 0)
		abort();
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = 0;
	return strstr(buf, name) != NULL;
}

int main(void)
{
	static char path[4096];
	void *(*tleak_alloc)(size_t);
	void *h, *a, *b, *tmp;
	ssize_t n;
	int line;
	char *slash;

	truth_runtime_caller("do_dlopen");
	truth_runtime_caller("do_dlsym");
	truth_runtime_caller("do_dlclose");
	truth_set_exact(0, 1);

	n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n <= 0)
		abort();
	path[n] = 0;
	slash = strrchr(path, '/');
	strcpy(slash + 1, "libtleak.so");

	h = do_dlopen(path);
	if (!h)
		abort();
	tleak_alloc = (void *(*)(size_t))do_dlsym(h, "tleak_alloc");
	a = tleak_alloc(4000);
	b = tleak_alloc(6000);
	tmp = tleak_alloc(500);
	line = *(int *)do_dlsym(h, "tleak_line");
	truth_track_in(a, 4000, "tleak_inner", "libtleak.c", line);
	truth_track_in(b, 6000, "tleak_inner", "libtleak.c", line);
	truth_track_in(tmp, 500, "tleak_inner", "libtleak.c", line);
	truth_sink = a;
	truth_sink = b;
	do_dlclose(h);
	T_FREE(tmp);
	truth_fact("unloaded", !mapped("libtleak.so"));
	truth_write();
	return 0;
}
