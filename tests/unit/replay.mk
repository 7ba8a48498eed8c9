# tests/unit/replay.mk - unit tests of the replay and the CLI helpers
#
# Included by tests/tests.mk.  Built with the analyzer's flags (sanitizers too
# under make SANITIZE=...); each ends with "N passed, N failed".
#
#   make unit-replay   analyzer/replay.c against a scripted event source
#                      (the test's own dump_next()): live map, peak per site,
#                      temporaries, mismatches, realloc, reach, pools
#   make unit-cli      analyzer/cli.c: sizes, seconds, times ('peak', markers),
#                      byte/count/duration formatting, argv quoting

REPLAYU_DIR = $(BUILD)/unit

$(REPLAYU_DIR)/test_replay: tests/unit/test_replay.c $(BUILD)/obj/analyzer/replay.o \
		analyzer/replay.h analyzer/dump.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/replay.o -lm

unit-replay: $(REPLAYU_DIR)/test_replay
	$(REPLAYU_DIR)/test_replay

.PHONY: unit-replay

# unit-cli: analyzer/cli.c (sizes, seconds, marker names, 'peak', formatting)
# with replay.o over a scripted reader.
$(REPLAYU_DIR)/test_cli: tests/unit/test_cli.c $(BUILD)/obj/analyzer/cli.o \
		$(BUILD)/obj/analyzer/replay.o analyzer/cli.h analyzer/replay.h
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -o $@ $< $(BUILD)/obj/analyzer/cli.o \
		$(BUILD)/obj/analyzer/replay.o -lm

unit-cli: $(REPLAYU_DIR)/test_cli
	$(REPLAYU_DIR)/test_cli

.PHONY: unit-cli
