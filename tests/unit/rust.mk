# tests/unit/rust.mk - unit test of the Rust symbol demangler
#
# Included by tests/tests.mk; built with the analyzer's flags (sanitizers too
# under make SANITIZE=...), ends with "N passed, N failed".
#
#   make unit-rustdemangle   analyzer/rustdemangle.c against c++filt's readings
#                            of real Rust names (tests/unit/rust_symbols.txt)

$(BUILD)/unit/test_rustdemangle: tests/unit/test_rustdemangle.c $(BUILD)/obj/analyzer/rustdemangle.o \
		analyzer/rustdemangle.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/rustdemangle.o -lstdc++

unit-rustdemangle: $(BUILD)/unit/test_rustdemangle
	$(BUILD)/unit/test_rustdemangle tests/unit/rust_symbols.txt

.PHONY: unit-rustdemangle
