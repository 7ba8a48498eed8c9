#!/usr/bin/env python3
"""test_growth.py - end-to-end checks of memory over time (issue 3): growth, snapshots, live dumps.

Ground truth comes from the targets themselves (tests/lib/truth.h):
growth_linear measures the rate at which its growing site adds bytes, and
growth_phases writes its live bytes per site at each marker and what it
allocated between two markers.  Checked:

- 'growth' ranks the linearly growing site first, with a slope in bytes/s
  and per 1000 allocations within 10% of the program's own, and classifies
  the capped cache as bounded and the churning site as transient (never
  growing) - also when the program frees everything before it exits;
- temporaries per site, by lifetime and by allocations in between;
- 'snapshot --at MARKER' (and 'report --at') equals the program's figures
  at that marker; '--between' equals what it allocated in the window and
  still held; 'peak', 'NAME#2' and 'signal' (kill -USR2) resolve;
- a dump read while its process runs gives the figures up to then, and
  'growth --follow' ends by itself once the process is gone.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402

T = check.Suite("growth")
WORK = tempfile.mkdtemp(prefix="heaptrail-growth-")
TOLERANCE = 0.10
GROW = ("grow_one", "growth_linear.c")
CACHE = ("cache_insert", "growth_linear.c")
CHURN = ("churn_once", "growth_linear.c")
TABLE = ("make_table", "growth_linear.c")


target = check.built_target


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def run_target(name, env=None):
    """Runs a target under the shim; returns (dump, truth lines)."""
    exe = target(name)
    d = fresh_dir(name + "-" + str(len(os.listdir(WORK))))
    dump, lines = check.run_with_truth(T, exe, d, env=env, how=check.preload)
    T.check("truth is valid", all(t.get("valid", True) for t in lines))
    return dump, lines


def analyze(verb, dump, *args):
    """heaptrail VERB --json ARGS DUMP, which must succeed."""
    cp, doc = check.analyze(verb, dump, *args)
    if cp.returncode != 0 or doc is None:
        raise AssertionError("%s %s: exit %d: %s" % (verb, " ".join(args), cp.returncode,
                                                      check.first_line(cp.stderr)))
    return doc


def one_site(sites, where, line=None):
    """The site whose top frame is (function, file) [and line]; None if absent."""
    fn, file = where
    m = [s for s in sites if check.function_matches(s.get("function"), fn) and
         check.base(s.get("file")) == file and (line is None or s.get("line") == line)]
    return m[0] if len(m) == 1 else None


def within(name, got, want):
    if got is None:
        T.check(name, False, "nothing to compare, want %.0f" % want)
        return
    ok = want and abs(got - want) <= TOLERANCE * abs(want)
    T.check(name, ok, "got %.0f, want %.0f (+-%d%%)" % (got, want, TOLERANCE * 100))


# --- growth ------------------------------------------------------------------

def truth_site(truth, fn):
    m = [s for s in truth["sites"] if s["function"] == fn]
    return m[0] if m else None


def check_growth(doc, truth, teardown, grown=None):
    """grown: the same dump's growth up to the program's "grown" marker."""
    facts = truth["facts"]
    sites = doc["sites"]
    T.check("sites are ranked (growing, bounded, transient)",
            [s["class"] for s in sites] == sorted(
                (s["class"] for s in sites),
                key=("growing", "bounded", "transient").index),
            [s["class"] for s in sites])
    T.check("every site carries its top frame and stack",
            all("function" in s and "stack" in s and "r2" in s for s in sites))
    grow = one_site(sites, GROW)
    if grow is None:
        raise AssertionError("no single grow_one site in %r" %
                             [(s.get("function"), s.get("line")) for s in sites])
    T.eq("growing site ranked first", sites[0] is grow, True)
    T.eq("growing site class", grow["class"], "growing")
    T.eq("growing site line", grow["line"], truth_site(truth, "grow_one")["line"])
    # The program timed its growth from its first node to its last; the
    # whole run's fit also spans start-up and exit, which a loaded machine
    # stretches: compare the fit over the growth itself.
    g_grow = one_site(grown["sites"], GROW) if grown else grow
    within("bytes per second within 10% of the program's (up to its marker 'grown')",
           g_grow["growth_bytes_per_second"] if g_grow else None,
           facts["grow_bytes_per_second"])
    within("bytes per 1000 allocations within 10% of the program's",
           grow["growth_bytes_per_1000_allocations"],
           facts["grow_bytes_per_1000_allocations"])
    T.check("steady fit (R^2 >= 0.9)", grow["r2"] >= 0.9, "r2 %.3f" % grow["r2"])
    T.eq("growing site allocations", grow["allocations"], facts["rounds"])
    T.eq("growing site allocations in the window", grow["window_allocations"], facts["rounds"])
    if not teardown:
        T.eq("growing site leaked_bytes (as in report)", grow["leaked_bytes"],
             truth_site(truth, "grow_one")["leaked_bytes"])
    T.eq("only one site grows", doc["counts"]["growing"], 1)

    cache = one_site(sites, CACHE)
    T.check("cache site listed", cache is not None)
    if cache:
        T.eq("capped cache is bounded", cache["class"], "bounded")
        if not teardown:
            T.eq("cache live bytes at the end", cache["live_bytes"],
                 truth_site(truth, "cache_insert")["leaked_bytes"])
    table = one_site(sites, TABLE)
    T.check("start-up table is not growing", table is not None and table["class"] != "growing")
    if table and not teardown:
        T.eq("start-up table is bounded", table["class"], "bounded")
    churn = one_site(sites, CHURN)
    T.check("churn site listed", churn is not None)
    if churn:
        T.check("churning site is not growing", churn["class"] != "growing", churn["class"])
        T.eq("churning site is transient", churn["class"], "transient")
        n = truth_site(truth, "churn_once")["allocations"]
        T.eq("churn allocations", churn["allocations"], n)
        # Each is freed right after it was made: temporary by both measures.
        T.eq("churn temporaries by time", churn["temporary_by_time"], n)
        T.eq("churn temporaries by allocations", churn["temporary_by_allocations"], n)
    if not teardown:
        T.eq("growing site has no temporaries", grow["temporary_by_time"], 0)
        if cache:
            # 300 entries of 22 allocations each lie between insert and evict
            T.eq("cache entries are not temporary (allocations)",
                 cache["temporary_by_allocations"], 0)


def test_linear():
    for teardown in (False, True):
        with T.case("growth_linear%s" % (" (frees all before exit)" if teardown else "")):
            dump, lines = run_target("growth_linear",
                                     {"GROWTH_TEARDOWN": "1" if teardown else "0"})
            truth = lines[-1]
            doc = analyze("growth", dump, "--top", "0")
            T.eq("dump is complete (not live)", doc["live"], False)
            check_growth(doc, truth, teardown,
                         analyze("growth", dump, "--top", "0", "--to", "grown"))
            # the text form ranks the same way and names the classes
            cp = check.run([check.HEAPTRAIL, "growth", dump])
            out = check.text(cp.stdout)
            T.eq("text exits 0", cp.returncode, 0)
            T.check("text lists the growing site first",
                    out.find("grow_one") >= 0 and
                    out.find("grow_one") < min(i for i in (out.find("cache_insert"),
                                                           out.find("churn_once")) if i >= 0),
                    out[:400])
            if not teardown:
                # --top limits the list, ranked as before
                doc2 = analyze("growth", dump, "--top", "1")
                T.eq("--top 1 keeps the first site", len(doc2["sites"]), 1)
                T.eq("--top 1 is the growing site", doc2["sites"][0]["function"],
                     doc["sites"][0]["function"])
                # temporaries by allocations in between: a window of 0
                doc3 = analyze("growth", dump, "--top", "0", "--temporary-allocs", "0",
                               "--temporary-ms", "0")
                churn = one_site(doc3["sites"], CHURN)
                n = truth_site(truth, "churn_once")["allocations"]
                T.eq("churn temporaries with 0 allocations in between",
                     churn["temporary_by_allocations"], n)


# --- snapshots ------------------------------------------------------------

def program_sites(doc):
    """(function, line) -> (live_bytes, live_blocks) of the program's own sites."""
    out = {}
    for s in doc["sites"]:
        if check.base(s.get("file")) != "growth_phases.c":
            continue
        k = check.location(s)
        b, n = out.get(k, (0, 0))
        out[k] = (b + s["live_bytes"], n + s["live_blocks"])
    return out


