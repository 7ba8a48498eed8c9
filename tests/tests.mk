# tests/tests.mk - test targets, unit and end-to-end test runs, and the demo
#
# Included by the top Makefile.
#
#   make test            build everything, run every unit-* target of
#                        tests/unit/*.mk and tests/fuzz/*.mk, then tests/run.sh
#                        (every executable tests/e2e/test_*); the last line
#                        reads "N passed, N failed, N skipped"
#   make test-targets    build the ground-truth programs into build/tests/
#   make unit            only the unit-* targets (with SANITIZE=... too)
#   make soak            the long soak run (SOAK_SECONDS, default 120)
#   make demo            record examples/leaky_cache and print its report
#
# Target programs: tests/targets/NAME.c or NAME.cc becomes build/tests/NAME,
# linked with tests/lib/truth.c; tests/targets/libNAME.c becomes
# build/tests/libNAME.so.  A source may ask for extra flags in a comment:
#   /* test-cflags: -O2 */   /* test-ldflags: -ldl */
# They are built without sanitizers, always: they run under LD_PRELOAD.

TEST_BUILD = $(BUILD)/tests
TEST_TRUTH_OBJ = $(TEST_BUILD)/obj/truth.o
TEST_TARGET_C = $(filter-out tests/targets/lib%.c,$(wildcard tests/targets/*.c))
TEST_TARGET_CC = $(wildcard tests/targets/*.cc)
TEST_TARGET_SO = $(wildcard tests/targets/lib*.c)
TEST_TARGETS = $(TEST_TARGET_C:tests/targets/%.c=$(TEST_BUILD)/%) \
	       $(TEST_TARGET_CC:tests/targets/%.cc=$(TEST_BUILD)/%) \
	       $(TEST_TARGET_SO:tests/targets/%.c=$(TEST_BUILD)/%.so)

# -O0 keeps every allocation and call where the source has it (no elided
# new/delete pairs, no tail calls, no inlining) unless a target asks.
TEST_WARN = -Wall -Wextra -Werror -Wno-unused-parameter
TEST_CFLAGS = -std=gnu11 -O0 -g -fno-omit-frame-pointer -D_GNU_SOURCE -pthread \
	      $(TEST_WARN) -Wstrict-prototypes -Wvla -Itests/lib -Iinclude
TEST_CXXFLAGS = -std=gnu++17 -O0 -g -fno-omit-frame-pointer -D_GNU_SOURCE -pthread \
		$(TEST_WARN) -Itests/lib -Iinclude
TEST_LDLIBS = -ldl -pthread
# Per-source extras from its "test-cflags:" / "test-ldflags:" comment.
test_flags = $$(sed -n 's|.*test-$(1):[[:space:]]*\([^*]*[^* ]\)[[:space:]]*\*/.*|\1|p' $(2) | head -n 1)

# Unit and fuzz tests: colleagues' .mk files define unit-* targets.
UNIT_MK = $(sort $(wildcard tests/unit/*.mk tests/fuzz/*.mk))
-include $(UNIT_MK)
UNIT_TARGETS = $(sort $(UNIT_TESTS) $(shell sed -n 's/^\(unit-[A-Za-z0-9_.-]*\)[[:space:]]*:.*/\1/p' $(UNIT_MK) /dev/null))

TEST_DEPS_STAMP = $(BUILD)/.test-deps-ok

# Rebuild the analyzer when its flags change (make SANITIZE=... after a plain
# build would otherwise reuse unsanitized objects).  The shim never gets them.
ANA_FLAGS_STAMP = $(BUILD)/.analyzer-flags
$(ANA_OBJ) $(BUILD)/heaptrail: $(ANA_FLAGS_STAMP)
$(ANA_FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(ANA_CFLAGS) $(SANFLAGS) $(ANA_LIBS)' | cmp -s - $@ || \
		echo '$(CC) $(ANA_CFLAGS) $(SANFLAGS) $(ANA_LIBS)' > $@

$(TEST_DEPS_STAMP): | $(DEPS_STAMP)
	@# Test tools are optional: a test whose tool is missing is skipped, and
	@# the next 'make test' tries to install them again.
	@if ./scripts/install-deps.sh --test; then touch $@; else \
		echo "heaptrail: some test tools are missing; tests that need them are skipped" >&2; fi

$(TEST_TRUTH_OBJ): tests/lib/truth.c tests/lib/truth.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(TEST_BUILD)/lib%.so: tests/targets/lib%.c tests/lib/truth.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(TEST_CFLAGS) -fPIC -shared $(call test_flags,cflags,$<) -o $@ $< \
		$(call test_flags,ldflags,$<)

$(TEST_BUILD)/%: tests/targets/%.c $(TEST_TRUTH_OBJ) tests/lib/truth.h include/heaptrail.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(TEST_CFLAGS) $(call test_flags,cflags,$<) -o $@ $< $(TEST_TRUTH_OBJ) \
		$(call test_flags,ldflags,$<) $(TEST_LDLIBS)

$(TEST_BUILD)/%: tests/targets/%.cc $(TEST_TRUTH_OBJ) tests/lib/truth.h include/heaptrail.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CXX     $@"
	@$(CXX) $(TEST_CXXFLAGS) $(call test_flags,cflags,$<) -o $@ $< $(TEST_TRUTH_OBJ) \
		$(call test_flags,ldflags,$<) $(TEST_LDLIBS)

test-targets: $(TEST_TARGETS)

test: all test-targets $(BUILD)/examples/leaky_cache $(TEST_DEPS_STAMP)
	@BUILD='$(BUILD)' UNIT_TARGETS='$(UNIT_TARGETS)' MAKE='$(MAKE)' \
		SANITIZE='$(SANITIZE)' ./tests/run.sh

# The unit-* targets alone; CI runs them a second time under sanitizers
# in a build directory of their own (.ci/run).
unit: all
	@BUILD='$(BUILD)' UNIT_TARGETS='$(UNIT_TARGETS)' MAKE='$(MAKE)' \
		SANITIZE='$(SANITIZE)' TESTS='$(UNIT_TARGETS)' ./tests/run.sh

# The soak (tests/e2e/soak.py): SOAK_SECONDS (default 120) under the shim;
# its figures are in docs/reliability.md.
soak: all test-targets
	@BUILD='$(BUILD)' SOAK_SECONDS='$(SOAK_SECONDS)' ./tests/e2e/soak.py

# --- the demo -------------------------------------------------------------

$(BUILD)/examples/%: examples/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline $(WARN) -D_GNU_SOURCE \
		-Iinclude -o $@ $<

demo: all $(BUILD)/examples/leaky_cache
	@rm -f $(BUILD)/demo.htr
	$(BUILD)/heaptrail record -o $(BUILD)/demo.htr -- $(BUILD)/examples/leaky_cache
	$(BUILD)/heaptrail report $(BUILD)/demo.htr

FORCE:

.PHONY: test test-targets unit soak demo FORCE
