/* test_rustdemangle.c - Rust symbol names against c++filt's readings (analyzer/rustdemangle.c) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analyzer/rustdemangle.h"

/*
 * The corpus (rust_symbols.txt) pairs real names from a Rust program with
 * what binutils' c++filt makes of them: v0 names through
 * rust_demangle_v0(), legacy ones through the C++ demangler and
 * rust_legacy_finish(), as the symbolizer does.  Then names this must
 * refuse (NULL: shown as they are) and malformed ones (never a crash,
 * never a read past the name: run under ASan in CI).
 */

char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

static int passed, failed;

static void check(const char *what, const char *got, const char *want)
{
	if ((got == NULL) == (want == NULL) && (!got || !strcmp(got, want))) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL %s\n  got  %s\n  want %s\n", what, got ? got : "(null)",
	       want ? want : "(null)");
}

static void corpus(const char *path)
{
	char line[8192];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f) {
		printf("FAIL cannot read %s\n", path);
		failed++;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *kind = line, *mangled, *want, *got = NULL;
		int status = -1;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\n")] = '\0';
		mangled = strchr(kind, '\t');
		want = mangled ? strchr(mangled + 1, '\t') : NULL;
		if (!want) {
			printf("FAIL bad corpus line: %s\n", line);
			failed++;
			continue;
		}
		*mangled++ = '\0';
		*want++ = '\0';
		if (!strcmp(kind, "v0")) {
			got = rust_demangle_v0(mangled);
		} else {
			got = __cxa_demangle(mangled, NULL, NULL, &status);
			if (status != 0 || !got || !rust_legacy_finish(mangled, got)) {
				free(got);
				got = NULL;
			}
		}
		check(mangled, got, want);
		free(got);
		n++;
	}
	fclose(f);
	if (n < 100) {
		printf("FAIL only %d names in the corpus\n", n);
		failed++;
	}
}

static void refused(const char *sym)
{
	char *got = rust_demangle_v0(sym);

	check(sym, got, NULL);
	free(got);
}

/* Every prefix of every corpus name, and bytes flipped: no crash, no overread. */
static void malformed(const char *path)
{
	char line[8192];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *m = strchr(line, '\t'), *end;
		size_t len, i;

		if (line[0] == '#' || !m || strncmp(line, "v0", 2))
			continue;
		m++;
		end = strchr(m, '\t');
		if (!end)
			continue;
		len = (size_t)(end - m);
		for (i = 2; i < len; i++) {
			char *cut = strndup(m, i), *flip = strndup(m, len);

			if (!cut || !flip)
				abort();
			free(rust_demangle_v0(cut));
			flip[i] = flip[i] == 'B' ? 'N' : 'B';	/* backrefs to odd places */
			free(rust_demangle_v0(flip));
			free(cut);
			free(flip);
		}
	}
	fclose(f);
	passed++;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "tests/unit/rust_symbols.txt";
	char deep[600];
	size_t i;

	corpus(path);
	{
		char *got = rust_demangle_v0("_RNvCs1234_7mycrate3foo.llvm.123");

		check("a vendor suffix is left out", got, "mycrate::foo");
		free(got);
	}
	refused("_ZN3foo3barE");		/* C++ */
	refused("_R");
	refused("_RNvCu7mycrate3foo");		/* punycode identifier */
	refused("_RNvC3foo");			/* the identifier runs past the end */
	refused("_RB_");			/* a backref to itself */
	refused("_RINvC3foo3barKRe_E");		/* a &str constant */
	/* nesting beyond the depth limit */
	memcpy(deep, "_R", 2);
	for (i = 2; i < sizeof(deep) - 8; i++)
		deep[i] = 'N';
	strcpy(deep + i, "C1a");
	refused(deep);
	malformed(path);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
