#!/usr/bin/env python3
"""test_sampling.py - HEAPTRAIL_SAMPLE: estimates from a Poisson sample by bytes.

sample_sites keeps 76 MiB in five sites of known size (5% to 42% of the
total, blocks of 48 bytes to 64 KiB) and churns a million short-lived
blocks.  Recorded with HEAPTRAIL_SAMPLE, every site holding at least 5% of
the total must be estimated within 15% of the program's own count, ranked as
under full tracing, and the report must say that its figures are estimates.
The sampling mean is 4 KiB so that the smallest site gets ~1,000 samples
(a relative error of ~3%): the check is statistical but not flaky.
sample_sites_cxx does the same through operator new[]/new and delete[].
With a mean of 1 byte every block is recorded (p = 1 - exp(-48) is 1.0 in
a double) and every site must come out exact: 292,393 blocks live at once
push the shim's set of recorded blocks (bytesample.c) far past its first
table, and every churned block's free must find its block there.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("sampling")
WORK = tempfile.mkdtemp(prefix="heaptrail-sampling-")
SITES = ("keep_pages", "keep_records", "keep_buffers", "keep_tiny", "keep_strings")


def target(name):
    for p in (check.HEAPTRAIL, check.SHIM):
        if not os.path.exists(p):
            raise Skip("not built: %s" % p)
    path = os.path.join(check.TARGETS, name)
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built" % path)
    return path


def site_bytes(doc, fn):
    return sum(s["leaked_bytes"] for s in doc["sites"]
               if check.function_matches(s.get("function"), fn))


def record(name, env, program="sample_sites"):
    exe = target(program)
    out = os.path.join(WORK, name + ".htr")
    truth = os.path.join(WORK, name + ".truth")
    e = dict(env)
    e["TRUTH_OUT"] = truth
    cp = check.preload(out, [exe], env=e)
    T.eq("%s: exit status" % name, cp.returncode, 0)
    rp, doc = check.report(out)
    T.eq("%s: report exit status" % name, rp.returncode, 0)
    if doc is None:
        raise Skip("no report")
    return doc, check.truth_lines(truth)[-1], rp  # one JSON line: the program's counts


def main():
    with T.case("full"):
        full, truth, _ = record("full", {})
        want = {s: truth[s] for s in SITES}
        total = sum(want.values())
        for s in SITES:
            T.eq("full: %s exact" % s, site_bytes(full, s), want[s])
            T.check("full: %s holds at least 5%%" % s, want[s] >= 0.05 * total,
                    "%d of %d" % (want[s], total))
        full_rank = sorted(SITES, key=lambda s: -site_bytes(full, s))
        T.eq("full: recorded_events = allocations + frees",
             full["totals"].get("recorded_events"),
             full["totals"]["allocations"] + full["totals"]["frees"])

    with T.case("sampled"):
        doc, truth, rp = record("sampled", {"HEAPTRAIL_SAMPLE": "4096"})
        T.eq("sampled: the dump says it is sampled",
             doc["process"].get("sample_bytes"), 4096)
        rec = doc["totals"].get("recorded_events", 0)
        full_rec = full["totals"]["recorded_events"]
        T.check("sampled: it holds fewer events than the full dump",
                0 < rec < full_rec * 0.75, "%d recorded, %d in the full dump" % (rec, full_rec))
        text = check.run([check.HEAPTRAIL, "report", os.path.join(WORK, "sampled.htr")])
        T.check("sampled: the text report says the figures are estimates",
                b"estimates" in text.stdout, check.first_line(text.stdout))
        for s in SITES:
            got = site_bytes(doc, s)
            err = abs(got - want[s]) / float(want[s])
            T.check("sampled: %s within 15%% (%.1f%%)" % (s, 100 * err), err <= 0.15,
                    "estimated %d, kept %d" % (got, want[s]))
        rank = sorted(SITES, key=lambda s: -site_bytes(doc, s))
        T.eq("sampled: ranking as under full tracing", rank, full_rank)
        events = doc["totals"]["allocations"]
        T.check("sampled: allocations estimated near the truth (1.26M)",
                abs(events - truth["allocations"]) <= 0.15 * truth["allocations"],
                "%d vs %d" % (events, truth["allocations"]))

    with T.case("sampled, C++"):
        # the same sites through operator new[] / new and delete[]: the
        # operators' own fast path for passed-over calls
        doc, truth, _ = record("sampled-cxx", {"HEAPTRAIL_SAMPLE": "4096"}, "sample_sites_cxx")
        want = {s: truth[s] for s in SITES}
        for s in SITES:
            got = site_bytes(doc, s)
            err = abs(got - want[s]) / float(want[s])
            T.check("sampled C++: %s within 15%% (%.1f%%)" % (s, 100 * err), err <= 0.15,
                    "estimated %d, kept %d" % (got, want[s]))
        T.eq("sampled C++: no block freed through the wrong family",
             doc["totals"].get("mismatches"), 0)
        events = doc["totals"]["allocations"]
        T.check("sampled C++: allocations estimated near the truth",
                abs(events - truth["allocations"]) <= 0.15 * truth["allocations"],
                "%d vs %d" % (events, truth["allocations"]))

    with T.case("sampled, every block"):
        for program in ("sample_sites", "sample_sites_cxx"):
            doc, truth, _ = record("every-" + program, {"HEAPTRAIL_SAMPLE": "1"}, program)
            for s in SITES:
                T.eq("every block, %s: %s exact" % (program, s), site_bytes(doc, s), truth[s])
            T.eq("every block, %s: no free of a block never seen" % program,
                 doc["totals"].get("unknown_frees"), 0)
            T.eq("every block, %s: nothing lost" % program, doc["totals"].get("lost_events"), 0)

    T.finish()


if __name__ == "__main__":
    main()
