#!/usr/bin/env python3
"""test_pack.py - heaptrail pack: a dump rewritten smaller, nothing lost.

The target is rel_churn (threads allocating, reallocating, freeing and
handing blocks to each other; it prints what it allocated per site).

  unpacked dump   recorded with HEAPTRAIL_PACK=0, packed: smaller; the
                  process record says packed; scripts/htrdump.py (the
                  independent decoder) finds every thread's events exactly
                  as in the unpacked dump, in the same order; report,
                  leaks, frag, timeline and clients print the same JSON
                  (but the dump's name), and report's allocations per site
                  are the program's own
  packed dump     recorded with HEAPTRAIL_PACK=1, packed again (joined
                  chunks, a higher level): the same events
  in place        'heaptrail pack DUMP' replaces DUMP with the packed one
  several dumps   'heaptrail pack A B': each packed in place, the same
                  events; -o with two dumps: a usage error
  record after    'heaptrail record --pack=after': the command's output and
                  status, its dump packed once it ended, figures per site
                  the program's own
  live dump       a dump its process still writes (the shim's lock): not
                  replaced in place (one line, exit 2; the recording goes on
                  to its END), copied with -o with a warning
  link and mode   in place through a symbolic link: the link stays, the
                  file it names is packed; a 0600 dump stays 0600
  cut short       a dump cut in the middle of a frame (a killed program):
                  one warning line, exit 0, the packed dump holds the events
                  of the frames before the cut, as the reader reads them
  bad input       not a dump, an empty file, a missing file, a bad --level,
                  an unwritable output: one line, exit 2, no output left
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))

import check  # noqa: E402
import htrdump  # noqa: E402
import reliability as rel  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("pack")
WORK = tempfile.mkdtemp(prefix="heaptrail-pack-")


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def churn():
    path = os.path.join(check.TARGETS, "rel_churn")
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % path)
    return path


def record(d, name, pack):
    """rel_churn 4 threads under the shim; (dump path, its stdout)."""
    dump = os.path.join(d, name)
    cp = rel.run([churn(), "4", "3000"], env=rel.shim_env(dump, {"HEAPTRAIL_PACK": pack}), cwd=d)
    T.eq("%s: the target exits 0" % name, cp.returncode, 0)
    return dump, check.text(cp.stdout)


def events_by_thread(dump):
    """Every thread's events, decoded by scripts/htrdump.py; and the PROCESS flags."""
    out, flags = {}, None
    for flags, tid, base, data in htrdump.chunks(dump):
        plain = htrdump.unpack_chunk(data) if flags & 16 else data
        out.setdefault(tid, []).extend(
            htrdump.chunk_events(htrdump.Buf(plain), len(plain), base))
    return out, flags


def pack(*args):
    return check.run([check.HEAPTRAIL, "pack"] + list(args))


def same_analyses(label, a, b):
    """The JSON of several verbs on dumps a and b, the dump's name aside."""
    for verb, extra in (("report", ["--top", "0"]), ("leaks", []), ("frag", []),
                        ("timeline", []), ("clients", [])):
        ca, da = check.analyze(verb, a, *extra)
        cb, db = check.analyze(verb, b, *extra)
        T.eq("%s: %s exits as on the unpacked dump" % (label, verb), cb.returncode,
             ca.returncode)
        text_a = json.dumps(da, sort_keys=True).replace(json.dumps(os.path.basename(a)), "D")
        text_b = json.dumps(db, sort_keys=True).replace(json.dumps(os.path.basename(b)), "D")
        text_a = text_a.replace(json.dumps(a), "D")
        text_b = text_b.replace(json.dumps(b), "D")
        T.check("%s: %s prints the same" % (label, verb), da is not None and text_a == text_b,
                "exit %d / %d" % (ca.returncode, cb.returncode))


