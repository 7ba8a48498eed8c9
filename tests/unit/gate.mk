# tests/unit/gate.mk - unit tests of the gate's pieces
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); ends with "N passed, N failed".
#
#   make unit-suppress   LeakSanitizer pattern semantics, suppression files
#                        (strict) and the program's own (lenient), baseline
#                        files round trip, JUnit escaping and counts

GATEU_DIR = $(BUILD)/unit

$(GATEU_DIR)/test_suppress: tests/unit/test_suppress.c $(ANA_LIB_OBJ) \
		analyzer/suppress.h analyzer/gate.h analyzer/junit.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(ANA_LIB_OBJ) $(ANA_LIBS)

unit-suppress: $(GATEU_DIR)/test_suppress
	$(GATEU_DIR)/test_suppress

.PHONY: unit-suppress
