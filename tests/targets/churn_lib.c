/* churn_lib.c - allocates through a library named on its command line, many times */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * Proves (test_report.py, review finding A3): a library that changed
 * between recording and reporting is said once ("changed since it was
 * recorded"), also when the report's frames in it were resolved ahead
 * while the dump was still being read (many events make the analyzer read
 * debug info ahead).  Loads LIB (libonecall.so or any library with its
 * one_alloc), calls one_alloc N times, frees all but the last 10.
 *
 *   churn_lib LIB N
 */

/* test-ldflags: -ldl */

int main(int argc, char **argv)
{
	void *(*alloc)(size_t);
	void *h, *keep[10] = { 0 };
	long n, i;

	if (argc != 3) {
		fprintf(stderr, "usage: churn_lib LIB N\n");
		return 2;
	}
	n = atol(argv[2]);
	h = dlopen(argv[1], RTLD_NOW);
	if (!h || !(*(void **)&alloc = dlsym(h, "one_alloc"))) {
		fprintf(stderr, "churn_lib: %s\n", dlerror());
		return 1;
	}
	for (i = 0; i < n; i++) {
		void *p = alloc(32 + (size_t)(i % 64));

		if (i >= n - 10)
			keep[i - (n - 10)] = p;
		else
			free(p);
	}
	printf("kept %d\n", 10);
	(void)keep;
	return 0;
}
