#!/usr/bin/env python3
"""test_compact.py - heaptrail pack --compact: no addresses, figures the same.

A compact dump keeps no block addresses and times only to the millisecond
(htr_compact.h).  Every analysis but 'frag' must read from it what it
reads from the dump as recorded; where the program knows its own figures,
they must be the program's.

  threads       rel_churn, 4 threads handing blocks to each other and
                reallocating them, a sample every millisecond: report, leaks and clients print the same
                JSON (times aside; times at most 1 ms earlier), the sites'
                allocations and bytes are the program's own, no chunk
                record is left and the process record says compact; the
                compact dump is smaller than the packed one; compacting it
                again changes nothing; flame (leaked, peak) and gate print
                the same; frag refuses it with one line (exit 2); html
                leaves out frag and the page map
  reallocs      realloc_threads, 4 threads reallocating all the time (windows
                end while a realloc is half done): every realloc kept, as
                the program counted; realloc_unseen, a realloc's new block
                over a block whose free went unseen: kept
  reach         reach_basic with --reach: leaks' reachability classes per
                site the same
  clients       gate_clients: the residue per client the same, and the
                program's own
  sampled       sample_sites with HEAPTRAIL_SAMPLE: the estimates the same
  pools, marks  html_mix: report the same
  cut short     a dump cut in a frame: one warning, exit 0, what the reader
                read of it
  cut reallocs  realloc_threads' compact dump cut at 45, 70 and 90%: the
                frees read are the free ops of the complete frames, a
                realloc's free half whose allocation half was cut off too
  damaged       compact dumps with bytes changed inside their frames
                (frames recompressed, so that the damage reaches the
                decoder): every read ends in exit 0 or 2, never a crash; the
                sanitized build (build-asan) too when it is there
  record        'heaptrail record --pack=compact': the command's output and
                status, its dump compact, allocations per site the program's
  -o a pipe     pack, pack --compact and html with -o naming a FIFO: written
                into it, the FIFO left in place (they renamed a temporary
                over it, which made /dev/null a plain file when run as root)
  bad input     --compact on a file that is not a dump: exit 2, one line;
                plain pack of a compact dump: exit 2, one line
"""

import json
import os
import random
import stat
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))

import check  # noqa: E402
import htrdump  # noqa: E402
import reliability as rel  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("compact")
WORK = tempfile.mkdtemp(prefix="heaptrail-compact-")
PF_COMPACT = 64
REC_CHUNK, REC_COMPACT = 4, 11
TIME_WORDS = ("time", "seconds", "duration")


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def target(name):
    path = os.path.join(check.TARGETS, name)
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % path)
    return path


def compact(*args):
    return check.run([check.HEAPTRAIL, "pack", "--compact"] + list(args))


def make_compact(label, dump):
    out = dump + ".c.htr"
    cp = compact(dump, "-o", out)
    T.eq("%s: pack --compact exits 0" % label, cp.returncode, 0)
    return out


def split_times(doc, path="", times=None):
    """The document with every time value taken out; and those values by path."""
    if times is None:
        times = {}
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            p = path + "." + k
            if any(w in k for w in TIME_WORDS) and isinstance(v, (int, float)):
                times[p] = v
            elif k == "dump":
                continue
            else:
                out[k] = split_times(v, p, times)[0]
        return out, times
    if isinstance(doc, list):
        return [split_times(v, "%s[%d]" % (path, i), times)[0] for i, v in enumerate(doc)], times
    return doc, times


def same_json(label, verb, a, b, *extra):
    ca, da = check.analyze(verb, a, *extra)
    cb, db = check.analyze(verb, b, *extra)
    T.eq("%s: %s exits as on the recorded dump" % (label, verb), cb.returncode, ca.returncode)
    if da is None or db is None:
        T.check("%s: %s reads both" % (label, verb), False,
                "%s / %s" % (check.first_line(ca.stderr), check.first_line(cb.stderr)))
        return None
    ra, ta = split_times(da)
    rb, tb = split_times(db)
    T.check("%s: %s prints the same, times aside" % (label, verb),
            json.dumps(ra, sort_keys=True) == json.dumps(rb, sort_keys=True),
            first_difference(ra, rb))
    late = [(p, ta[p], tb.get(p)) for p in ta
            if tb.get(p) is None or not (ta[p] - 0.001 - 1e-9 <= tb[p] <= ta[p] + 1e-9)]
    T.check("%s: %s's times at most 1 ms earlier" % (label, verb), not late, repr(late[:3]))
    return db


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return "%s: %r / %r" % (path, a, b)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s only on one side" % (path, k)
            d = first_difference(a[k], b[k], path + "." + k)
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d / %d entries" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return ""
    return "" if a == b else "%s: %r / %r" % (path, a, b)


