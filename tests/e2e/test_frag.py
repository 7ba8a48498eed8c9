#!/usr/bin/env python3
"""test_frag.py - end-to-end checks of 'heaptrail frag' and 'heaptrail replay' (issue 5).

Ground truth comes from the target programs: what glibc itself says
(mallinfo2, malloc_trim, /proc/self/statm) at the markers the programs set,
the bytes they freed below their long-lived blocks, the growth steps they
made, and, for their own pool allocator, where each live object lies.

  frag_pinned   pinned bytes and the sites that pin them, against mallinfo2
                and malloc_trim; the ladder against mallinfo2 and statm
  frag_realloc  exact-fit growth flagged at its sites, geometric growth not
  frag_pool     a pool annotated with heaptrail.h analysed like malloc
  frag_usable   live blocks of every C allocation function, from 1 byte to
                mapped ones (aligned too): requested and usable bytes
                against malloc_usable_size, mapped blocks against mallinfo2
  replay        the frag_pinned run replayed on glibc and other allocators
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("frag")
WORK = tempfile.mkdtemp(prefix="heaptrail-frag-")
CHILD = os.path.join(check.BUILD, "heaptrail-replay-child")

KiB = 1024
MiB = 1024 * 1024


def target(name):
    path = os.path.join(check.TARGETS, name)
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % path)
    for p in (check.HEAPTRAIL, check.SHIM):
        if not os.path.exists(p):
            raise Skip("%s is not built" % p)
    return path


def run_target(name, args=()):
    """Records NAME (samples every 20 ms); returns (dump, truth)."""
    exe = target(name)
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    out = os.path.join(d, "out.htr")
    truth_path = os.path.join(d, "truth.json")
    cp = check.record(out, [exe] + list(args), env={"TRUTH_OUT": truth_path}, cwd=d,
                      options=["--interval", "20"])
    T.eq("%s exits 0" % name, cp.returncode, 0)
    if not os.path.exists(out) or not os.path.exists(truth_path):
        raise Skip("no dump or truth: %s" % check.first_line(cp.stderr))
    return out, check.truth_lines(truth_path)[-1]


def frag(dump, *args):
    cp, doc = check.analyze("frag", dump, *args)
    T.check(" ".join(["frag --json"] + list(args)) + " exits 0 with JSON",
            cp.returncode == 0 and doc is not None,
            "exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
    if doc is None:
        raise Skip("no frag document")
    return doc


def near(name, got, want, rel, absolute):
    """got within rel * want + absolute of want."""
    tol = rel * abs(want) + absolute
    T.check("%s: %s close to %s (+-%d)" % (name, got, want, tol),
            got is not None and abs(got - want) <= tol,
            "off by %s" % (None if got is None else got - want))


def truth_site(truth, function):
    m = [s for s in truth["sites"] if s["function"] == function]
    if len(m) != 1:
        raise Skip("the truth has %d sites in %s" % (len(m), function))
    return m[0]


def doc_sites(sites, function, line):
    return check.matching_sites(sites, function, line)


def ladder_vs_glibc(label, doc, facts, prefix):
    """The ladder's sample agrees with what the program read at the marker."""
    lad = doc["ladder"]
    s = lad.get("sample")
    if not s:
        T.fail(label + ": a sample near the marker", "none")
        return
    if not s["exact"]:
        T.skip(label + ": allocator figures", "no sample without heap events near the marker")
        return
    T.eq(label + ": allocator_held_bytes = mallinfo2 arena + hblkhd",
         lad["allocator_held_bytes"], facts[prefix + "_arena"] + facts[prefix + "_hblkhd"])
    T.eq(label + ": in_use_bytes = mallinfo2 uordblks", s["in_use_bytes"],
         facts[prefix + "_uordblks"])
    T.eq(label + ": free_bytes = mallinfo2 fordblks", s["free_bytes"],
         facts[prefix + "_fordblks"])
    T.eq(label + ": top_releasable_bytes = mallinfo2 keepcost", s["top_releasable_bytes"],
         facts[prefix + "_keepcost"])
    # The shim's writer thread read statm at another instant than the
    # program; only the shim's own buffers may differ in between.
    near(label + ": rss_bytes vs statm", lad["rss_bytes"], facts[prefix + "_rss"], 0.01, 1 * MiB)


