#!/usr/bin/env python3
"""test_endrecord.py - the dump's END record in ways programs end that the shim does not see directly.

Each target knows how it ends and what it leaked; its dump must end with
that (END "killed by signal N" or "exit status S") and hold those leaks,
and the program must behave under the shim exactly as without it (same
stdout, stderr and exit status).

  re-raise     sig_reraise MODE: the program's own handler puts SIG_DFL back
               (signal(), sigaction()) or has the kernel do it (SA_RESETHAND,
               sysv_signal) and raises the signal again; SIGPIPE from a
               closed pipe; SIG_DFL set by the program at start (as shells
               do); a SIGSEGV handler with SA_RESETHAND that returns.  What
               the program reads back of its handlers (old handler, flags,
               mask, in and out of its handler) is printed and must match
               the plain run
  daemon       daemon_leak: glibc's daemon() ends the parent with _exit(0)
               inside the C library; the parent's dump must end "exit 0",
               the daemon's "exit 7"; what the daemon finds (cwd, session,
               descriptors 0-2) as without the shim; with and without
               nochdir/noclose
  fork, then   fork_term: SIGTERM sent the moment fork() returns in the
  SIGTERM      parent, while the child's shim is opening its dump: every
               child's dump ends "killed by signal 15"
  real         GNU sort killed by SIGPIPE (its handler re-raises), timeout
  programs     re-raising its child's SIGTERM, timeout's timer, dash killed
               by 'kill -TERM $$' (it sets SIG_DFL itself): same output and
               status, every dump with its END (skipped when not installed)
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
import reliability as rel  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("endrecord")
WORK = tempfile.mkdtemp(prefix="heaptrail-endrecord-")


def end_of(dump):
    """The dump's END as {"how", "status"}, or None when report cannot read it."""
    cp, doc = check.report(dump)
    if doc is None:
        return None, None
    return doc["totals"].get("end"), doc


def dump_of_pid(dump, pid):
    """DUMP.PID, the dump of a followed child with that pid (not of its exec'd images)."""
    return "%s.%d" % (dump, pid)


def images(dump):
    """{exe basename: [dump, ...]} over the dump and its children's dumps."""
    out = {}
    for f in rel.dumps_of(dump):
        cp = check.run([check.HEAPTRAIL, "report", "--json", "--top", "0", f])
        exe = None
        if cp.returncode == 0:
            try:
                doc = json.loads(check.text(cp.stdout))
                exe = os.path.basename((doc.get("process") or {}).get("exe") or "")
            except ValueError:
                pass
        out.setdefault(exe, []).append(f)
    return out


# --- the program's handler re-raises -----------------------------------------------

RERAISE = [("signal", signal.SIGTERM), ("sigaction", signal.SIGTERM),
           ("resethand", signal.SIGTERM), ("resethand-info", signal.SIGTERM),
           ("sysv", signal.SIGTERM), ("pipe", signal.SIGPIPE), ("dfl", signal.SIGINT),
           ("segv-resethand", signal.SIGSEGV)]


def case_reraise():
    exe = check.built_target("sig_reraise")
    leaks = 4
    for mode, sig in RERAISE:
        label = "re-raise " + mode
        d = check.fresh_dir(WORK, "reraise-" + mode)
        argv = [exe, mode, str(leaks)]
        plain = rel.run(argv, cwd=d)
        T.eq(label + ": the plain run dies of signal %d" % sig, plain.returncode, -sig)
        dump = os.path.join(d, "run.htr")
        traced = rel.run(argv, env=rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}), cwd=d)
        rel.same_run(T, label, plain, traced)
        end, doc = end_of(dump)
        T.eq(label + ": the dump ends 'killed by signal %d'" % sig, end,
             {"how": "signal", "status": int(sig)})
        if doc is not None:
            T.eq(label + ": the leaks made before", rel.site_sum(doc, "leak_here",
                                                                 "leaked_blocks"), leaks)


# --- daemon() ---------------------------------------------------------------------

def wait_gone(pid):
    """Until the daemon is gone (or a zombie nobody reaps); a hang guard of 60 s."""
    for _ in range(1200):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def run_daemon(argv, d, env):
    """Runs a daemon_leak; returns (result, the daemon's report text, its pid)."""
    out = os.path.join(d, "daemon.out")
    r = rel.run(argv, env=env, cwd=d)
    pid = None
    for _ in range(1200):	# the daemon writes its pid last; a hang guard of 60 s
        if os.path.exists(out + ".pid"):
            with open(out + ".pid") as f:
                txt = f.read()
            if txt.endswith("\n"):
                pid = int(txt)
                break
        time.sleep(0.05)
    if pid is None:
        return r, None, None
    wait_gone(pid)
    with open(out) as f:
        return r, f.read(), pid


