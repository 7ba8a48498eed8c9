#!/usr/bin/env python3
"""test_basic.py - end-to-end checks of the foundation (issue 2).

Each ground-truth target in build/tests runs under the shim; the analyzer's
'report --json' (and 'leaks --json') must agree with what the target itself
counted (tests/lib/truth.h), and, on deterministic targets, with heaptrack's
figures for the same program.  Then: a process tree, the depth cap, a
SIGKILLed target, damaged dumps, output file naming, exit statuses, and
python3, sqlite3 and git running unchanged under the shim.
"""

import glob
import os
import re
import shutil
import signal
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
import heaptrack  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("basic")
WORK = tempfile.mkdtemp(prefix="heaptrail-e2e-")

# name: source-file -> module overrides for compare()
SINGLE = {
    "leak_depths": None,
    "inline_leak": None,
    "calloc_aligned": None,
    "memalign_pvalloc": None,
    "realloc_chain": None,
    "realloc_edge": None,
    "cxx_new": None,
    "threads": None,
    "dlopen_leak": {"libtleak.c": "libtleak.so"},
    "ctor_atexit": None,
    "deep_recursion": None,
    "huge_request": None,
}
# Deterministic targets compared with heaptrack, and on which figures.
# memalign_pvalloc and realloc_edge are left out: heaptrack does not
# intercept memalign and pvalloc, and misses the free of realloc(p, 0).
# threads: counts are deterministic, the peak is not; and the runtime's
# per-thread blocks (the TLS vector) grow with the number of modules that
# have TLS, which differs between the two shims, so bytes are not compared.
ALL_FIGURES = ("allocations", "leaked_bytes", "leaked_blocks", "peak_live_bytes")
HEAPTRACK = {
    "leak_depths": ALL_FIGURES,
    "inline_leak": ALL_FIGURES,
    "calloc_aligned": ALL_FIGURES,
    "realloc_chain": ALL_FIGURES,
    "cxx_new": ALL_FIGURES,
    "dlopen_leak": ALL_FIGURES,
    "ctor_atexit": ALL_FIGURES,
    "deep_recursion": ALL_FIGURES,
    "threads": ("allocations", "leaked_blocks"),
}
# Also recorded through LD_PRELOAD + HEAPTRAIL_OUT instead of 'record'.
PRELOAD_TOO = ("leak_depths", "cxx_new", "threads", "huge_request")


target = check.target


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


need_tools = check.need_tools


def ended(label, doc, how=None):
    """The dump has an end record (and the expected one): nothing was cut off."""
    end = doc.get("totals", {}).get("end")
    if not isinstance(end, dict):
        return  # the report does not say; nothing to check
    if how is None:
        T.check(label + ": dump has an end record", end.get("how") is not None,
                "end %r" % end)
    else:
        T.eq(label + ": dump ends with '%s'" % how, end.get("how"), how)


