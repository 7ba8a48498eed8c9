// dlf_atexit.cc - static objects whose destructors free at exit, in the program and in a library
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Proves (tests/e2e/test_dl_fork.py, review finding 5): frees made by
 * static C++ destructors and by a library's exit-time destructors, after
 * main returned, are in the dump: nothing made here leaks.  The one block
 * leaked on purpose (static_keep, 4242 bytes) shows the leak report works.
 *
 *   dlf_atexit LIBDIR
 */

struct Holder {
	char *block;
	Holder() : block(nullptr) {}
	__attribute__((noinline)) void fill(size_t n)
	{
		block = static_cast<char *>(malloc(n));
		memset(block, 'H', n);
	}
	~Holder() { free(block); }
};

static Holder holder;

static void *volatile keep;

__attribute__((noinline)) static void static_keep(void)
{
	keep = malloc(4242);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	char path[4096];

	if (argc < 2)
		return 2;
	snprintf(path, sizeof(path), "%s/libdlf_static.so", argv[1]);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 3;
	}
	int (*ready)(void) = reinterpret_cast<int (*)(void)>(dlsym(h, "static_ready"));
	if (!ready || !ready())
		return 4;
	holder.fill(5005);
	static_keep();
	printf("ready\n");
	return 0;	// holder's destructor, then the library's, run after this
}