def case_unpacked():
    d = fresh_dir("unpacked")
    dump, out = record(d, "u.htr", "0")
    packed = os.path.join(d, "p.htr")
    cp = pack(dump, "-o", packed)
    T.eq("unpacked: pack exits 0", cp.returncode, 0)
    T.check("unpacked: the packed dump is smaller",
            os.path.exists(packed) and os.path.getsize(packed) < 0.8 * os.path.getsize(dump),
            "%d -> %d" % (os.path.getsize(dump),
                          os.path.getsize(packed) if os.path.exists(packed) else -1))
    ev_u, flags_u = events_by_thread(dump)
    ev_p, flags_p = events_by_thread(packed)
    T.check("unpacked: the recorded dump is not packed", flags_u is not None and not flags_u & 16)
    T.check("unpacked: the packed dump says packed", flags_p is not None and flags_p & 16,
            "flags %r" % flags_p)
    T.eq("unpacked: the same threads", sorted(ev_p), sorted(ev_u))
    T.check("unpacked: every thread's events the same, in order (independent decoder)",
            all(ev_p.get(t) == ev_u[t] for t in ev_u),
            "%r" % [(t, len(ev_u[t]), len(ev_p.get(t, []))) for t in ev_u])
    same_analyses("unpacked", dump, packed)
    cp, doc = check.report(packed)
    sites = rel.site_facts(out)
    T.check("unpacked: the program counted its sites", len(sites) >= 5, repr(sites))
    if doc is not None:
        for name, (n, nbytes) in sorted(sites.items()):
            T.eq("unpacked, packed dump: allocations at %s as the program counted" % name,
                 rel.site_sum(doc, name, "allocations"), n)
            T.eq("unpacked, packed dump: bytes at %s as the program counted" % name,
                 rel.site_sum(doc, name, "allocated_bytes"), nbytes)


def case_packed():
    d = fresh_dir("packed")
    dump, _ = record(d, "k.htr", "1")
    again = os.path.join(d, "k2.htr")
    cp = pack(dump, "-o", again, "--level", "3")
    T.eq("packed: pack exits 0", cp.returncode, 0)
    ev_a, _ = events_by_thread(dump)
    ev_b, flags = events_by_thread(again)
    T.check("packed: says packed", flags is not None and flags & 16)
    T.check("packed: every thread's events the same", ev_a == ev_b)
    T.check("packed: not larger", os.path.getsize(again) <= os.path.getsize(dump),
            "%d -> %d" % (os.path.getsize(dump), os.path.getsize(again)))


def case_in_place():
    d = fresh_dir("in-place")
    dump, _ = record(d, "i.htr", "0")
    before, _ = events_by_thread(dump)
    size = os.path.getsize(dump)
    cp = pack(dump)
    T.eq("in place: pack exits 0", cp.returncode, 0)
    after, flags = events_by_thread(dump)
    T.check("in place: the dump is now packed and smaller",
            flags is not None and flags & 16 and os.path.getsize(dump) < size)
    T.check("in place: the same events", before == after)
    T.eq("in place: no file left behind", sorted(os.listdir(d)), ["i.htr"])


def case_several():
    """A process tree's dumps in one command: each packed in place."""
    d = fresh_dir("several")
    a, _ = record(d, "a.htr", "0")
    b, _ = record(d, "b.htr", "0")
    before = [events_by_thread(x)[0] for x in (a, b)]
    cp = pack(a, b)
    T.eq("several: pack exits 0", cp.returncode, 0)
    after = [events_by_thread(x) for x in (a, b)]
    T.check("several: both packed, the same events",
            all(f is not None and f & 16 and ev == was
                for (ev, f), was in zip(after, before)))
    cp = pack(a, b, "-o", os.path.join(d, "x.htr"))
    T.eq("several: -o with two dumps is a usage error", cp.returncode, 2)


def case_record_after():
    """heaptrail record --pack=after: the run at full speed, its dump packed once it ended."""
    d = fresh_dir("record-after")
    dump = os.path.join(d, "r.htr")
    argv = [churn(), "2", "2000"]
    plain = check.run(argv, cwd=d)
    cp = check.run([check.HEAPTRAIL, "record", "-o", dump, "--pack=after", "--"] + argv, cwd=d)
    T.eq("record --pack=after: the command's exit status", cp.returncode, plain.returncode)
    T.check("record --pack=after: the command's own output", cp.stdout == plain.stdout)
    T.check("record --pack=after: says the dump was written and packed",
            "dump written to 'r.htr', packed" in check.text(cp.stderr), check.text(cp.stderr))
    flags, modes = htrdump.chunk_modes(dump)
    T.check("record --pack=after: the dump is packed",
            flags is not None and flags & 16 and modes and all(m == 1 for m in modes),
            "flags %r, modes %r" % (flags, modes[:5]))
    _, doc = check.report(dump)
    sites = rel.site_facts(check.text(plain.stdout))
    if doc is not None:
        for name, (n, nbytes) in sorted(sites.items()):
            T.eq("record --pack=after: allocations at %s as the program counted" % name,
                 rel.site_sum(doc, name, "allocations"), n)