def records(dump):
    """(process flags, record types seen) of a dump."""
    flags, types = None, set()
    for kind, raw in htrdump.frames(dump):
        if kind != "frame":
            continue
        if flags is None and raw[:1] == b"\x01":
            b = htrdump.Buf(raw[1:])
            for _ in range(5):
                b.u()
            b.str()
            b.str()
            for _ in range(3):
                b.u()
            flags = b.u()
        types |= set(record_types(raw))
    return flags, types


def record_types(raw):
    """Record types of a frame, walked by their lengths (enough for this test)."""
    b = htrdump.Buf(raw)
    out = []
    while not b.done():
        t = b.raw(1)[0]
        out.append(t)
        if t == REC_COMPACT:
            nruns = b.u()
            for _ in range(3 * nruns):
                b.u()
            lens = [b.u() for _ in range(6)]
            b.raw(sum(lens))
        else:
            htrdump.skip_record(b, t)
    return out


def case_threads():
    d = fresh_dir("threads")
    dump = os.path.join(d, "t.htr")
    # a sample every millisecond: samples fall between reallocs' two halves
    cp = rel.run([target("rel_churn"), "4", "3000"],
                 env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "0",
                                         "HEAPTRAIL_INTERVAL_MS": "1"}), cwd=d)
    T.eq("threads: the target exits 0", cp.returncode, 0)
    sites = rel.site_facts(cp.stdout)
    small = make_compact("threads", dump)
    packed = dump + ".p.htr"
    check.run([check.HEAPTRAIL, "pack", dump, "-o", packed])
    flags, types = records(small)
    T.check("threads: the process record says compact", flags is not None and flags & PF_COMPACT,
            "flags %r" % flags)
    T.check("threads: compact windows, no chunk left",
            REC_COMPACT in types and REC_CHUNK not in types, repr(sorted(types)))
    T.check("threads: smaller than the packed dump",
            os.path.getsize(small) < os.path.getsize(packed),
            "%d >= %d" % (os.path.getsize(small), os.path.getsize(packed)))
    doc = same_json("threads", "report", dump, small, "--top", "0")
    same_json("threads", "leaks", dump, small, "--top", "0")
    same_json("threads", "clients", dump, small)
    T.check("threads: the program counted its sites", len(sites) >= 5, repr(sites))
    if doc is not None:
        for name, (n, nbytes) in sorted(sites.items()):
            T.eq("threads: allocations at %s as the program counted" % name,
                 rel.site_sum(doc, name, "allocations"), n)
            T.eq("threads: bytes at %s as the program counted" % name,
                 rel.site_sum(doc, name, "allocated_bytes"), nbytes)
    for verb in (["flame"], ["flame", "--cost", "peak"], ["gate"]):
        ca = check.run([check.HEAPTRAIL] + verb + [dump])
        cb = check.run([check.HEAPTRAIL] + verb + [small])
        T.check("threads: %s prints the same and exits the same" % " ".join(verb),
                ca.returncode == cb.returncode and ca.stdout == cb.stdout,
                "exit %d / %d" % (ca.returncode, cb.returncode))
    again = small + ".again.htr"
    cp = compact(small, "-o", again)
    T.eq("threads: compacting the compact dump exits 0", cp.returncode, 0)
    same_json("threads, compacted twice", "report", dump, again, "--top", "0")
    cp = check.run([check.HEAPTRAIL, "frag", small])
    lines = check.text(cp.stderr).strip().splitlines()
    T.eq("threads: frag refuses a compact dump (exit 2)", cp.returncode, 2)
    T.check("threads: ... in one line that says why",
            len(lines) == 1 and "compact" in lines[0], repr(lines))
    page = os.path.join(d, "t.html")
    cp = check.run([check.HEAPTRAIL, "html", small, "-o", page])
    T.eq("threads: html of a compact dump exits 0", cp.returncode, 0)
    text = open(page, encoding="utf-8").read() if os.path.exists(page) else ""
    T.check("threads: ... without frag and page map",
            '"frag":null' in text and '"page_map":null' in text)


