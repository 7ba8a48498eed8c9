#!/usr/bin/env python3
"""test_pprof.py - end-to-end checks of 'heaptrail pprof' (issue 7).

The profile of html_mix (tests/targets/html_mix.c) is read twice: by a
small protobuf decoder below (the wire format of profile.proto: sample
types, string table, every referenced location, function and mapping
present, values adding up to the program's truth), and by 'go tool pprof
-top' (Debian's golang-go), whose flat figures per function must be the
program's own for inuse_space, inuse_objects, alloc_space and
alloc_objects.  inline_leak's inlined function is its own entry.
Skipped without go.
"""

import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("pprof")
WORK = tempfile.mkdtemp(prefix="heaptrail-pprof-")


target = check.built_target


def run_target(name):
    dump, lines = check.run_with_truth(T, target(name), check.fresh_dir(WORK, name))
    return dump, lines[-1]


def truth_fn(truth, fn, key):
    return sum(s[key] for s in truth["sites"] if s["function"] == fn)


def pprof(dump, name):
    out = os.path.join(WORK, name)
    cp = check.run([check.HEAPTRAIL, "pprof", dump, "-o", out])
    if cp.returncode != 0:
        raise AssertionError("pprof: exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
    return out


# ---- profile.proto, decoded by hand -------------------------------------

def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """[(field, value)]: ints for varints, bytes for length-delimited."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wire == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise AssertionError("wire type %d" % wire)
        out.append((f, v))
    return out


def packed(v):
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def decode(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        raise AssertionError("not gzip'd")
    p = {"sample_type": [], "sample": [], "mapping": {}, "location": {}, "function": {},
         "strings": [], "comment": [], "default_sample_type": 0, "period_type": None}
    for f, v in fields(gzip.decompress(raw)):
        if f == 1:
            d = dict(fields(v))
            p["sample_type"].append((d.get(1, 0), d.get(2, 0)))
        elif f == 2:
            locs, vals = [], []
            for g, w in fields(v):
                if g == 1:
                    locs += packed(w)
                elif g == 2:
                    vals += [signed(x) for x in packed(w)]
            p["sample"].append((locs, vals))
        elif f == 3:
            d = dict(fields(v))
            p["mapping"][d[1]] = d
        elif f == 4:
            d = {"lines": []}
            for g, w in fields(v):
                if g == 4:
                    d["lines"].append(dict(fields(w)))
                else:
                    d[g] = w
            p["location"][d[1]] = d
        elif f == 5:
            d = dict(fields(v))
            p["function"][d[1]] = d
        elif f == 6:
            p["strings"].append(v.decode("utf-8"))
        elif f == 13:
            p["comment"].append(v)
        elif f == 14:
            p["default_sample_type"] = v
        elif f == 11:
            d = dict(fields(v))
            p["period_type"] = (d.get(1, 0), d.get(2, 0))
    return p


def leaf_function(p, sample):
    loc = p["location"][sample[0][0]]
    return p["strings"][p["function"][loc["lines"][0][1]][2]]


def test_wire(path, truth):
    with T.case("wire format"):
        p = decode(path)
        s = p["strings"]
        T.eq("string 0 is empty", s[0] if s else None, "")
        types = [(s[a], s[b]) for a, b in p["sample_type"]]
        T.eq("sample types", types, [("alloc_objects", "count"), ("alloc_space", "bytes"),
                                     ("inuse_objects", "count"), ("inuse_space", "bytes")])
        T.eq("default sample type", s[p["default_sample_type"]], "inuse_space")
        T.eq("period type", tuple(s[x] for x in p["period_type"]), ("space", "bytes"))
        T.check("a comment names the dump", any("html_mix" in s[c] or "out.htr" in s[c] for c in p["comment"]))
        sums = [sum(v[k] for _, v in p["sample"]) for k in range(4)]
        T.eq("alloc_objects add up to the truth", sums[0], truth["allocations"])
        T.eq("alloc_space add up to the truth", sums[1], truth["allocated_bytes"])
        T.eq("inuse_objects add up to the truth", sums[2], truth["leaked_blocks"])
        T.eq("inuse_space add up to the truth", sums[3], truth["leaked_bytes"])
        refs = [l for locs, _ in p["sample"] for l in locs]
        T.check("every sample's locations exist", all(l in p["location"] for l in refs))
        fns = [ln[1] for loc in p["location"].values() for ln in loc["lines"]]
        T.check("every line's function exists", all(f in p["function"] for f in fns))
        maps = [loc[2] for loc in p["location"].values() if 2 in loc]
        T.check("every location's mapping exists", all(m in p["mapping"] for m in maps))
        T.check("mappings say they are symbolized",
                all(m.get(7) == 1 and m.get(9) == 1 for m in p["mapping"].values()))
        exe = [m for m in p["mapping"].values() if s[m.get(5, 0)].endswith("/html_mix")]
        T.check("the program's mapping with its build-id", exe and len(s[exe[0].get(6, 0)]) == 40,
                repr([s[m.get(5, 0)] for m in p["mapping"].values()]))
        leaves = {}
        for smp in p["sample"]:
            fn = leaf_function(p, smp)
            leaves[fn] = leaves.get(fn, 0) + smp[1][3]
        for fn in ("grow_history", "leak_config", "client_residue", "keep_pinned"):
            T.eq("leaf %s's inuse_space" % fn, leaves.get(fn), truth_fn(truth, fn, "leaked_bytes"))
        gl = [ln for loc in p["location"].values() for ln in loc["lines"]
              if s[p["function"][ln[1]][2]] == "grow_history"]
        line = [x["line"] for x in truth["sites"] if x["function"] == "grow_history"][0]
        T.check("grow_history's line and file", any(ln.get(2) == line for ln in gl) and
                any(s[p["function"][ln[1]][4]].endswith("html_mix.c") for ln in gl), repr(gl))


GO_ROW = re.compile(r"^\s*(\S+)\s+(\S+)%\s+(\S+)%\s+(\S+)\s+(\S+)%\s+(.+?)\s*$")


def go_top(path, index, unit=None):
    """{function: (flat, cum)} from 'go tool pprof -top'."""
    args = ["go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0",
            "-sample_index=" + index]
    if unit:
        args.append("-unit=" + unit)
    env = check.clean_env({"PPROF_TMPDIR": WORK, "HOME": WORK, "GOFLAGS": "-mod=mod",
                           "GOCACHE": os.path.join(WORK, "gocache")})
    cp = subprocess.run(args + [path], capture_output=True, env=env, timeout=check.HANG_GUARD)
    if cp.returncode != 0:
        raise AssertionError("go tool pprof: exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
    rows, total = {}, None
    for line in check.text(cp.stdout).splitlines():
        m = re.search(r"of (\d+)B? total", line)
        if m:
            total = int(m.group(1))
        m = GO_ROW.match(line)
        if m and m.group(1) != "flat":
            num = lambda x: int(re.sub(r"[^0-9]", "", x) or 0)
            # pprof marks a function inlined at that place with " (inline)"
            rows[re.sub(r" \(inline\)$", "", m.group(6))] = (num(m.group(1)), num(m.group(4)))
    return rows, total


def test_go(path, truth):
    with T.case("go tool pprof"):
        if not shutil.which("go"):
            raise Skip("go is not installed (scripts/install-deps.sh --test installs golang-go)")
        rows, total = go_top(path, "inuse_space", "B")
        T.eq("inuse_space total = leaked bytes", total, truth["leaked_bytes"])
        for fn in ("grow_history", "leak_config", "client_residue", "keep_pinned"):
            T.eq("inuse_space of %s" % fn, rows.get(fn, (None,))[0], truth_fn(truth, fn, "leaked_bytes"))
        T.eq("main's cumulative inuse_space", rows.get("main", (0, None))[1], truth["leaked_bytes"])
        top = sorted(rows.items(), key=lambda kv: -kv[1][0])[0][0]
        T.eq("inuse_space's top site", top, "grow_history")
        rows, _ = go_top(path, "inuse_objects")
        T.eq("inuse_objects of keep_pinned", rows.get("keep_pinned", (None,))[0], truth_fn(truth, "keep_pinned", "leaked_blocks"))
        rows, total = go_top(path, "alloc_space", "B")
        T.eq("alloc_space total = bytes allocated", total, truth["allocated_bytes"])
        for fn in ("peak_buffer", "make_temp", "keep_pinned"):
            T.eq("alloc_space of %s" % fn, rows.get(fn, (None,))[0], truth_fn(truth, fn, "allocated_bytes"))
        rows, total = go_top(path, "alloc_objects")
        T.eq("alloc_objects total = allocations", total, truth["allocations"])
        T.eq("alloc_objects of make_temp", rows.get("make_temp", (None,))[0], truth["facts"]["temps"])


def test_inline():
    with T.case("inline frames (inline_leak, -O2)"):
        if not shutil.which("go"):
            raise Skip("go is not installed")
        dump, truth = run_target("inline_leak")
        path = pprof(dump, "inline.pb.gz")
        rows, _ = go_top(path, "inuse_space", "B")
        T.eq("the inlined make_label holds the bytes (shown 'make_label (inline)')", rows.get("make_label", (None,))[0],
             truth_fn(truth, "make_label", "leaked_bytes"))
        T.eq("keep_labels, which it was inlined into, only cumulatively",
             rows.get("keep_labels"), (0, truth_fn(truth, "make_label", "leaked_bytes")))


def test_usage(dump):
    with T.case("usage"):
        cp = check.run([check.HEAPTRAIL, "pprof"])
        T.eq("no dump: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "pprof", os.path.join(WORK, "missing.htr"), "-o", os.path.join(WORK, "m.pb.gz")])
        T.eq("missing dump: exit 2", cp.returncode, 2)
        T.eq("missing dump: one line", len(check.text(cp.stderr).strip().splitlines()), 1)
        cp = check.run([check.HEAPTRAIL, "pprof", dump, "-o", os.path.join(WORK, "no", "dir", "x.pb.gz")])
        T.eq("unwritable output: exit 2", cp.returncode, 2)
        d = os.path.join(WORK, "default")
        os.makedirs(d)
        cp = check.run([check.HEAPTRAIL, "pprof", dump], cwd=d)
        T.eq("default name: exit 0", cp.returncode, 0)
        T.eq("default name: the dump's with .pb.gz", os.listdir(d), ["out.pb.gz"])
        cp = check.run([check.HEAPTRAIL, "pprof", dump, "-o", "-"])
        T.check("-o -: gzip on stdout", cp.returncode == 0 and cp.stdout[:2] == b"\x1f\x8b")
        h1 = check.run([check.HEAPTRAIL, "help", "pprof"]).stdout
        h2 = check.run([check.HEAPTRAIL, "pprof", "--help"]).stdout
        T.check("help pprof == pprof --help", h1 == h2 and b"usage: heaptrail pprof" in h1)


def main():
    dump = None
    with T.case("record"):
        dump, truth = run_target("html_mix")
    if dump:
        path = None
        with T.case("export"):
            cp = check.run([check.HEAPTRAIL, "pprof", dump, "-o", os.path.join(WORK, "mix.pb.gz")])
            T.eq("exit 0", cp.returncode, 0)
            T.eq("nothing on stdout or stderr (no terminal: no progress line)", cp.stdout + cp.stderr, b"")
            path = os.path.join(WORK, "mix.pb.gz")
        if path:
            test_wire(path, truth)
            test_go(path, truth)
        test_usage(dump)
    test_inline()
    if os.environ.get("KEEP_TEST_FILES") != "1":
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
