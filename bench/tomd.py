#!/usr/bin/env python3
"""tomd.py - prints a results.json of bench/run.py as Markdown tables.

usage: bench/tomd.py [build/bench/results.json]

For docs/performance.md: the same figures as the runner's table, in a form
that can be pasted under the command that produced them.
"""
import json
import sys


def fmt(v, f, empty=""):
    return f % v if v is not None else empty


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/bench/results.json"
    with open(path) as f:
        r = json.load(f)
    m = r["machine"]
    v = r.get("versions", {})
    print("Run of %s, %s mode, %d counted runs per configuration after one warm-up, "
          "%.0f s in all." % (r["date"], "QUICK" if r["quick"] else "full", r["runs"],
                              r.get("elapsed_s", 0)))
    print()
    print("- machine: %d cores, %s, %d MB RAM, Linux %s; load average %.2f at the start, "
          "%.2f at the end" % (m["nproc"], m["cpu"], m["mem_mb"], m["kernel"],
                               m["loadavg_start"], m["loadavg_end"]))
    print("- heaptrail %s, %s, sqlite3 %s, %s, %s" % (
        v.get("commit"), v.get("heaptrack"), (v.get("sqlite3") or "").split(" ")[0],
        v.get("python3"), v.get("cc")))
    print()
    print("| workload | config | median s | min-max s | x plain | cpu x plain | peak RSS MB "
          "| shim RSS MB | dump MB | events | bytes/event |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for wl, w in r["workloads"].items():
        first = True
        for cname, st in w["configs"].items():
            name = ("`%s`" % wl) if first else ""
            first = False
            if not st["times"]:
                print("| %s | %s | %s |  |  |  |  |  |  |  |  |" % (
                    name, cname, "FAILED" if st["failed"] else "-"))
                continue
            extra = w.get("shim_extra_rss_kb", {}).get(cname)
            print("| %s | %s | %.3f | %.3f-%.3f | %.2f | %.2f | %.1f | %s | %s | %s | %s |" % (
                name, cname + (" *" if st.get("runs_disturbed") else ""), st["median"], st["min"], st["max"],
                w["slowdown"][cname], w["cpu_slowdown"][cname],
                st["maxrss_kb_median"] / 1024,
                fmt(None if extra is None else extra / 1024, "%+.1f"),
                fmt(None if st.get("dump_bytes_median") is None
                    else st["dump_bytes_median"] / 1e6, "%.1f"),
                fmt(st.get("events"), "~%d (estimated)" if st.get("events_estimated") else "%d"),
                fmt(st.get("bytes_per_event"), "%.2f")))
    print()
    print("\\* some counted runs shared the CPU with other processes (noisy).")
    print()
    packed = ["%s %s %.0f%%" % (wl, c, 100 * st["packed_share"])
              for wl, w in r["workloads"].items() for c, st in w["configs"].items()
              if st.get("packed_share") is not None and c != "packed"]
    if packed:
        print("Chunks packed under `HEAPTRAIL_PACK=auto` (the share of each dump's chunks): " +
              ", ".join(packed) + ".")
        print()
    after = ["%s %.2f (%.2f s)" % (wl, st["pack_after_bytes_per_event"], st["pack_after_seconds"])
             for wl, w in r["workloads"].items() for c, st in w["configs"].items()
             if st.get("pack_after_bytes_per_event") is not None]
    if after:
        print("The `heaptrail` row's dump after `heaptrail pack`, bytes/event (time to pack): " +
              ", ".join(after) + ".")
        print()
    compact = ["%s %.2f (%.2f s)" % (wl, st["compact_after_bytes_per_event"],
                                     st["compact_after_seconds"])
               for wl, w in r["workloads"].items() for c, st in w["configs"].items()
               if st.get("compact_after_bytes_per_event") is not None]
    if compact:
        print("The same dump after `heaptrail pack --compact`, bytes/event (time to compact): " +
              ", ".join(compact) + ".")
        print()
    ratios = [(wl, w["overhead_ratio"]) for wl, w in r["workloads"].items()
              if w.get("overhead_ratio") is not None]
    if ratios:
        print("heaptrack's overhead over heaptrail's, (heaptrack - plain) / "
              "(heaptrail - plain): " + ", ".join("%s %.1fx" % x for x in ratios) + ".")
        print()
    a = r.get("analyzer")
    if a:
        print("| analyzer (mtmalloc's dumps) | events | median s | M events/s | peak RSS MB |")
        print("|---|---:|---:|---:|---:|")
        for label, x in a.items():
            if isinstance(x, dict):
                print("| `%s` | %d | %.3f | %.2f | %.1f |" % (
                    label, x["events"], x["median"], x["events_per_second"] / 1e6,
                    x["maxrss_kb"] / 1024))
        print()
    print("| target (issue 8) | measured | verdict |")
    print("|---|---:|---|")
    for t in r["targets"]:
        print("| %s | %s | %s |" % (t["target"], t["shown"],
                                    "info" if t.get("info") else
                                    {True: "PASS", False: "FAIL", None: "not measured"}[t["pass"]]))
    if r["errors"]:
        print()
        print("Errors:")
        print()
        for e in r["errors"]:
            print("- %s/%s: %s; command `%s`%s" % (
                e["workload"], e["config"], e["symptom"], e["command"],
                ("; " + e["detail"]) if e.get("detail") else ""))


if __name__ == "__main__":
    main()
