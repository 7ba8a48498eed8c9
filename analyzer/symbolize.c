/* symbolize.c - turns recorded addresses into function, file:line and module */
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <libelf.h>
#include <uthash.h>

#include "symbolize.h"
#include "rustdemangle.h"
#include "sympool.h"

/*
 * Every module gets a Dwfl of its own, opened the first time one of its
 * frames is printed.  Modules loaded at different times may have occupied
 * the same addresses (dlclose, then dlopen of another library), so a single
 * address space cannot tell them apart; the reader already resolved each
 * frame to a module index and an offset, and that pair is what we look up.
 * Inside its own Dwfl a module is reported at load bias 0, so an address in
 * libdwfl is the frame's offset in its module: the same in every process
 * that loaded that file, wherever it was loaded.  That lets a module outlive
 * the symbolizer that opened it (sympool.c).
 *
 * All captured addresses are return addresses (the malloc call's and its
 * callers'), so the lookup is at ip - 1: the call instruction, whose line
 * is the call's line even when the call is the last thing in a function.
 */

/* libstdc++'s demangler; declared here so that no C++ header is needed. */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

enum { MOD_UNOPENED, MOD_OK, MOD_UNUSABLE };

struct symmod {
	int state;
	struct modinfo mi;	/* MOD_OK: its debug info */
	const char *path;	/* interned */
	char *held_warn;	/* opened ahead (sym_prewarm): its warning, told on first use */
};

/* Cache key: module index and offset, or -1 and the raw ip. */
struct symkey {
	int64_t module;
	uint64_t offset;
};

struct symentry {
	struct symkey key;
	UT_hash_handle hh;
	size_t n;
	struct sym_frame *frames;
};

struct strent {
	UT_hash_handle hh;
	char s[];
};

struct memoent {
	uint32_t stack;
	UT_hash_handle hh;
	struct sym_memo memo;
};

struct symbolizer {
	const struct dump *dump;
	struct symmod *mods;
	size_t nmods;
	struct symentry *cache;
	struct strent *strings;
	struct memoent *memos;
	char *warn;		/* "heaptrail: warning: ...\n" lines */
	size_t warn_len, warn_cap, warn_printed;
	/* Scratch for building one address's frames. */
	struct sym_frame *tmp;
	size_t tmp_n, tmp_cap;
	/*
	 * sym_prewarm(): the thread, and what it works from (copies taken
	 * before it started: the reader goes on meanwhile).  'ahead' is set
	 * while the thread runs and only the thread reads it.
	 */
	pthread_t warm;
	int warming, ahead;
	struct dump_module *warm_mods;
	size_t warm_nmods;
	struct dump_frame *warm_frames;
	size_t warm_nframes;
};

/*
 * libdwfl searches separate debug files by build-id under
 * /usr/lib/debug/.build-id and by .gnu_debuglink next to the file and under
 * /usr/lib/debug (a NULL path means that default).
 */
static char *debuginfo_path;

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/* Strings live until sym_free(); equal strings are stored once. */
static const char *intern(struct symbolizer *s, const char *str)
{
	struct strent *e;
	size_t len;

	if (!str)
		return NULL;
	len = strlen(str);
	HASH_FIND(hh, s->strings, str, len, e);
	if (e)
		return e->s;
	e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return NULL;
	memcpy(e->s, str, len + 1);
	HASH_ADD_KEYPTR(hh, s->strings, e->s, len, e);
	return e->s;
}

static void add_warning_line(struct symbolizer *s, const char *line)
{
	size_t n = strlen(line);

	if (s->warn_len + n + 2 > s->warn_cap) {
		size_t cap = s->warn_cap ? s->warn_cap * 2 : 512;
		char *w;

		while (cap < s->warn_len + n + 2)
			cap *= 2;
		w = realloc(s->warn, cap);
		if (!w)
			return;
		s->warn = w;
		s->warn_cap = cap;
	}
	memcpy(s->warn + s->warn_len, line, n);
	s->warn_len += n;
	s->warn[s->warn_len++] = '\n';
	s->warn[s->warn_len] = '\0';
}

/*
 * A module's warning.  Opened ahead of time (sym_prewarm's thread), the
 * module keeps it until the report first uses the module: the warnings, and
 * their order, stay those of the modules the report reads.
 */
