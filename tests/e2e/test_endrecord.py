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
  trap         trap_leak: an int3 with no debugger, SIGTRAP (Chromium's CHECK
               failures): the dump ends "killed by signal 5" with the leaks
  stuck        term_in_realloc: the main thread waits for ever inside
  realloc      realloc (another thread holds the arena); SIGTERM ends it, as
               plainly, with END (a deferral to the end of the realloc
               once made it ignore TERM)
  daemon       daemon_leak: glibc's daemon() ends the parent with _exit(0)
               inside the C library; the parent's dump must end "exit 0",
               the daemon's "exit 7"; what the daemon finds (cwd, session,
               descriptors 0-2) as without the shim; with and without
               nochdir/noclose
  fork, then   fork_term: SIGTERM sent the moment fork() returns in the
  SIGTERM      parent, while the child's shim is opening its dump: every
               child's dump ends "killed by signal 15"
  SIGTERM in   term_churn: 1 to 4 threads in a tight malloc/free loop, SIGTERM
  malloc       sent to the process (kill, once or twice) or to one thread
               (tgkill) at a random moment, or the kernel's SIGALRM of a
               timer the target sets, 20 runs each: every dump ends
               "killed by signal N" and holds, for the thread the signal found, every
               allocation and free it completed (counters in a shared file
               written after each call returns) and at most the one in
               flight; for any thread never more than it started
  real         GNU sort killed by SIGPIPE (its handler re-raises), timeout
  programs     re-raising its child's SIGTERM, timeout's timer, dash killed
               by 'kill -TERM $$' (it sets SIG_DFL itself): same output and
               status, every dump with its END (skipped when not installed)