def case_reallocs():
    d = fresh_dir("reallocs")
    dump = os.path.join(d, "r.htr")
    cp = rel.run([target("realloc_threads"), "4", "100000"],
                 env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "0"}), cwd=d)
    want = rel.output_facts(cp.stdout).get("reallocs")
    T.eq("reallocs: the target exits 0", cp.returncode, 0)
    small = make_compact("reallocs", dump)
    doc = same_json("reallocs", "report", dump, small, "--top", "0")
    T.eq("reallocs: every realloc whole across the windows, as the program counted",
         doc["totals"].get("reallocs") if doc else None, want)
    dump = os.path.join(d, "u.htr")
    cp = rel.run([target("realloc_unseen")], env=rel.shim_env(dump, {}), cwd=d)
    small = make_compact("reallocs, unseen frees", dump)
    doc = same_json("reallocs, unseen frees", "report", dump, small, "--top", "0")
    T.eq("reallocs, unseen frees: the realloc over a live block kept",
         doc["totals"].get("reallocs") if doc else None, 1)


def case_reach():
    d = fresh_dir("reach")
    dump = os.path.join(d, "r.htr")
    cp = check.record(dump, [target("reach_basic")], cwd=d, options=["--reach"])
    T.eq("reach: the target exits 0", cp.returncode, 0)
    small = make_compact("reach", dump)
    doc = same_json("reach", "leaks", dump, small, "--top", "0")
    T.check("reach: the scan is in the compact dump",
            doc is not None and doc["totals"].get("reach_scan") is True)


def case_clients():
    d = fresh_dir("clients")
    dump = os.path.join(d, "c.htr")
    cp = check.record(dump, [target("gate_clients"), "4", "1500"], cwd=d)
    T.eq("clients: the target exits 0", cp.returncode, 0)
    small = make_compact("clients", dump)
    doc = same_json("clients", "clients", dump, small)
    if doc is not None:
        residues = [c.get("residue_bytes") for c in doc.get("per_client", [])]
        T.check("clients: 4 clients, each leaving the 1500 bytes it kept",
                len(residues) == 4 and all(r == 1500 for r in residues), repr(residues))


def case_sampled():
    d = fresh_dir("sampled")
    dump = os.path.join(d, "s.htr")
    cp = check.preload(dump, [target("sample_sites")], env={"HEAPTRAIL_SAMPLE": "65536"}, cwd=d)
    T.eq("sampled: the target exits 0", cp.returncode, 0)
    small = make_compact("sampled", dump)
    doc = same_json("sampled", "report", dump, small, "--top", "0")
    T.check("sampled: still says estimated",
            doc is not None and doc["process"].get("sample_bytes") == 65536)


def case_pools():
    d = fresh_dir("pools")
    dump = os.path.join(d, "h.htr")
    cp = check.record(dump, [target("html_mix")], cwd=d)
    T.eq("pools: the target exits 0", cp.returncode, 0)
    small = make_compact("pools", dump)
    same_json("pools", "report", dump, small, "--top", "0")
    same_json("pools", "leaks", dump, small, "--top", "0")


def case_cut_short():
    d = fresh_dir("cut")
    dump = os.path.join(d, "c.htr")
    cp = rel.run([target("rel_churn"), "2", "3000"],
                 env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "0"}), cwd=d)
    with open(dump, "rb") as f:
        data = f.read()
    cut = os.path.join(d, "cut.htr")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    out = os.path.join(d, "cutc.htr")
    cp = compact(cut, "-o", out)
    T.eq("cut short: exit 0", cp.returncode, 0)
    lines = [line for line in check.text(cp.stderr).splitlines() if "warning" in line]
    T.check("cut short: one warning line", len(lines) == 1 and "compacted what came before" in
            lines[0], repr(lines))
    ca, da = check.report(cut)
    cb, db = check.report(out)
    if da is not None and db is not None:
        for k in ("allocations", "frees", "allocated_bytes", "peak_live_bytes"):
            T.eq("cut short: %s as the reader read the cut dump" % k,
                 db["totals"].get(k), da["totals"].get(k))
    else:
        T.check("cut short: both read", False)


