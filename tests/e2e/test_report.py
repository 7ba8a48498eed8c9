#!/usr/bin/env python3
"""test_report.py - end-to-end checks of 'record', 'report', 'leaks' and the CLI itself.

Ground truth comes from the targets (tests/lib/truth.h): report_mix counts
its temporaries, mismatched frees, unknown free, the blocks that make its
peak and its leak; leak_depths its leaks per line.  The CLI checks (usage
errors, help, exit statuses, refusing static and setuid programs, signal
forwarding) compare with what a shell and the documentation promise.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("report")
WORK = tempfile.mkdtemp(prefix="heaptrail-report-")

TOTALS_KEYS = ("allocations", "frees", "allocated_bytes", "peak_live_bytes",
               "leaked_bytes", "leaked_blocks", "peak_rss_bytes", "duration_seconds",
               "temporary", "unknown_frees", "mismatches", "lost_events",
               "peak_time_seconds", "end")
SITE_KEYS = ("function", "file", "line", "module", "stack", "leaked_bytes",
             "leaked_blocks", "peak_bytes", "allocations", "allocated_bytes",
             "temporary", "mismatches")


target = check.target


need_tools = check.need_tools


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def ht(*args, **kw):
    return check.run([check.HEAPTRAIL] + list(args), **kw)


def truth_site(truth, function):
    s = [x for x in truth["sites"] if x["function"] == function]
    if len(s) != 1:
        raise AssertionError("truth has %d sites in %s" % (len(s), function))
    return s[0]


def sites_at(doc, function, line):
    return check.matching_sites(doc["sites"], function, line)


def site_sum(doc, truth, function, key):
    t = truth_site(truth, function)
    return sum(s[key] for s in sites_at(doc, function, t["line"]))


def record_mix(d, mode=None):
    out = os.path.join(d, "mix.htr")
    tfile = os.path.join(d, "truth.json")
    argv = [target("report_mix")] + ([mode] if mode else [])
    cp = check.record(out, argv, env={"TRUTH_OUT": tfile}, cwd=d)
    truths = check.truth_lines(tfile) if os.path.exists(tfile) else []
    return cp, out, (truths[-1] if truths else None)


# --- report_mix: temporaries, mismatches, unknown frees, peak per site ------

def test_mix():
    need_tools()
    d = fresh_dir("mix")
    cp, out, truth = record_mix(d)
    T.eq("record exits with the command's status", cp.returncode, 3)
    T.check("the target wrote its truth", truth is not None)
    err = check.text(cp.stderr)
    T.check("record names the dump it wrote",
            "heaptrail: dump written to '%s'" % out in err or
            "heaptrail: dump written to 'mix.htr'" in err, err.strip())

    rp, doc = check.report(out)
    T.eq("report --json exits 0", rp.returncode, 0)
    if doc is None:
        raise AssertionError("no JSON: %s" % check.first_line(rp.stderr))
    T.eq("nothing on stderr", check.text(rp.stderr), "")
    check.compare(T, doc, truth)
    tot = doc["totals"]
    missing = [k for k in TOTALS_KEYS if k not in tot]
    T.check("totals carry the documented keys", not missing, "missing %r" % missing)
    missing = sorted(set(k for s in doc["sites"] for k in SITE_KEYS if k not in s))
    T.check("sites carry the documented keys", not missing, "missing %r" % missing)
    T.eq("process.pid", doc["process"]["pid"], truth["pid"])
    T.eq("process.ppid", doc["process"]["ppid"], truth["ppid"])
    T.eq("process.argv", doc["process"]["argv"], [target("report_mix")])
    T.eq("end", tot["end"], {"how": "exit", "status": 3})

    facts = truth["facts"]
    T.eq("temporaries at make_temps", site_sum(doc, truth, "make_temps", "temporary"),
         facts["temporaries"])
    nt = [s for s in truth["sites"] if s["function"] == "not_temps"]
    T.eq("not_temps has two sites in the truth", len(nt), 2)
    for s in nt:
        T.eq("no temporaries at not_temps:%d" % s["line"],
             sum(x["temporary"] for x in sites_at(doc, "not_temps", s["line"])), 0)
    # Every block freed right after it was made, by the program's own count:
    # the 50, peak_b (freed before a), and the three mismatched blocks.
    T.eq("totals.temporary", tot["temporary"], facts["temporaries"] + 1 + 3)

    for fn in ("mismatch_new_free", "mismatch_newarr_delete", "mismatch_malloc_deletearr"):
        T.eq("one mismatch at " + fn, site_sum(doc, truth, fn, "mismatches"), 1)
        T.eq("no leak at " + fn, site_sum(doc, truth, fn, "leaked_bytes"), 0)
    T.eq("no mismatch at matched_new_delete",
         sum(s["mismatches"] for s in doc["sites"]
             if check.norm_function(s["function"]) == "matched_new_delete"), 0)
    T.eq("totals.mismatches", tot["mismatches"], facts["mismatches"])
    T.check("the free of a block never seen is an unknown free",
            tot["unknown_frees"] >= facts["unknown_frees"],
            "unknown_frees = %d" % tot["unknown_frees"])

    T.eq("peak_a's bytes at the peak", site_sum(doc, truth, "peak_a", "peak_bytes"), 300000)
    T.eq("peak_b's bytes at the peak", site_sum(doc, truth, "peak_b", "peak_bytes"), 200000)
    T.eq("the later leak has nothing at the peak",
         site_sum(doc, truth, "leak_after_peak", "peak_bytes"), 0)
    T.eq("the later leak", site_sum(doc, truth, "leak_after_peak", "leaked_bytes"), 100000)
    T.check("the peak comes before the end",
            0 < tot["peak_time_seconds"] <= tot["duration_seconds"],
            "peak at %r, duration %r" % (tot["peak_time_seconds"], tot["duration_seconds"]))

    # The text report says the same.
    tp = ht("report", out)
    T.eq("report exits 0", tp.returncode, 0)
    txt = check.text(tp.stdout)
    T.check("text: how it ended", "exited with status 3" in txt)
    for key, want in (("unknown frees", tot["unknown_frees"]),
                      ("mismatches", tot["mismatches"]),
                      ("lost events", tot["lost_events"])):
        m = re.search(r"^%s\s+([\d,]+)" % key, txt, re.M)
        T.check("text: %s" % key, m and int(m.group(1).replace(",", "")) == want,
                m.group(0) if m else "no line")
    for fn in ("mismatch_new_free", "mismatch_newarr_delete", "mismatch_malloc_deletearr"):
        loc = "%s (report_mix.c:%d)" % (fn, truth_site(truth, fn)["line"])
        T.check("text: mismatch site " + fn, "1 x " + loc in txt, loc)
    m = re.search(r"^Top sites by bytes leaked at exit:\n.*\n\s+(\S.*)$", txt, re.M)
    want = "leak_after_peak (report_mix.c:%d)" % truth_site(truth, "leak_after_peak")["line"]
    T.eq("text: the top leak", m.group(1) if m else None, want)
    m = re.search(r"^Top sites by temporary allocations.*\n.*\n\s+(\S.*)$", txt, re.M)
    want = "make_temps (report_mix.c:%d)" % truth_site(truth, "make_temps")["line"]
    T.eq("text: the top temporary site", m.group(1) if m else None, want)

    # --top 1: the union of the first site of each table.
    cp1, doc1 = check.analyze("report", out, "--top", "1")
    T.check("--top 1 lists at most four sites", doc1 and 1 <= len(doc1["sites"]) <= 4,
            "%r sites" % (len(doc1["sites"]) if doc1 else None))
    if doc1:
        T.eq("--top 1 starts with the top leak",
             check.location(doc1["sites"][0]),
             ("leak_after_peak", truth_site(truth, "leak_after_peak")["line"]))

    # leaks: the same leak, every leaking site, largest first.
    lp, ldoc = check.analyze("leaks", out)
    T.eq("leaks --json exits 0", lp.returncode, 0)
    sizes = [s["leaked_bytes"] for s in ldoc["sites"]]
    T.eq("leaks: sorted by bytes", sizes, sorted(sizes, reverse=True))
    T.eq("leaks: every site with a live block",
         len(ldoc["sites"]), len([s for s in doc["sites"] if s["leaked_blocks"]]))
    T.eq("leaks: totals equal report's", (ldoc["totals"]["leaked_bytes"],
                                          ldoc["totals"]["leaked_blocks"]),
         (tot["leaked_bytes"], tot["leaked_blocks"]))
    line = truth_site(truth, "leak_after_peak")["line"]
    T.eq("leaks: leak_after_peak",
         sum(s["leaked_bytes"] for s in check.matching_sites(ldoc["sites"],
                                                             "leak_after_peak", line)),
         100000)
    lp1, ldoc1 = check.analyze("leaks", out, "--top", "1")
    T.check("leaks --top 1", ldoc1 and len(ldoc1["sites"]) == 1 and
            ldoc1["totals"]["sites"] == len(ldoc["sites"]))
    lt = ht("leaks", out)
    txt = check.text(lt.stdout)
    T.check("leaks text: the leak with its stack",
            re.search(r"^97\.7 KiB in 1 block .*\n\s+leak_after_peak \(report_mix\.c:%d\)\n"
                      r"\s+main \(report_mix\.c:\d+\)" % line, txt, re.M), txt[:400])


def test_signal_end():
    need_tools()
    d = fresh_dir("signal")
    cp, out, truth = record_mix(d, "signal")
    T.eq("record exits 128 + SIGTERM", cp.returncode, 128 + signal.SIGTERM)
    rp, doc = check.report(out)
    T.eq("report exits 0", rp.returncode, 0)
    T.eq("end: killed by SIGTERM", doc["totals"]["end"],
         {"how": "signal", "status": int(signal.SIGTERM)})
    txt = check.text(ht("report", out).stdout)
    T.check("text: killed by SIGTERM", "killed by SIGTERM (signal 15)" in txt)
    T.check("text: live at the end, not leaked at exit",
            re.search(r"^live at end\s", txt, re.M) and "leaked at exit" not in txt)


def forward_case(sig):
    d = fresh_dir("forward%d" % sig)
    out = os.path.join(d, "wait.htr")
    ready = os.path.join(d, "ready")
    p = subprocess.Popen([check.HEAPTRAIL, "record", "-o", out, "--", target("report_mix"),
                          "wait", ready], env=check.clean_env({"TRUTH_OUT": os.path.join(
                              d, "truth.json")}), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=d)
    try:
        while not os.path.exists(ready):
            if p.poll() is not None:
                raise AssertionError("record ended early: %r" % p.stderr.read())
            time.sleep(0.05)
        os.kill(p.pid, sig)
        _, err = p.communicate(timeout=check.HANG_GUARD)
    finally:
        if p.poll() is None:
            p.kill()
    name = signal.Signals(sig).name
    T.eq("%s to heaptrail reaches the command: exit 128 + %d" % (name, sig),
         p.returncode, 128 + sig)
    T.check("%s: the dump is named" % name, "dump written to" in check.text(err),
            check.text(err))
    rp, doc = check.report(out)
    T.eq("%s: the dump reads" % name, rp.returncode, 0)
    if doc:
        T.check("%s: the block made before waiting is there" % name,
                any(s["leaked_bytes"] == 777 for s in doc["sites"]))


def test_forwarding():
    need_tools()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        forward_case(sig)


# --- refusing what the shim cannot enter ----------------------------------

def test_refusals():
    need_tools()
    d = fresh_dir("refuse")
    src = os.path.join(d, "static.c")
    with open(src, "w") as f:
        f.write("#include <stdlib.h>\nint main(void){return malloc(1)==0;}\n")
    exe = os.path.join(d, "static_prog")
    cc = subprocess.run(["cc", "-static", "-o", exe, src], capture_output=True)
    if cc.returncode == 0:
        cp = ht("record", "-o", os.path.join(d, "s.htr"), "--", exe, cwd=d)
        err = check.text(cp.stderr)
        T.eq("static: exit 2", cp.returncode, 2)
        T.check("static: one line saying why", err.count("\n") == 1 and
                err.startswith("heaptrail: cannot record '") and "statically linked" in err,
                err)
        T.check("static: it did not run", not os.path.exists(os.path.join(d, "s.htr")))
    else:
        T.skip("static executable", "cc -static failed: %s" % check.first_line(cc.stderr))

    if os.geteuid() == 0:
        suid = os.path.join(d, "suid_prog")
        shutil.copy(target("report_mix"), suid)
        os.chown(suid, 65534, 65534)
        os.chmod(suid, 0o4755)
        cp = ht("record", "--", suid)
        err = check.text(cp.stderr)
        T.eq("setuid: exit 2", cp.returncode, 2)
        T.check("setuid: one line saying why",
                err.count("\n") == 1 and "setuid" in err, err)
    else:
        T.skip("setuid executable", "needs root to give a copy another owner")

    cp = ht("record", "--", "heaptrail_no_such_command_x")
    T.eq("not found: exit 127", cp.returncode, 127)
    T.eq("not found: the shell's message", check.text(cp.stderr),
         "heaptrail: cannot run 'heaptrail_no_such_command_x': No such file or directory\n")
    cp = ht("record", "--", os.path.join(d, "missing"))
    T.eq("missing path: exit 127", cp.returncode, 127)
    noexec = os.path.join(d, "noexec")
    with open(noexec, "w") as f:
        f.write("x\n")
    os.chmod(noexec, 0o644)
    cp = ht("record", "--", noexec)
    T.eq("not executable: exit 126", cp.returncode, 126)


def test_exit_status_passthrough():
    need_tools()
    d = fresh_dir("status")
    for code in (0, 1, 42):
        cp = ht("record", "-o", os.path.join(d, "s%d.htr" % code), "--",
                "/bin/sh", "-c", "exit %d" % code, cwd=d)
        T.eq("sh exit %d through record" % code, cp.returncode, code)


# --- the CLI itself -----------------------------------------------------------

def test_usage():
    need_tools()
    cp = ht()
    T.eq("no verb: exit 2", cp.returncode, 2)
    listing = check.text(cp.stdout)
    T.check("no verb: lists the verbs",
            all(re.search(r"^  %s\s" % v, listing, re.M) for v in ("record", "report", "leaks")),
            listing)
    cp = ht("--help")
    T.eq("--help: exit 0", cp.returncode, 0)
    T.eq("--help prints the same list", check.text(cp.stdout), listing)
    cp = ht("--version")
    T.check("--version", cp.returncode == 0 and
            re.match(r"^heaptrail \d+\.\d+", check.text(cp.stdout)), check.text(cp.stdout))
    cp = ht("bogus")
    T.eq("unknown verb: exit 2", cp.returncode, 2)
    T.eq("unknown verb: the error line", check.first_line(cp.stderr),
         "heaptrail: unknown verb 'bogus'")
    for verb in ("record", "report", "leaks", "help"):
        a, b = ht("help", verb), ht(verb, "--help")
        T.check("help %s == %s --help" % (verb, verb),
                a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout and
                check.text(a.stdout).startswith("usage: heaptrail %s" % verb),
                check.first_line(a.stdout))
    cp = ht("help", "bogus")
    T.eq("help for an unknown verb: exit 2", cp.returncode, 2)

    d = fresh_dir("usage")
    for args, what in ((["report"], "report without a dump"),
                       (["leaks"], "leaks without a dump"),
                       (["record"], "record without a command"),
                       (["report", "a.htr", "b.htr"], "report with two dumps"),
                       (["report", "--top", "x", "a.htr"], "--top x"),
                       (["report", "--bogus", "a.htr"], "unknown option"),
                       (["report", "--top"], "--top without a value"),
                       (["record", "--depth", "0", "--", "true"], "--depth 0"),
                       (["record", "--follow-forks=2", "--", "true"], "--follow-forks=2"),
                       (["record", "--unwind", "magic", "--", "true"], "--unwind magic"),
                       (["record", "--sample", "lots", "--", "true"], "--sample lots")):
        cp = ht(*args, cwd=d)
        T.eq(what + ": exit 2", cp.returncode, 2)
        T.check(what + ": says why on stderr",
                check.text(cp.stderr).startswith("heaptrail: "), check.text(cp.stderr))
    T.eq("usage errors ran nothing", os.listdir(d), [])

    for verb in ("report", "leaks"):
        missing = os.path.join(d, "missing.htr")
        cp = ht(verb, missing)
        T.eq("%s of a missing dump: exit 2" % verb, cp.returncode, 2)
        T.check("%s of a missing dump: one line" % verb,
                check.text(cp.stderr).startswith("heaptrail: cannot read '%s'" % missing) and
                check.text(cp.stderr).count("\n") == 1, check.text(cp.stderr))
        T.eq("%s of a missing dump: no output" % verb, check.text(cp.stdout), "")


def test_reach():
    need_tools()
    d = fresh_dir("reach")
    out = os.path.join(d, "r.htr")
    tfile = os.path.join(d, "truth.json")
    cp = check.record(out, [target("leak_depths")], env={"TRUTH_OUT": tfile},
                      options=["--reach"])
    T.eq("record --reach exits 0", cp.returncode, 0)
    lp, doc = check.analyze("leaks", out)
    T.eq("leaks exits 0", lp.returncode, 0)
    if not doc["totals"]["reach_scan"]:
        raise Skip("the shim wrote no reachability scan")
    keys = ("lost_bytes", "indirect_bytes", "possibly_bytes", "reachable_bytes",
            "unscanned_bytes")
    for s in doc["sites"]:
        T.eq("classes add up at %s:%s" % (s["function"], s["line"]),
             sum(s[k] for k in keys), s["leaked_bytes"])
    T.eq("totals' classes add up", sum(doc["totals"][k] for k in keys),
         doc["totals"]["leaked_bytes"] + doc["totals"]["pool_leaked_bytes"])


def test_changed_library():
    """A library rebuilt after recording is said, once, with its frames as
    addresses; also when the report's only frame in it was resolved while
    the dump was still being read (the read-ahead of debug info)."""
    need_tools()
    d = fresh_dir("changed-lib")
    lib = os.path.join(d, "libchanging.so")
    shutil.copy(target("libonecall.so"), lib)
    out = os.path.join(d, "c.htr")
    cp = check.preload(out, [target("churn_lib"), lib, "300000"], cwd=d)
    T.eq("churn_lib exits 0", cp.returncode, 0)
    before = ht("report", out)
    T.eq("report before the change: no warning", check.text(before.stderr).strip(), "")
    os.unlink(lib)
    shutil.copy(target("libhugector.so"), lib)	# another build-id at the same path
    after = ht("report", out)
    T.eq("report after the change exits 0", after.returncode, 0)
    said = [ln for ln in check.text(after.stderr).splitlines()
            if "libchanging.so" in ln and "changed since it was recorded" in ln]
    T.eq("the changed library is said once", len(said), 1)
    T.eq("what the report says is the same but for its frames there",
         [ln for ln in check.text(after.stdout).splitlines() if "libchanging" not in ln
          and "one_alloc" not in ln and "0x" not in ln],
         [ln for ln in check.text(before.stdout).splitlines() if "libchanging" not in ln
          and "one_alloc" not in ln and "0x" not in ln])


def main():
    cases = [("mix", test_mix), ("signal end", test_signal_end),
             ("forwarding", test_forwarding), ("refusals", test_refusals),
             ("exit status", test_exit_status_passthrough), ("usage", test_usage),
             ("reach", test_reach), ("changed library", test_changed_library)]
    for name, fn in cases:
        with T.case(name):
            fn()
    if not os.environ.get("KEEP_TEST_FILES"):
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