"""

import ctypes
import json
import os
import random
import struct
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

import check  # noqa: E402
import htrdump  # noqa: E402
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


def case_trap():
    """A breakpoint instruction with no debugger: SIGTRAP (Chromium's CHECK failures)."""
    exe = check.built_target("trap_leak")
    d = check.fresh_dir(WORK, "trap")
    argv = [exe, "3"]
    plain = rel.run(argv, cwd=d)
    T.eq("trap: the plain run dies of SIGTRAP", plain.returncode, -signal.SIGTRAP)
    dump = os.path.join(d, "run.htr")
    traced = rel.run(argv, env=rel.shim_env(dump), cwd=d)
    rel.same_run(T, "trap", plain, traced)
    end, doc = end_of(dump)
    T.eq("trap: the dump ends 'killed by signal 5'", end,
         {"how": "signal", "status": int(signal.SIGTRAP)})
    if doc is not None:
        T.eq("trap: the leaks made before", rel.site_sum(doc, "trap_leak_here", "leaked_bytes"),
             900)


def term_stuck(exe, env, d):
    """Runs exe, sends SIGTERM once it says ready; its exit status, or None if still alive."""
    p = subprocess.Popen([exe], env=env, cwd=d, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    p.stdout.readline()	# its pid
    line = p.stdout.readline()
    time.sleep(0.3)	# into realloc, waiting for the arena
    p.send_signal(signal.SIGTERM)
    try:
        return line, p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return line, None


def case_term_stuck_realloc():
    """SIGTERM to a process whose main thread waits for ever inside realloc."""
    exe = check.built_target("term_in_realloc")
    d = check.fresh_dir(WORK, "stuck-realloc")
    line, status = term_stuck(exe, check.clean_env(), d)
    T.eq("stuck realloc, plain: dies of SIGTERM", (line, status), (b"ready\n", -signal.SIGTERM))
    dump = os.path.join(d, "run.htr")
    line, status = term_stuck(exe, rel.shim_env(dump), d)
    T.eq("stuck realloc, traced: dies of SIGTERM (not deferred for ever)", (line, status),
         (b"ready\n", -signal.SIGTERM))
    end, _ = end_of(dump)
    T.eq("stuck realloc: the dump ends 'killed by signal 15'", end,
         {"how": "signal", "status": int(signal.SIGTERM)})


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


# --- SIGTERM while the shim records ---------------------------------------------------

CHURN_MAX = 8
CHURN_SIZE = 1000


def churn_counters(path):
    """term_churn's counters file as {"ready", "tid": [..], "alloc_started": [..], ...}."""
    with open(path, "rb") as f:
        data = f.read()
    words = struct.unpack("<%dQ" % (len(data) // 8), data)
    n = words[1]
    out = {"ready": words[0], "n": n}
    for k, name in enumerate(("tid", "alloc_started", "alloc_done", "free_started",
                              "free_done")):
        base = 2 + k * CHURN_MAX
        out[name] = list(words[base:base + n])
    return out


def churn_events(dump):
    """{tid: [allocations of the worker's size, frees of those blocks]} in the dump."""
    out = {}
    live = {}
    for flags, tid, base, data in htrdump.chunks(dump):
        plain = htrdump.unpack_chunk(data) if flags & 16 else data
        ev = htrdump.chunk_events(htrdump.Buf(plain), len(plain), base)
        got = out.setdefault(tid, [0, 0])
        mine = live.setdefault(tid, set())
        for e in ev:
            if e[0] == "alloc" and CHURN_SIZE <= e[4] < CHURN_SIZE + CHURN_MAX:
                got[0] += 1
                mine.add(e[3])
            elif e[0] == "free" and e[3] in mine:
                got[1] += 1
                mine.discard(e[3])
    return out


def tgkill(pid, tid, sig):
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(234, ctypes.c_int(pid), ctypes.c_int(tid), ctypes.c_int(sig))


def churn_run(exe, d, threads, how, rng):
    """One run: start, wait for 'ready', then at a random moment SIGTERM to the
    process ("kill", "kill twice") or to one thread ("tgkill"), or the
    target's own timer's SIGALRM ("alarm").  Returns (status, end, counters,
    events, the thread signalled or None)."""
    dump = os.path.join(d, "run.htr")
    cfile = os.path.join(d, "counters")
    for f in rel.dumps_of(dump) if os.path.exists(dump) else []:
        os.unlink(f)
    if os.path.exists(cfile):
        os.unlink(cfile)
    argv = [exe, str(threads), cfile]
    if how == "alarm":
        argv.append(str(rng.randrange(1000, 30000)))
    p = subprocess.Popen(argv, cwd=d,
                         env=rel.shim_env(dump, {"HEAPTRAIL_QUIET": "1"}),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    target = None
    try:
        for _ in range(6000):
            if os.path.exists(cfile) and os.path.getsize(cfile) >= 16 and \
                    churn_counters(cfile)["ready"]:
                break
            if p.poll() is not None:
                break
            time.sleep(0.005)
        if how != "alarm":
            time.sleep(rng.uniform(0.0, 0.03))
        if how == "tgkill":
            target = rng.randrange(threads)
            tgkill(p.pid, churn_counters(cfile)["tid"][target], int(signal.SIGTERM))
        elif how.startswith("kill"):
            os.kill(p.pid, signal.SIGTERM)
            if how == "kill twice":
                os.kill(p.pid, signal.SIGTERM)
        status = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rel.kill_group(p)
        p.wait()
        status = "hung"
    end = end_of(dump)[0] if os.path.exists(dump) else "no dump"
    return status, end, churn_counters(cfile), churn_events(dump), target


def case_term_churn():
    exe = check.built_target("term_churn")
    rng = random.Random(int(os.environ.get("ENDRECORD_SEED", "0")) or None)
    runs = int(os.environ.get("ENDRECORD_CHURN_RUNS", "20"))
    d = check.fresh_dir(WORK, "term-churn")
    for threads, how in ((1, "kill"), (4, "kill twice"), (3, "tgkill"), (2, "alarm")):
        sig = int(signal.SIGALRM if how == "alarm" else signal.SIGTERM)
        want_end = {"how": "signal", "status": sig}
        directed = how == "tgkill"
        label = "%s, %d thread%s in malloc/free" % (
            {"kill": "SIGTERM to the process", "kill twice": "SIGTERM twice to the process",
             "tgkill": "SIGTERM to one thread", "alarm": "SIGALRM of a timer"}[how],
            threads, "s" if threads > 1 else "")
        bad_status, bad_end, over, short = [], [], [], []
        for run in range(runs):
            status, end, c, ev, target = churn_run(exe, d, threads, how, rng)
            if status != -sig:
                bad_status.append((run, status))
            if end != want_end:
                bad_end.append((run, end))
                continue
            held = [ev.get(c["tid"][i], [0, 0]) for i in range(threads)]
            for i in range(threads):
                if held[i][0] > c["alloc_started"][i] or held[i][1] > c["free_started"][i]:
                    over.append((run, i, held[i], c["alloc_started"][i], c["free_started"][i]))

            def complete(i):
                return (c["alloc_done"][i] <= held[i][0] <= c["alloc_started"][i] and
                        c["free_done"][i] <= held[i][1] <= c["free_started"][i])
            # the thread the signal found stopped there: all it completed is in
            if directed:
                ok = complete(target)
            else:
                ok = any(complete(i) for i in range(threads))
            if not ok:
                short.append((run, target, held, c["alloc_done"], c["free_done"]))
        T.check(label + ": every run dies of signal %d" % sig, not bad_status,
                "%d of %d do not: %r" % (len(bad_status), runs, bad_status[:5]))
        T.check(label + ": every dump ends 'killed by signal %d'" % sig, not bad_end,
                "%d of %d do not: %r" % (len(bad_end), runs, bad_end[:5]))
        T.check(label + ": no thread has more events than it started", not over,
                "%d: %r" % (len(over), over[:3]))
        T.check(label + ": the signalled thread's completed calls are all in the dump",
                not short, "%d of %d runs not: %r" % (len(short), runs, short[:3]))


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
    cases = [("re-raise", case_reraise), ("trap", case_trap),
             ("TERM in a stuck realloc", case_term_stuck_realloc), ("daemon", case_daemon),
             ("fork then SIGTERM", case_fork_term), ("SIGTERM in malloc", case_term_churn),
             ("sort", case_sort),
             ("timeout", case_timeout)]
    try:
        rel.run_cases(T, cases, "ENDRECORD_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