__attribute__((format(printf, 3, 4)))
static void mod_warning(struct symbolizer *s, struct symmod *m, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (s->ahead) {
		free(m->held_warn);
		m->held_warn = strdup(line);
	} else {
		add_warning_line(s, line);
	}
}

/* Waits for sym_prewarm()'s thread: the symbolizer is the caller's again. */
static void warm_join(struct symbolizer *s)
{
	if (!s->warming)
		return;
	pthread_join(s->warm, NULL);
	s->warming = 0;
	s->ahead = 0;
	free(s->warm_mods);
	free(s->warm_frames);
	s->warm_mods = NULL;
	s->warm_frames = NULL;
	s->warm_nmods = s->warm_nframes = 0;
}

struct symbolizer *sym_new(const struct dump *d)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dump = d;
	elf_version(EV_CURRENT);
	/*
	 * libdwfl falls back to debuginfod servers when DEBUGINFOD_URLS is
	 * set; without network every module then waits for a timeout.  The
	 * analyzer works offline unless the user asks for it.
	 */
	if (!getenv("HEAPTRAIL_DEBUGINFOD"))
		unsetenv("DEBUGINFOD_URLS");
	return s;
}

void sym_free(struct symbolizer *s)
{
	struct symentry *e, *et;
	struct strent *t, *tt;
	struct memoent *m, *mt;

	if (!s)
		return;
	warm_join(s);
	/* last to first: the pool keeps those put last, the program and libc come first */
	for (size_t i = s->nmods; i-- > 0;) {
		if (s->mods[i].state == MOD_OK)
			sympool_put(&s->mods[i].mi);
		else
			modinfo_end(&s->mods[i].mi);
		free(s->mods[i].held_warn);
	}
	free(s->mods);
	HASH_ITER(hh, s->cache, e, et) {
		HASH_DEL(s->cache, e);
		free(e->frames);
		free(e);
	}
	HASH_ITER(hh, s->strings, t, tt) {
		HASH_DEL(s->strings, t);
		free(t);
	}
	HASH_ITER(hh, s->memos, m, mt) {
		HASH_DEL(s->memos, m);
		free(m->memo.label);
		free(m);
	}
	free(s->warn);
	free(s->tmp);
	free(s);
}

const char *sym_warnings(const struct symbolizer *s)
{
	/* the symbolizer is never a const object: the join may write to it */
	if (s)
		warm_join((struct symbolizer *)s);
	return s && s->warn_len ? s->warn : NULL;
}

void sym_print_warnings(struct symbolizer *s)
{
	if (s)
		warm_join(s);
	if (!s || s->warn_printed >= s->warn_len)
		return;
	fputs(s->warn + s->warn_printed, stderr);
	s->warn_printed = s->warn_len;
}

struct sym_memo *sym_memo(struct symbolizer *s, uint32_t stack)
{
	struct memoent *m;

	warm_join(s);
	HASH_FIND(hh, s->memos, &stack, sizeof(stack), m);
	if (m)
		return &m->memo;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->stack = stack;
	HASH_ADD(hh, s->memos, stack, sizeof(m->stack), m);
	return &m->memo;
}

/* C++ and Rust names are demangled; anything else is returned as it is. */
static const char *demangled(struct symbolizer *s, const char *name)
{
	const char *r;
	char *dem = NULL;
	int status = -1;

	if (!name)
		return NULL;
	if (name[0] == '_' && name[1] == 'R') {
		dem = rust_demangle_v0(name);
		status = dem ? 0 : -1;
	} else if (name[0] == '_' && name[1] == 'Z') {
		dem = __cxa_demangle(name, NULL, NULL, &status);
		if (status == 0 && dem)
			rust_legacy_finish(name, dem);
	} else {
		return intern(s, name);
	}
	r = intern(s, status == 0 && dem ? dem : name);
	free(dem);
	return r;
}

/* Does the file's build-id (kept in mi) match the one the dump recorded? */
static int same_build_id(const struct dump_module *dm, Elf *elf, struct modinfo *mi)
{
	const void *id = NULL;
	ssize_t len = dwelf_elf_gnu_build_id(elf, &id);

	if (len > 0 && (size_t)len <= sizeof(mi->build_id)) {
		memcpy(mi->build_id, id, (size_t)len);
		mi->build_id_len = (size_t)len;
	}
	if (dm->build_id_len == 0)
		return 1;	/* nothing recorded to compare against */
	return len > 0 && (size_t)len == dm->build_id_len &&
	       memcmp(id, dm->build_id, len) == 0;
}

