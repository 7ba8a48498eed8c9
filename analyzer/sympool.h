/* sympool.h - opened modules kept from one symbolizer for the next (symbolize.c) */
#ifndef HT_SYMPOOL_H
#define HT_SYMPOOL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <elfutils/libdwfl.h>

#include "dump.h"

/* A CU's address range, for files without .debug_aranges. */
struct cu_range {
	Dwarf_Addr lo, hi;
	Dwarf_Die cu;
};

/*
 * An opened module's debug info, and what identifies the file it is from.
 * The module is reported at load bias 0: an address is an offset in the
 * file, the same in every process that loaded it.
 */
struct modinfo {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	int ranges_built;
	struct cu_range *ranges;	/* sorted by lo */
	size_t nranges;
	char *path;		/* malloc'd: it outlives the symbolizer */
	struct stat st;		/* dev, ino, size, mtime when opened */
	uint8_t build_id[64];
	size_t build_id_len;
};

/* Closes it and frees what it holds; zeroes it. */
void modinfo_end(struct modinfo *mi);

/*
 * Into *out, the kept module of dm's file as it is now (st: its stat) and
 * as the dump recorded it (its build-id); 0 when there is none.  Taken
 * means removed: no two symbolizers ever use one Dwfl at once.
 */
int sympool_take(const struct dump_module *dm, const struct stat *st, struct modinfo *out);

/* A symbolizer is done with *mi: kept for the next one, or ended. */
void sympool_put(struct modinfo *mi);

#endif
