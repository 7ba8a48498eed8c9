# tests/unit/clients.mk - unit test of the per-client analysis
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); ends with "N passed, N failed".
#
#   make unit-clients   analyzer/clients.c over dumps written by
#                       tests/unit/dumpgen.c: grace period, judged and
#                       pending clients, ids used twice, clients seen only
#                       through CLIENT_SET, whole-process view, trends

CLIENTSU_DIR = $(BUILD)/unit
CLIENTSU_OBJ = $(BUILD)/obj/analyzer/clients.o $(BUILD)/obj/analyzer/replay.o \
	       $(BUILD)/obj/analyzer/dump.o $(BUILD)/obj/analyzer/dump_thread.o \
	       $(BUILD)/obj/analyzer/dump_pipe.o \
	       $(BUILD)/obj/analyzer/chunkunpack.o $(BUILD)/obj/analyzer/compact_read.o \
	       $(BUILD)/obj/analyzer/compact.o

$(CLIENTSU_DIR)/test_clients: tests/unit/test_clients.c tests/unit/dumpgen.c \
		tests/unit/dumpgen.h $(CLIENTSU_OBJ) analyzer/clients.h \
		analyzer/replay.h analyzer/dump.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -Ianalyzer -Itests/unit -o $@ $< tests/unit/dumpgen.c \
		$(CLIENTSU_OBJ) -lzstd -lm

unit-clients: $(CLIENTSU_DIR)/test_clients
	$(CLIENTSU_DIR)/test_clients

.PHONY: unit-clients
