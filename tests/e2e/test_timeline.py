#!/usr/bin/env python3
"""test_timeline.py - end-to-end checks of 'heaptrail timeline' (issue 3).

The targets know their own live bytes (tests/lib/truth.h): growth_linear
its live heap and each site's live bytes at the end and its peak,
growth_phases its figures at each marker.  Checked, for --json, --csv,
--svg and the terminal chart: the last moment's live heap and the drawn
sites' live bytes equal the program's, the growing site's curve rises, the
markers appear in order and --from/--to windows start and end on them,
RSS and allocator samples are present; a live dump is read up to the last
complete frame and --follow redraws until the process ends.
"""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402

T = check.Suite("timeline")
WORK = tempfile.mkdtemp(prefix="heaptrail-timeline-")
SVG_NS = "{http://www.w3.org/2000/svg}"


target = check.built_target


def run_target(name, env=None):
    return check.run_with_truth(T, target(name), check.fresh_dir(WORK, name),
                                env=env, how=check.preload)


def timeline(dump, *args):
    cp = check.run([check.HEAPTRAIL, "timeline"] + list(args) + [dump])
    if cp.returncode != 0:
        raise AssertionError("timeline %s: exit %d: %s" % (" ".join(args), cp.returncode,
                                                           check.first_line(cp.stderr)))
    return check.text(cp.stdout)


def site_named(sites, fn):
    m = [s for s in sites if check.function_matches(s.get("function"), fn)]
    return m[0] if len(m) == 1 else None