def test_pinned():
    with T.case("frag_pinned"):
        dump, truth = run_target("frag_pinned")
        f = truth["facts"]
        dense = truth_site(truth, "keep_dense")
        sparse = truth_site(truth, "keep_sparse")
        doc = frag(dump, "--at", "freed", "--top", "0")

        T.eq("live_bytes = the program's live bytes", doc["live_bytes"], f["live_bytes"])
        T.eq("mmapped_bytes = mallinfo2 hblkhd", doc["mmapped_bytes"], f["freed_hblkhd"])
        T.eq("mmapped_blocks", doc["mmapped_blocks"], 1)
        # glibc counts each in-use chunk as usable + 8; its own tcache
        # control block (under 1 KiB) is the only chunk the shim never saw.
        near("heap usable + chunk headers vs mallinfo2 uordblks",
             doc["heap_usable_bytes"] + 8 * doc["heap_live_blocks"], f["freed_uordblks"],
             0, 4 * KiB)
        # pinned: the free bytes below the top of the heap, as glibc counts them
        near("pinned_bytes vs mallinfo2 fordblks - keepcost", doc["pinned_bytes"],
             f["pinned_bytes"], 0.01, 64 * KiB)
        # ... of which what malloc_trim(0) could not return
        near("pinned_page_bytes vs what malloc_trim left", doc["pinned_page_bytes"],
             f["pinned_page_bytes"], 0.03, 512 * KiB)
        near("releasable_bytes vs what malloc_trim returned", doc["releasable_bytes"],
             f["trim_returned_bytes"], 0.03, 512 * KiB)
        T.check("heap_span_bytes >= pinned + live", doc["heap_span_bytes"] >=
                doc["pinned_bytes"] + doc["heap_live_bytes"], "%r" % doc["heap_span_bytes"])

        sites = doc["pinning_sites"]
        T.check("pinning_sites ranked by pinned_bytes",
                all(a["pinned_bytes"] >= b["pinned_bytes"] for a, b in zip(sites, sites[1:])),
                [s["pinned_bytes"] for s in sites])
        T.eq("total of pinning_sites = pinned_bytes",
             sum(s["pinned_bytes"] for s in sites), doc["pinned_bytes"])
        tops = [check.location(s) for s in sites[:2]]
        T.eq("the two pinning sites, most first", tops,
             [("keep_sparse", sparse["line"]), ("keep_dense", dense["line"])])
        for t, freed_key in ((sparse, "sparse_freed_bytes"), (dense, "dense_freed_bytes")):
            m = doc_sites(sites, t["function"], t["line"])
            if len(m) != 1:
                T.fail("pinning site %s" % t["function"], "found %d" % len(m))
                continue
            s = m[0]
            T.eq("%s live_blocks" % t["function"], s["live_blocks"], t["leaked_blocks"])
            T.eq("%s live_bytes" % t["function"], s["live_bytes"], t["leaked_bytes"])
            near("%s pinned_bytes vs the chunks freed below its blocks" % t["function"],
                 s["pinned_bytes"], f[freed_key], 0.01, 64 * KiB)
            T.check("%s site object" % t["function"],
                    all(k in s for k in ("function", "file", "line", "module", "stack")),
                    sorted(s))
        # the dense keepers sit on every page: malloc_trim returns nothing of theirs
        m = doc_sites(sites, "keep_dense", dense["line"])
        if m:
            near("keep_dense: all of it pinned page by page", m[0]["pinned_page_bytes"],
                 f["dense_freed_bytes"], 0.01, 64 * KiB)

        ladder_vs_glibc("at 'freed'", doc, f, "freed")
        lad = doc["ladder"]
        T.eq("ladder requested_bytes", lad["requested_bytes"], f["live_bytes"])
        T.check("ladder steps rise: requested <= usable <= pages <= held",
                lad["requested_bytes"] <= lad["usable_bytes"] <= lad["live_page_bytes"]
                <= lad["allocator_held_bytes"], lad)
        T.check("peak footprint: requested at the peak = the program's peak",
                doc["peak"]["requested_bytes"] == truth["peak_live_bytes"],
                "%r vs %r" % (doc["peak"]["requested_bytes"], truth["peak_live_bytes"]))
        T.check("timeline has samples", len(doc["timeline"]) > 2, len(doc["timeline"]))

        # after malloc_trim, at the last marker (the shim samples again at exit)
        doc2 = frag(dump, "--at", "trimmed")
        ladder_vs_glibc("at 'trimmed'", doc2, f, "trimmed")
        near("pinned_bytes unchanged by trimming (it only returns pages)",
             doc2["pinned_bytes"], doc["pinned_bytes"], 0, 0)

        cp = check.run([check.HEAPTRAIL, "frag", "--at", "freed", dump])
        out = check.text(cp.stdout)
        T.eq("text exits 0", cp.returncode, 0)
        T.check("text names the pinning site and what it keeps",
                "keep_sparse" in out and "keep" in out and "from being returned" in out,
                out[:300])


