# tests/unit/unit.mk - unit tests and benchmark of the dump reader
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); each ends with "N passed, N failed".
#
#   make unit-dump     analyzer/dump.c + dump_thread.c against dumps written by
#                      tests/unit/dumpgen.c with exactly known content:
#                      merge order, realloc split, clients, stacks and
#                      modules, truncation at every byte, corrupt input,
#                      follow mode, bounded memory
#   make bench-dump    events per second through dump_next() on a generated
#                      dump of BENCH_DUMP_EVENTS (default 20000000) events

DUMPU_DIR = $(BUILD)/unit
DUMPGEN_SRC = tests/unit/dumpgen.c
DUMPGEN_DEPS = tests/unit/dumpgen.c tests/unit/dumpgen.h common/htr_format.h \
	       common/htr_varint.h
BENCH_DUMP_EVENTS ?= 20000000
# The reader's objects, for any test that links it without the whole analyzer.
DUMP_OBJ = $(BUILD)/obj/analyzer/dump.o $(BUILD)/obj/analyzer/dump_thread.o \
	   $(BUILD)/obj/analyzer/dump_pipe.o \
	   $(BUILD)/obj/analyzer/chunkunpack.o $(BUILD)/obj/analyzer/compact_read.o \
	   $(BUILD)/obj/analyzer/compact.o

$(DUMPU_DIR)/test_dump: tests/unit/test_dump.c $(DUMPGEN_DEPS) \
		$(DUMP_OBJ) analyzer/dump.h analyzer/dump_internal.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -Ianalyzer -Itests/unit -o $@ $< $(DUMPGEN_SRC) \
		$(DUMP_OBJ) -lzstd

$(DUMPU_DIR)/bench_dump: tests/unit/bench_dump.c $(DUMPGEN_DEPS) \
		$(DUMP_OBJ) analyzer/dump.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -Ianalyzer -Itests/unit -o $@ $< $(DUMPGEN_SRC) \
		$(DUMP_OBJ) -lzstd

unit-dump: $(DUMPU_DIR)/test_dump
	$(DUMPU_DIR)/test_dump

bench-dump: $(DUMPU_DIR)/bench_dump
	$(DUMPU_DIR)/bench_dump $(BENCH_DUMP_EVENTS)

.PHONY: unit-dump bench-dump