def case_live():
    """A dump whose process still writes it: not replaced in place; a copy warns."""
    d = fresh_dir("live")
    dump = os.path.join(d, "live.htr")
    p = subprocess.Popen([churn(), "2", "-s", "3", "-p", "2000"], cwd=d,
                         env=rel.shim_env(dump), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
                not os.path.exists(dump) or os.path.getsize(dump) < 4096):
            time.sleep(0.05)
        cp = pack(dump)
        T.eq("live: pack in place exits 2", cp.returncode, 2)
        lines = check.text(cp.stderr).strip().splitlines()
        T.check("live: one line saying a process still writes it",
                len(lines) == 1 and "still writing" in lines[0], repr(lines))
        copy = os.path.join(d, "copy.htr")
        cp = pack(dump, "-o", copy)
        T.eq("live: a copy with -o exits 0", cp.returncode, 0)
        T.check("live: ... with a warning that it is still being written",
                "still being written" in check.text(cp.stderr), check.text(cp.stderr))
    finally:
        T.eq("live: the program ends as it would", p.wait(timeout=60), 0)
    end, _ = (lambda r: (r[1]["totals"].get("end") if r[1] else None, None))(check.report(dump))
    T.eq("live: the dump, left alone, ends with the program's exit", end,
         {"how": "exit", "status": 0})


def case_link_and_mode():
    """In place through a symbolic link, on a dump only its owner may read."""
    d = fresh_dir("link")
    dump, _ = record(d, "real.htr", "0")
    os.chmod(dump, 0o600)
    link = os.path.join(d, "link.htr")
    os.symlink("real.htr", link)
    before, _ = events_by_thread(dump)
    cp = pack(link)
    T.eq("link: pack exits 0", cp.returncode, 0)
    T.check("link: the link is still a link", os.path.islink(link))
    after, flags = events_by_thread(dump)
    T.check("link: the file it names is packed, with the same events",
            flags is not None and flags & 16 and after == before)
    T.eq("link: the packed dump keeps the dump's mode", oct(os.stat(dump).st_mode & 0o777),
         oct(0o600))


def case_cut_short():
    d = fresh_dir("cut")
    dump, _ = record(d, "c.htr", "0")
    with open(dump, "rb") as f:
        data = f.read()
    cut = os.path.join(d, "cut.htr")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    packed = os.path.join(d, "cutp.htr")
    cp = pack(cut, "-o", packed)
    T.eq("cut short: pack exits 0", cp.returncode, 0)
    lines = [l for l in check.text(cp.stderr).splitlines() if "warning" in l]
    T.check("cut short: one warning line, saying what was packed",
            len(lines) == 1 and "packed what came before" in lines[0], repr(lines))
    ca, da = check.report(cut)
    cb, db = check.report(packed)
    T.check("cut short: the packed dump reads", cb.returncode == 0 and db is not None)
    if da is not None and db is not None:
        for k in ("allocations", "frees", "allocated_bytes"):
            T.eq("cut short: %s as the reader read the cut dump" % k,
                 db["totals"].get(k), da["totals"].get(k))


def case_bad_input():
    d = fresh_dir("bad")
    junk = os.path.join(d, "junk.htr")
    with open(junk, "wb") as f:
        f.write(b"this is not a dump, only text\n" * 10)
    empty = os.path.join(d, "empty.htr")
    open(empty, "wb").close()
    good, _ = record(d, "g.htr", "0")
    for label, args in (("not a dump", [junk, "-o", os.path.join(d, "o1.htr")]),
                        ("an empty file", [empty, "-o", os.path.join(d, "o2.htr")]),
                        ("a missing file", [os.path.join(d, "none.htr")]),
                        ("a bad --level", [good, "--level", "40"]),
                        ("no dump", []),
                        ("an unwritable output", [good, "-o", os.path.join(d, "no", "x.htr")])):
        cp = pack(*args)
        T.eq("bad input, %s: exit 2" % label, cp.returncode, 2)
        lines = check.text(cp.stderr).strip().splitlines()
        T.check("bad input, %s: a heaptrail line first" % label,
                lines and lines[0].startswith("heaptrail: "), repr(lines[:3]))
    left = sorted(f for f in os.listdir(d) if f not in ("junk.htr", "empty.htr", "g.htr"))
    T.eq("bad input: no output or temporary file left", left, [])


def main():
    for p in (check.HEAPTRAIL, check.SHIM):
        if not os.path.exists(p):
            T.skip("pack", "build first (make)")
            T.finish()
            return
    cases = [("unpacked dump", case_unpacked), ("packed dump", case_packed),
             ("in place", case_in_place), ("several dumps", case_several),
             ("record --pack=after", case_record_after),
             ("live dump", case_live),
             ("link and mode", case_link_and_mode), ("cut short", case_cut_short),
             ("bad input", case_bad_input)]
    try:
        rel.run_cases(T, cases, "PACK_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
