#!/usr/bin/env python3
"""test_flame.py - end-to-end checks of 'heaptrail flame' (issue 7).

Folded stacks of html_mix (tests/targets/html_mix.c) for every cost: each
line is "root;...;leaf N", the root (the program's entry) first and the
allocating function last; the lines add up to the totals 'report --json'
and 'clients --json' give, which equal the program's own truth; each
known site carries its known figure.  inline_leak's leak inside an
inlined function appears as that function below the one it was inlined
into.  --lines adds file:line.  When flamegraph.pl or inferno-flamegraph
is installed, it must accept the output.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("flame")
WORK = tempfile.mkdtemp(prefix="heaptrail-flame-")
LINE = re.compile(r"^([^;\n]+(?:;[^;\n]+)*) (\d+)$")


target = check.built_target


def run_target(name):
    dump, lines = check.run_with_truth(T, target(name), check.fresh_dir(WORK, name))
    return dump, lines[-1]


def flame(dump, *args):
    cp = check.run([check.HEAPTRAIL, "flame", dump] + list(args))
    if cp.returncode != 0:
        raise AssertionError("flame %s: exit %d: %s" % (" ".join(args), cp.returncode,
                                                        check.first_line(cp.stderr)))
    return check.text(cp.stdout)


def parse(text):
    """[(frames, value)], after checking every line's form."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            raise AssertionError("not a folded stack line: %r" % line)
        out.append((m.group(1).split(";"), int(m.group(2))))
    return out


def leaf_sum(lines, fn):
    return sum(v for f, v in lines if f[-1] == fn)


def truth_fn(truth, fn, key):
    return sum(s[key] for s in truth["sites"] if s["function"] == fn)


def test_costs(dump, truth):
    cp, rep = check.report(dump)
    cp2, cl = check.analyze("clients", dump)
    if rep is None or cl is None:
        raise AssertionError("report/clients --json failed")
    t = rep["totals"]
    want = {
        "leaked": t["leaked_bytes"], "peak": t["peak_live_bytes"],
        "allocations": t["allocations"], "temporary": t["temporary"],
        "residue": cl["residue_bytes"], "allocated": t["allocated_bytes"],
    }
    with T.case("report equals truth"):
        T.eq("leaked", t["leaked_bytes"], truth["leaked_bytes"])
        T.eq("peak", t["peak_live_bytes"], truth["peak_live_bytes"])
        T.eq("allocations", t["allocations"], truth["allocations"])
        T.eq("allocated", t["allocated_bytes"], truth["allocated_bytes"])
        T.eq("residue", cl["residue_bytes"], truth["facts"]["clients"] * truth["facts"]["residue"])
    for cost, total in want.items():
        with T.case("--cost %s" % cost):
            text = flame(dump, "--cost", cost)
            lines = parse(text)
            T.eq("lines add up to the report's total", sum(v for _, v in lines), total)
            stacks = [";".join(f) for f, _ in lines]
            T.eq("every stack once", len(set(stacks)), len(stacks))
            T.eq("sorted", stacks, sorted(stacks))
            T.check("no zero line", all(v > 0 for _, v in lines))
            T.check("root first: every stack starts at _start",
                    all(f[0] == "_start" for f, _ in lines), repr([f[:2] for f, _ in lines][:3]))
            T.check("main below the root in every stack", all("main" in f for f, _ in lines))
            if cost == "leaked":
                for fn in ("leak_config", "grow_history", "client_residue", "keep_pinned"):
                    T.eq("%s's leaked bytes" % fn, leaf_sum(lines, fn), truth_fn(truth, fn, "leaked_bytes"))
                res = [f for f, _ in lines if f[-1] == "client_residue"]
                T.check("client_residue called from serve", res and res[0][-2] == "serve", repr(res))
            elif cost == "peak":
                T.eq("peak_buffer's bytes at the peak", leaf_sum(lines, "peak_buffer"), truth["facts"]["peak_buffer_bytes"])
            elif cost == "allocations":
                for fn in ("make_temp", "grow_history", "peak_buffer", "leak_config"):
                    T.eq("%s's allocations" % fn, leaf_sum(lines, fn), truth_fn(truth, fn, "allocations"))
            elif cost == "temporary":
                T.eq("make_temp's temporaries", leaf_sum(lines, "make_temp"), truth["facts"]["temps"])
            elif cost == "residue":
                T.eq("all residue at client_residue", leaf_sum(lines, "client_residue"), total)
            elif cost == "allocated":
                for fn in ("make_temp", "peak_buffer", "keep_pinned"):
                    T.eq("%s's bytes allocated" % fn, leaf_sum(lines, fn), truth_fn(truth, fn, "allocated_bytes"))
    with T.case("--lines"):
        lines = parse(flame(dump, "--lines"))
        line = [s["line"] for s in truth["sites"] if s["function"] == "grow_history"][0]
        leaf = "grow_history (html_mix.c:%d)" % line
        T.check("leaf frame with file:line", any(f[-1] == leaf for f, _ in lines),
                repr([f[-1] for f, _ in lines]))
        T.eq("same total", sum(v for _, v in lines), want["leaked"])
    with T.case("-o FILE"):
        out = os.path.join(WORK, "leaked.folded")
        cp = check.run([check.HEAPTRAIL, "flame", dump, "-o", out])
        T.eq("exit 0", cp.returncode, 0)
        T.eq("nothing on stdout", cp.stdout, b"")
        T.eq("nothing on stderr (no terminal: no progress line)", cp.stderr, b"")
        T.eq("the file holds what stdout would", open(out).read(), flame(dump))
        T.eq("the same output twice", flame(dump), flame(dump))
    return want