def report_ok(dump, label="report"):
    """report --json exits 0 with a document; returns it."""
    cp, doc = check.report(dump)
    T.check(label + " exits 0", cp.returncode == 0,
            "exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
    if cp.returncode == 0:
        T.check(label + " prints JSON", doc is not None, check.first_line(cp.stdout))
    if doc is None:
        raise Skip("no report to compare")
    return doc


def run_single(name, mode, extra_env=None):
    """Runs a target once under the shim; returns (report, truth)."""
    exe = target(name)
    d = fresh_dir("%s-%s" % (name, mode))
    out = os.path.join(d, "out.htr")
    truth_path = os.path.join(d, "truth.json")
    env = {"TRUTH_OUT": truth_path}
    env.update(extra_env or {})
    if mode == "record":
        cp = check.record(out, [exe], env=env, cwd=d)
    else:
        cp = check.preload(out, [exe], env=env, cwd=d)
    T.eq("exit status", cp.returncode, 0)
    T.check("dump written", os.path.exists(out), "no %s; stderr: %s" %
            (out, check.first_line(cp.stderr)))
    if not os.path.exists(truth_path):
        raise Skip("the target wrote no truth")
    truth = check.truth_lines(truth_path)[-1]
    if not os.path.exists(out):
        raise Skip("no dump")
    return report_ok(out), truth, out


REPORTS = {}


def test_single_targets():
    for name, modules in SINGLE.items():
        modes = ("record", "preload") if name in PRELOAD_TOO else ("record",)
        for mode in modes:
            with T.case("%s (%s)" % (name, mode)):
                need_tools()
                rep, truth, dump = run_single(name, mode)
                if mode == "record":
                    REPORTS[name] = rep
                check.compare(T, rep, truth, modules)
                ended("dump", rep, "exit")
                if mode == "record":
                    cp, doc = check.analyze("leaks", dump, "--top", "0")
                    T.eq("leaks --json exits 0", cp.returncode, 0)
                    if doc is not None:
                        check.leaks_compare(T, doc, truth)
                if name == "threads":
                    # The scenario did what it is for: frees in one thread,
                    # the same addresses handed out again in another.
                    T.check("addresses were handed out again (>= 10000 times)",
                            truth["facts"].get("reused", 0) >= 10000,
                            "only %r" % truth["facts"].get("reused"))
                if name == "dlopen_leak":
                    T.eq("library was unloaded before exit", truth["facts"].get("unloaded"), 1)
                if name == "cxx_new" and "mismatches" in rep["totals"]:
                    T.eq("totals.mismatches", rep["totals"]["mismatches"],
                         truth["facts"]["mismatches"])


def test_fp_unwinder():
    """Targets keep frame pointers: the fp unwinder must find the same sites."""
    for name in ("leak_depths", "threads"):
        with T.case("%s (HEAPTRAIL_UNWIND=fp)" % name):
            need_tools()
            rep, truth, _ = run_single(name, "preload-fp", {"HEAPTRAIL_UNWIND": "fp"})
            check.compare(T, rep, truth)


def test_packing():
    """Packed chunks (HEAPTRAIL_PACK=1) and plain ones (=0) give the same exact figures."""
    for name in ("threads", "leak_depths", "cxx_new", "realloc_chain"):
        if name not in SINGLE:
            continue
        for pack in ("1", "0"):
            with T.case("%s (HEAPTRAIL_PACK=%s)" % (name, pack)):
                need_tools()
                rep, truth, _ = run_single(name, "preload-pack" + pack, {"HEAPTRAIL_PACK": pack})
                check.compare(T, rep, truth, SINGLE[name])


def test_heaptrack():
    if not heaptrack.available():
        T.skip("heaptrack comparison", "heaptrack, heaptrack_print or zstdcat missing")
        return
    for name, figures in HEAPTRACK.items():
        with T.case("%s vs heaptrack" % name):
            exe = target(name)
            rep = REPORTS.get(name)
            if rep is None:
                raise Skip("no heaptrail report of %s" % name)
            d = fresh_dir(name + "-heaptrack")
            cp, data = heaptrack.run([exe], os.path.join(d, "ht"), cwd=d,
                                     env=check.clean_env({"TRUTH_OUT": os.path.join(d, "t")}))
            if data is None:
                T.fail("heaptrack ran", "no data file: %s" % check.first_line(cp.stderr))
                continue
            want, problems = heaptrack.normalized(data, exe)
            T.check("heaptrack_print agrees with its data file", not problems,
                    "; ".join(problems))
            for key in figures:
                T.eq(key + " equals heaptrack's", rep["totals"][key], want[key])


def dumps_in(d, base):
    return sorted(p for p in glob.glob(os.path.join(d, base + "*"))
                  if not p.endswith(".json"))


def test_process_tree():
    with T.case("forker (record)"):
        need_tools()
        exe = target("forker")
        target("exec_child")
        d = fresh_dir("forker")
        out = os.path.join(d, "tree.htr")
        truth_path = os.path.join(d, "truth.json")
        cp = check.record(out, [exe], env={"TRUTH_OUT": truth_path}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        lines = check.truth_lines(truth_path)
        root = [t for t in lines if "child_exit" in t["facts"]]
        if len(root) != 1:
            raise Skip("the root's truth line is missing")
        root_pid = root[0]["pid"]
        T.eq("truth lines (root, 2 children, grandchild, child before and after exec)",
             len(lines), 6)
        expected = set()
        for t in lines:
            pid = t["pid"]
            if pid == root_pid:
                path = out
                what = "root"
            elif t["image"] == "exec_child":
                found = [p for p in glob.glob("%s.%d.*" % (out, pid))
                         if re.match(r"^\.\d+$", p[len("%s.%d" % (out, pid)):])]
                what = "exec'd image %d" % pid
                T.eq(what + ": one dump named OUT.PID.N", len(found), 1)
                if len(found) != 1:
                    continue
                path = found[0]
            else:
                path = "%s.%d" % (out, pid)
                what = "forked child %d" % pid
            expected.add(path)
            if not T.check(what + ": dump exists", os.path.exists(path), path):
                continue
            with T.case(what):
                rep = report_ok(path)
                check.compare(T, rep, t)
                ended("dump", rep, "exec" if "execs" in t["facts"] else "exit")
        got = set(dumps_in(d, "tree.htr"))
        T.eq("no other dumps", sorted(got - expected), [])

    with T.case("root process execs (sh -c 'exec exec_child')"):
        need_tools()
        exe = target("exec_child")
        d = fresh_dir("root-exec")
        out = os.path.join(d, "sh.htr")
        truth_path = os.path.join(d, "truth.json")
        cp = check.record(out, ["sh", "-c", "exec '%s'" % exe],
                          env={"TRUTH_OUT": truth_path}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        truth = check.truth_lines(truth_path)[-1]
        after = "%s.%d" % (out, truth["pid"])
        T.eq("the shell's dump and the exec'd image's OUT.PID",
             [os.path.basename(p) for p in dumps_in(d, "sh.htr")],
             sorted(["sh.htr", os.path.basename(after)]))
        if os.path.exists(out):
            ended("the shell's dump", report_ok(out, "the shell's report"), "exec")
        if os.path.exists(after):
            rep = report_ok(after, "the exec'd image's report")
            check.compare(T, rep, truth)
            ended("the exec'd image's dump", rep, "exit")

    with T.case("forker (HEAPTRAIL_FOLLOW=0)"):
        need_tools()
        exe = target("forker")
        d = fresh_dir("forker-nofollow")
        out = os.path.join(d, "tree.htr")
        truth_path = os.path.join(d, "truth.json")
        cp = check.preload(out, [exe], env={"TRUTH_OUT": truth_path,
                                            "HEAPTRAIL_FOLLOW": "0"}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        T.eq("only the root's dump", [os.path.basename(p) for p in dumps_in(d, "tree.htr")],
             ["tree.htr"])
        root = [t for t in check.truth_lines(truth_path) if "child_exit" in t["facts"]]
        if os.path.exists(out) and len(root) == 1:
            check.compare(T, report_ok(out), root[0])


def stack_lengths(rep):
    return sorted(set(len(s["stack"]) for s in rep["sites"]))


def test_depth_cap():
    for cap in (None, "8", "256"):
        with T.case("deep_recursion (HEAPTRAIL_DEPTH=%s)" % (cap or "default")):
            need_tools()
            exe = target("deep_recursion")
            d = fresh_dir("deep-%s" % cap)
            out = os.path.join(d, "deep.htr")
            env = {"TRUTH_OUT": os.path.join(d, "truth.json")}
            if cap:
                env["HEAPTRAIL_DEPTH"] = cap
            cp = check.preload(out, [exe], env=env, cwd=d)
            T.eq("exit status", cp.returncode, 0)
            rep = report_ok(out)
            truth = check.truth_lines(env["TRUTH_OUT"])[-1]
            check.compare(T, rep, truth)
            want = int(cap or 64)
            # The bottom leak is 300 calls deep: its stack is cut to exactly
            # the cap.  The others are 150 and 180 deep: cut too unless the
            # cap is larger.
            bottom = [s for s in rep["sites"]
                      if check.function_matches(s.get("function"), "leak_at_bottom")]
            T.eq("the deepest stack has HEAPTRAIL_DEPTH frames",
                 sorted(set(len(s["stack"]) for s in bottom)), [want])
            T.check("no stack has more than HEAPTRAIL_DEPTH frames",
                    max(stack_lengths(rep)) <= want, "lengths %r" % stack_lengths(rep))
            if want < 150:
                T.eq("every stack has HEAPTRAIL_DEPTH frames", stack_lengths(rep), [want])

    with T.case("deep_recursion (record --depth 12)"):
        need_tools()
        exe = target("deep_recursion")
        d = fresh_dir("deep-record")
        out = os.path.join(d, "deep.htr")
        truth_path = os.path.join(d, "truth.json")
        cp = check.record(out, [exe], env={"TRUTH_OUT": truth_path}, cwd=d,
                          options=["--depth", "12"])
        T.eq("exit status", cp.returncode, 0)
        rep = report_ok(out)
        check.compare(T, rep, check.truth_lines(truth_path)[-1])
        T.eq("every stack has 12 frames", stack_lengths(rep), [12])

    with T.case("deep_recursion (HEAPTRAIL_DEPTH=1000, above the maximum)"):
        need_tools()
        exe = target("deep_recursion")
        d = fresh_dir("deep-bad")
        out = os.path.join(d, "deep.htr")
        env = {"TRUTH_OUT": os.path.join(d, "truth.json"), "HEAPTRAIL_DEPTH": "1000"}
        cp = check.preload(out, [exe], env=env, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        err = check.text(cp.stderr)
        T.eq("the bad value is reported on stderr once", err.count("HEAPTRAIL_DEPTH"), 1)
        rep = report_ok(out)
        T.check("stacks are at most 256 frames", max(stack_lengths(rep)) <= 256,
                "lengths %r" % stack_lengths(rep))
        check.compare(T, rep, check.truth_lines(env["TRUTH_OUT"])[-1])


def test_quiet():
    with T.case("HEAPTRAIL_QUIET"):
        need_tools()
        exe = target("deep_recursion")
        d = fresh_dir("quiet")
        out = os.path.join(d, "q.htr")
        cp = check.preload(out, [exe], env={"HEAPTRAIL_DEPTH": "1000",
                                            "HEAPTRAIL_QUIET": "1"}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        T.eq("nothing on stderr, not even the bad value", check.text(cp.stderr), "")
        T.check("dump written", os.path.exists(out))


def test_demo():
    """examples/leaky_cache: its leaks follow from its source, request by request."""
    with T.case("demo (examples/leaky_cache)"):
        need_tools()
        exe = os.path.join(check.BUILD, "examples", "leaky_cache")
        if not os.access(exe, os.X_OK):
            raise Skip("%s is not built" % exe)
        d = fresh_dir("demo")
        out = os.path.join(d, "demo.htr")
        cp = check.record(out, [exe], cwd=d)
        T.eq("exit status", cp.returncode, 0)
        rep = report_ok(out)
        names = ["alice", "bob", "carol", "dave", "erin"]
        lines = ["GET /item/%d %s" % (i, names[i % 5]) for i in range(500)]
        want = {
            "render_page": 500 * 256,           # malloc(256) per request
            "remember_response": 500 * 32 + sum(len(l) + 1 for l in lines),
        }                                       # struct cached + strdup(key)
        got = {}
        for s in rep["sites"]:
            f = check.norm_function(s["function"])
            got[f] = got.get(f, 0) + s["leaked_bytes"]
        for f, n in want.items():
            T.eq("%s leaks" % f, got.get(f, 0), n)
        T.eq("nothing else leaks", rep["totals"]["leaked_bytes"], sum(want.values()))
        if "temporary" in rep["totals"]:
            # Each word copy is freed before anything else is allocated.
            T.check("temporary allocations: at least the 1500 word copies",
                    rep["totals"]["temporary"] >= 1500, "%r" % rep["totals"]["temporary"])
        # Per request: strdup(line) + 3 word copies in parse_request, a body,
        # an entry and a key; plus one struct user per distinct name.  (libc
        # may allocate for itself in dprintf: count the demo's functions.)
        allocs = {}
        for s in rep["sites"]:
            f = check.norm_function(s["function"])
            allocs[f] = allocs.get(f, 0) + s["allocations"]
        want_allocs = {"parse_request": 2000, "lookup_user": 5, "render_page": 500,
                       "remember_response": 1000}
        T.eq("allocations per function", {f: allocs.get(f, 0) for f in want_allocs},
             want_allocs)


def test_sigkill():
    with T.case("sigkill"):
        need_tools()
        exe = target("sigkill")
        d = fresh_dir("sigkill")
        out = os.path.join(d, "killed.htr")
        truth_path = os.path.join(d, "truth.json")
        cp = check.record(out, [exe], env={"TRUTH_OUT": truth_path}, cwd=d)
        T.check("record exits as the command did (killed by SIGKILL)",
                cp.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL),
                "exit %d" % cp.returncode)
        truth = check.truth_lines(truth_path)[-1]
        cp2, doc = check.report(out)
        T.eq("report exits 0", cp2.returncode, 0)
        if doc is None:
            raise Skip("no report")
        check.compare(T, doc, truth)
        txt = check.run([check.HEAPTRAIL, "report", out])
        said = check.text(txt.stdout + txt.stderr).lower()
        T.check("the report warns that the process did not end normally",
                "sigkill" in said or "no end record" in said or "killed" in said,
                "nothing about it in: %s" % said[:300])

        # The same dump cut in its last frame: read up to there, with a warning.
        cut = os.path.join(d, "cut.htr")
        with open(out, "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[:-7])
        cp3, doc3 = check.report(cut)
        T.eq("a dump cut short: report exits 0", cp3.returncode, 0)
        T.check("a dump cut short: warning on stderr",
                "warning" in check.text(cp3.stderr).lower(), check.first_line(cp3.stderr))
        phase1 = [s for s in truth["sites"] if s["function"] == "leak_phase1"][0]
        if doc3:
            m = check.matching_sites(doc3["sites"], "leak_phase1", phase1["line"])
            T.eq("a dump cut short: the first phase is all there",
                 sum(s["leaked_bytes"] for s in m), phase1["leaked_bytes"])
            T.check("a dump cut short: never more than the whole",
                    doc3["totals"]["leaked_bytes"] <= doc["totals"]["leaked_bytes"])

        # A frame near the end damaged (zstd data flipped, frame header
        # intact): read up to the damage, with a warning.
        frames = frame_offsets(data)
        T.check("the dump has several frames", len(frames) >= 3, "%d frames" % len(frames))
        if len(frames) >= 3:
            off, size = frames[-2]
            start = off + 16 + size // 2
            bad = os.path.join(d, "corrupt.htr")
            with open(bad, "wb") as f:
                f.write(data[:start] + bytes(b ^ 0x5a for b in data[start:start + 8]) +
                        data[start + 8:])
            cp4, doc4 = check.report(bad)
            T.eq("a dump with a damaged frame: report exits 0", cp4.returncode, 0)
            T.check("a dump with a damaged frame: warning on stderr",
                    "warning" in check.text(cp4.stderr).lower(), check.first_line(cp4.stderr))
            if doc4:
                m = check.matching_sites(doc4["sites"], "leak_phase1", phase1["line"])
                T.eq("a dump with a damaged frame: the first phase is all there",
                     sum(s["leaked_bytes"] for s in m), phase1["leaked_bytes"])


def frame_offsets(data):
    """(offset, compressed size) of each frame (common/htr_format.h layout)."""
    out = []
    off = struct.unpack_from("<I", data, 12)[0]     # header_size
    while off + 16 <= len(data):
        _magic, csize, _raw, _check = struct.unpack_from("<IIII", data, off)
        if off + 16 + csize > len(data):
            break
        out.append((off, csize))
        off += 16 + csize
    return out


def test_bad_input():
    need = [check.HEAPTRAIL]
    if not all(os.path.exists(p) for p in need):
        T.skip("bad input", "heaptrail not built")
        return
    d = fresh_dir("bad-input")
    empty = os.path.join(d, "empty.htr")
    open(empty, "wb").close()
    foreign = os.path.join(d, "foreign.htr")
    with open(foreign, "wb") as f:
        f.write(b"this is not a heaptrail dump\n" * 100)
    header_only = os.path.join(d, "header.htr")
    with open(header_only, "wb") as f:
        f.write(b"HTRDUMP\n" + b"\x01\x00\x00\x00" + b"\x00" * 20)
    for label, path in (("missing", os.path.join(d, "nope.htr")), ("empty", empty),
                        ("foreign", foreign), ("bad header", header_only)):
        for verb in ("report", "leaks"):
            cp = check.run([check.HEAPTRAIL, verb, path])
            err = check.text(cp.stderr).strip().splitlines()
            T.eq("%s dump: %s exits 2" % (label, verb), cp.returncode, 2)
            T.check("%s dump: %s says so in one line 'heaptrail: ...'" % (label, verb),
                    len(err) == 1 and err[0].startswith("heaptrail: "), repr(err[:3]))


def test_output_names():
    with T.case("HEAPTRAIL_OUT unset"):
        need_tools()
        exe = target("leak_depths")
        d = fresh_dir("default-name")
        truth_path = os.path.join(d, "truth.json")
        cp = check.preload(None, [exe], env={"TRUTH_OUT": truth_path}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        pid = check.truth_lines(truth_path)[-1]["pid"]
        want = "heaptrail.leak_depths.%d.htr" % pid
        T.eq("dump named heaptrail.<exe>.<pid>.htr in the working directory",
             sorted(f for f in os.listdir(d) if f.endswith(".htr")), [want])
    with T.case("HEAPTRAIL_OUT with %e and %p"):
        need_tools()
        exe = target("leak_depths")
        d = fresh_dir("pattern-name")
        truth_path = os.path.join(d, "truth.json")
        cp = check.preload(os.path.join(d, "x-%e-%p.htr"), [exe],
                           env={"TRUTH_OUT": truth_path}, cwd=d)
        T.eq("exit status", cp.returncode, 0)
        pid = check.truth_lines(truth_path)[-1]["pid"]
        T.eq("%e and %p replaced",
             sorted(f for f in os.listdir(d) if f.endswith(".htr")),
             ["x-leak_depths-%d.htr" % pid])


def test_install():
    """make install PREFIX=...: the installed CLI finds the installed shim."""
    with T.case("make install"):
        need_tools()
        exe = target("leak_depths")
        prefix = fresh_dir("prefix")
        make = os.environ.get("MAKE", "make").split()
        cp = check.run(make + ["-s", "--no-print-directory", "-C", check.TOP,
                               "install", "PREFIX=" + prefix,
                               "BUILD=" + os.path.relpath(check.BUILD, check.TOP)])
        T.eq("make install exits 0", cp.returncode, 0)
        if cp.returncode:
            raise Skip(check.first_line(cp.stderr))
        for path in ("bin/heaptrail", "lib/heaptrail/libheaptrail.so",
                     "include/heaptrail.h", "share/doc/heaptrail/README.md",
                     "share/doc/heaptrail/docs/README.md", "share/doc/heaptrail/docs/env.md"):
            T.check("installs %s" % path, os.path.exists(os.path.join(prefix, path)))
        d = fresh_dir("installed-run")
        out = os.path.join(d, "i.htr")
        truth_path = os.path.join(d, "truth.json")
        env = check.clean_env({"TRUTH_OUT": truth_path})
        env.pop("HEAPTRAIL_LIB", None)
        cp = check.run([os.path.join(prefix, "bin", "heaptrail"), "record", "-o", out,
                        "--", exe], env=env, cwd=d)
        T.eq("the installed heaptrail records", cp.returncode, 0)
        if os.path.exists(out):
            cp = check.run([os.path.join(prefix, "bin", "heaptrail"), "report", "--json",
                            "--top", "0", out])
            T.eq("the installed heaptrail reports", cp.returncode, 0)
            if cp.returncode == 0:
                rep = check.json.loads(check.text(cp.stdout))
                check.compare(T, rep, check.truth_lines(truth_path)[-1])
        else:
            T.fail("the installed heaptrail wrote a dump", check.first_line(cp.stderr))


def test_huge_request_early():
    """A preloaded library's constructor asks for SIZE_MAX bytes, maybe before
    the shim's constructor: the request fails, the program goes on (finding S2)."""
    with T.case("SIZE_MAX requested from a constructor preloaded after the shim"):
        need_tools()
        lib = os.path.join(check.TARGETS, "libhugector.so")
        if not os.path.exists(lib):
            raise Skip("%s is not built (make test-targets)" % lib)
        d = fresh_dir("huge-ctor")
        out = os.path.join(d, "h.htr")
        cp = check.run(["true"], env=check.clean_env(
            {"LD_PRELOAD": check.SHIM + " " + lib, "HEAPTRAIL_OUT": out}), cwd=d)
        T.eq("the program exits 0 (3-5: the library's requests went wrong)", cp.returncode, 0)
        rc, _ = check.report(out)
        T.eq("its dump analyzes", rc.returncode, 0)


def test_exit_status():
    with T.case("exit status and signals pass through record"):
        need_tools()
        d = fresh_dir("status")
        cp = check.record(os.path.join(d, "a.htr"), ["sh", "-c", "exit 3"], cwd=d)
        T.eq("exit 3", cp.returncode, 3)
        cp = check.record(os.path.join(d, "b.htr"), ["sh", "-c", "kill -TERM $$"], cwd=d)
        T.check("killed by SIGTERM", cp.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM),
                "exit %d" % cp.returncode)
        for f in dumps_in(d, ""):
            if f.endswith(".htr") or ".htr." in f:
                cp, _ = check.report(f)
                T.eq("%s analyzes" % os.path.basename(f), cp.returncode, 0)


# --- real programs --------------------------------------------------------

def same_behaviour(label, argv, cwd, env=None, stdin_text=None):
    """A plain run and a run under the shim print the same and exit the same."""
    base_env = check.clean_env(env)
    plain = check.run(argv, env=base_env, cwd=cwd)
    d = fresh_dir(label.replace(" ", "_").replace("/", "_"))
    out = os.path.join(d, "run.htr")
    shim_env = dict(base_env, LD_PRELOAD=check.SHIM, HEAPTRAIL_OUT=out)
    traced = check.run(argv, env=shim_env, cwd=cwd)
    T.eq(label + ": exit status unchanged", traced.returncode, plain.returncode)
    T.check(label + ": stdout unchanged", traced.stdout == plain.stdout,
            "%r vs %r" % (traced.stdout[:200], plain.stdout[:200]))
    T.check(label + ": stderr unchanged", traced.stderr == plain.stderr,
            "%r vs %r" % (traced.stderr[:200], plain.stderr[:200]))
    rec = check.record(os.path.join(d, "rec.htr"), argv, env=env, cwd=cwd)
    T.eq(label + ": exit status unchanged under record", rec.returncode, plain.returncode)
    T.check(label + ": stdout unchanged under record", rec.stdout == plain.stdout,
            "%r vs %r" % (rec.stdout[:200], plain.stdout[:200]))
    dumps = [f for f in sorted(os.listdir(d)) if ".htr" in f]
    T.check(label + ": dumps written", "run.htr" in dumps and "rec.htr" in dumps,
            "dumps: %r" % dumps)
    for f in dumps:
        cp, doc = check.report(os.path.join(d, f))
        T.check(label + ": %s analyzes" % f, cp.returncode == 0 and doc is not None,
                "exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
        if doc is not None and f in ("run.htr", "rec.htr"):
            T.check(label + ": %s has allocations" % f, doc["totals"]["allocations"] > 0,
                    "totals %r" % doc["totals"])
        if doc is not None:
            ended(label + ": " + f, doc)
    return plain


def test_real_programs():
    need_tools_ok = all(os.path.exists(p) for p in (check.HEAPTRAIL, check.SHIM))
    python = shutil.which("python3", path="/usr/bin:/bin") or shutil.which("python3")
    progs = [
        ("python3", python, [
            [python, "-c",
             "import json, hashlib, sys\n"
             "d = {str(i): [i] * 5 for i in range(20000)}\n"
             "s = json.dumps(d)\n"
             "print(len(s), hashlib.sha256(s.encode()).hexdigest())\n"
             "sys.exit(3)"],
            [python, "-c", "import sys; sys.stderr.write('to stderr\\n'); raise SystemExit(1)"],
        ]),
        ("sqlite3", shutil.which("sqlite3"), [
            ["sqlite3", ":memory:",
             "create table t(a integer, b text);"
             "with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000)"
             " insert into t select x, printf('row-%d', x) from c;"
             "create index i on t(b);"
             "select count(*), sum(a), max(b) from t;"],
            ["sqlite3", ":memory:", "select * from no_such_table;"],
        ]),
    ]
    for name, path, runs in progs:
        with T.case(name):
            if not need_tools_ok:
                raise Skip("heaptrail not built")
            if not path:
                raise Skip("%s is not installed" % name)
            for i, argv in enumerate(runs):
                same_behaviour("%s run %d" % (name, i + 1), argv, WORK)

    with T.case("git"):
        if not need_tools_ok:
            raise Skip("heaptrail not built")
        if not shutil.which("git"):
            raise Skip("git is not installed")
        repo = fresh_dir("git-repo")
        home = fresh_dir("git-home")
        env = {"HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat",
               "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.org",
               "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}
        cp = check.run(["git", "init", "-q", "-b", "main", repo], env=check.clean_env(env))
        T.eq("git init", cp.returncode, 0)
        for i in range(20):
            with open(os.path.join(repo, "f%02d.txt" % i), "w") as f:
                f.write("line %d\n" % i * (i + 1))
        check.run(["git", "add", "."], env=check.clean_env(env), cwd=repo)
        check.run(["git", "commit", "-q", "-m", "first"], env=check.clean_env(env), cwd=repo)
        same_behaviour("git log", ["git", "log", "--stat", "--format=%H %s"], repo, env)
        same_behaviour("git status", ["git", "status", "--porcelain=v1", "--branch"], repo, env)
        same_behaviour("git rev-parse (fails)", ["git", "rev-parse", "--verify", "no-such-ref"],
                       repo, env)
        same_behaviour("git fsck", ["git", "fsck", "--no-progress"], repo, env)


def main():
    missing = [p for p in (check.HEAPTRAIL, check.SHIM) if not os.path.exists(p)]
    if missing:
        # Run from 'make test', which builds them: missing is a failure.
        T.fail("build", "not built: %s (run make all test-targets)" % ", ".join(missing))
        T.finish()
    try:
        test_single_targets()
        test_fp_unwinder()
        test_packing()
        test_heaptrack()
        test_process_tree()
        test_depth_cap()
        test_quiet()
        test_demo()
        test_sigkill()
        test_bad_input()
        test_output_names()
        test_exit_status()
        test_huge_request_early()
        test_install()
        test_real_programs()
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