def test_realloc():
    with T.case("frag_realloc"):
        dump, truth = run_target("frag_realloc")
        f = truth["facts"]
        doc = frag(dump, "--at", "grown")
        pats = doc["realloc_patterns"]
        want = {"append_exact": "exact-fit", "copy_exact": "exact-fit",
                "append_doubling": "geometric", "copy_doubling": "geometric"}
        for function, pattern in want.items():
            t = truth_site(truth, function)
            m = doc_sites(pats, function, t["line"])
            if pattern == "geometric" and not m:
                T.ok("%s not flagged" % function)
                continue
            if len(m) != 1:
                T.fail("%s in realloc_patterns" % function, "found %d" % len(m))
                continue
            T.eq("%s pattern" % function, m[0]["pattern"], pattern)
            T.eq("%s growth steps" % function, m[0]["grows"], f[function + "_grows"])
            T.check("%s has a size-class histogram" % function,
                    sum(c["allocations"] for c in m[0]["size_classes"]) > 0, m[0]["size_classes"])
        flagged = [check.location(p) for p in pats if p["pattern"] == "exact-fit"]
        T.eq("only the exact-fit sites are flagged", sorted(flagged),
             sorted((fn, truth_site(truth, fn)["line"]) for fn in ("append_exact", "copy_exact")))


def test_pool():
    with T.case("frag_pool"):
        dump, truth = run_target("frag_pool")
        f = truth["facts"]
        doc = frag(dump)
        pools = {p["id"]: p for p in doc["pools"]}
        p = pools.get(f["pool_id"])
        if p is None:
            T.fail("pool %d reported" % f["pool_id"], "pools %r" % sorted(pools))
            raise Skip("no pool")
        T.eq("pool label", p["label"], "objects")
        for key in ("live_bytes", "live_blocks", "heap_span_bytes", "pinned_bytes",
                    "pinned_page_bytes"):
            fact = "pool_" + ("span_bytes" if key == "heap_span_bytes" else key)
            T.eq("pool " + key, p[key], f[fact])
        ps = p["pinning_sites"]
        T.check("the pool's pinning site is obj_keep's",
                len(ps) == 1 and any(check.norm_function(fr.get("function")) == "obj_keep"
                                     for fr in ps[0]["stack"]),
                [(s["function"], [fr.get("function") for fr in s["stack"]]) for s in ps])
        T.check("the destroyed pool is gone at the end", f["scratch_id"] not in pools,
                sorted(pools))
        doc2 = frag(dump, "--at", "scratch")
        pools2 = {p["id"]: p for p in doc2["pools"]}
        s = pools2.get(f["scratch_id"])
        T.check("the scratch pool before its destruction",
                s is not None and s["live_bytes"] == f["scratch_live_bytes"] and s["alive"],
                s)


