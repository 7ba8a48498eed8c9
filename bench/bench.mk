# bench/bench.mk - `make bench`: build the workloads, run bench/run.py
#
#   make bench            4-7 minutes: every workload, 1 warm-up + 5 runs
#   make bench QUICK=1    1-2 minutes: 3 runs, heaptrack on mtmalloc only
#
# Prints the table and the issue-8 targets; writes $(BUILD)/bench/results.json.
# See docs/performance.md.

BENCH_DIR = $(BUILD)/bench
BENCH_CFLAGS = -std=gnu11 -O2 -g -pthread $(WARN)
BENCH_BINS = $(BENCH_DIR)/spawn $(BENCH_DIR)/mtmalloc $(BENCH_DIR)/mtmalloc-fp $(BENCH_DIR)/cxxchurn
PYTHON ?= python3

$(BENCH_DIR)/spawn: bench/spawn.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

# The default build of a distribution: no frame pointers.
$(BENCH_DIR)/mtmalloc: bench/workloads/mtmalloc.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -fomit-frame-pointer -o $@ $<

# The same program with a frame chain, for HEAPTRAIL_UNWIND=fp.
$(BENCH_DIR)/mtmalloc-fp: bench/workloads/mtmalloc.c
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -o $@ $<

$(BENCH_DIR)/cxxchurn: bench/workloads/cxxchurn.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -O2 -g -Wall -Wextra -Werror -o $@ $<

bench-workloads: $(BENCH_BINS)

bench: all bench-workloads
	$(PYTHON) bench/run.py --build $(BUILD) $(if $(QUICK),--quick)

.PHONY: bench bench-workloads