static void open_module(struct symbolizer *s, struct symmod *m,
			const struct dump_module *dm)
{
	const char *path = dm->path;
	struct modinfo *mi = &m->mi;
	struct stat st;
	Elf *elf;
	int fd, ok;

	m->state = MOD_UNUSABLE;
	m->path = intern(s, path);
	/*
	 * "[vdso]", "linux-vdso.so.1", anonymous code: nothing on disk to
	 * read, nothing to warn about.  A path with a slash is a file.
	 */
	if (!path || path[0] == '[' || !strchr(path, '/'))
		return;
	if (stat(path, &st) == 0 && sympool_take(dm, &st, mi)) {
		m->state = MOD_OK;
		return;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		mod_warning(s, m, "heaptrail: warning: cannot open '%s': %s; its frames are shown as addresses",
			    path, strerror(errno));
		return;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		mod_warning(s, m, "heaptrail: warning: cannot read '%s': not an ELF file; its frames are shown as addresses",
			    path);
		elf_end(elf);
		close(fd);
		return;
	}
	ok = same_build_id(dm, elf, mi);
	elf_end(elf);
	if (!ok) {
		mod_warning(s, m, "heaptrail: warning: '%s' changed since it was recorded (build-id differs); its frames are shown as addresses",
			    path);
		close(fd);
		return;
	}
	mi->path = strdup(path);
	if (!mi->path || fstat(fd, &mi->st) != 0) {
		modinfo_end(mi);
		close(fd);
		return;
	}
	mi->dwfl = dwfl_begin(&offline_callbacks);
	if (!mi->dwfl) {
		modinfo_end(mi);
		close(fd);
		return;
	}
	/* ET_DYN with add_p_vaddr at base 0: addresses are offsets in the file */
	mi->mod = dwfl_report_elf(mi->dwfl, path, path, fd, 0, true);
	if (!mi->mod) {
		mod_warning(s, m, "heaptrail: warning: cannot read '%s': %s; its frames are shown as addresses",
			    path, dwfl_errmsg(-1));
		close(fd);
		modinfo_end(mi);
		return;
	}
	dwfl_report_end(mi->dwfl, NULL, NULL);
	m->state = MOD_OK;
}

/* A module opened ahead (sym_prewarm) says its warning when first used, as if opened then. */
static void tell_held_warning(struct symbolizer *s, int i)
{
	if (i >= 0 && (size_t)i < s->nmods && s->mods[i].held_warn && !s->ahead) {
		add_warning_line(s, s->mods[i].held_warn);
		free(s->mods[i].held_warn);
		s->mods[i].held_warn = NULL;
	}
}

/* The module of index i, opened on first use; NULL when there is none. */
static struct symmod *get_module(struct symbolizer *s, int i)
{
	const struct dump_module *mods;
	size_t n = 0;

	if (i < 0)
		return NULL;
	if (s->ahead) {
		mods = s->warm_mods;
		n = s->warm_nmods;
	} else {
		mods = dump_modules(s->dump, &n);
	}
	if ((size_t)i >= n || !mods)
		return NULL;
	if ((size_t)i >= s->nmods) {
		/* The reader may have met more modules since last time. */
		struct symmod *nm = realloc(s->mods, n * sizeof(*nm));

		if (!nm)
			return NULL;
		memset(nm + s->nmods, 0, (n - s->nmods) * sizeof(*nm));
		s->mods = nm;
		s->nmods = n;
	}
	if (s->mods[i].state == MOD_UNOPENED)
		open_module(s, &s->mods[i], &mods[i]);
	tell_held_warning(s, i);
	return &s->mods[i];
}

static struct sym_frame *push_frame(struct symbolizer *s)
{
	if (s->tmp_n == s->tmp_cap) {
		size_t cap = s->tmp_cap ? s->tmp_cap * 2 : 8;
		struct sym_frame *t = realloc(s->tmp, cap * sizeof(*t));

		if (!t)
			return NULL;
		s->tmp = t;
		s->tmp_cap = cap;
	}
	memset(&s->tmp[s->tmp_n], 0, sizeof(s->tmp[0]));
	return &s->tmp[s->tmp_n++];
}

