#!/bin/sh
# run.sh - run every unit test target and every end-to-end test script, sum the results
#
# Usage: tests/run.sh   (from 'make test', or by hand after 'make all test-targets')
#
# Unit tests: each make target named in $UNIT_TARGETS ('make test' passes the
# unit-* targets of tests/unit/*.mk and tests/fuzz/*.mk) runs with $MAKE.
# End-to-end tests: every executable tests/e2e/test_* runs from the top of
# the tree.  Each prints a closing line "N passed, N failed[, N skipped]";
# a run that ends without one, or that exits non-zero while reporting no
# failure, counts as one failure (it crashed).  The last line of this script
# is the sum, "N passed, N failed, N skipped"; it exits 1 when anything failed.
#
# Environment: BUILD (default build), MAKE (default make), UNIT_TARGETS,
# TESTS (a space-separated subset of script or target names to run),
# VERBOSE=1 (also show the passing checks, lines starting with "ok ").

set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
UNIT_TARGETS=${UNIT_TARGETS:-}
TESTS=${TESTS:-}
VERBOSE=${VERBOSE:-}
export TOP="$top" BUILD

passed=0
failed=0
skipped=0
crashed=""
log=$(mktemp "${TMPDIR:-/tmp}/heaptrail-test.XXXXXX") || exit 2
trap 'rm -f "$log"' EXIT INT TERM

wanted() {	# wanted NAME: is NAME selected by $TESTS?
	[ -z "$TESTS" ] && return 0
	for w in $TESTS; do
		[ "$w" = "$1" ] && return 0
	done
	return 1
}

# tally NAME STATUS: add the closing line of $log to the sums.
tally() {
	name=$1
	status=$2
	line=$(grep -E '^([A-Za-z_-]+: )?[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?[[:space:]]*$' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		if [ "$status" -eq 0 ]; then
			# A target that passed but counts nothing is one passing test.
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
			crashed="$crashed $name"
		fi
		return
	fi
	line=${line#*: }
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + ${s:-0}))
	if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
		failed=$((failed + 1))
		crashed="$crashed $name"
	fi
}

# run NAME CMD...: run one test, show its output indented, tally it.
run() {
	name=$1
	shift
	echo "== $name"
	"$@" >"$log" 2>&1
	status=$?
	if [ -n "$VERBOSE" ]; then
		sed 's/^/   /' "$log"
	else
		# Passing checks ("ok ...") are counted, not shown.
		grep -v '^ok ' "$log" | sed 's/^/   /'
	fi
	tally "$name" "$status"
	[ "$status" -ne 0 ] && echo "   ($name exited with status $status)"
}

for unit in $UNIT_TARGETS; do
	wanted "$unit" || continue
	run "$unit" $MAKE --no-print-directory "$unit"
done

for script in tests/e2e/test_*; do
	[ -f "$script" ] && [ -x "$script" ] || continue
	sname=$(basename "$script")
	wanted "$sname" || wanted "${sname%.*}" || continue
	run "$sname" "./$script"
done

[ -n "$crashed" ] && echo "crashed or exited non-zero without counting a failure:$crashed"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