def free_ops(dump):
    """FREE and FREE_ADDR ops (every free, a realloc's free half too) in the
    complete frames of a compact dump."""
    n = 0
    for kind, raw in htrdump.frames(dump):
        if kind != "frame":
            continue
        b = htrdump.Buf(raw)
        while not b.done():
            t = b.raw(1)[0]
            if t != REC_COMPACT:
                htrdump.skip_record(b, t)
                continue
            nruns = b.u()
            for _ in range(3 * nruns):
                b.u()
            lens = [b.u() for _ in range(6)]
            streams = b.raw(sum(lens))
            ops = streams[lens[0]:lens[0] + lens[1]]
            n += sum(1 for op in ops if op & 7 in (1, 3))
    return n


def case_cut_reallocs():
    """A compact dump cut while reallocs were half done at a window's end."""
    d = fresh_dir("cut-reallocs")
    dump = os.path.join(d, "r.htr")
    # about 4 M events: several frames of a million
    rel.run([target("realloc_threads"), "32", "60000"],
            env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "0", "HEAPTRAIL_INTERVAL_MS": "1"}), cwd=d)
    small = make_compact("cut reallocs", dump)
    with open(small, "rb") as f:
        data = f.read()
    for pct in (45, 70, 90):
        cut = os.path.join(d, "cut%d.htr" % pct)
        with open(cut, "wb") as f:
            f.write(data[:len(data) * pct // 100])
        cp, doc = check.report(cut)
        T.eq("cut reallocs at %d%%: reads (exit 0)" % pct, cp.returncode, 0)
        T.eq("cut reallocs at %d%%: every free of the complete frames, a realloc's half "
             "too" % pct, doc["totals"].get("frees") if doc else None, free_ops(cut))


def frame_check(magic, csize, rsize):
    m = 0xffffffff
    x = (magic * 0x9e3779b1) & m
    x ^= (csize + 0x7f4a7c15 + (x << 6) + (x >> 2)) & m
    x ^= (rsize + 0x7f4a7c15 + (x << 6) + (x >> 2)) & m
    return x & m


def damaged(data, rng):
    """The dump with a few bytes of one frame's records changed, the frame recompressed."""
    hsize = struct.unpack_from("<I", data, 12)[0]
    frames, off = [], hsize
    while off + 16 <= len(data):
        magic, csize, rsize, _ = struct.unpack_from("<IIII", data, off)
        frames.append((off, csize))
        off += 16 + csize
    off, csize = frames[rng.randrange(len(frames))]
    raw = bytearray(subprocess.run(["zstd", "-dc"], input=data[off + 16:off + 16 + csize],
                                   capture_output=True, check=True).stdout)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(raw))
        raw[i] = rng.randrange(256) if rng.random() < 0.7 else raw[i] ^ (1 << rng.randrange(8))
    z = subprocess.run(["zstd", "-1", "-c", "--no-check"], input=bytes(raw), capture_output=True,
                       check=True).stdout
    head = struct.pack("<IIII", 0x52465448, len(z), len(raw),
                       frame_check(0x52465448, len(z), len(raw)))
    return data[:off] + head + z + data[off + 16 + csize:]


def case_damaged():
    d = fresh_dir("damaged")
    dump = os.path.join(d, "d.htr")
    cp = rel.run([target("rel_churn"), "3", "2000"],
                 env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "0"}), cwd=d)
    small = make_compact("damaged", dump)
    with open(small, "rb") as f:
        data = f.read()
    readers = [check.HEAPTRAIL]
    asan = os.path.join(check.TOP, "build-asan", "heaptrail")
    if os.access(asan, os.X_OK):
        readers.append(asan)
    rng = random.Random(7)
    bad, n = [], 40
    path = os.path.join(d, "x.htr")
    for i in range(n):
        with open(path, "wb") as f:
            f.write(damaged(data, rng))
        for exe in readers:
            for verb in ("report", "leaks"):
                cp = check.run([exe, verb, path], env=check.clean_env(
                    {"ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "halt_on_error=1"}))
                err = check.text(cp.stderr)
                if cp.returncode not in (0, 2) or "Sanitizer" in err or "runtime error" in err:
                    bad.append((i, os.path.basename(os.path.dirname(exe)), verb, cp.returncode,
                                check.first_line(cp.stderr)))
    T.check("damaged: %d damaged dumps, %d reader(s): exit 0 or 2, no crash, no sanitizer "
            "report" % (n, len(readers)), not bad, repr(bad[:3]))


def case_record():
    d = fresh_dir("record")
    dump = os.path.join(d, "r.htr")
    plain = check.run([target("rel_churn"), "2", "2000"], cwd=d)
    cp = check.record(dump, [target("rel_churn"), "2", "2000"], cwd=d,
                      options=["--pack=compact"])
    T.eq("record --pack=compact: the command's status", cp.returncode, plain.returncode)
    T.check("record --pack=compact: the command's output", cp.stdout == plain.stdout)
    T.check("record --pack=compact: says it compacted the dump",
            "compacted" in check.text(cp.stderr), check.first_line(cp.stderr))
    flags, _ = records(dump)
    T.check("record --pack=compact: the dump is compact", flags is not None and
            flags & PF_COMPACT, "flags %r" % flags)
    _, doc = check.report(dump)
    sites = rel.site_facts(cp.stdout)
    T.check("record --pack=compact: the program counted its sites", len(sites) >= 5)
    for name, (n, nbytes) in sorted(sites.items()):
        T.eq("record --pack=compact: allocations at %s as the program counted" % name,
             rel.site_sum(doc, name, "allocations") if doc else None, n)


def case_special_output():
    """-o naming a pipe: written into it, not replaced by a file (as /dev/null was)."""
    d = fresh_dir("special")
    dump = os.path.join(d, "s.htr")
    rel.run([target("rel_churn"), "1", "500"], env=rel.shim_env(dump, {}), cwd=d)
    for label, argv in (("pack", ["pack"]), ("pack --compact", ["pack", "--compact"]),
                        ("html", ["html"])):
        fifo = os.path.join(d, "out.fifo")
        got = os.path.join(d, "got")
        if os.path.exists(fifo):
            os.remove(fifo)
        os.mkfifo(fifo)
        with open(got, "wb") as sink:
            reader = subprocess.Popen(["cat", fifo], stdout=sink)
            cp = check.run([check.HEAPTRAIL] + argv + [dump, "-o", fifo])
            if cp.returncode != 0:
                with open(fifo, "wb"):
                    pass        # let cat end
            reader.wait(timeout=60)
        T.eq("-o a pipe, %s: exit 0" % label, cp.returncode, 0)
        T.check("-o a pipe, %s: the pipe is still a pipe" % label,
                stat.S_ISFIFO(os.stat(fifo).st_mode))
        T.check("-o a pipe, %s: what it wrote came through it" % label,
                os.path.getsize(got) > 100, "%d bytes" % os.path.getsize(got))
        if argv[0] == "pack":
            ca, da = check.report(got)
            T.check("-o a pipe, %s: a dump that reads" % label, da is not None,
                    check.first_line(ca.stderr))


def case_bad_input():
    d = fresh_dir("bad")
    junk = os.path.join(d, "junk.htr")
    with open(junk, "wb") as f:
        f.write(b"not a dump\n" * 20)
    cp = compact(junk, "-o", os.path.join(d, "o.htr"))
    lines = check.text(cp.stderr).strip().splitlines()
    T.eq("bad input: --compact of a file that is not a dump: exit 2", cp.returncode, 2)
    T.check("bad input: ... one heaptrail line", len(lines) == 1 and
            lines[0].startswith("heaptrail: "), repr(lines))
    T.check("bad input: ... nothing left", not os.path.exists(os.path.join(d, "o.htr")))
    dump = os.path.join(d, "g.htr")
    rel.run([target("rel_churn"), "1", "500"], env=rel.shim_env(dump, {}), cwd=d)
    small = make_compact("bad input", dump)
    cp = check.run([check.HEAPTRAIL, "pack", small, "-o", os.path.join(d, "p.htr")])
    lines = check.text(cp.stderr).strip().splitlines()
    T.eq("bad input: plain pack of a compact dump: exit 2", cp.returncode, 2)
    T.check("bad input: ... one line saying it is compact",
            len(lines) == 1 and "compact" in lines[0], repr(lines))


def main():
    for p in (check.HEAPTRAIL, check.SHIM):
        if not os.path.exists(p):
            T.skip("compact", "build first (make)")
            T.finish()
            return
    cases = [("threads", case_threads), ("reallocs", case_reallocs), ("reach", case_reach), ("clients", case_clients),
             ("sampled", case_sampled), ("pools", case_pools), ("cut short", case_cut_short),
             ("cut reallocs", case_cut_reallocs),
             ("damaged", case_damaged), ("record --pack=compact", case_record),
             ("-o a pipe", case_special_output), ("bad input", case_bad_input)]
    try:
        rel.run_cases(T, cases, "COMPACT_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