def compare_at(label, doc, truth):
    got = program_sites(doc)
    for t in truth["sites"]:
        k = (t["function"], t["line"])
        T.eq("%s: %s:%d live bytes" % (label, t["function"], t["line"]),
             got.get(k, (0, 0))[0], t["leaked_bytes"])
        T.eq("%s: %s:%d live blocks" % (label, t["function"], t["line"]),
             got.get(k, (0, 0))[1], t["leaked_blocks"])
    if truth["exact_totals"]:
        T.eq(label + ": live heap", doc["totals"]["live_bytes"], truth["leaked_bytes"])
        T.eq(label + ": live blocks", doc["totals"]["live_blocks"], truth["leaked_blocks"])
        T.eq(label + ": allocations so far", doc["totals"]["allocations"], truth["allocations"])


def compare_between(label, doc, truth):
    facts = truth["facts"]
    got = {}
    for s in doc["sites"]:
        if check.base(s.get("file")) == "growth_phases.c":
            fn = check.norm_function(s.get("function"))
            b, n = got.get(fn, (0, 0))
            got[fn] = (b + s["live_bytes"], n + s["live_blocks"])
    for site in ("a", "b", "c"):
        fn = "alloc_" + site
        T.eq("%s: %s bytes allocated in the window and still live" % (label, fn),
             got.get(fn, (0, 0))[0], facts["between_%s_bytes" % site])
        T.eq("%s: %s blocks" % (label, fn),
             got.get(fn, (0, 0))[1], facts["between_%s_blocks" % site])
    if truth["exact_totals"]:
        T.eq(label + ": total still live",
             doc["totals"]["live_bytes"],
             sum(facts["between_%s_bytes" % x] for x in "abc"))


