# tests/unit/frag.mk - unit tests of the fragmentation analysis
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); ends with "N passed, N failed".
#
#   make unit-frag   analyzer/frag_occ.c and frag_map.c: spans, pinned bytes
#                    and their attribution on hand-drawn layouts, heap ranges,
#                    size classes, the u64 map against a reference

FRAGU_DIR = $(BUILD)/unit

$(FRAGU_DIR)/test_frag_occ: tests/unit/test_frag_occ.c $(BUILD)/obj/analyzer/frag_occ.o \
		$(BUILD)/obj/analyzer/frag_map.o analyzer/frag_internal.h analyzer/frag.h \
		analyzer/frag_map.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/frag_occ.o \
		$(BUILD)/obj/analyzer/frag_map.o

unit-frag: $(FRAGU_DIR)/test_frag_occ
	$(FRAGU_DIR)/test_frag_occ

.PHONY: unit-frag
