/* test_symbolize.c - symbolizer and site printing against call sites whose lines the target knows */
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <libelf.h>

#include "../../analyzer/site.h"
#include "../../analyzer/symbolize.h"

/*
 * Ground truth comes from the target library itself: each st_* function
 * returns the return address of a call made on a source line tagged "@name",
 * and the test finds those lines by reading the source.  The library is
 * dlopen'ed, so its load bias and build-id are the real ones; the module
 * table of a dump is fabricated around them (this binary defines the two
 * reader functions the symbolizer and site printer use).
 *
 * usage: test_symbolize DIR    DIR holds libsymtarget*.so built by sym.mk
 */

#ifndef SYM_SRCDIR
#error "build with -DSYM_SRCDIR=\"/abs/path/tests/unit\""
#endif

#define MAXMOD 8
#define PATHLEN 1024
#define MAXSTACK 8

struct dump {
	struct dump_module mods[MAXMOD];
	size_t nmods;
	struct dump_stack stacks[MAXSTACK];
	uint32_t nstacks;
};

const struct dump_module *dump_modules(const struct dump *d, size_t *n)
{
	*n = d->nmods;
	return d->mods;
}

const struct dump_stack *dump_stack(const struct dump *d, uint32_t id)
{
	if (id == 0 || id > d->nstacks)
		return NULL;
	return &d->stacks[id - 1];
}

static int passed, failed, skipped;
static char want[32768];

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (cond) {                                                 \
			passed++;                                           \
		} else {                                                    \
			failed++;                                           \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__,       \
				__LINE__, #cond);                           \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
		}                                                           \
	} while (0)

static int streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static const char *show(const char *s)
{
	return s ? s : "(null)";
}

/* Line of the source line carrying "@tag " (the call site's marker). */
static int marker_line(const char *file, const char *tag)
{
	char path[4096], buf[1024], want[64];
	int line = 0, found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", SYM_SRCDIR, file);
	snprintf(want, sizeof(want), "/* %s */", tag);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(2);
	}
	while (fgets(buf, sizeof(buf), f)) {
		line++;
		if (strstr(buf, want)) {
			found = line;
			break;
		}
	}
	fclose(f);
	if (!found) {
		fprintf(stderr, "marker %s not found in %s\n", tag, path);
		exit(2);
	}
	return found;
}

static size_t read_build_id(const char *path, uint8_t *out)
{
	const void *id = NULL;
	ssize_t len = 0;
	int fd = open(path, O_RDONLY);
	Elf *e;

	if (fd < 0)
		return 0;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e)
		len = dwelf_elf_gnu_build_id(e, &id);
	if (len > 0 && len <= 64)
		memcpy(out, id, len);
	else
		len = 0;
	elf_end(e);
	close(fd);
	return (size_t)len;
}

static void add_module(struct dump *d, const char *path, uint64_t bias,
		       const uint8_t *id, size_t idlen)
{
	struct dump_module *m = &d->mods[d->nmods];

	m->id = (uint32_t)d->nmods;
	m->load_bias = bias;
	m->path = strdup(path);
	memcpy(m->build_id, id, idlen);
	m->build_id_len = idlen;
	m->unloaded_at = UINT64_MAX;
	d->nmods++;
}

static struct dump_frame frame(const struct dump *d, int mod, void *ip)
{
	struct dump_frame f;

	f.ip = (uint64_t)(uintptr_t)ip;
	f.module = mod;
	f.offset = mod >= 0 ? f.ip - d->mods[mod].load_bias : 0;
	return f;
}

static void *call(void *h, const char *name)
{
	void *(*fn)(void);

	*(void **)&fn = dlsym(h, name);
	if (!fn) {
		fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
		exit(2);
	}
	return fn();
}

static void check_frame(const struct sym_frame *f, const char *fn,
			const char *file, int line, int inlined,
			const char *what)
{
	CHECK(streq(f->function, fn), "%s: function %s, want %s", what,
	      show(f->function), fn);
	CHECK(file ? streq(f->file, file) : f->file == NULL,
	      "%s: file %s, want %s", what, show(f->file), show(file));
	CHECK(f->line == line, "%s: line %d, want %d", what, f->line, line);
	CHECK(f->inlined == inlined, "%s: inlined %d, want %d", what,
	      f->inlined, inlined);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; p && (p = strstr(p, needle)); p++)
		n++;
	return n;
}