def case_daemon():
    exe = check.built_target("daemon_leak")
    leaks = 6
    for opts in ([], ["nochdir", "noclose"]):
        label = "daemon(%s)" % (", ".join(opts) or "0, 0")
        d = check.fresh_dir(WORK, "daemon-" + "-".join(opts or ["plain"]))
        out = os.path.join(d, "daemon.out")
        argv = [exe, str(leaks), out] + opts
        plain, plain_says, _ = run_daemon(argv, d, check.clean_env())
        if plain_says is None:
            raise Skip("the plain daemon did not report (daemon() failed?)")
        os.remove(out)
        os.remove(out + ".pid")
        dump = os.path.join(d, "run.htr")
        traced, says, pid = run_daemon(argv, d, rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}))
        rel.same_run(T, label, plain, traced)
        T.eq(label + ": the daemon finds what it finds without the shim", says, plain_says)
        if pid is None:
            continue
        end, doc = end_of(dump)
        T.eq(label + ": the parent's dump ends 'exit 0'", end, {"how": "exit", "status": 0})
        if doc is not None:
            T.eq(label + ": the parent's leaks", rel.site_sum(doc, "leak_before",
                                                             "leaked_blocks"), leaks)
        end, doc = end_of(dump_of_pid(dump, pid))
        T.eq(label + ": the daemon's dump ends 'exit 7'", end, {"how": "exit", "status": 7})
        if doc is not None:
            T.eq(label + ": the daemon's own leaks", rel.site_sum(doc, "leak_in_daemon",
                                                                  "leaked_blocks"), leaks)


# --- SIGTERM the moment a child is forked ------------------------------------------------

def case_fork_term():
    exe = check.built_target("fork_term")
    rounds = 20
    d = check.fresh_dir(WORK, "fork-term")
    dump = os.path.join(d, "run.htr")
    r = rel.run([exe, str(rounds)], env=rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}), cwd=d)
    T.eq("fork, then SIGTERM: the parent exits 0", r.returncode, 0)
    children = []
    for line in check.text(r.stdout).splitlines():
        p = line.split()
        if len(p) == 4 and p[0] == "child":
            children.append((int(p[1]), int(p[3])))
    T.eq("fork, then SIGTERM: every child died of SIGTERM", [s for _, s in children],
         [int(signal.SIGTERM)] * rounds)
    ends = [end_of(dump_of_pid(dump, pid))[0] if os.path.exists(dump_of_pid(dump, pid))
            else "no dump" for pid, _ in children]
    bad = [e for e in ends if e != {"how": "signal", "status": int(signal.SIGTERM)}]
    T.check("fork, then SIGTERM: every child's dump ends 'killed by signal 15'", not bad,
            "%d of %d do not: %r" % (len(bad), len(ends), bad[:5]))
    end, doc = end_of(dump)
    T.eq("fork, then SIGTERM: the parent's dump ends 'exit 0'", end,
         {"how": "exit", "status": 0})


# --- real programs ------------------------------------------------------------------------

def tool(name):
    path = shutil.which(name, path="/usr/bin:/bin")
    if not path:
        raise Skip("%s is not installed" % name)
    return path


def ends_by_image(dump):
    """{exe basename: [END, ...]} for every image that left a dump, execs excluded."""
    out = {}
    for exe, files in images(dump).items():
        for f in files:
            end, _ = end_of(f)
            if end and end.get("how") == "exec":
                continue
            out.setdefault(exe, []).append(end)
    return out


def sort_pipe(argv, env, cwd):
    """sort writing into a pipe the reader closes after one line: SIGPIPE."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        first = p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read()
        p.wait(timeout=rel.TIMEOUT)
    finally:
        if p.poll() is None:
            rel.kill_group(p)
            p.wait()
    return first, err, p.returncode


def case_sort():
    sort = tool("sort")
    d = check.fresh_dir(WORK, "sort")
    data = os.path.join(d, "in.txt")
    with open(data, "w") as f:
        for i in range(300000):
            f.write("%d\n" % (i * 7919 % 300007))
    argv = [sort, "-n", data]
    plain = sort_pipe(argv, check.clean_env(), d)
    T.eq("sort | close: the plain sort dies of SIGPIPE", plain[2], -signal.SIGPIPE)
    dump = os.path.join(d, "sort.htr")
    traced = sort_pipe(argv, rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}), d)
    T.eq("sort | close: same first line, stderr and status", traced, plain)
    end, doc = end_of(dump)
    T.eq("sort | close: the dump ends 'killed by signal 13'", end,
         {"how": "signal", "status": int(signal.SIGPIPE)})
    T.check("sort | close: the dump holds sort's allocations",
            doc is not None and doc["totals"]["allocations"] > 0, "%r" % (doc and doc["totals"]))


def case_timeout():
    timeout = tool("timeout")
    sh = tool("sh")
    sleep = tool("sleep")
    for label, argv, want in (
            ("timeout re-raises its child's SIGTERM", [timeout, "30", sh, "-c", "kill -TERM $$"],
             {"timeout": [{"how": "signal", "status": 15}],
              os.path.basename(os.path.realpath(sh)): [{"how": "signal", "status": 15}]}),
            ("timeout 0.2 sleep 1", [timeout, "0.2", sleep, "1"],
             {"timeout": [{"how": "exit", "status": 124}],
              "sleep": [{"how": "signal", "status": 15}]})):
        d = check.fresh_dir(WORK, "timeout")
        plain = rel.run(argv, cwd=d)
        dump = os.path.join(d, "t.htr")
        traced = rel.run(argv, env=rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}), cwd=d)
        rel.same_run(T, label, plain, traced)
        T.eq(label + ": every image's dump has its END", ends_by_image(dump), want)


def main():
    cases = [("re-raise", case_reraise), ("daemon", case_daemon),
             ("fork then SIGTERM", case_fork_term), ("sort", case_sort),
             ("timeout", case_timeout)]
    try:
        rel.run_cases(T, cases, "ENDRECORD_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