static int range_cmp(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * libdw 0.188 finds a CU by address only through .debug_aranges, which
 * clang does not emit by default; without it every address of a clang-built
 * file would come out unsymbolized.  So the CUs' own ranges are collected
 * once per module and searched instead.
 */
static void build_ranges(struct modinfo *m)
{
	Dwarf_Addr bias;
	Dwarf *dw = dwfl_module_getdwarf(m->mod, &bias);
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie, subdie;
	uint8_t type;
	size_t cap = 0;

	m->ranges_built = 1;
	if (!dw)
		return;
	while (dwarf_get_units(dw, cu, &cu, NULL, &type, &cudie, &subdie) == 0) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;

		if (type != DW_UT_compile && type != DW_UT_skeleton &&
		    type != DW_UT_partial)
			continue;
		while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
			if (m->nranges == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct cu_range *r = realloc(m->ranges, ncap * sizeof(*r));

				if (!r)
					goto done;
				m->ranges = r;
				cap = ncap;
			}
			m->ranges[m->nranges].lo = lo;
			m->ranges[m->nranges].hi = hi;
			m->ranges[m->nranges].cu = cudie;
			m->nranges++;
		}
	}
done:
	if (m->nranges)
		qsort(m->ranges, m->nranges, sizeof(*m->ranges), range_cmp);
}

static Dwarf_Die *find_cu(struct modinfo *m, Dwarf_Addr addr, Dwarf_Addr *bias)
{
	Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, addr, bias);
	size_t lo = 0, hi;

	if (cudie)
		return cudie;
	if (!m->ranges_built)
		build_ranges(m);
	if (!dwfl_module_getdwarf(m->mod, bias))
		return NULL;
	addr -= *bias;
	/* Last range starting at or below addr, then back over overlaps. */
	hi = m->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->ranges[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo-- > 0)
		if (addr < m->ranges[lo].hi && addr >= m->ranges[lo].lo)
			return &m->ranges[lo].cu;
	return NULL;
}

static int has_linkage_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;

	return dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	       dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr);
}

/* A unit in C, whose functions have no mangled names to look for. */
static int c_unit(Dwarf_Die *cudie)
{
	switch (dwarf_srclang(cudie)) {
	case DW_LANG_C89:
	case DW_LANG_C:
	case DW_LANG_C99:
	case DW_LANG_C11:
		return 1;
	default:
		return 0;
	}
}

/* Linkage name (demangled) first: DW_AT_name lacks C++ scopes and types. */
static const char *die_function_name(struct symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
		name = dwarf_formstring(&attr);
	if (name && name[0] == '_' && name[1] == 'Z')
		return demangled(s, name);
	name = dwarf_diename(die);
	return name ? intern(s, name) : NULL;
}

/*
 * Line tables may name files relative to the CU's compilation directory
 * (clang's DWARF 5 does, and libdw 0.188 leaves them so); reports and JSON
 * show the full path, as addr2line does.
 */
static const char *cu_path(struct symbolizer *s, Dwarf_Die *cudie,
			   const char *file)
{
	Dwarf_Attribute attr;
	const char *dir;
	char buf[4096];

	if (!file || file[0] == '/' || !cudie)
		return file;
	dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr));
	if (!dir || !dir[0])
		return file;
	if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", dir, file) >= sizeof(buf))
		return file;
	return intern(s, buf);
}

static void add_frame(struct symbolizer *s, const char *fn, const char *file,
		      int line, int inlined)
{
	struct sym_frame *f = push_frame(s);

	if (!f)
		return;
	f->function = fn;
	f->file = intern(s, file);
	f->line = line;
	f->inlined = inlined;
}

/*
 * Frames from DWARF, innermost first, the way addr2line -i walks them: the
 * address's own line belongs to the innermost inlined function; each
 * inlined subroutine's DW_AT_call_file/call_line is the line in the function
 * it was inlined into; the walk ends at the concrete DW_TAG_subprogram.
 * Returns the number of frames added.
 */
