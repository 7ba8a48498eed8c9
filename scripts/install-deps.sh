#!/bin/sh
# install-deps.sh - check heaptrail's build (and test) dependencies, install what is missing
#
#   scripts/install-deps.sh --check-or-install   build headers and libraries
#   scripts/install-deps.sh --test               the above plus what the tests use
#   scripts/install-deps.sh --check              report only, never install
#   scripts/install-deps.sh --check-test         report only, test dependencies too
#
# Quiet when everything is present.  Installs Debian packages with apt-get as
# root (or through sudo when it works without a password); otherwise prints
# the exact apt-get command to run and exits 1.  'apt-get update' runs only
# when something has to be installed.

set -u

mode=${1:---check-or-install}
case $mode in
--check-or-install | --test | --check | --check-test) ;;
-h | --help)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "heaptrail: install-deps.sh: unknown option '$mode' (use --check-or-install, --test or --check)" >&2
	exit 2
	;;
esac

CC=${CC:-cc}
missing=""

need() {	# need PACKAGE: record a missing Debian package once
	case " $missing " in
	*" $1 "*) ;;
	*) missing="$missing $1" ;;
	esac
}

has_cmd() { command -v "$1" >/dev/null 2>&1; }

# A header counts as present when the compiler finds it (Debian keeps
# libunwind.h under the multiarch include directory, so no fixed path).
has_header() {
	has_cmd "$CC" || return 1
	printf '#include <%s>\n' "$1" | "$CC" -E -x c - >/dev/null 2>&1
}

# A library counts as present when the compiler can link against it.
has_lib() {
	has_cmd "$CC" || return 1
	tmp=$(mktemp -d 2>/dev/null) || return 1
	printf 'int main(void) { return 0; }\n' >"$tmp/t.c"
	"$CC" "$tmp/t.c" -o "$tmp/t" "-l$1" >/dev/null 2>&1
	rc=$?
	rm -rf "$tmp"
	return $rc
}

has_pkg() {	# an installed Debian package (for libraries without a command)
	has_cmd dpkg-query || return 1
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

# --- build dependencies ---------------------------------------------------
has_cmd "$CC" && has_cmd make && has_cmd c++ || need build-essential
has_cmd pkg-config || need pkg-config
if has_cmd "$CC"; then
	has_header libunwind.h && has_lib unwind || need libunwind-dev
	has_header elfutils/libdwfl.h && has_lib dw || need libdw-dev
	has_header libelf.h && has_lib elf || need libelf-dev
	has_header uthash.h || need uthash-dev
	has_header zstd.h && has_lib zstd || need libzstd-dev
	has_header zlib.h && has_lib z || need zlib1g-dev
else
	# Without a compiler nothing can be probed: ask for everything.
	for p in libunwind-dev libdw-dev libelf-dev uthash-dev libzstd-dev zlib1g-dev; do need $p; done
fi

# --- test dependencies ----------------------------------------------------
if [ "$mode" = --test ] || [ "$mode" = --check-test ]; then
	has_cmd python3 || need python3
	has_cmd heaptrack && has_cmd heaptrack_print || need heaptrack
	has_cmd valgrind || need valgrind
	has_cmd sqlite3 || need sqlite3
	has_cmd git || need git
	has_cmd redis-server || need redis-server
	has_cmd redis-cli || need redis-tools
	has_cmd memcached || need memcached
	has_cmd go || need golang-go
	has_cmd chromium || need chromium
	has_cmd clang || need clang
	has_pkg libclang-rt-14-dev || need libclang-rt-14-dev
	has_pkg libjemalloc2 || need libjemalloc2
	has_pkg libjemalloc-dev || need libjemalloc-dev
	has_pkg libtcmalloc-minimal4 || need libtcmalloc-minimal4
	has_pkg libmimalloc2.0 || need libmimalloc2.0
	has_cmd hyperfine || need hyperfine
	has_cmd zstd || need zstd
fi

[ -z "$missing" ] && exit 0

missing=${missing# }
if [ "$mode" = --check ] || [ "$mode" = --check-test ]; then
	echo "heaptrail: missing packages: $missing" >&2
	exit 1
fi

if [ "$(id -u)" = 0 ]; then
	sudo=""
elif has_cmd sudo && sudo -n true 2>/dev/null; then
	sudo="sudo"
else
	echo "heaptrail: missing packages: $missing" >&2
	echo "heaptrail: install them as root with:" >&2
	echo "  apt-get update && apt-get install -y $missing" >&2
	exit 1
fi

echo "heaptrail: installing $missing" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # word splitting of the package list is wanted
if ! $sudo apt-get update -qq >&2 ||
	! $sudo apt-get install -y -qq --no-install-recommends $missing >&2; then
	echo "heaptrail: apt-get could not install: $missing" >&2
	exit 1
fi

# Check again: a package that installed but still leaves a header missing
# would otherwise fail much later with a confusing compiler error.
if [ "$mode" = --test ]; then
	exec "$0" --check-test
fi
exec "$0" --check
