# tests/unit/replay.mk - unit tests of the replay and the CLI helpers
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); each ends with "N passed, N failed".
#
#   make unit-replay   analyzer/replay.c against a scripted event source
#                      (the test's own dump_next()): live map, peak per site,
#                      temporaries, mismatches, realloc, reach, pools

REPLAYU_DIR = $(BUILD)/unit

$(REPLAYU_DIR)/test_replay: tests/unit/test_replay.c $(BUILD)/obj/analyzer/replay.o \
		analyzer/replay.h analyzer/dump.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/replay.o

unit-replay: $(REPLAYU_DIR)/test_replay
	$(REPLAYU_DIR)/test_replay

.PHONY: unit-replay