static size_t dwarf_frames(struct symbolizer *s, struct modinfo *m,
			   Dwarf_Addr addr)
{
	Dwfl_Module *mod = m->mod;
	Dwarf_Addr bias = 0;
	Dwarf_Die *cudie, *scopes = NULL, *chain = NULL, split;
	const char *file = NULL;
	int line = 0, nscopes, nchain;
	size_t before = s->tmp_n;
	Dwarf_Line *ln;
	uint8_t type;

	cudie = find_cu(m, addr, &bias);
	if (!cudie)
		return 0;
	/* Split DWARF: the functions are in the .dwo's unit, not the skeleton. */
	if (dwarf_cu_info(cudie->cu, NULL, &type, NULL, &split, NULL, NULL,
			  NULL) == 0 && type == DW_UT_skeleton &&
	    dwarf_tag(&split) == DW_TAG_compile_unit)
		cudie = &split;
	ln = dwarf_getsrc_die(cudie, addr - bias);
	if (ln) {
		file = cu_path(s, cudie, dwarf_linesrc(ln, NULL, NULL));
		if (dwarf_lineno(ln, &line) != 0)
			line = 0;
	}
	nscopes = dwarf_getscopes(cudie, addr - bias, &scopes);
	if (nscopes <= 0) {
		free(scopes);
		if (!file)
			return 0;
		/* Line table without a DIE for the code: name from symtab. */
		add_frame(s, demangled(s, dwfl_module_addrname(mod, addr)),
			  file, line, 0);
		return s->tmp_n - before;
	}
	/* The concrete chain of DIEs from the innermost scope outwards. */
	nchain = dwarf_getscopes_die(&scopes[0], &chain);
	free(scopes);
	for (int i = 0; i < nchain; i++) {
		Dwarf_Die *die = &chain[i];
		int tag = dwarf_tag(die);

		if (tag == DW_TAG_inlined_subroutine) {
			Dwarf_Attribute attr;
			Dwarf_Word val;
			Dwarf_Files *files;
			Dwarf_Die cu;

			add_frame(s, die_function_name(s, die), file, line, 1);
			file = NULL;
			line = 0;
			if (dwarf_diecu(die, &cu, NULL, NULL) &&
			    dwarf_getsrcfiles(&cu, &files, NULL) == 0 &&
			    dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &val) == 0)
				file = cu_path(s, &cu, dwarf_filesrc(files, val, NULL, NULL));
			if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &val) == 0)
				line = (int)val;
		} else if (tag == DW_TAG_subprogram) {
			const char *fn = die_function_name(s, die);

			/*
			 * A static C++ function has no linkage name in DWARF and a
			 * bare DW_AT_name; its symbol is still mangled, with scopes.
			 * (The symbol table is searched only then: in libdw a
			 * search goes through every symbol.)
			 */
			if (!fn || (!has_linkage_name(die) && !c_unit(cudie))) {
				const char *sym = dwfl_module_addrname(mod, addr);

				if (!fn || (sym && sym[0] == '_' && sym[1] == 'Z'))
					fn = demangled(s, sym);
			}
			add_frame(s, fn, file, line, 0);
			free(chain);
			return s->tmp_n - before;
		}
	}
	free(chain);
	/* No enclosing subprogram (odd DWARF): close with the symtab name. */
	add_frame(s, demangled(s, dwfl_module_addrname(mod, addr)), file,
		  line, 0);
	return s->tmp_n - before;
}

static void resolve_into_tmp(struct symbolizer *s, const struct dump_frame *f)
{
	struct symmod *m = get_module(s, f->module);
	uint64_t offset = m ? f->offset : f->ip;

	s->tmp_n = 0;
	if (m && m->state == MOD_OK) {
		Dwarf_Addr addr = f->offset;	/* the module is at bias 0 */

		if (addr > 0)
			addr--;
		if (dwarf_frames(s, &m->mi, addr) == 0) {
			const char *fn = dwfl_module_addrname(m->mi.mod, addr);

			if (fn)
				add_frame(s, demangled(s, fn), NULL, 0, 0);
		}
	}
	if (s->tmp_n == 0)
		add_frame(s, NULL, NULL, 0, 0);
	for (size_t i = 0; i < s->tmp_n; i++) {
		s->tmp[i].module = m ? m->path : NULL;
		s->tmp[i].offset = offset;
		s->tmp[i].ip = f->ip;
	}
}