int main(int argc, char **argv)
{
	static struct dump d;
	char lib[PATHLEN], stripped[PATHLEN], other[PATHLEN], missing[PATHLEN];
	char split[PATHLEN], csrc[PATHLEN], cppsrc[PATHLEN];
	uint8_t id[64], libc_id[64];
	size_t idlen, libc_idlen;
	struct link_map *lm = NULL, *libc_lm = NULL;
	void *h, *libc, *libc_fn;
	void *ra_outer, *ra_plain, *ra_hidden, *ra_cpp;
	int l_leaf, l_mid, l_outer, l_plain, l_hidden, l_cpp;
	struct symbolizer *s;
	const struct sym_frame *fr, *fr2;
	struct dump_frame f;
	Dl_info info;
	size_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: test_symbolize DIR\n");
		return 2;
	}
	elf_version(EV_CURRENT);
	snprintf(lib, PATHLEN, "%s/libsymtarget.so", argv[1]);
	snprintf(stripped, PATHLEN, "%s/libsymtarget_stripped.so", argv[1]);
	snprintf(other, PATHLEN, "%s/libsymtarget_other.so", argv[1]);
	snprintf(split, PATHLEN, "%s/libsymtarget_split.so", argv[1]);
	snprintf(missing, PATHLEN, "%s/libsymtarget_missing.so", argv[1]);
	snprintf(csrc, PATHLEN, "%s/symtarget.c", SYM_SRCDIR);
	snprintf(cppsrc, PATHLEN, "%s/symtarget_cpp.cpp", SYM_SRCDIR);
	l_leaf = marker_line("symtarget.c", "@leaf");
	l_mid = marker_line("symtarget.c", "@mid");
	l_outer = marker_line("symtarget.c", "@outer");
	l_plain = marker_line("symtarget.c", "@plain");
	l_hidden = marker_line("symtarget.c", "@hidden");
	l_cpp = marker_line("symtarget_cpp.cpp", "@cpp");

	h = dlopen(lib, RTLD_NOW);
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
		fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
		return 2;
	}
	ra_outer = call(h, "st_outer");
	ra_plain = call(h, "st_plain");
	ra_hidden = call(h, "st_call_hidden");
	ra_cpp = call(h, "st_cpp_entry");
	idlen = read_build_id(lib, id);
	CHECK(idlen == 20, "build-id of %s: %zu bytes", lib, idlen);

	/* libc's own strdup (not a sanitizer's interceptor) for the runtime rule. */
	libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	libc_fn = libc ? dlsym(libc, "strdup") : NULL;
	if (!libc_fn || !dladdr1(libc_fn, &info, (void **)&libc_lm,
				 RTLD_DL_LINKMAP) || !libc_lm) {
		fprintf(stderr, "cannot find libc's strdup\n");
		return 2;
	}
	libc_idlen = read_build_id(info.dli_fname, libc_id);

	/*
	 * Modules 0..3 and 5 all claim the same addresses, as libraries that
	 * were dlclose'd and replaced do: only the frame's module index can
	 * tell which file to read.
	 */
	add_module(&d, lib, lm->l_addr, id, idlen);		/* 0 */
	add_module(&d, stripped, lm->l_addr, id, idlen);	/* 1 */
	add_module(&d, other, lm->l_addr, id, idlen);		/* 2 */
	add_module(&d, missing, lm->l_addr, id, idlen);		/* 3 */
	add_module(&d, info.dli_fname, libc_lm->l_addr, libc_id, libc_idlen); /* 4 */
	add_module(&d, split, lm->l_addr, id, idlen);		/* 5 */

	s = sym_new(&d);
	CHECK(s != NULL, "sym_new");
	if (!s)
		return 1;

	/* Inline expansion: innermost inlined function first, as addr2line -i. */
	f = frame(&d, 0, ra_outer);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 3, "st_outer expands to %zu frames, want 3", n);
	if (n == 3) {
		check_frame(&fr[0], "st_leaf", csrc, l_leaf, 1, "inline leaf");
		check_frame(&fr[1], "st_mid", csrc, l_mid, 1, "inline mid");
		check_frame(&fr[2], "st_outer", csrc, l_outer, 0, "outer");
		for (size_t i = 0; i < n; i++) {
			CHECK(streq(fr[i].module, lib), "module %s", show(fr[i].module));
			CHECK(fr[i].offset == f.offset && fr[i].ip == f.ip,
			      "offset 0x%" PRIx64 " ip 0x%" PRIx64, fr[i].offset, fr[i].ip);
		}
	}
	/* Cached: the same frames come back. */
	n = sym_resolve(s, &f, &fr2);
	CHECK(n == 3 && fr2 == fr, "second lookup is cached");

	f = frame(&d, 0, ra_plain);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1, "st_plain: %zu frames", n);
	check_frame(&fr[0], "st_plain", csrc, l_plain, 0, "plain");

	f = frame(&d, 0, ra_hidden);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1, "st_hidden: %zu frames", n);
	check_frame(&fr[0], "st_hidden", csrc, l_hidden, 0, "hidden");

	/* C++: the linkage name, demangled, with namespace and template. */
	f = frame(&d, 0, ra_cpp);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1, "cpp: %zu frames", n);
	check_frame(&fr[0], "void* stns::fetch<int>(int)", cppsrc, l_cpp, 0, "cpp");

	/* Separate debug file (.gnu_debuglink next to the library). */
	f = frame(&d, 5, ra_outer);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 3, "split debug st_outer: %zu frames", n);
	if (n == 3) {
		check_frame(&fr[0], "st_leaf", csrc, l_leaf, 1, "split leaf");
		check_frame(&fr[2], "st_outer", csrc, l_outer, 0, "split outer");
		CHECK(streq(fr[0].module, split), "split module %s", show(fr[0].module));
	}

	/* Stripped: the dynamic symbol table names what it exports. */
	f = frame(&d, 1, ra_plain);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1, "stripped plain: %zu frames", n);
	check_frame(&fr[0], "st_plain", NULL, 0, 0, "stripped plain");
	CHECK(fr[0].file == NULL, "stripped has no file");
	f = frame(&d, 1, ra_outer);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && streq(fr[0].function, "st_outer") && fr[0].file == NULL,
	      "stripped outer: %zu frames, %s", n, show(fr[0].function));
	f = frame(&d, 1, ra_cpp);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && streq(fr[0].function, "void* stns::fetch<int>(int)"),
	      "stripped cpp demangled from symtab: %s", show(fr[0].function));
	/* ... and nothing for a hidden function: module+offset. */
	f = frame(&d, 1, ra_hidden);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && fr[0].function == NULL && fr[0].file == NULL &&
	      fr[0].line == 0, "stripped hidden: %s", show(fr[0].function));
	CHECK(streq(fr[0].module, stripped) && fr[0].offset == f.offset,
	      "stripped hidden module %s offset 0x%" PRIx64, show(fr[0].module),
	      fr[0].offset);

	CHECK(sym_warnings(s) == NULL, "no warnings yet: %s", show(sym_warnings(s)));

	/* Build-id mismatch: the file is not read, one warning per module. */
	f = frame(&d, 2, ra_plain);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && fr[0].function == NULL && fr[0].file == NULL &&
	      streq(fr[0].module, other) && fr[0].offset == f.offset,
	      "changed module: %s %s", show(fr[0].function), show(fr[0].module));
	f = frame(&d, 2, ra_outer);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && fr[0].function == NULL, "changed module outer: %s",
	      show(fr[0].function));
	{

		snprintf(want, sizeof(want),
			 "heaptrail: warning: '%s' changed since it was recorded (build-id differs); its frames are shown as addresses\n",
			 other);
		CHECK(streq(sym_warnings(s), want), "warnings:\n%s\nwant:\n%s",
		      show(sym_warnings(s)), want);
	}

	/* Missing file: module+offset and a warning naming it. */
	f = frame(&d, 3, ra_plain);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && fr[0].function == NULL && streq(fr[0].module, missing),
	      "missing module: %s", show(fr[0].function));
	f = frame(&d, 3, ra_outer);
	sym_resolve(s, &f, &fr);
	{

		snprintf(want, sizeof(want),
			 "heaptrail: warning: cannot open '%s': No such file or directory; its frames are shown as addresses\n",
			 missing);
		CHECK(count(sym_warnings(s), want) == 1, "warnings:\n%s",
		      show(sym_warnings(s)));
		CHECK(count(sym_warnings(s), "heaptrail: warning: ") == 2,
		      "two warnings:\n%s", show(sym_warnings(s)));
	}

	/*
	 * libc through its separate debug file under /usr/lib/debug/.build-id
	 * (when libc6-dbg is installed): DWARF names the file.
	 */
	{
		char dbg[PATHLEN];
		int k = snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%02x/",
				 libc_id[0]);

		for (size_t i = 1; i < libc_idlen; i++)
			k += snprintf(dbg + k, sizeof(dbg) - k, "%02x", libc_id[i]);
		snprintf(dbg + k, sizeof(dbg) - k, ".debug");
		f = frame(&d, 4, (char *)libc_fn + 4);
		n = sym_resolve(s, &f, &fr);
		CHECK(n >= 1 && fr[n - 1].function && strstr(fr[n - 1].function, "strdup"),
		      "libc strdup: %s", show(fr[n - 1].function));
		if (libc_idlen && access(dbg, R_OK) == 0)
			CHECK(fr[0].file != NULL && fr[0].line > 0,
			      "libc frame has no file:line from %s", dbg);
		else
			skipped++;
	}

	/* No module at all: the bare address. */
	f = frame(&d, -1, (void *)0x1234);
	n = sym_resolve(s, &f, &fr);
	CHECK(n == 1 && fr[0].function == NULL && fr[0].module == NULL &&
	      fr[0].ip == 0x1234, "no module");

	/* Sites. */
	{
		static struct dump_frame st1[4], st2[1], st3[2];
		struct site_ctx c = { &d, s };
		const struct sym_frame *top;
		char buf[256], *out = NULL;
		size_t outlen = 0;
		FILE *mem;
		struct json j;

		/* strdup's caller is the site; the libc frame is skipped. */
		st1[0] = frame(&d, 4, (char *)libc_fn + 4);
		st1[1] = frame(&d, 0, ra_plain);
		st1[2] = frame(&d, 0, ra_outer);
		st1[3] = frame(&d, 1, ra_hidden);
		d.stacks[0] = (struct dump_stack){ 4, st1 };
		/* Only runtime frames: the innermost one. */
		st2[0] = frame(&d, 4, (char *)libc_fn + 4);
		d.stacks[1] = (struct dump_stack){ 1, st2 };
		/* For exact JSON. */
		st3[0] = frame(&d, 0, ra_outer);
		st3[1] = frame(&d, 1, ra_hidden);
		d.stacks[2] = (struct dump_stack){ 2, st3 };
		d.stacks[3] = (struct dump_stack){ 0, NULL };
		d.nstacks = 4;

		top = site_top_frame(&c, 1);
		CHECK(top && streq(top->function, "st_plain") && top->line == l_plain,
		      "top frame skips libc: %s", top ? show(top->function) : "NULL");
		snprintf(want, sizeof(want), "st_plain (symtarget.c:%d)", l_plain);
		CHECK(streq(site_label(&c, 1, buf, sizeof(buf)), want),
		      "label '%s', want '%s'", buf, want);
		CHECK(streq(site_label(&c, 1, buf, sizeof(buf)), want),
		      "label again '%s'", buf);
		CHECK(site_label(&c, 1, buf, 9) == buf && strlen(buf) == 8,
		      "truncated label '%s'", buf);

		top = site_top_frame(&c, 2);
		CHECK(top && streq(top->module, info.dli_fname),
		      "all-runtime stack: top in %s", top ? show(top->module) : "NULL");
		CHECK(site_top_frame(&c, 4) == NULL, "empty stack has no top");
		CHECK(streq(site_label(&c, 4, buf, sizeof(buf)), "(no stack)"),
		      "empty label '%s'", buf);
		CHECK(streq(site_label(&c, 99, buf, sizeof(buf)), "(no stack)"),
		      "unknown stack label '%s'", buf);

		mem = open_memstream(&out, &outlen);
		site_print(mem, &c, 1, 4, -1);
		fclose(mem);
		snprintf(want, sizeof(want),
			 "st_plain (symtarget.c:%d)\n"
			 "    st_leaf (symtarget.c:%d)\n"
			 "    st_mid (symtarget.c:%d)\n"
			 "    st_outer (symtarget.c:%d)\n"
			 "    %s+0x%" PRIx64 "\n",
			 l_plain, l_leaf, l_mid, l_outer, stripped, st1[3].offset);
		CHECK(streq(out, want), "site_print:\n%s\nwant:\n%s", out, want);
		free(out);

		mem = open_memstream(&out, &outlen);
		site_print(mem, &c, 1, 2, 2);
		fclose(mem);
		snprintf(want, sizeof(want),
			 "st_plain (symtarget.c:%d)\n"
			 "  st_leaf (symtarget.c:%d)\n"
			 "  st_mid (symtarget.c:%d)\n",
			 l_plain, l_leaf, l_mid);
		CHECK(streq(out, want), "site_print 2 frames:\n%s\nwant:\n%s", out, want);
		free(out);

		mem = open_memstream(&out, &outlen);
		site_print(mem, &c, 1, 2, 0);
		fclose(mem);
		snprintf(want, sizeof(want), "st_plain (symtarget.c:%d)\n", l_plain);
		CHECK(streq(out, want), "site_print top only:\n%s", out);
		free(out);

		mem = open_memstream(&out, &outlen);
		json_init(&j, mem, 0);
		json_obj_begin(&j);
		site_json_fields(&j, &c, 3);
		json_obj_end(&j);
		json_finish(&j);
		fclose(mem);
		snprintf(want, sizeof(want),
			 "{\"function\":\"st_leaf\",\"file\":\"%s\",\"line\":%d,\"module\":\"%s\",\"stack\":["
			 "{\"function\":\"st_leaf\",\"file\":\"%s\",\"line\":%d,\"module\":\"%s\",\"address\":\"0x%" PRIx64 "\",\"offset\":\"0x%" PRIx64 "\",\"inlined\":true},"
			 "{\"function\":\"st_mid\",\"file\":\"%s\",\"line\":%d,\"module\":\"%s\",\"address\":\"0x%" PRIx64 "\",\"offset\":\"0x%" PRIx64 "\",\"inlined\":true},"
			 "{\"function\":\"st_outer\",\"file\":\"%s\",\"line\":%d,\"module\":\"%s\",\"address\":\"0x%" PRIx64 "\",\"offset\":\"0x%" PRIx64 "\",\"inlined\":false},"
			 "{\"function\":null,\"file\":null,\"line\":null,\"module\":\"%s\",\"address\":\"0x%" PRIx64 "\",\"offset\":\"0x%" PRIx64 "\",\"inlined\":false}"
			 "]}\n",
			 csrc, l_leaf, lib,
			 csrc, l_leaf, lib, st3[0].ip, st3[0].offset,
			 csrc, l_mid, lib, st3[0].ip, st3[0].offset,
			 csrc, l_outer, lib, st3[0].ip, st3[0].offset,
			 stripped, st3[1].ip, st3[1].offset);
		CHECK(streq(out, want), "site json:\n%s\nwant:\n%s", out, want);
		free(out);

		mem = open_memstream(&out, &outlen);
		json_init(&j, mem, 0);
		json_obj_begin(&j);
		site_json_fields(&j, &c, 4);
		json_obj_end(&j);
		json_finish(&j);
		fclose(mem);
		CHECK(streq(out, "{\"function\":null,\"file\":null,\"line\":null,\"module\":null,\"stack\":[]}\n"),
		      "empty site json: %s", out);
		free(out);
	}

	sym_free(s);
	dlclose(libc);
	dlclose(h);
	for (size_t i = 0; i < d.nmods; i++)
		free(d.mods[i].path);
	if (skipped)
		printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	else
		printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