def test_snapshots():
    with T.case("growth_phases snapshots"):
        dump, lines = run_target("growth_phases")
        T.eq("three truth lines", len(lines), 3)
        for i, mark in enumerate(("phase1", "phase2", "phase3")):
            compare_at("--at " + mark, analyze("snapshot", dump, "--at", mark, "--top", "0"),
                       lines[i])
        compare_at("--at tick#2", analyze("snapshot", dump, "--at", "tick#2", "--top", "0"),
                   lines[1])
        compare_at("report --at phase2",
                   analyze("report", dump, "--at", "phase2", "--top", "0"), lines[1])
        compare_between("--between phase1 phase2",
                        analyze("snapshot", dump, "--between", "phase1", "phase2",
                                "--top", "0"), lines[1])
        compare_between("report --between",
                        analyze("report", dump, "--top", "0", "--between", "phase1",
                                "phase2"), lines[1])
        last = lines[-1]
        if last["peak_exact"] and last["exact_totals"]:
            doc = analyze("snapshot", dump, "--at", "peak")
            T.eq("--at peak: live heap is the program's peak",
                 doc["totals"]["live_bytes"], last["peak_live_bytes"])
        # a marker time as seconds gives the same figures as the marker
        at = analyze("snapshot", dump, "--at", "phase1")["at"]["time_seconds"]
        doc = analyze("snapshot", dump, "--at", "%.9f" % at, "--top", "0")
        compare_at("--at <phase1 in seconds>", doc, lines[0])
        # errors: unknown marker, missing time, empty window
        cp = check.run([check.HEAPTRAIL, "snapshot", dump, "--at", "nosuch"])
        T.eq("unknown marker: exit 2", cp.returncode, 2)
        T.check("unknown marker: says so", "no marker 'nosuch'" in check.text(cp.stderr),
                check.first_line(cp.stderr))
        cp = check.run([check.HEAPTRAIL, "snapshot", dump])
        T.eq("no --at: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "snapshot", dump, "--between", "phase2", "phase1"])
        T.eq("reversed window: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "snapshot", dump, "--at", "tick#3"])
        T.eq("third 'tick' does not exist: exit 2", cp.returncode, 2)


# --- a live process ------------------------------------------------------

def wait_for(pred, proc, what):
    """Polls pred() until it is true; fails when proc ended first (no time limit)."""
    deadline = time.time() + check.HANG_GUARD
    while not pred():
        if proc.poll() is not None:
            raise AssertionError("the target ended before %s (exit %r)" % (what, proc.returncode))
        if time.time() > deadline:
            raise AssertionError("hung waiting for " + what)
        time.sleep(0.02)


def start_live(d):
    exe = target("growth_phases")
    dump = os.path.join(d, "live.htr")
    truth = os.path.join(d, "truth.json")
    ready = os.path.join(d, "ready")
    go = os.path.join(d, "go")
    env = check.clean_env({"LD_PRELOAD": check.SHIM, "HEAPTRAIL_OUT": dump,
                           "TRUTH_OUT": truth, "READY_FILE": ready, "GO_FILE": go,
                           "HEAPTRAIL_MARK_SIGNAL": "USR2"})
    proc = subprocess.Popen([exe], env=env, cwd=d, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, dump, truth, ready, go


def test_live():
    with T.case("a dump read while its process runs"):
        d = fresh_dir("live")
        proc, dump, truth_path, ready, go = start_live(d)
        try:
            wait_for(lambda: os.path.exists(ready), proc, "the target got ready")
            lines = check.truth_lines(truth_path)
            T.eq("two truth lines so far", len(lines), 2)
            # The marker signal: the shim writes a "signal" marker.
            os.kill(proc.pid, signal.SIGUSR2)
            # It reaches the file with the writer's next round.
            state = {}

            def marker_visible():
                cp, doc = check.analyze("snapshot", dump, "--at", "signal", "--top", "0")
                state["doc"] = doc
                return cp.returncode == 0 and doc is not None

            wait_for(marker_visible, proc, "the signal marker reached the dump")
            doc = state["doc"]
            T.eq("snapshot says the process still runs", doc["live"], True)
            compare_at("live --at signal", doc, lines[1])
            compare_at("live --at phase2", analyze("snapshot", dump, "--at", "phase2",
                                                   "--top", "0"), lines[1])
            compare_between("live --between phase1 phase2",
                            analyze("snapshot", dump, "--between", "phase1", "phase2",
                                    "--top", "0"), lines[1])
            # Up to the end of what was read: the program is idle, so the
            # live heap at the end is its live heap now.
            if lines[1]["exact_totals"]:
                end = analyze("snapshot", dump, "--at", "end", "--top", "0")
                compare_at("live --at end", end, lines[1])
            g = analyze("growth", dump, "--top", "0")
            T.eq("growth says the process still runs", g["live"], True)
            T.check("growth: nothing grows in an idle program", g["counts"]["growing"] == 0,
                    g["counts"])
            cp = check.run([check.HEAPTRAIL, "snapshot", dump, "--at", "phase3"])
            T.eq("a marker not written yet: exit 2", cp.returncode, 2)
            T.check("... and says the process still runs",
                    "still runs" in check.text(cp.stderr), check.first_line(cp.stderr))
            # --follow reports now and again until the process is gone
            follow = subprocess.Popen([check.HEAPTRAIL, "growth", "--follow", "--interval",
                                       "100ms", "--json", "--top", "0", dump],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=check.clean_env())
            first = follow.stdout.readline()
            T.check("--follow: first report while the process runs",
                    first and json.loads(first)["live"] is True, first[:200])
            open(go, "w").close()
            rest, err = follow.communicate(timeout=check.HANG_GUARD)
            T.eq("--follow ends by itself, exit 0", follow.returncode, 0)
            docs = [json.loads(x) for x in rest.splitlines() if x.strip()]
            T.check("--follow: last report after the process ended",
                    docs and docs[-1]["live"] is False,
                    "%d more reports; stderr %s" % (len(docs), check.first_line(err)))
        finally:
            if not os.path.exists(go):
                open(go, "w").close()
            proc.wait(timeout=check.HANG_GUARD)
        T.eq("target exits 0", proc.returncode, 0)
        lines = check.truth_lines(truth_path)
        compare_at("finished --at phase3", analyze("snapshot", dump, "--at", "phase3",
                                                   "--top", "0"), lines[2])
        compare_at("finished --at signal", analyze("snapshot", dump, "--at", "signal",
                                                   "--top", "0"), lines[1])
        T.eq("finished dump is not live", analyze("growth", dump)["live"], False)


def test_usage():
    with T.case("usage errors"):
        target("growth_phases")
        for argv in (["growth"], ["growth", "--top", "x", "d.htr"],
                     ["growth", "--temporary-ms", "-1", "d.htr"],
                     ["growth", "--bogus", "d.htr"], ["growth", "/nonexistent.htr"]):
            cp = check.run([check.HEAPTRAIL] + argv)
            T.eq("%s: exit 2" % " ".join(argv), cp.returncode, 2)
            T.check("%s: one 'heaptrail:' line" % " ".join(argv),
                    check.text(cp.stderr).startswith("heaptrail: "),
                    check.first_line(cp.stderr))


def main():
    test_linear()
    test_snapshots()
    test_live()
    test_usage()
    shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
