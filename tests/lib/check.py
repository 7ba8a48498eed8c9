"""check.py - shared helpers for heaptrail's end-to-end tests.

A test script builds a Suite, runs programs under the shim, reads the
analyzer's JSON and compares it with the ground truth the target programs
wrote (tests/lib/truth.h).  Suite.finish() prints the closing line
"N passed, N failed, N skipped" and exits non-zero on any failure.

Paths come from the environment tests/run.sh sets (TOP, BUILD), or from the
location of this file when a script is run by hand.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import traceback

TOP = os.environ.get("TOP") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.join(TOP, os.environ.get("BUILD", "build"))
HEAPTRAIL = os.path.join(BUILD, "heaptrail")
SHIM = os.path.join(BUILD, "libheaptrail.so")
TARGETS = os.path.join(BUILD, "tests")

# A guard against a hung child only; no test measures time.
HANG_GUARD = 900

# Modules of the C/C++ runtime, as docs/json.md defines the top frame.
RUNTIME_PREFIXES = ("libc.so", "libc-", "libstdc++.so", "libgcc_s", "ld-linux",
                    "libm.so", "libpthread", "libdl.so", "linux-vdso")


class Suite:
    """Counts checks; one line per check, one closing line."""

    def __init__(self, name):
        self.name = name
        self.passed = self.failed = self.skipped = 0
        self.prefix = []

    def _label(self, name):
        return ": ".join(self.prefix + [name])

    def ok(self, name):
        self.passed += 1
        print("ok   %s" % self._label(name), flush=True)

    def fail(self, name, why):
        self.failed += 1
        print("FAIL %s: %s" % (self._label(name), why), flush=True)

    def skip(self, name, why):
        self.skipped += 1
        print("skip %s: %s" % (self._label(name), why), flush=True)

    def check(self, name, cond, why=""):
        if cond:
            self.ok(name)
        else:
            self.fail(name, why or "false")
        return bool(cond)

    def eq(self, name, got, want):
        return self.check(name, got == want, "got %r, want %r" % (got, want))

    @contextlib.contextmanager
    def case(self, name):
        """Checks inside are prefixed with 'name'; an exception is one failure."""
        self.prefix.append(name)
        try:
            yield
        except Skip as e:
            self.skip("(rest)", str(e))
        except Exception as e:  # a broken case must not stop the others
            tb = traceback.format_exc().strip().splitlines()
            self.fail("(crashed)", "%s: %s [%s]" % (type(e).__name__, e,
                                                    " | ".join(tb[-3:])))
        finally:
            self.prefix.pop()

    def finish(self):
        print("%d passed, %d failed, %d skipped" %
              (self.passed, self.failed, self.skipped), flush=True)
        sys.exit(1 if self.failed else 0)


class Skip(Exception):
    """Raised inside Suite.case() to skip the rest of a case."""


def need_tools():
    """Skips unless heaptrail and the shim are built."""
    for p in (HEAPTRAIL, SHIM):
        if not os.path.exists(p):
            raise Skip("%s is not built (make)" % p)


def target(name):
    """The path of test target 'name'; skips when it is not built."""
    path = os.path.join(TARGETS, name)
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % path)
    return path


def built_target(name):
    """target(name), after need_tools()."""
    need_tools()
    return target(name)


def fresh_dir(work, name):
    """The folder WORK/NAME, empty."""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def clean_up(work):
    """Removes a script's scratch folder WORK at its end; with
    KEEP_TEST_FILES set it is kept, and the script says where."""
    if os.environ.get("KEEP_TEST_FILES"):
        print("# test files kept in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)


def run_with_truth(suite, exe, d, env=None, how=None):
    """Runs EXE in folder D under the shim ('how': record, the default, or
    preload) with TRUTH_OUT set; checks that it exits 0 and returns (dump,
    truth lines).  Skips when the run left no dump or no truth."""
    dump = os.path.join(d, "out.htr")
    truth = os.path.join(d, "truth.json")
    e = {"TRUTH_OUT": truth}
    e.update(env or {})
    cp = (how or record)(dump, [exe], env=e, cwd=d)
    suite.eq("%s exits 0" % os.path.basename(exe), cp.returncode, 0)
    if not os.path.exists(dump) or not os.path.exists(truth):
        raise Skip("no dump or truth: %s" % first_line(cp.stderr))
    return dump, truth_lines(truth)


def clean_env(extra=None):
    """The caller's environment without heaptrail or preload settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HEAPTRAIL_") and k not in ("LD_PRELOAD", "TRUTH_OUT")}
    if extra:
        env.update(extra)
    return env