static size_t sym_resolve_cached(struct symbolizer *s, const struct dump_frame *f,
				 const struct sym_frame **out)
{
	static const struct sym_frame unknown;
	struct symkey key;
	struct symentry *e;

	memset(&key, 0, sizeof(key));
	key.module = f->module >= 0 ? f->module : -1;
	key.offset = f->module >= 0 ? f->offset : f->ip;
	HASH_FIND(hh, s->cache, &key, sizeof(key), e);
	if (e) {
		*out = e->frames;
		return e->n;
	}
	resolve_into_tmp(s, f);
	e = calloc(1, sizeof(*e));
	if (e)
		e->frames = malloc(s->tmp_n * sizeof(*e->frames));
	if (!e || !e->frames) {
		free(e);
		*out = &unknown;
		return 1;
	}
	e->key = key;
	e->n = s->tmp_n;
	memcpy(e->frames, s->tmp, s->tmp_n * sizeof(*e->frames));
	HASH_ADD(hh, s->cache, key, sizeof(key), e);
	*out = e->frames;
	return e->n;
}

size_t sym_resolve(struct symbolizer *s, const struct dump_frame *f,
		   const struct sym_frame **out)
{
	if (__builtin_expect(s->warming, 0))
		warm_join(s);
	/*
	 * A frame the read-ahead resolved is a cache hit that never asks for
	 * its module: its held warning is said here (review finding A3).
	 */
	tell_held_warning(s, f->module);
	return sym_resolve_cached(s, f, out);
}

/* ---- reading debug info ahead ---- */

static void *warm_main(void *arg)
{
	struct symbolizer *s = arg;
	const struct sym_frame *out;

	for (size_t i = 0; i < s->warm_nframes; i++)
		sym_resolve_cached(s, &s->warm_frames[i], &out);
	return NULL;
}

/*
 * Weak: the unit tests link this file with a scripted reader of their own,
 * which has no stack count (and so nothing is read ahead there).
 */
extern uint32_t dump_stack_count(const struct dump *d) __attribute__((weak));

/* Frames of a stack that a report may show: the top one is found among the first few. */
#define WARM_DEPTH 6

int sym_prewarm(struct symbolizer *s)
{
	const struct dump_module *mods;
	size_t nmods = 0, nframes = 0;
	uint32_t id, nstacks;
	uint8_t *seen;

	if (s->warming || !dump_stack_count)
		return 0;
	mods = dump_modules(s->dump, &nmods);
	nstacks = dump_stack_count(s->dump);
	if (!nmods || !mods || !nstacks)
		return 0;
	s->warm_mods = malloc(nmods * sizeof(*s->warm_mods));
	s->warm_frames = malloc(nmods * sizeof(*s->warm_frames));
	seen = calloc(nmods, 1);
	if (!s->warm_mods || !s->warm_frames || !seen)
		goto none;
	memcpy(s->warm_mods, mods, nmods * sizeof(*mods));
	s->warm_nmods = nmods;
	/* one address per module is enough: libdw reads a module's sections whole */
	for (id = 1; id <= nstacks && nframes < nmods; id++) {
		const struct dump_stack *st = dump_stack(s->dump, id);

		for (uint32_t k = 0; st && k < st->depth && k < WARM_DEPTH; k++) {
			const struct dump_frame *f = &st->frames[k];

			if (f->module < 0 || (size_t)f->module >= nmods || seen[f->module] ||
			    ((size_t)f->module < s->nmods &&
			     s->mods[f->module].state != MOD_UNOPENED))
				continue;
			seen[f->module] = 1;
			s->warm_frames[nframes++] = *f;
		}
	}
	free(seen);
	seen = NULL;
	s->warm_nframes = nframes;
	if (!nframes)
		goto none;
	s->ahead = 1;
	if (pthread_create(&s->warm, NULL, warm_main, s) != 0) {
		s->ahead = 0;
		goto none;
	}
	s->warming = 1;
	return 1;
none:
	free(seen);
	free(s->warm_mods);
	free(s->warm_frames);
	s->warm_mods = NULL;
	s->warm_frames = NULL;
	s->warm_nmods = s->warm_nframes = 0;
	return 0;
}
