#!/usr/bin/env python3
"""soak.py - a long run under the shim: its memory stays flat, its figures agree with a short run's.

Run by 'make soak' (not by 'make test': it takes minutes).  The target is
rel_churn with 4 threads at a steady rate (each sleeps 0.5 ms after every
20 iterations: ~100,000 allocations a second in all), for SOAK_SECONDS
(default 120) under the shim while the same program runs plainly beside it
for the same time.  Every second the RSS of both is read from /proc.

Checks:
  - both traced runs (long, and a short one of SOAK_SECONDS / 12, at least
    5 s) behave as plain runs do and leave clean dumps (exit 0, no warning,
    END record, no lost events);
  - each dump's figures per site equal the program's own count (allocations
    and bytes at each churn_* site, the leak);
  - per-event figures agree between the long and the short run: allocations
    per 1000 iterations at each site (within 0.5 %) and mean bytes per
    allocation (within 2 %);
  - the shim's own memory (shim_bytes of the dump's SAMPLE records) does not
    grow after the first quarter of the run by more than 1 MiB;
  - the traced process's RSS minus the plain one's does not grow from the
    second quarter of the run to the last by more than 4 MiB.
Prints the figures (docs/reliability.md quotes them) and the closing line.

Environment: SOAK_SECONDS, BUILD, KEEP_TEST_FILES=1 (keep the dumps).
"""

import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
import reliability as rel  # noqa: E402

T = check.Suite("soak")
WORK = tempfile.mkdtemp(prefix="heaptrail-soak-")
THREADS = "4"
PAUSE_US = "500"
SITES = ("churn_malloc", "churn_calloc", "churn_realloc", "churn_aligned")
MIB = 1 << 20
# Standard deviation of rel_churn's sizes: 16 + U[0, 600) bytes, and with
# probability 1/64 instead 4096 + U[0, 60000): sqrt(E[x^2] - E[x]^2).
_P = 1 / 64
_M1 = (1 - _P) * 315.5 + _P * 34095.5
_M2 = (1 - _P) * (315.5 ** 2 + 600 ** 2 / 12) + _P * (34095.5 ** 2 + 60000 ** 2 / 12)
SIZE_SD = (_M2 - _M1 ** 2) ** 0.5


# --- SAMPLE records from the dump (common/htr_format.h) ---------------------

