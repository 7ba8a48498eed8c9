# tests/fuzz/fuzz.mk - fuzzing the dump reader
#
# Included by tests/tests.mk.
#
#   make unit-fuzz-corpus   generate the seed corpus (a few hundred valid and
#                           mutated dumps, tests/fuzz/gen_corpus.c) and read
#                           every file under ASan/UBSan (gcc); each must end
#                           in a clean read or a clean error; valid ones must
#                           read completely.  Ends with "N passed, N failed".
#   make fuzz               libFuzzer (clang) for FUZZ_SECONDS (default 60)
#                           starting from that corpus; new inputs go to
#                           build/fuzz/work, crashes to build/fuzz/crash-*

FUZZ_DIR = $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_CLANG ?= clang
FUZZ_SRC = tests/fuzz/fuzz_dump.c analyzer/dump.c analyzer/dump_thread.c analyzer/dump_pipe.c \
	   analyzer/chunkunpack.c analyzer/compact_read.c analyzer/compact.c
FUZZ_DEPS = $(FUZZ_SRC) analyzer/dump.h analyzer/dump_internal.h analyzer/compact.h \
	    analyzer/compact_read.h common/htr_format.h common/htr_varint.h common/htr_compact.h
FUZZ_CFLAGS = -std=gnu11 -O1 -g -D_GNU_SOURCE -Icommon -Ianalyzer \
	      -fno-omit-frame-pointer $(WARN)

$(FUZZ_DIR)/gen_corpus: tests/fuzz/gen_corpus.c tests/unit/dumpgen.c \
		tests/unit/dumpgen.h common/htr_format.h common/htr_varint.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -Itests/unit -o $@ tests/fuzz/gen_corpus.c \
		tests/unit/dumpgen.c -lzstd

# Regenerated whenever the generator changes; never committed.
$(FUZZ_DIR)/corpus/.stamp: $(FUZZ_DIR)/gen_corpus
	rm -rf $(FUZZ_DIR)/corpus
	$(FUZZ_DIR)/gen_corpus $(FUZZ_DIR)/corpus
	@touch $@

# Corpus runner: no libFuzzer, gcc's sanitizers.
$(FUZZ_DIR)/fuzz_dump_run: $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) -DFUZZ_STANDALONE \
		-fsanitize=address,undefined -fno-sanitize-recover=all \
		-o $@ $(FUZZ_SRC) -lzstd

$(FUZZ_DIR)/fuzz_dump: $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -o $@ $(FUZZ_SRC) -lzstd

unit-fuzz-corpus: $(FUZZ_DIR)/fuzz_dump_run $(FUZZ_DIR)/corpus/.stamp
	$(FUZZ_DIR)/fuzz_dump_run $(FUZZ_DIR)/corpus

fuzz: $(FUZZ_DIR)/fuzz_dump $(FUZZ_DIR)/corpus/.stamp
	@mkdir -p $(FUZZ_DIR)/work
	$(FUZZ_DIR)/fuzz_dump -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
		-rss_limit_mb=2048 -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/work $(FUZZ_DIR)/corpus

.PHONY: unit-fuzz-corpus fuzz
