#!/usr/bin/env python3
"""ab.py - A/B timing of a few configurations on a shared, noisy machine.

usage: bench/ab.py [--runs N] [--spawn PATH] NAME='ENV... -- CMD [< FILE]' ...

Each argument is one configuration: NAME=, then optional VAR=VALUE pairs,
then `--`, then the command, and optionally `<` and a file for its stdin.  The configurations run alternately, N rounds
(default 9), through bench/spawn.c (CPU time: user + system of the command
and its threads).  Prints, per configuration, the best and the median of
wall and CPU time and their ratio to the first configuration's.  The best
of N is the least disturbed run: on a busy machine it is the figure that
repeats; the median shows the spread.

Example (the sampling target):
  bench/ab.py plain='-- build/bench/mtmalloc' \\
      sampled='LD_PRELOAD=build/libheaptrail.so HEAPTRAIL_OUT=/tmp/ab.htr \\
               HEAPTRAIL_SAMPLE=524288 -- build/bench/mtmalloc'
"""
import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--spawn", default=os.path.join(ROOT, "build", "bench", "spawn"))
    ap.add_argument("configs", nargs="+")
    a = ap.parse_args()
    cfgs = []
    for c in a.configs:
        name, _, rest = c.partition("=")
        words = shlex.split(rest)
        if "--" not in words:
            sys.exit("ab.py: %s: no -- before the command" % name)
        i = words.index("--")
        cmd, stdin = words[i + 1:], None
        if len(cmd) > 2 and cmd[-2] == "<":
            cmd, stdin = cmd[:-2], cmd[-1]
        cfgs.append((name, words[:i], cmd, stdin))
    res = {c[0]: ([], []) for c in cfgs}
    fd, out = tempfile.mkstemp(prefix="ab.")
    os.close(fd)
    try:
        for r in range(a.runs):
            for name, env, cmd, stdin in cfgs:
                with open(stdin or os.devnull) as f:
                    p = subprocess.run([a.spawn, out, "300"] + env + ["--"] + cmd,
                                       stdin=f, stdout=subprocess.DEVNULL)
                if p.returncode:
                    sys.exit("ab.py: %s: cannot run" % name)
                with open(out) as f:
                    wall, _, status, cpu, _ = f.read().split()
                if int(status):
                    sys.exit("ab.py: %s: wait status %s" % (name, status))
                res[name][0].append(float(wall))
                res[name][1].append(float(cpu))
    finally:
        os.unlink(out)
    base = cfgs[0][0]
    bw, bc = min(res[base][0]), min(res[base][1])
    mw, mc = statistics.median(res[base][0]), statistics.median(res[base][1])
    print("%-12s %9s %9s %7s %7s | %9s %9s %7s %7s" % (
        "config", "best wall", "best cpu", "x", "cpu x", "med wall", "med cpu", "x", "cpu x"))
    for name in res:
        w, c = res[name]
        print("%-12s %9.3f %9.3f %7.2f %7.2f | %9.3f %9.3f %7.2f %7.2f" % (
            name, min(w), min(c), min(w) / bw, min(c) / bc,
            statistics.median(w), statistics.median(c),
            statistics.median(w) / mw, statistics.median(c) / mc))


if __name__ == "__main__":
    main()