def _u(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7


def _skip_str(b, i):
    n, i = _u(b, i)
    return i + n


def samples(path):
    """[(time_s, rss_bytes, shim_bytes)] of every SAMPLE record, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"HTRDUMP\n":
        raise ValueError("not a dump")
    off = struct.unpack_from("<I", data, 12)[0]
    comp = tempfile.NamedTemporaryFile(dir=WORK, delete=False)
    with comp:
        while off + 16 <= len(data):
            _magic, csize, _raw, _check = struct.unpack_from("<IIII", data, off)
            if off + 16 + csize > len(data):
                break
            comp.write(data[off + 16:off + 16 + csize])
            off += 16 + csize
    del data
    p = subprocess.Popen(["zstd", "-dcq", comp.name], stdout=subprocess.PIPE)
    out = []
    buf = b""
    i = 0
    eof = False
    while True:
        if len(buf) - i < (1 << 20) and not eof:
            more = p.stdout.read(8 << 20)
            eof = not more
            buf = buf[i:] + more
            i = 0
        if i >= len(buf):
            break
        start = i
        try:
            r = buf[i]
            i += 1
            if r == 1:		# PROCESS
                for _ in range(5):
                    _, i = _u(buf, i)
                i = _skip_str(buf, i)
                i = _skip_str(buf, i)
                for _ in range(5):
                    _, i = _u(buf, i)
            elif r == 2:	# MODULE_LOAD
                for _ in range(3):
                    _, i = _u(buf, i)
                i = _skip_str(buf, i)
                i = _skip_str(buf, i)
                nseg, i = _u(buf, i)
                for _ in range(2 * nseg):
                    _, i = _u(buf, i)
            elif r == 3:
                for _ in range(2):
                    _, i = _u(buf, i)
            elif r == 4:	# CHUNK
                for _ in range(2):
                    _, i = _u(buf, i)
                n, i = _u(buf, i)
                if i + n > len(buf):
                    raise IndexError
                i += n
            elif r == 5:	# SAMPLE
                vals = []
                for _ in range(8):
                    v, i = _u(buf, i)
                    vals.append(v)
                out.append((vals[0] / 1e9, vals[1], vals[7]))
            elif r == 6:
                _, i = _u(buf, i)
            elif r in (7, 8):
                for _ in range(3 if r == 7 else 5):
                    _, i = _u(buf, i)
            elif r == 9:
                _, i = _u(buf, i)
                i = _skip_str(buf, i)
            elif r == 10:
                for _ in range(2):
                    _, i = _u(buf, i)
                n, i = _u(buf, i)
                for _ in range(2 * n):
                    _, i = _u(buf, i)
            else:
                raise ValueError("unknown record %d" % r)
        except IndexError:
            if eof:
                break
            i = start		# the record continues in the next block
            more = p.stdout.read(8 << 20)
            eof = not more
            buf = buf[i:] + more
            i = 0
    p.wait()
    os.unlink(comp.name)
    return out


# --- runs ------------------------------------------------------------------------

def rss_of(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def run_watched(argv, env, cwd, rss):
    """Runs argv, appending (seconds, RSS) to rss every second."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start = time.monotonic()
    result = {}

    def reader():
        result["out"], result["err"] = p.communicate()

    t = threading.Thread(target=reader)
    t.start()
    while p.poll() is None:
        v = rss_of(p.pid)
        if v is not None:
            rss.append((time.monotonic() - start, v))
        time.sleep(1)
    t.join()
    return rel.Result(p.returncode, result["out"], result["err"], False,
                      time.monotonic() - start)


def check_dump(label, res, dump):
    T.eq(label + ": exit status", res.returncode, 0)
    T.eq(label + ": nothing on stderr", check.text(res.stderr), "")
    doc = rel.clean_dump(T, label, dump, "exit")
    if doc is None:
        return None, None
    sites = rel.site_facts(res.stdout)
    for name in SITES:
        T.eq("%s: allocations at %s" % (label, name),
             rel.site_sum(doc, name, "allocations"), sites[name][0])
        T.eq("%s: bytes at %s" % (label, name),
             rel.site_sum(doc, name, "allocated_bytes"), sites[name][1])
    T.eq(label + ": leaked at churn_leak", rel.site_sum(doc, "churn_leak", "leaked_bytes"),
         rel.output_facts(res.stdout).get("leaked_bytes"))
    iters = rel.output_facts(res.stdout)["iterations"]
    per_event = {}
    for name in SITES:
        n = rel.site_sum(doc, name, "allocations")
        b = rel.site_sum(doc, name, "allocated_bytes")
        per_event[name] = (1000.0 * n / iters, b / n if n else 0.0, n)
    return doc, per_event


def window(series, lo, hi):
    """Values of (t, v) series with lo <= t/T_end < hi."""
    if not series:
        return []
    end = series[-1][0]
    return [v for t, v in series if lo * end <= t < hi * end or (hi >= 1 and t == end)]


def main():
    seconds = float(os.environ.get("SOAK_SECONDS") or 120)
    short = max(5.0, seconds / 12)
    exe = os.path.join(check.TARGETS, "rel_churn")
    for p in (check.HEAPTRAIL, check.SHIM, exe):
        if not os.path.exists(p):
            T.fail("build", "%s is not built (make all test-targets)" % p)
            T.finish()
    if not shutil.which("zstd"):
        T.fail("zstd", "the zstd command is needed to read SAMPLE records")
        T.finish()
    try:
        # The short run.
        short_dump = os.path.join(WORK, "short.htr")
        argv = [exe, THREADS, "-s", "%g" % short, "-p", PAUSE_US]
        res = rel.run(argv, env=rel.shim_env(short_dump), cwd=WORK, timeout=short + 600)
        _, short_pe = check_dump("short run (%g s)" % short, res, short_dump)

        # The long run, and a plain one beside it.
        long_dump = os.path.join(WORK, "long.htr")
        argv = [exe, THREADS, "-s", "%g" % seconds, "-p", PAUSE_US]
        rss_traced, rss_plain, results = [], [], {}
        th = threading.Thread(target=lambda: results.__setitem__(
            "plain", run_watched(argv, check.clean_env(), WORK, rss_plain)))
        th.start()
        results["traced"] = run_watched(argv, rel.shim_env(long_dump), WORK, rss_traced)
        th.join()
        label = "long run (%g s)" % seconds
        T.eq(label + ": the plain run beside it exits 0", results["plain"].returncode, 0)
        t0 = time.monotonic()
        long_doc, long_pe = check_dump(label, results["traced"], long_dump)
        analysis_s = time.monotonic() - t0

        # Per-event figures, long against short.
        if short_pe and long_pe:
            for name in SITES:
                (sa, sb, sn), (la, lb, ln) = short_pe[name], long_pe[name]
                T.check("per event: allocations per 1000 iterations at %s agree" % name,
                        abs(la - sa) <= 0.005 * sa, "long %.2f, short %.2f" % (la, sa))
                # Sizes are random (rel_churn's pick_size): the means of the
                # two runs differ by chance; 5 standard errors of it.
                tol = 5 * SIZE_SD * (1 / sn + 1 / ln) ** 0.5 if sn and ln else 0
                T.check("per event: mean bytes per allocation at %s agree (within %.0f)"
                        % (name, tol), abs(lb - sb) <= tol,
                        "long %.1f, short %.1f" % (lb, sb))

        # The shim's own memory, from the dump.
        smp = samples(long_dump)
        shim = [(t, s) for t, _, s in smp]
        early = window(shim, 0.2, 0.3)
        late = window(shim, 0.75, 1.0)
        T.check("shim_bytes sampled over the run", len(shim) >= seconds * 5,
                "%d samples" % len(shim))
        if early and late:
            T.check("shim_bytes flat: last quarter's max - max at 20-30 %% <= 1 MiB",
                    max(late) - max(early) <= MIB,
                    "%d -> %d bytes" % (max(early), max(late)))

        # RSS of the traced process over the plain one's.
        n = min(len(rss_traced), len(rss_plain))
        over = [(rss_traced[i][0], rss_traced[i][1] - rss_plain[i][1]) for i in range(n)]
        q2 = window(over, 0.25, 0.5)
        q4 = window(over, 0.75, 1.0)
        if q2 and q4:
            T.check("RSS over the plain run flat: median of the last quarter - "
                    "median of the second <= 4 MiB",
                    statistics.median(q4) - statistics.median(q2) <= 4 * MIB,
                    "%.1f -> %.1f MiB" % (statistics.median(q2) / MIB,
                                          statistics.median(q4) / MIB))
        else:
            T.fail("RSS sampled", "%d traced, %d plain samples" % (len(rss_traced),
                                                                  len(rss_plain)))

        # The figures.
        tot = long_doc["totals"] if long_doc else {}
        iters = rel.output_facts(results["traced"].stdout).get("iterations", 0)
        print("# soak figures")
        print("#   run: %g s, %d threads, %d iterations, %d allocations, %d frees"
              % (seconds, int(THREADS), iters, tot.get("allocations", 0), tot.get("frees", 0)))
        print("#   dump: %.1f MiB, analysed (report) in %.1f s" %
              (os.path.getsize(long_dump) / MIB, analysis_s))
        if shim:
            print("#   shim_bytes: %.2f MiB at 10 %%, %.2f MiB at 50 %%, %.2f MiB at the end"
                  % (window(shim, 0.1, 0.2)[0] / MIB if window(shim, 0.1, 0.2) else 0,
                     window(shim, 0.5, 0.6)[0] / MIB if window(shim, 0.5, 0.6) else 0,
                     shim[-1][1] / MIB))
        if q2 and q4:
            print("#   RSS traced - plain (median): %.1f MiB in the second quarter, "
                  "%.1f MiB in the last" % (statistics.median(q2) / MIB,
                                           statistics.median(q4) / MIB))
            print("#   RSS plain (median, last quarter): %.1f MiB; traced: %.1f MiB" %
                  (statistics.median(window(rss_plain, 0.75, 1.0)) / MIB,
                   statistics.median(window(rss_traced, 0.75, 1.0)) / MIB))
        if short_pe and long_pe:
            print("#   per 1000 iterations (short / long) and mean bytes (short / long):")
            for name in SITES:
                print("#     %-14s %8.2f / %8.2f   %8.1f / %8.1f" %
                      (name, short_pe[name][0], long_pe[name][0], short_pe[name][1],
                       long_pe[name][1]))
    finally:
        if os.environ.get("KEEP_TEST_FILES"):
            print("# soak files kept in %s" % WORK)
        else:
            shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