def test_inline():
    with T.case("inline frames (inline_leak, -O2)"):
        dump, truth = run_target("inline_leak")
        lines = parse(flame(dump))
        want = truth_fn(truth, "make_label", "leaked_bytes")
        T.eq("make_label's bytes", leaf_sum(lines, "make_label"), want)
        ml = [f for f, _ in lines if f[-1] == "make_label"]
        T.check("make_label (inlined) below keep_labels", ml and ml[0][-2] == "keep_labels", repr(ml))


def test_tools(dump):
    with T.case("flame graph tools"):
        tool = shutil.which("inferno-flamegraph") or shutil.which("flamegraph.pl") or shutil.which("flamegraph")
        if not tool:
            raise Skip("neither inferno-flamegraph nor flamegraph.pl is installed")
        cp = subprocess.run([tool], input=flame(dump).encode(), capture_output=True, timeout=check.HANG_GUARD)
        T.eq("%s accepts the output" % os.path.basename(tool), cp.returncode, 0)
        T.check("and draws grow_history", b"grow_history" in cp.stdout)


def test_usage(dump):
    with T.case("usage"):
        cp = check.run([check.HEAPTRAIL, "flame", dump, "--cost", "bogus"])
        T.eq("unknown cost: exit 2", cp.returncode, 2)
        T.check("unknown cost: names the costs", b"leaked" in cp.stderr)
        cp = check.run([check.HEAPTRAIL, "flame"])
        T.eq("no dump: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "flame", os.path.join(WORK, "missing.htr")])
        T.eq("missing dump: exit 2", cp.returncode, 2)
        T.eq("missing dump: one line", len(check.text(cp.stderr).strip().splitlines()), 1)
        h1 = check.run([check.HEAPTRAIL, "help", "flame"]).stdout
        h2 = check.run([check.HEAPTRAIL, "flame", "--help"]).stdout
        T.check("help flame == flame --help", h1 == h2 and b"usage: heaptrail flame" in h1)


def main():
    dump = None
    with T.case("record"):
        dump, truth = run_target("html_mix")
    if dump:
        test_costs(dump, truth)
        test_tools(dump)
        test_usage(dump)
    test_inline()
    if os.environ.get("KEEP_TEST_FILES") != "1":
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
