# heaptrail - heap profiler and leak gate for Linux
#
#   make              build/libheaptrail.so and build/heaptrail
#   make demo         record the bundled example and print its report
#   make test         build and run every test (ends with "N passed, N failed")
#   make bench        benchmarks: plain vs heaptrail vs heaptrack
#   make install PREFIX=/usr/local
#   make SANITIZE=address,undefined   analyzer and unit tests under sanitizers

PREFIX ?= /usr/local
BUILD ?= build
CC ?= cc
CXX ?= c++
OPT ?= -O2 -g
WARN = -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Wvla \
       -Wno-unused-parameter
CFLAGS_COMMON = -std=gnu11 $(OPT) $(WARN) -D_GNU_SOURCE -Icommon -Iinclude
SANITIZE ?=
ifneq ($(SANITIZE),)
SANFLAGS = -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

DEPS_STAMP = $(BUILD)/.deps-ok

SHIM_SRC = $(sort $(wildcard preload/*.c))
SHIM_OBJ = $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
ANA_SRC = $(sort $(wildcard analyzer/*.c))
ANA_OBJ = $(ANA_SRC:%.c=$(BUILD)/obj/%.o)
# 'heaptrail pack' runs the shim's own packer: one source, built for both
ANA_OBJ += $(BUILD)/obj/analyzer-shared/chunkpack.o
ANA_LIB_OBJ = $(filter-out $(BUILD)/obj/analyzer/main.o,$(ANA_OBJ))

SHIM_CFLAGS = $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	      -fno-omit-frame-pointer -pthread
SHIM_LIBS = -lunwind -lzstd -ldl -lpthread -lm
ANA_CFLAGS = $(CFLAGS_COMMON) $(SANFLAGS)
ANA_LIBS = -ldw -lelf -lzstd -lz -lm -lstdc++

all: $(BUILD)/libheaptrail.so $(BUILD)/heaptrail $(BUILD)/heaptrail-replay-child

$(DEPS_STAMP):
	@mkdir -p $(BUILD)
	@./scripts/install-deps.sh --check-or-install
	@touch $@

$(BUILD)/obj/preload/%.o: preload/%.c $(wildcard preload/*.h) $(wildcard common/*.h) include/heaptrail.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(SHIM_CFLAGS) -c $< -o $@

$(BUILD)/obj/analyzer/%.o: analyzer/%.c $(wildcard analyzer/*.h) $(wildcard common/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -c $< -o $@

$(BUILD)/obj/analyzer-shared/%.o: preload/%.c preload/%.h $(wildcard common/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ANA_CFLAGS) -c $< -o $@

$(BUILD)/libheaptrail.so: $(SHIM_OBJ) preload/libheaptrail.map
	$(CC) -shared -o $@ $(SHIM_OBJ) -Wl,--version-script=preload/libheaptrail.map \
		-Wl,-z,nodelete -Wl,-z,now $(SHIM_LIBS)

$(BUILD)/heaptrail: $(ANA_OBJ)
	$(CC) $(SANFLAGS) -o $@ $(ANA_OBJ) $(ANA_LIBS)

# 'heaptrail replay' runs this under each allocator: plain malloc, no sanitizers
$(BUILD)/heaptrail-replay-child: analyzer/replay_child/replay_child.c analyzer/replay_ops.h common/htr_varint.h | $(DEPS_STAMP)
	$(CC) $(CFLAGS_COMMON) -o $@ $<

-include tests/tests.mk
-include bench/bench.mk

# The benchmarks' recipe is in bench/bench.mk (plain vs heaptrail vs heaptrack).
bench:
.PHONY: bench

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/heaptrail \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/doc/heaptrail/docs
	install -m 755 $(BUILD)/heaptrail $(DESTDIR)$(PREFIX)/bin/heaptrail
	install -m 755 $(BUILD)/libheaptrail.so $(DESTDIR)$(PREFIX)/lib/heaptrail/libheaptrail.so
	install -m 755 $(BUILD)/heaptrail-replay-child $(DESTDIR)$(PREFIX)/lib/heaptrail/heaptrail-replay-child
	install -m 644 include/heaptrail.h $(DESTDIR)$(PREFIX)/include/heaptrail.h
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/doc/heaptrail/
	install -m 644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/heaptrail/docs/

clean:
	rm -rf $(BUILD)

.PHONY: all install clean