def run(argv, env=None, cwd=None, stdin=None):
    return subprocess.run(argv, env=env if env is not None else clean_env(),
                          cwd=cwd, capture_output=True, timeout=HANG_GUARD,
                          stdin=stdin if stdin is not None else subprocess.DEVNULL)


def record(out, argv, env=None, cwd=None, options=()):
    """heaptrail record -o OUT [options] -- argv."""
    return run([HEAPTRAIL, "record", "-o", out] + list(options) + ["--"] + list(argv),
               env=clean_env(env), cwd=cwd)


def preload(out, argv, env=None, cwd=None):
    """LD_PRELOAD=libheaptrail.so HEAPTRAIL_OUT=OUT argv."""
    e = {"LD_PRELOAD": SHIM}
    if out is not None:
        e["HEAPTRAIL_OUT"] = out
    e.update(env or {})
    return run(list(argv), env=clean_env(e), cwd=cwd)


def analyze(verb, dump, *args):
    """Runs 'heaptrail VERB --json ARGS DUMP'; returns (process, parsed JSON or None)."""
    cp = run([HEAPTRAIL, verb, "--json"] + list(args) + [dump])
    doc = None
    if cp.returncode == 0:
        try:
            doc = json.loads(cp.stdout.decode("utf-8"))
        except ValueError:
            doc = None
    return cp, doc


def report(dump):
    """Every site: --top 0."""
    return analyze("report", dump, "--top", "0")


def truth_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def first_line(b):
    t = text(b).strip().splitlines()
    return t[0] if t else ""


# --- sites -----------------------------------------------------------------

def norm_function(name):
    """'ns::f(int) const' -> 'ns::f'; C names unchanged; None stays None."""
    if name is None:
        return None
    name = name.strip()
    # Drop a trailing parameter list (balanced), and cv/ref qualifiers after it.
    m = re.match(r"^(.*?[^\s(])\s*\((?:[^()]|\([^()]*\))*\)\s*(const|volatile|&|&&|\s)*$", name)
    if m and not name.startswith("operator()"):
        name = m.group(1)
    return name


def function_matches(got, want):
    g = norm_function(got)
    return g is not None and g == want


def base(path):
    return os.path.basename(path) if path else path


def is_runtime_module(path):
    return path is not None and base(path).startswith(RUNTIME_PREFIXES)


def is_runtime_site(site, runtime_callers):
    """A block the runtime allocated for itself, or on behalf of a runtime caller."""
    stack = site.get("stack") or []
    if stack and all(is_runtime_module(f.get("module")) for f in stack):
        return True
    if not stack and is_runtime_module(site.get("module")):
        return True
    return any(norm_function(f.get("function")) in runtime_callers for f in stack)


def matching_sites(sites, function, line):
    return [s for s in sites if s.get("line") == line and
            function_matches(s.get("function"), function)]


def location(site):
    return (norm_function(site.get("function")), site.get("line"))