def test_json_linear(dump, truth):
    with T.case("--json (growth_linear)"):
        doc = json.loads(timeline(dump, "--json", "--points", "50", "--top", "4"))
        pts = doc["points"]
        T.eq("50 points", len(pts), 50)
        T.check("points in time order", all(a["time_seconds"] < b["time_seconds"]
                                            for a, b in zip(pts, pts[1:])))
        T.eq("last point is the end", pts[-1]["time_seconds"], doc["duration_seconds"])
        T.eq("dump ended by exit", doc["end"], "exit")
        if truth["exact_totals"]:
            T.eq("live heap at the end", pts[-1]["heap_live_bytes"], truth["leaked_bytes"])
            T.eq("peak live heap", doc["peak_live_bytes"], truth["peak_live_bytes"])
            T.eq("allocations at the end", pts[-1]["allocations"], truth["allocations"])
        T.check("highest live heap of each moment >= its live heap",
                all(p["heap_max_bytes"] >= p["heap_live_bytes"] for p in pts))
        T.check("RSS sampled (last point)", (pts[-1]["rss_bytes"] or 0) > 0, pts[-1])
        T.check("allocator bytes sampled (last point)",
                (pts[-1]["allocator_bytes"] or 0) > 0, pts[-1])
        T.check("RSS at the end >= live heap", pts[-1]["rss_bytes"] >= pts[-1]["heap_live_bytes"])
        grow = site_named(doc["sites"], "grow_one")
        T.check("the growing site is drawn", grow is not None,
                [s.get("function") for s in doc["sites"]])
        if grow:
            T.eq("drawn first (largest)", doc["sites"][0] is grow, True)
            series = grow["live_bytes"]
            T.eq("one value per point", len(series), len(pts))
            T.check("its curve never falls", all(a <= b for a, b in zip(series, series[1:])))
            want = [s for s in truth["sites"] if s["function"] == "grow_one"][0]
            T.eq("its live bytes at the end", series[-1], want["leaked_bytes"])
            T.eq("its highest live bytes", grow["max_live_bytes"], want["leaked_bytes"])
            # Halfway through its growth it holds about half (it grows
            # linearly, one node a round).  Halfway between the first point
            # with a node and the first with all of them, not halfway
            # through the run: on a loaded machine start-up and exit take
            # longer, and the run's middle moved towards the start.
            first = next(i for i, v in enumerate(series) if v > 0)
            full = series.index(series[-1])
            mid = series[(first + full) // 2]
            T.check("about half halfway through its growth",
                    first < full and 0.35 * series[-1] <= mid <= 0.65 * series[-1],
                    "%d of %d (points %d..%d)" % (mid, series[-1], first, full))
        cache = site_named(doc["sites"], "cache_insert")
        if cache:
            want = [s for s in truth["sites"] if s["function"] == "cache_insert"][0]
            T.eq("cache at the end", cache["live_bytes"][-1], want["leaked_bytes"])
            T.eq("cache never exceeds its cap", max(cache["live_bytes"]), want["leaked_bytes"])


def test_csv_linear(dump, truth):
    with T.case("--csv (growth_linear)"):
        rows = list(csv.reader(io.StringIO(timeline(dump, "--csv", "--points", "40"))))
        head, body = rows[0], rows[1:]
        T.eq("40 rows", len(body), 40)
        for col in ("time_seconds", "heap_live_bytes", "rss_bytes", "allocator_bytes",
                    "allocations", "marker"):
            T.check("column " + col, col in head, head)
        T.check("a column per site, named by its top frame",
                any("grow_one" in h for h in head), head)
        T.check("every row as wide as the header", all(len(r) == len(head) for r in body))
        if truth["exact_totals"]:
            T.eq("live heap at the end", int(body[-1][head.index("heap_live_bytes")]),
                 truth["leaked_bytes"])
        col = [i for i, h in enumerate(head) if "grow_one" in h][0]
        want = [s for s in truth["sites"] if s["function"] == "grow_one"][0]
        T.eq("growing site at the end", int(body[-1][col]), want["leaked_bytes"])


def test_svg_linear(dump, truth):
    with T.case("--svg (growth_linear)"):
        out = os.path.join(WORK, "chart.svg")
        timeline(dump, "--svg", out)
        T.check("file written", os.path.exists(out))
        root = ET.parse(out).getroot()
        T.eq("an <svg> document", root.tag, SVG_NS + "svg")
        lines = root.findall(".//" + SVG_NS + "polyline")
        T.check("curves: RSS, allocator, heap and sites (>= 4)", len(lines) >= 4, len(lines))
        texts = " ".join(t.text or "" for t in root.iter(SVG_NS + "text"))
        T.check("legend names the growing site", "grow_one" in texts, texts[:300])
        T.check("legend names the live heap", "live heap" in texts)
        T.check("no temporary file left", not os.path.exists(out + ".tmp"))


def test_text_linear(dump):
    with T.case("terminal chart (growth_linear)"):
        out = timeline(dump, "--width", "60")
        for what in ("live heap", "RSS", "allocator", "grow_one", "cache_insert"):
            T.check("mentions " + what, what in out)
        out = timeline(dump, "--ascii", "--width", "40", "--height", "5")
        T.check("--ascii is plain ASCII", all(ord(c) < 128 for c in out))
        T.check("--ascii still draws the growing site", "grow_one" in out)


def test_markers():
    with T.case("markers and windows (growth_phases)"):
        dump, lines = run_target("growth_phases")
        doc = json.loads(timeline(dump, "--json", "--points", "20"))
        labels = [m["label"] for m in doc["markers"]]
        T.eq("markers in order", labels, ["tick", "phase1", "phase2", "tick", "phase3"])
        times = [m["time_seconds"] for m in doc["markers"]]
        T.check("marker times ascend", all(a <= b for a, b in zip(times, times[1:])))
        win = json.loads(timeline(dump, "--json", "--points", "10", "--from", "phase1",
                                  "--to", "phase2"))
        T.eq("--from phase1 starts at the marker", win["from_seconds"], times[1])
        T.eq("--to phase2 ends at the marker", win["to_seconds"], times[2])
        T.eq("last point at phase2", win["points"][-1]["time_seconds"], times[2])
        if lines[1]["exact_totals"]:
            T.eq("live heap at phase2", win["points"][-1]["heap_live_bytes"],
                 lines[1]["leaked_bytes"])
        cp = check.run([check.HEAPTRAIL, "timeline", "--from", "nosuch", dump])
        T.eq("unknown marker: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "timeline", "--from", "phase2", "--to", "phase1",
                        dump])
        T.eq("empty window: exit 2", cp.returncode, 2)