def test_usable():
    with T.case("frag_usable"):
        dump, truth = run_target("frag_usable")
        f = truth["facts"]
        doc = frag(dump, "--at", "held", "--top", "0")
        T.eq("live_bytes = the bytes the program asked for", doc["live_bytes"],
             f["requested_bytes"])
        T.eq("usable_bytes = the sum of malloc_usable_size", doc["usable_bytes"],
             f["usable_bytes"])
        T.eq("mmapped_blocks = mallinfo2 hblks", doc["mmapped_blocks"], f["mapped_blocks"])
        T.eq("mmapped_bytes = mallinfo2 hblkhd (aligned leads included)",
             doc["mmapped_bytes"], f["hblkhd"])


def test_replay():
    with T.case("replay"):
        dump, truth = run_target("frag_pinned", ["0"])
        if not os.access(CHILD, os.X_OK):
            raise Skip("%s is not built" % CHILD)
        cp, doc = check.analyze("replay", dump)
        T.check("replay --json exits 0", cp.returncode == 0 and doc is not None,
                "exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
        if doc is None:
            raise Skip("no replay document")
        T.eq("peak_live_bytes = the program's peak", doc["peak_live_bytes"],
             truth["peak_live_bytes"])
        T.eq("final_live_bytes = the program's leaked bytes", doc["final_live_bytes"],
             truth["leaked_bytes"])
        allocs = doc["allocators"]
        T.eq("glibc first", allocs[0]["name"] if allocs else None, "glibc")
        ok = [a for a in allocs if a["ok"]]
        T.check("at least two allocators replayed", len(ok) >= 2,
                [(a["name"], a["error"]) for a in allocs])
        for a in ok:
            # every block's pages are written: the peak holds the live peak
            T.check("%s: peak heap holds the live peak" % a["name"],
                    a["peak_heap_bytes"] >= 0.95 * truth["peak_live_bytes"],
                    "%d < %d" % (a["peak_heap_bytes"], truth["peak_live_bytes"]))
            T.check("%s: final RSS <= peak RSS" % a["name"],
                    a["final_rss_bytes"] <= a["peak_rss_bytes"], a)
            T.eq("%s: every operation done" % a["name"], a["operations"], doc["operations"])
        g = allocs[0] if allocs and allocs[0]["ok"] else None
        if g:
            # same sequence, same allocator: glibc keeps what the program kept
            near("glibc: final heap vs the program's pinned bytes", g["final_heap_bytes"],
                 truth["facts"]["pinned_bytes"] + truth["leaked_bytes"], 0.05, 2 * MiB)

        cp = check.run([check.HEAPTRAIL, "replay", "--allocator", "jemalloc", dump])
        out = check.text(cp.stdout)
        T.eq("replay --allocator jemalloc exits 0", cp.returncode, 0)
        rows = [ln.split()[0] for ln in out.splitlines() if ln.startswith(("glibc", "jemalloc"))]
        T.eq("text: glibc and jemalloc side by side", rows, ["glibc", "jemalloc"])

        cp = check.run([check.HEAPTRAIL, "replay", "--allocator", "no-such-alloc", dump])
        T.eq("unknown allocator exits 2", cp.returncode, 2)
        T.check("unknown allocator: one line naming it",
                check.first_line(cp.stderr).startswith("heaptrail: ") and
                "no-such-alloc" in check.text(cp.stderr), check.text(cp.stderr))


def test_errors():
    with T.case("errors"):
        target("frag_pinned")
        missing = os.path.join(WORK, "missing.htr")
        cp = check.run([check.HEAPTRAIL, "frag", missing])
        T.eq("frag on a missing dump exits 2", cp.returncode, 2)
        T.check("says it cannot read it", "cannot read" in check.first_line(cp.stderr),
                check.first_line(cp.stderr))
        dump = os.path.join(WORK, "frag_pinned", "out.htr")
        if os.path.exists(dump):
            cp = check.run([check.HEAPTRAIL, "frag", "--at", "no-such-marker", dump])
            T.eq("frag --at an unknown marker exits 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "frag"])
        T.eq("frag without a dump exits 2", cp.returncode, 2)


def main():
    try:
        test_pinned()
        test_realloc()
        test_pool()
        test_usable()
        test_replay()
        test_errors()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