def compare(suite, rep, truth, modules=None):
    """
    Compares a 'report --json' document with one truth line: every site the
    truth names, the totals, the top site, the shape of stacks.  'modules'
    maps a source file name to the module expected for its sites (default:
    the program's image).
    """
    modules = modules or {}
    totals = rep["totals"]
    sites = rep["sites"]
    image = truth["image"]

    suite.check("truth is valid", truth.get("valid", True),
                "the target's own bookkeeping overflowed or saw an unknown block")

    # The sites of the report add up to its totals.
    suite.eq("sites sum to totals.leaked_bytes",
             sum(s["leaked_bytes"] for s in sites), totals["leaked_bytes"])
    suite.eq("sites sum to totals.leaked_blocks",
             sum(s["leaked_blocks"] for s in sites), totals["leaked_blocks"])
    suite.eq("sites sum to totals.allocations",
             sum(s["allocations"] for s in sites), totals["allocations"])

    # The shim's own frames are never part of a stack.
    shim_frames = [f for s in sites for f in s.get("stack") or []
                   if (base(f.get("module")) or "").startswith("libheaptrail")]
    suite.check("no shim frames in stacks", not shim_frames,
                "%d frames in libheaptrail.so, e.g. %r" % (
                    len(shim_frames), shim_frames[:1]))

    # Every site the program counted.
    for t in truth["sites"]:
        m = matching_sites(sites, t["function"], t["line"])
        label = "site %s:%d" % (t["function"], t["line"])
        if not m and t["leaked_bytes"] == 0:
            continue    # a site without leaks may be left out of the report
        suite.eq(label + " leaked_bytes", sum(s["leaked_bytes"] for s in m),
                 t["leaked_bytes"])
        suite.eq(label + " leaked_blocks", sum(s["leaked_blocks"] for s in m),
                 t["leaked_blocks"])
        suite.eq(label + " allocations", sum(s["allocations"] for s in m),
                 t["allocations"])
        if not m:
            continue
        files = sorted(set(base(s.get("file")) for s in m), key=str)
        suite.eq(label + " file", files, [t["file"]])
        want_mod = modules.get(t["file"], image)
        mods = sorted(set(base(s.get("module")) for s in m), key=str)
        suite.eq(label + " module", mods, [want_mod])

    # The top site (by leaked bytes, stacks ending in one line taken together).
    leaks = {}
    for t in truth["sites"]:
        leaks[(t["function"], t["line"])] = leaks.get((t["function"], t["line"]), 0) + \
            t["leaked_bytes"]
    if leaks and max(leaks.values()) > 0:
        want_top = max(leaks, key=leaks.get)
        got = {}
        for s in sites:
            if is_runtime_site(s, truth.get("runtime_callers", [])):
                continue
            got[location(s)] = got.get(location(s), 0) + s["leaked_bytes"]
        got_top = max(got, key=got.get) if got else None
        suite.eq("top leaking site", got_top, want_top)

    # Totals.
    callers = truth.get("runtime_callers", [])
    if truth["exact_totals"]:
        for key in ("allocations", "allocated_bytes", "leaked_bytes", "leaked_blocks"):
            suite.eq("totals." + key, totals[key], truth[key])
        if truth["reallocs"] == 0:
            suite.eq("totals.frees", totals["frees"], truth["frees"])
        if truth["peak_exact"]:
            suite.eq("totals.peak_live_bytes", totals["peak_live_bytes"],
                     truth["peak_live_bytes"])
        else:
            suite.check("totals.peak_live_bytes >= the program's",
                        totals["peak_live_bytes"] >= truth["peak_live_bytes"],
                        "%d < %d" % (totals["peak_live_bytes"], truth["peak_live_bytes"]))
    else:
        rt = [s for s in sites if is_runtime_site(s, callers)]
        for key in ("leaked_bytes", "leaked_blocks", "allocations"):
            suite.eq("program's " + key + " (totals less the runtime's)",
                     totals[key] - sum(s[key] for s in rt), truth[key])
        peak = totals["peak_live_bytes"]
        suite.check("totals.peak_live_bytes >= the program's", peak >= truth["peak_live_bytes"],
                    "%d < %d" % (peak, truth["peak_live_bytes"]))
        if truth["peak_exact"]:
            rest = peak - sum(s["peak_bytes"] for s in rt)
            suite.check("program's bytes at the peak <= its own peak",
                        rest <= truth["peak_live_bytes"],
                        "%d > %d" % (rest, truth["peak_live_bytes"]))


def leaks_compare(suite, doc, truth):
    """'heaptrail leaks --json': every leaking site with its exact bytes."""
    sites = doc.get("sites") if isinstance(doc, dict) else doc
    if not isinstance(sites, list):
        suite.fail("leaks --json has a sites array", "got %r" % type(sites))
        return
    for t in truth["sites"]:
        if t["leaked_bytes"] == 0:
            continue
        m = matching_sites(sites, t["function"], t["line"])
        suite.eq("leaks site %s:%d leaked_bytes" % (t["function"], t["line"]),
                 sum(s["leaked_bytes"] for s in m), t["leaked_bytes"])
