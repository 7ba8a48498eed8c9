#!/usr/bin/env python3
"""run.py - the heaptrail benchmark: plain vs heaptrail vs heaptrack, side by side.

usage: bench/run.py [--quick] [--build DIR] [--runs N] [--only NAME,...] [--keep-dumps]

Every measurement alternates its configurations (A B C A B C ...): one
warm-up round, then --runs counted rounds (5 by default, 3 with --quick),
so a slow minute on a shared machine hits every configuration alike; rounds
that other processes disturbed are measured again (see measure()).  Wall
time, CPU time and peak RSS come from the launcher bench/spawn.c (for
heaptrack, peak RSS is that of its largest process).

Prints a table and the issue-8 targets with PASS/FAIL (and, marked info,
the dumps as recorded beside heaptrack's: the dump size target is the
compact dump, `heaptrail pack --compact`), and writes
DIR/bench/results.json.  Exits 0 unless a run crashed, hung, printed
something different from plain, or a profiler's event counts disagree with
what the workload says it did (exit 1): a missed target never breaks the
build, a broken profiler does.  The dumps in DIR/bench/dumps are deleted at
the end unless --keep-dumps or something went wrong.

The workload binaries are built by `make bench` (bench/bench.mk) into
DIR/bench/; see docs/performance.md for what each one does.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import htrdump  # noqa: E402  (the independent decoder: chunk pack modes)

# The issue-8 targets.
MAX_SLOWDOWN = 2.5
MIN_OVERHEAD_RATIO = 2.5
MAX_SAMPLING_OVERHEAD = 0.05
MIN_ANALYZER_SPEEDUP = 3.0
SAMPLE_BYTES = 524288

# mtmalloc's shape: 2 threads x OPS operations is ~0.25 s plain on the
# reference machine; the 8-thread run does the same total work.
MT_OPS = 2000000

# A run taking longer than this is a hang: the slowest run, heaptrack on
# mtmalloc, takes about 7 s on the reference machine.
TIMEOUT_S = 300

# A round of runs during which other processes used more than this many
# cores (CPU time not ours, over wall time) is measured again, up to
# runs + runs/2 + 1 rounds in all, of which the least disturbed count.
FOREIGN_LIMIT = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Up to this many allocations/frees beyond what a workload made itself are
# the C library's own (stdio buffers, thread start-up).
COUNT_SLACK = 200


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.bdir = os.path.join(self.build, "bench")
        self.dumps = os.path.join(self.bdir, "dumps")
        os.makedirs(self.dumps, exist_ok=True)
        self.shim = os.path.join(self.build, "libheaptrail.so")
        self.cli = os.path.join(self.build, "heaptrail")
        self.launcher = os.path.join(self.bdir, "spawn")
        self.have_heaptrail = os.path.exists(self.shim) and os.path.exists(self.cli)
        self.heaptrack = shutil.which("heaptrack")
        self.heaptrack_print = shutil.which("heaptrack_print")
        self.errors = []
        self.timed_out = False
        self.deadline = time.time() + 480
        self.results = {"workloads": {}, "targets": [], "errors": self.errors}
        base = dict(os.environ)
        for k in list(base):
            if k == "LD_PRELOAD" or k.startswith("HEAPTRAIL_") or k.startswith("HEAPTRACK"):
                del base[k]
        self.base_env = base

    # ---------------------------------------------------------------- running

    def spawn(self, argv, env, stdin=None, stdout=None, stderr=None):
        """Runs argv; returns (wall s, maxrss KiB, wait status, cpu s).

        A command still running after TIMEOUT_S is killed (SIGKILL); the
        returned status then says so and self.timed_out is set.

        Through the small launcher bench/spawn.c: a child forked from this
        Python process would inherit its ~30 MB as a floor of ru_maxrss.
        """
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, stdin or os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, stdout or os.devnull,
             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_OPEN, 2, stderr or os.devnull,
             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        ]
        res = os.path.join(self.dumps, "spawn.result")
        if os.path.exists(res):
            os.unlink(res)
        # Variables that differ from the runner's own go to the launcher's
        # child only (see spawn.c).
        pairs = ["%s=%s" % kv for kv in env.items() if self.base_env.get(kv[0]) != kv[1]]
        pid = os.posix_spawn(self.launcher,
                             [self.launcher, res, str(TIMEOUT_S)] + pairs + ["--"] + list(argv),
                             self.base_env, file_actions=actions)
        _, status, _ = os.wait4(pid, 0)
        if status != 0 or not os.path.exists(res):
            raise RuntimeError("launcher failed on %s (status %d)" % (" ".join(argv), status))
        with open(res) as f:
            wall, kb, st, cpu, tmo = f.read().split()
        self.timed_out = tmo == "1"
        return float(wall), int(kb), int(st), float(cpu)

    def config_argv_env(self, cfg, argv, env_extra, tag):
        """The command line, environment and dump path of one configuration."""
        env = dict(self.base_env)
        env.update(env_extra)
        argv = cfg.get("argv", argv)
        dump = None
        kind = cfg["kind"]
        if kind == "heaptrail":
            dump = os.path.join(self.dumps, tag + ".htr")
            env["LD_PRELOAD"] = self.shim
            env["HEAPTRAIL_OUT"] = dump
            env.update(cfg.get("env", {}))
            return list(argv), env, dump
        if kind == "heaptrack":
            dump = os.path.join(self.dumps, tag + ".htk")
            return [self.heaptrack, "-o", dump] + list(argv), env, dump
        return list(argv), env, None

    def find_dump(self, dump, kind):
        """heaptrack appends .zst or .gz; the shim may add a suffix too."""
        if dump is None:
            return None
        if kind == "heaptrail" and os.path.exists(dump):
            return dump
        hits = sorted(glob.glob(glob.escape(dump) + "*"))
        return hits[0] if hits else None

    def remove_dumps(self, dump):
        if dump:
            for f in glob.glob(glob.escape(dump) + "*"):
                os.unlink(f)

    def measure(self, name, argv, configs, env_extra=None, stdin=None,
                runs=None, warmup=1, keep_dumps=True, retry=True):
        """Alternates configs over warmup+runs rounds; returns per-config stats.

        configs: list of {"name", "kind" (plain|heaptrail|heaptrack), "env",
        optionally "argv" instead of the shared argv}.  The latest run of
        every profiler keeps its dump (for counting events and the analyzer
        measurements) when keep_dumps is set.  retry: measure rounds that
        other processes disturbed again (not for RSS-only measurements).
        """
        runs = runs or self.args.runs
        env_extra = env_extra or {}
        stats = {c["name"]: {"kind": c["kind"], "times": [], "cpu": [], "maxrss_kb": [],
                             "foreign_cores": [],
                             "dump_bytes": [], "dump": None, "failed": False}
                 for c in configs}
        ref_out = None
        log("  %s: %s (%d warm-up + %d runs x %s)" % (
            name, " ".join(argv) or " vs ".join(" ".join(c["argv"]) for c in configs),
            warmup, runs, " ".join(c["name"] for c in configs)))
        rounds = []	# (most foreign cores in the round, runs of the round)
        clean = rnd = 0
        # Rounds measured again: a few, and none once the time budget of
        # the whole benchmark is spent (on a machine that stays busy they
        # would only make it longer).
        max_rounds = runs + runs // 2 + 1 if retry else runs
        while clean < runs and len(rounds) < max_rounds and (
                len(rounds) < runs or time.time() < self.deadline):
            got = []	# (stats, wall, cpu, rss, dump size, foreign cores)
            disturbed = False
            for cfg in configs:
                st = stats[cfg["name"]]
                if st["failed"]:
                    continue
                tag = "%s-%s" % (name, cfg["name"])
                cargv, env, dump = self.config_argv_env(cfg, argv, env_extra, tag)
                shown = cargv + (["<", stdin] if stdin else [])	# for error messages
                self.remove_dumps(dump)
                out = os.path.join(self.dumps, tag + ".out")
                err = os.path.join(self.dumps, tag + ".err")
                busy0 = cpu_busy_seconds()
                wall, rss, status, cpu = self.spawn(cargv, env, stdin, out, err)
                foreign = max(0.0, cpu_busy_seconds() - busy0 - cpu) / wall
                if status != 0:
                    self.fail(name, cfg, shown, env, status, err)
                    st["failed"] = True
                    continue
                with open(out, "rb") as f:
                    text = f.read()
                if cfg["kind"] == "plain" and ref_out is None:
                    ref_out = text
                elif cfg["kind"] == "heaptrail" and ref_out is not None and text != ref_out:
                    self.error(name, cfg["name"], shown, env,
                               "stdout differs from the plain run's (%d vs %d bytes)"
                               % (len(text), len(ref_out)))
                    st["failed"] = True
                    continue
                st["stdout"] = text.decode("utf-8", "replace")[-300:]
                found = self.find_dump(dump, cfg["kind"])
                if dump and not found:
                    self.error(name, cfg["name"], shown, env, "no dump file was written")
                    st["failed"] = True
                    continue
                if found and keep_dumps:
                    st["dump"] = found	# the latest run's; replaced by the next
                elif dump:
                    self.remove_dumps(dump)
                got.append((st, wall, cpu, rss, os.path.getsize(found) if found else None,
                            foreign))
                disturbed = disturbed or foreign > FOREIGN_LIMIT
            rnd += 1
            if rnd <= warmup:
                continue
            if not got:
                break	# every configuration failed
            # A round during which another process took CPU is measured
            # again; of all rounds the least disturbed count.
            rounds.append((max(g[5] for g in got), got))
            clean += not disturbed
        rounds.sort(key=lambda r: r[0])
        discarded = max(0, len(rounds) - runs)
        for _, got in rounds[:runs]:
            for st, wall, cpu, rss, size, foreign in got:
                st["times"].append(wall)
                st["cpu"].append(cpu)
                st["maxrss_kb"].append(rss)
                st["foreign_cores"].append(round(foreign, 3))
                if size is not None:
                    st["dump_bytes"].append(size)
        if discarded:
            log("    %d round(s) measured again: other processes were using the CPU" % discarded)
        for st in stats.values():
            st["rounds_discarded"] = discarded
            st["runs_disturbed"] = sum(f > FOREIGN_LIMIT for f in st["foreign_cores"])
        for st in stats.values():
            summarize(st)
        return stats

    # ---------------------------------------------------------------- errors

    def error(self, where, cfg, argv, env, what, detail=""):
        extra = {k: v for k, v in env.items()
                 if k in ("LD_PRELOAD", "PYTHONMALLOC") or k.startswith("HEAPTRAIL_")}
        cmd = " ".join("%s=%s" % kv for kv in sorted(extra.items()))
        cmd = (cmd + " " if cmd else "") + " ".join(argv)
        e = {"workload": where, "config": cfg, "command": cmd, "symptom": what}
        if detail:
            e["detail"] = detail
        self.errors.append(e)
        log("  ERROR %s/%s: %s\n    command: %s%s" % (
            where, cfg, what, cmd, ("\n    " + detail.replace("\n", "\n    ")) if detail else ""))

    def fail(self, where, cfg, argv, env, status, errfile):
        if self.timed_out:
            what = "still running after %d s (hung?), killed" % TIMEOUT_S
        elif os.WIFSIGNALED(status):
            what = "killed by signal %d" % os.WTERMSIG(status)
        else:
            what = "exit status %d" % os.WEXITSTATUS(status)
        try:
            with open(errfile, "rb") as f:
                tail = f.read()[-1500:].decode("utf-8", "replace").strip()
        except OSError:
            tail = ""
        self.error(where, cfg["name"], argv, env, what, "stderr: " + tail if tail else "")

    # ---------------------------------------------------------------- counts

    def heaptrail_totals(self, dump):
        """allocations, frees, reallocs from `heaptrail report --json`."""
        p = subprocess.run([self.cli, "report", "--json", dump], capture_output=True)
        if p.returncode != 0:
            raise RuntimeError("`heaptrail report --json %s` exit status %d: %s" % (
                dump, p.returncode, p.stderr.decode("utf-8", "replace").strip()[-800:]))
        doc = json.loads(p.stdout)
        tot = find_totals(doc)
        if tot is None:
            raise RuntimeError("no totals (allocations, frees) in `heaptrail report --json`")
        proc = doc.get("process") if isinstance(doc, dict) else None
        if isinstance(proc, dict) and proc.get("sample_bytes"):
            tot["sample_bytes"] = proc["sample_bytes"]	# the totals are estimates
        return tot

    def heaptrack_events(self, dump):
        """Allocations and frees in a heaptrack dump: its '+' and '-' lines."""
        cat = ["zstdcat", dump] if dump.endswith(".zst") else ["zcat", dump]
        p = subprocess.Popen(cat, stdout=subprocess.PIPE)
        allocs = frees = 0
        prev = b"\n"
        while True:
            buf = p.stdout.read(1 << 22)
            if not buf:
                break
            s = prev + buf
            allocs += s.count(b"\n+")
            frees += s.count(b"\n-")
            prev = buf[-1:]
        p.wait()
        return {"allocations": allocs, "frees": frees, "reallocs": 0}

    def count_events(self, name, stats, expect=None):
        """Events and bytes/event of every profiler's kept dump; checks counts."""
        for cname, st in stats.items():
            if not st.get("dump"):
                continue
            try:
                if st["kind"] == "heaptrail":
                    tot = self.heaptrail_totals(st["dump"])
                else:
                    tot = self.heaptrack_events(st["dump"])
            except (RuntimeError, ValueError) as e:
                self.error(name, cname, ["heaptrail", "report", "--json", st["dump"]],
                           {}, "analysis failed", str(e))
                continue
            # The analyzer counts a realloc as a free plus an allocation, as
            # heaptrack's dump has a '-' and a '+' line for it.
            events = tot["allocations"] + tot["frees"]
            st["totals"] = tot
            st["events"] = events
            if tot.get("sample_bytes"):
                # A sampled dump's totals are the analyzer's estimates of all
                # events, not the events it holds: no bytes per event.
                st["events_estimated"] = True
            elif events and st.get("dump_bytes_median"):
                st["bytes_per_event"] = st["dump_bytes_median"] / events
            if st["kind"] == "heaptrail":
                st["packed_share"] = packed_share(st["dump"])
            if (cname == "heaptrail" and "heaptrack" in stats and events and
                    not tot.get("sample_bytes")):
                self.pack_after(name, st, events)
            if expect and st["kind"] == "heaptrail":
                ea, ef = expect
                ok = (ea <= tot["allocations"] <= ea + COUNT_SLACK and
                      ef <= tot["frees"] <= ef + COUNT_SLACK)
                st["counts_ok"] = ok
                if not ok:
                    self.error(name, cname, ["heaptrail", "report", "--json", st["dump"]], {},
                               "wrong event counts: the workload made %d mallocs and %d frees, "
                               "the dump has %d allocations and %d frees"
                               % (ea, ef, tot["allocations"], tot["frees"]))

    def pack_after(self, name, st, events):
        """`heaptrail pack` and `heaptrail pack --compact` on the default
        configuration's latest dump: the size a dump recorded at full speed
        (not packed while every core was busy) has once packed or compacted
        afterwards, and how long that took.  The compact dump's report
        totals must be the recorded dump's."""
        for key, extra in (("pack_after", []), ("compact_after", ["--compact"])):
            out = st["dump"] + "." + key
            argv = [self.cli, "pack"] + extra + [st["dump"], "-o", out]
            t0 = time.monotonic()
            p = subprocess.run(argv, capture_output=True)
            took = time.monotonic() - t0
            if p.returncode != 0 or not os.path.exists(out):
                self.error(name, "heaptrail", ["heaptrail"] + argv[1:], {},
                           "pack failed", p.stderr.decode("utf-8", "replace").strip()[-800:])
                continue
            st[key + "_bytes_per_event"] = os.path.getsize(out) / events
            st[key + "_seconds"] = round(took, 3)
            if extra:
                self.same_totals(name, st["dump"], out)
            os.unlink(out)

    def same_totals(self, name, dump, compact):
        """The report totals of a compact dump against those of its dump."""
        keys = ("allocations", "frees", "allocated_bytes", "peak_live_bytes", "leaked_bytes",
                "leaked_blocks", "reallocs", "temporary")
        tots = []
        for path in (dump, compact):
            p = subprocess.run([self.cli, "report", "--json", "--top", "0", path],
                               capture_output=True)
            try:
                tots.append(json.loads(p.stdout)["totals"])
            except (ValueError, KeyError):
                tots.append({})
        diff = [(k, tots[0].get(k), tots[1].get(k)) for k in keys
                if tots[0].get(k) != tots[1].get(k)]
        if diff:
            self.error(name, "heaptrail", ["heaptrail", "report", "--json", compact], {},
                       "the compact dump's totals differ", repr(diff))

    # ---------------------------------------------------------------- parts

    def configs(self, heaptrack=True, extra=()):
        c = [{"name": "plain", "kind": "plain"}]
        if self.have_heaptrail:
            c.append({"name": "heaptrail", "kind": "heaptrail"})
        c.extend(extra)
        if heaptrack and self.heaptrack:
            c.append({"name": "heaptrack", "kind": "heaptrack"})
        return c

    def workload(self, name, argv, title, env_extra=None, stdin=None, expect_from_stdout=False,
                 heaptrack=True, runs=None, extra=()):
        if not self.wanted(name):
            return None
        configs = self.configs(heaptrack, extra)
        stats = self.measure(name, argv, configs, env_extra, stdin, runs=runs)
        expect = None
        if expect_from_stdout:
            out = stats["plain"].get("stdout", "")
            m = re.search(r"mallocs=(\d+) frees=(\d+)", out)
            if m:
                expect = (int(m.group(1)), int(m.group(2)))
        self.count_events(name, stats, expect)
        w = {"title": title, "command": " ".join(argv), "env": env_extra or {},
             "configs": stats}
        if expect:
            w["workload_counts"] = {"mallocs": expect[0], "frees": expect[1]}
        derive(w)
        self.results["workloads"][name] = w
        return w

    def wanted(self, name):
        return not self.args.only or name in self.args.only

    def run_all(self):
        b = self.bdir
        quick = self.args.quick
        mt = os.path.join(b, "mtmalloc")
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        sql = os.path.join(b, "workload.sql")
        with open(sql, "w") as f:
            subprocess.run([sys.executable, os.path.join(ROOT, "bench/workloads/sqlgen.py")],
                           stdout=f, check=True)

        log("workloads:")
        # HEAPTRAIL_PACK=auto packs only with 4 CPUs or more: show both
        packed = [{"name": "packed", "kind": "heaptrail", "env": {"HEAPTRAIL_PACK": "1"}}]
        self.workload("mtmalloc", [mt, "2", str(MT_OPS)],
                      "mtmalloc, 2 threads x %d ops" % MT_OPS, expect_from_stdout=True,
                      extra=packed)
        self.workload("mtmalloc-8t", [mt, "8", str(MT_OPS // 4)],
                      "mtmalloc, 8 threads x %d ops (same total)" % (MT_OPS // 4),
                      expect_from_stdout=True, heaptrack=not quick)
        self.workload("cxxchurn", [os.path.join(b, "cxxchurn")],
                      "C++ string/vector/map/unordered_map churn", heaptrack=not quick,
                      extra=packed)
        self.workload("sqlite3", ["sqlite3", ":memory:"],
                      "sqlite3 :memory: < generated script (inserts, updates, indexed queries)",
                      stdin=sql, heaptrack=not quick, extra=packed)
        self.workload("python3", [py, os.path.join(ROOT, "bench/workloads/pychurn.py")],
                      "python3 dict/list/string churn (PYTHONMALLOC=malloc)",
                      env_extra={"PYTHONMALLOC": "malloc"}, heaptrack=not quick, extra=packed)
        if self.have_heaptrail:
            self.sampling(mt)
            self.frame_pointers(os.path.join(b, "mtmalloc-fp"))
            self.fp_robustness([
                ("mtmalloc", [mt, "2", str(MT_OPS // 4)], {}, None),
                ("sqlite3", ["sqlite3", ":memory:"], {}, sql),
                ("python3", [py, os.path.join(ROOT, "bench/workloads/pychurn.py")],
                 {"PYTHONMALLOC": "malloc"}, None)])
            self.analyzer()
            self.shim_memory(mt)

    def sampling(self, mt):
        """HEAPTRAIL_SAMPLE at the default mean: overhead against plain."""
        if not self.wanted("sampling"):
            return
        cfg = [{"name": "plain", "kind": "plain"},
               {"name": "sampled", "kind": "heaptrail",
                "env": {"HEAPTRAIL_SAMPLE": str(SAMPLE_BYTES)}}]
        # 5% is a small difference: more rounds than elsewhere.
        runs = 5 if self.args.quick else max(11, self.args.runs)
        argv = [mt, "2", str(MT_OPS)]
        stats = self.measure("sampling", argv, cfg, runs=runs)
        self.count_events("sampling", stats)
        w = {"title": "mtmalloc 2 threads, HEAPTRAIL_SAMPLE=%d" % SAMPLE_BYTES,
             "command": " ".join(argv), "env": {}, "configs": stats}
        derive(w)
        self.results["workloads"]["sampling"] = w

    def frame_pointers(self, mtfp):
        """mtmalloc built with frame pointers: libunwind (default) vs HEAPTRAIL_UNWIND=fp."""
        if not self.wanted("fp"):
            return
        cfg = [{"name": "plain", "kind": "plain"},
               {"name": "heaptrail", "kind": "heaptrail"},
               {"name": "heaptrail-fp", "kind": "heaptrail", "env": {"HEAPTRAIL_UNWIND": "fp"}}]
        argv = [mtfp, "2", str(MT_OPS)]
        stats = self.measure("fp", argv, cfg)
        out = stats["plain"].get("stdout", "")
        m = re.search(r"mallocs=(\d+) frees=(\d+)", out)
        self.count_events("fp", stats, (int(m.group(1)), int(m.group(2))) if m else None)
        w = {"title": "mtmalloc-fp (-fno-omit-frame-pointer), 2 threads",
             "command": " ".join(argv), "env": {}, "configs": stats}
        derive(w)
        self.results["workloads"]["fp"] = w

    def fp_robustness(self, runs):
        """HEAPTRAIL_UNWIND=fp on programs built without frame pointers.

        Their frame chains are garbage: the shim must neither crash nor change
        the output.  One run each; failures land in the errors.
        """
        if not self.wanted("fp"):
            return
        cfg = [{"name": "plain", "kind": "plain"},
               {"name": "heaptrail-fp", "kind": "heaptrail", "env": {"HEAPTRAIL_UNWIND": "fp"}}]
        res = {}
        for name, argv, env, stdin in runs:
            n = "fp-on-" + name
            before = len(self.errors)
            stats = self.measure(n, argv, cfg, env, stdin, runs=1, warmup=0, keep_dumps=True,
                                 retry=False)
            expect = None
            m = re.search(r"mallocs=(\d+) frees=(\d+)", stats["plain"].get("stdout", ""))
            if m:
                expect = (int(m.group(1)), int(m.group(2)))
            self.count_events(n, stats, expect)
            st = stats["heaptrail-fp"]
            res[name] = {"ok": len(self.errors) == before, "events": st.get("events"),
                         "command": " ".join(argv)}
            self.remove_dumps(st.get("dump"))
        self.results["fp_robustness"] = res

    def analyzer(self):
        """Events per second: `heaptrail report` vs heaptrack_print on mtmalloc's dumps."""
        w = self.results["workloads"].get("mtmalloc")
        if not w or not self.wanted("analyzer"):
            return
        res = self.results.setdefault("analyzer", {})
        # A program of a third of a second on a shared machine: five counted
        # runs after a warm-up (three gave medians 50% apart between runs).
        runs = 1 if self.args.quick else 5
        cfg = []
        for label, cname, argv in (("heaptrail report", "heaptrail", [self.cli, "report"]),
                                   ("heaptrack_print", "heaptrack", [self.heaptrack_print])):
            st = w["configs"].get(cname, {})
            if argv[0] and st.get("dump") and st.get("events"):
                cfg.append({"name": label, "kind": "plain", "argv": argv + [st["dump"]],
                            "events": st["events"], "allocations": st["totals"]["allocations"]})
        if not cfg:
            return
        stats = self.measure("analyzer", [], cfg, runs=runs, warmup=0 if self.args.quick else 1)
        for c in cfg:
            st = stats[c["name"]]
            if not st["times"]:
                continue
            if c["name"] == "heaptrack_print":
                # Cross-check the '+' lines counted against heaptrack's own.
                with open(os.path.join(self.dumps, "analyzer-heaptrack_print.out"),
                          errors="replace") as f:
                    m = re.search(r"calls to allocation functions: (\d+)", f.read())
                if m and int(m.group(1)) != c["allocations"]:
                    log("  note: heaptrack_print counts %s allocations, its trace has %d"
                        % (m.group(1), c["allocations"]))
            res[c["name"]] = {"command": " ".join(c["argv"]), "events": c["events"],
                              "times": st["times"], "median": st["median"],
                              "events_per_second": c["events"] / st["median"],
                              "maxrss_kb": max(st["maxrss_kb"]),
                              "runs_disturbed": st["runs_disturbed"],
                              "dump_bytes": os.path.getsize(c["argv"][-1])}
        a, b = res.get("heaptrail report"), res.get("heaptrack_print")
        if a and b:
            res["speedup"] = a["events_per_second"] / b["events_per_second"]

    def shim_memory(self, mt):
        """Shim's extra peak RSS for a run and a run ten times longer.

        Plain's peak RSS is the same for both (the live window does not
        change), so the difference is the shim's: it may grow with new
        distinct stacks, never with the number of events.
        """
        if not self.wanted("shim-memory"):
            return
        base = MT_OPS // 4 if self.args.quick else MT_OPS
        runs = 1 if self.args.quick else 2
        cfg = [{"name": "plain", "kind": "plain"}, {"name": "heaptrail", "kind": "heaptrail"}]
        res = {}
        for label, ops in (("1x", base), ("10x", base * 10)):
            w = self.results["workloads"].get("mtmalloc")
            if label == "1x" and ops == MT_OPS and w and "shim_extra_rss_kb" in w:
                res["extra_rss_kb_1x"] = w["shim_extra_rss_kb"].get("heaptrail")
                res["ops_1x"] = ops
                continue
            argv = [mt, "2", str(ops)]
            name = "mtmalloc-" + label
            # Peak RSS does not suffer from a busy CPU: no runs again.
            stats = self.measure(name, argv, cfg, runs=runs, warmup=0, keep_dumps=True,
                                 retry=False)
            w = {"title": "mtmalloc, 2 threads x %d ops (%s)" % (ops, label),
                 "command": " ".join(argv), "env": {}, "configs": stats}
            derive(w)
            if label == "10x":
                self.analyzer_10x(name, stats)
            self.remove_dumps(stats["heaptrail"].get("dump"))
            self.results["workloads"][name] = w
            res["extra_rss_kb_" + label] = w.get("shim_extra_rss_kb", {}).get("heaptrail")
            res["ops_" + label] = ops
        if res.get("extra_rss_kb_1x") and res.get("extra_rss_kb_10x") is not None:
            res["ratio"] = res["extra_rss_kb_10x"] / res["extra_rss_kb_1x"]
        self.results["shim_memory"] = res

    def analyzer_10x(self, name, stats):
        """The analyzer on the 10x dump: same live set, so the same peak RSS."""
        self.count_events(name, stats)
        st = stats["heaptrail"]
        if not st.get("dump") or not st.get("events"):
            return
        argv = [self.cli, "report", st["dump"]]
        err = os.path.join(self.dumps, "analyzer.err")
        log("  analyzer on the 10x dump: %s" % " ".join(argv))
        wall, kb, status, _ = self.spawn(argv, self.base_env, None, None, err)
        if status != 0:
            self.fail("analyzer", {"name": "heaptrail report (10x)"}, argv, {}, status, err)
            return
        self.results.setdefault("analyzer", {})["heaptrail report (10x dump)"] = {
            "command": " ".join(argv), "events": st["events"], "times": [wall],
            "median": wall, "events_per_second": st["events"] / wall, "maxrss_kb": kb,
            "dump_bytes": st.get("dump_bytes_median")}

    # ---------------------------------------------------------------- report

    def targets(self):
        T = self.results["targets"]
        W = self.results["workloads"]

        def add(name, value, limit, ok, fmt="%.2f", noisy=False, info=False):
            # pass is null when the figure could not be measured; noisy when
            # other processes took CPU during some of the timed runs; info:
            # a comparison shown beside a target, not a target itself.
            shown = (fmt % value) if value is not None else "not measured"
            if noisy and value is not None:
                shown += " (noisy)"
            T.append({"target": name, "value": value, "limit": limit,
                      "pass": ok if value is not None else None, "noisy": bool(noisy),
                      "shown": shown, "info": info})

        def noisy(wl):
            return any(st.get("runs_disturbed") for st in W.get(wl, {}).get(
                "configs", {}).values())

        for wl in ("mtmalloc", "mtmalloc-8t"):
            s = W.get(wl, {}).get("slowdown", {}).get("heaptrail")
            add("%s: heaptrail slowdown <= %.1fx plain" % (wl, MAX_SLOWDOWN), s,
                MAX_SLOWDOWN, s is not None and s <= MAX_SLOWDOWN, "%.2fx", noisy(wl))
        r = W.get("mtmalloc", {}).get("overhead_ratio")
        add("mtmalloc: heaptrack overhead / heaptrail overhead >= %.1f" % MIN_OVERHEAD_RATIO,
            r, MIN_OVERHEAD_RATIO, r is not None and r >= MIN_OVERHEAD_RATIO, "%.1fx",
            noisy("mtmalloc"))
        # Dump size: the target is the compact dump (heaptrack's information,
        # docs/performance.md "Compact dumps"); the dumps as recorded, which
        # keep the addresses and fine times 'frag' needs, are shown beside it.
        for wl, w in W.items():
            c = w["configs"]
            b = c.get("heaptrack", {}).get("bytes_per_event")
            for cn in ("heaptrail", "packed"):
                a = c.get(cn, {}).get("bytes_per_event")
                if a is not None and b is not None:
                    add("%s: dump bytes/event %s vs heaptrack (%.2f)" % (wl, cn, b), a, b,
                        a <= b, "%.2f", info=True)
            a = c.get("heaptrail", {}).get("pack_after_bytes_per_event")
            if a is not None and b is not None:
                add("%s: dump bytes/event heaptrail + pack vs heaptrack (%.2f)" % (wl, b),
                    a, b, a <= b, "%.2f", info=True)
            a = c.get("heaptrail", {}).get("compact_after_bytes_per_event")
            if a is not None and b is not None:
                add("%s: dump bytes/event heaptrail + pack --compact <= heaptrack (%.2f)"
                    % (wl, b), a, b, a <= b, "%.2f")
        s = W.get("sampling", {}).get("slowdown", {}).get("sampled")
        add("mtmalloc: sampling (%d) overhead <= %d%%" % (SAMPLE_BYTES,
                                                         MAX_SAMPLING_OVERHEAD * 100),
            None if s is None else (s - 1) * 100, MAX_SAMPLING_OVERHEAD * 100,
            s is not None and s - 1 <= MAX_SAMPLING_OVERHEAD, "%+.1f%%", noisy("sampling"))
        an = self.results.get("analyzer", {})
        a = an.get("speedup")
        add("analyzer events/s >= %.0fx heaptrack_print" % MIN_ANALYZER_SPEEDUP, a,
            MIN_ANALYZER_SPEEDUP, a is not None and a >= MIN_ANALYZER_SPEEDUP, "%.1fx",
            any(isinstance(x, dict) and x.get("runs_disturbed") for x in an.values()))
        m = self.results.get("shim_memory", {})
        r = m.get("ratio")
        add("shim extra RSS, 10x longer run < 10x (1x: %s, 10x: %s KiB)" % (
            fmt_kb(m.get("extra_rss_kb_1x")), fmt_kb(m.get("extra_rss_kb_10x"))), r, 10.0,
            r is not None and r < 10.0, "%.2fx")

    def print_report(self):
        W = self.results["workloads"]
        print()
        m = self.results["machine"]
        print("heaptrail benchmark  %s  %s, %d cores  load average %.1f -> %.1f" % (
            self.results["date"], m["cpu"], m["nproc"], m["loadavg_start"],
            m["loadavg_end"]))
        print()
        hdr = "%-13s %-12s %8s %15s %7s %7s %9s %9s %8s %7s %7s" % (
            "workload", "config", "median", "min-max", "x plain", "cpu x", "peak RSS",
            "shim RSS", "dump", "events", "B/event")
        print(hdr)
        print("-" * len(hdr))
        for wl, w in W.items():
            first = True
            for cname, st in w["configs"].items():
                if not st["times"]:
                    print("%-13s %-12s %8s" % (wl if first else "", cname,
                                               "FAILED" if st["failed"] else "-"))
                    first = False
                    continue
                sd = w.get("slowdown", {}).get(cname)
                extra = w.get("shim_extra_rss_kb", {}).get(cname)
                bpe = st.get("bytes_per_event")
                db = st.get("dump_bytes_median")
                ev = st.get("events")
                cs = w.get("cpu_slowdown", {}).get(cname)
                print("%-13s %-12s %7.3fs %6.3f-%-8.3f %6.2fx %6.2fx %6.1f MB %9s %8s %7s %7s" % (
                    wl if first else "", cname + ("*" if st.get("runs_disturbed") else ""),
                    st["median"], st["min"], st["max"],
                    sd if sd is not None else 1.0, cs if cs is not None else 1.0,
                    st["maxrss_kb_median"] / 1024,
                    ("%+.1f MB" % (extra / 1024)) if extra is not None else "",
                    ("%.1f MB" % (db / 1e6)) if db is not None else "",
                    (("~" if st.get("events_estimated") else "") + "%.2fM" % (ev / 1e6))
                    if ev is not None else "",
                    ("%.2f" % bpe) if bpe is not None else ""))
                first = False
            packed = ["%s %.0f%%" % (c, 100 * st["packed_share"])
                      for c, st in w["configs"].items() if st.get("packed_share") is not None]
            if packed:
                print("%-13s chunks packed: %s" % ("", ", ".join(packed)))
            pa = w["configs"].get("heaptrail", {})
            if pa.get("pack_after_bytes_per_event") is not None:
                print("%-13s heaptrail's dump after `heaptrail pack`: %.2f bytes/event (%.2f s)" % (
                    "", pa["pack_after_bytes_per_event"], pa["pack_after_seconds"]))
            if pa.get("compact_after_bytes_per_event") is not None:
                print("%-13s ... after `heaptrail pack --compact`: %.2f bytes/event (%.2f s)" % (
                    "", pa["compact_after_bytes_per_event"], pa["compact_after_seconds"]))
            if w.get("overhead_ratio") is not None:
                print("%-13s heaptrack's overhead is %.1fx heaptrail's" % (
                    "", w["overhead_ratio"]))
        print("x plain: median wall time over plain's; cpu x: the same for user+system CPU time.")
        print("*: some counted runs shared the CPU with other processes (more than %.2f "
              "cores): noisy." % FOREIGN_LIMIT)
        print("~: a sampled dump's totals are the analyzer's estimates of all events.")
        print("shim RSS: peak RSS above plain's.  heaptrack's peak RSS is that of its "
              "largest process\n(heaptrack_interpret).  events: allocations + frees in "
              "the dump (a realloc is both).")
        a = self.results.get("analyzer")
        if a:
            print()
            print("analyzer on mtmalloc's dumps (median of %d runs; the 10x dump: 1 run):"
                  % (1 if self.args.quick else 5))
            for label, r in a.items():
                if isinstance(r, dict):
                    print("  %-27s %10d events %7.3fs %7.2f M events/s  peak RSS %.1f MB"
                          % (label + ("*" if r.get("runs_disturbed") else ""),
                             r["events"], r["median"],
                             r["events_per_second"] / 1e6, r["maxrss_kb"] / 1024))
        fr = self.results.get("fp_robustness")
        if fr:
            print()
            print("HEAPTRAIL_UNWIND=fp on programs without frame pointers (must not crash): " +
                  ", ".join("%s %s" % (k, "ok" if v["ok"] else "FAILED") for k, v in fr.items()))
        print()
        print("targets (issue 8):")
        for t in self.results["targets"]:
            verdict = "info" if t.get("info") else {True: "PASS", False: "FAIL",
                                                     None: "----"}[t["pass"]]
            print("  %-4s %-72s %s" % (verdict, t["target"], t["shown"]))
        if self.errors:
            print()
            print("ERRORS:")
            for e in self.errors:
                print("  %s/%s: %s" % (e["workload"], e["config"], e["symptom"]))
                print("    command: %s" % e["command"])
                if e.get("detail"):
                    print("    " + e["detail"].replace("\n", "\n    "))
        print()
        print("results: %s" % os.path.relpath(self.out, os.getcwd()))


def packed_share(dump):
    """The share of a heaptrail dump's chunks packed into columns (HTR_PF_PACKED:
    all of them under HEAPTRAIL_PACK=1, as the spare CPU went under auto)."""
    try:
        _, modes = htrdump.chunk_modes(dump)
    except (OSError, ValueError, IndexError, subprocess.CalledProcessError):
        return None
    return sum(m == 1 for m in modes) / len(modes) if modes else None


def cpu_busy_seconds():
    """CPU seconds all processors spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is in user)
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / CLK_TCK


def fmt_kb(v):
    return "?" if v is None else "%.0f" % v


def summarize(st):
    t = st["times"]
    if t:
        st["median"] = statistics.median(t)
        st["min"] = min(t)
        st["max"] = max(t)
        st["maxrss_kb_median"] = statistics.median(st["maxrss_kb"])
        st["cpu_median"] = statistics.median(st["cpu"])
    if st["dump_bytes"]:
        st["dump_bytes_median"] = statistics.median(st["dump_bytes"])


def derive(w):
    """Slowdowns, overhead ratio and extra RSS of one workload's configs."""
    c = w["configs"]
    p = c.get("plain")
    if not p or not p["times"]:
        return
    w["slowdown"] = {n: s["median"] / p["median"] for n, s in c.items() if s["times"]}
    # CPU time (user + system, threads and waited-for children included) is
    # less disturbed by other load on a shared machine than wall time.
    w["cpu_slowdown"] = {n: s["cpu_median"] / max(p["cpu_median"], 1e-6)
                         for n, s in c.items() if s["times"]}
    w["shim_extra_rss_kb"] = {n: s["maxrss_kb_median"] - p["maxrss_kb_median"]
                              for n, s in c.items()
                              if s["times"] and s["kind"] == "heaptrail"}
    ht, hk = c.get("heaptrail"), c.get("heaptrack")
    if ht and hk and ht["times"] and hk["times"]:
        over = ht["median"] - p["median"]
        # Below timer noise the ratio means nothing; floor heaptrail's at 1 ms.
        w["overhead_ratio"] = (hk["median"] - p["median"]) / max(over, 0.001)


def find_totals(doc):
    """The object holding allocations and frees counts in the report JSON."""
    if isinstance(doc, dict):
        for key in ("totals", "total", "summary"):
            v = doc.get(key)
            if isinstance(v, dict) and "allocations" in v and "frees" in v:
                return {"allocations": int(v["allocations"]), "frees": int(v["frees"]),
                        "reallocs": int(v.get("reallocs", 0) or 0)}
        if "allocations" in doc and "frees" in doc and all(
                isinstance(doc[k], int) for k in ("allocations", "frees")):
            return {"allocations": doc["allocations"], "frees": doc["frees"],
                    "reallocs": int(doc.get("reallocs", 0) or 0)}
        for v in doc.values():
            r = find_totals(v)
            if r:
                return r
    return None


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_mb": mem,
            "kernel": platform.release(), "loadavg_start": os.getloadavg()[0]}


def versions(b):
    def first_line(argv):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (p.stdout or p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    try:
        commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    def last_commit(path):
        try:
            return subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %cI", "--", path],
                                  capture_output=True, text=True).stdout.strip()
        except OSError:
            return None
    return {"commit": commit, "preload_commit": last_commit("preload"),
            "analyzer_commit": last_commit("analyzer"),
            "heaptrack": b.heaptrack and first_line([b.heaptrack, "--version"]),
            "sqlite3": first_line(["sqlite3", "--version"]),
            "python3": first_line(["/usr/bin/python3", "--version"]),
            "cc": first_line(["cc", "--version"])}


def main():
    ap = argparse.ArgumentParser(description="heaptrail benchmark (issue 8)")
    ap.add_argument("--quick", action="store_true", help="about one minute")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=0, help="counted runs per config")
    ap.add_argument("--keep-dumps", action="store_true",
                    help="keep the dumps of the last runs in DIR/bench/dumps")
    ap.add_argument("--only", default="",
                    help="comma-separated: mtmalloc,mtmalloc-8t,cxxchurn,sqlite3,python3,"
                    "sampling,fp,analyzer,shim-memory")
    args = ap.parse_args()
    args.runs = args.runs or (3 if args.quick else 5)
    args.only = set(x for x in args.only.split(",") if x)
    b = Bench(args)
    b.out = os.path.join(b.bdir, "results.json")
    t0 = time.time()
    # After this, disturbed rounds are no longer measured again (see measure).
    b.deadline = t0 + (75 if args.quick else 480)
    b.results["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    b.results["machine"] = machine()
    b.results["versions"] = versions(b)
    b.results["quick"] = args.quick
    b.results["runs"] = args.runs
    load = os.getloadavg()[0]
    if load > 0.5:
        log("warning: load average %.1f at start: the machine is busy and wall times "
            "will be inflated; compare the cpu columns, or rerun when it is idle" % load)
    if not b.have_heaptrail:
        log("note: %s or %s is missing; measuring plain and heaptrack only"
            % (b.shim, b.cli))
    if not b.heaptrack:
        log("note: heaptrack is not installed; measuring plain and heaptrail only")
    b.run_all()
    b.results["machine"]["loadavg_end"] = os.getloadavg()[0]
    b.results["elapsed_s"] = round(time.time() - t0, 1)
    b.targets()
    for w in b.results["workloads"].values():
        for st in w["configs"].values():
            st.pop("stdout", None)
    with open(b.out, "w") as f:
        json.dump(b.results, f, indent=1, sort_keys=False)
        f.write("\n")
    b.print_report()
    print("elapsed %.0f s" % b.results["elapsed_s"])
    if not args.keep_dumps and not b.errors:
        # Several hundred MB; rerun with --keep-dumps to look at them.  After
        # an error they stay, for the commands the error names.
        for f in glob.glob(os.path.join(b.dumps, "*.htr*")) + glob.glob(
                os.path.join(b.dumps, "*.htk*")):
            os.unlink(f)
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