def test_follow():
    with T.case("--follow on a live dump"):
        exe = target("growth_phases")
        d = os.path.join(WORK, "follow")
        os.makedirs(d)
        dump, truth = os.path.join(d, "live.htr"), os.path.join(d, "truth.json")
        ready, go = os.path.join(d, "ready"), os.path.join(d, "go")
        env = check.clean_env({"LD_PRELOAD": check.SHIM, "HEAPTRAIL_OUT": dump,
                               "TRUTH_OUT": truth, "READY_FILE": ready, "GO_FILE": go})
        proc = subprocess.Popen([exe], env=env, cwd=d, stdin=subprocess.DEVNULL)
        try:
            deadline = time.time() + check.HANG_GUARD
            while not os.path.exists(ready):
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError("target never got ready")
                time.sleep(0.02)
            lines = check.truth_lines(truth)

            # The program is idle: wait until what it did is in the file.
            def phase2_in_file():
                cp = check.run([check.HEAPTRAIL, "snapshot", dump, "--at", "tick#2"])
                return cp.returncode == 0

            while not phase2_in_file():
                if time.time() > deadline:
                    raise AssertionError("phase2 never reached the dump")
                time.sleep(0.05)
            doc = json.loads(timeline(dump, "--json", "--points", "10"))
            T.eq("read while running: live", doc["live"], True)
            T.eq("read while running: no end yet", doc["end"], None)
            if lines[1]["exact_totals"]:
                T.eq("read while running: live heap at the end of what was read",
                     doc["points"][-1]["heap_live_bytes"], lines[1]["leaked_bytes"])
            fol = subprocess.Popen([check.HEAPTRAIL, "timeline", "--follow", "--interval",
                                    "100ms", "--json", "--points", "10", dump],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=check.clean_env())
            first = json.loads(fol.stdout.readline())
            T.eq("--follow: first chart while running", first["live"], True)
            open(go, "w").close()
            rest, err = fol.communicate(timeout=check.HANG_GUARD)
            T.eq("--follow stops when the process ends, exit 0", fol.returncode, 0)
            docs = [json.loads(x) for x in rest.splitlines() if x.strip()]
            T.check("--follow: a last chart of the finished dump",
                    docs and docs[-1]["live"] is False and docs[-1]["end"] == "exit",
                    check.first_line(err))
            if docs:
                T.check("--follow: the last chart has phase3",
                        "phase3" in [m["label"] for m in docs[-1]["markers"]])
        finally:
            if not os.path.exists(go):
                open(go, "w").close()
            proc.wait(timeout=check.HANG_GUARD)


def test_follow_before_start():
    with T.case("--follow of a dump not written yet"):
        exe = target("growth_phases")
        d = os.path.join(WORK, "follow-early")
        os.makedirs(d)
        dump = os.path.join(d, "early.htr")
        fol = subprocess.Popen([check.HEAPTRAIL, "timeline", "--follow", "--interval",
                                "50ms", "--json", "--points", "5", dump],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=check.clean_env())
        cp = check.preload(dump, [exe], env={"TRUTH_OUT": os.path.join(d, "t.json")}, cwd=d)
        T.eq("target exits 0", cp.returncode, 0)
        out, err = fol.communicate(timeout=check.HANG_GUARD)
        T.eq("--follow waited for the dump and ended, exit 0", fol.returncode, 0)
        docs = [json.loads(x) for x in check.text(out).splitlines() if x.strip()]
        T.check("the last chart is of the finished dump",
                docs and docs[-1]["live"] is False and docs[-1]["end"] == "exit",
                check.first_line(err))


def main():
    try:
        with T.case("growth_linear"):
            dump, lines = run_target("growth_linear")
            test_json_linear(dump, lines[-1])
            test_csv_linear(dump, lines[-1])
            test_svg_linear(dump, lines[-1])
            test_text_linear(dump)
        test_markers()
        test_follow()
        test_follow_before_start()
        with T.case("usage errors"):
            target("growth_phases")
            for argv in (["timeline"], ["timeline", "--top", "1000", "d.htr"],
                         ["timeline", "--points", "1", "d.htr"], ["timeline", "/nonexistent"]):
                cp = check.run([check.HEAPTRAIL] + argv)
                T.eq("%s: exit 2" % " ".join(argv), cp.returncode, 2)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
