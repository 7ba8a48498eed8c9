#!/usr/bin/env python3
"""test_guard.py - signals and re-entry: where a signal finds a thread decides what the shim may do.

Each target runs plainly and under the shim: same output, same exit
status; the dump's figures are checked against what the target knows.

  guard_sigfamily     sigset, sysv_signal, siginterrupt + signal, a raw
                      rt_sigaction: what the program reads back is what it
                      set, with libc's own flags (the shim's hidden handler
                      neither shows through nor lingers)
  guard_fault segv    a kernel fault, a sent SIGSEGV, an abort inside free()
  ... kill-segv       (the thread is in the real allocator), a default-fatal
  ... bad-free        SIGUSR2: each dies of its signal, and the dump ends
  ... usr2            "killed by signal N" holding the leaks made before
  guard_fault usr2    with HEAPTRAIL_MARK_SIGNAL=USR2 the signal is a marker
                      instead (opt-in): the process lives on
  guard_newhandler    operator new[] fails, its new_handler makes room, the
                      retry succeeds: the block is new[]'s, delete[] matches
  guard_samplechurn   HEAPTRAIL_SAMPLE=1 records every block of 1.9 M: the
                      sampled-block set reuses its room, counts are exact
  unshare -r          unshare(CLONE_NEWUSER), refused to threaded processes,
                      works under the shim (its writer thread pauses)
"""

import os
import shutil
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
import reliability as rel  # noqa: E402

T = check.Suite("guard")
WORK = tempfile.mkdtemp(prefix="heaptrail-guard-")
target = check.built_target


def pair(label, argv, env=None):
    """A plain and a traced run; same behaviour.  Returns (plain, traced, dump)."""
    d = check.fresh_dir(WORK, label.replace(" ", "_"))
    plain = rel.run(argv, env=check.clean_env(env), cwd=d)
    dump = os.path.join(d, "run.htr")
    traced = rel.run(argv, env=rel.shim_env(dump, env), cwd=d)
    rel.same_run(T, label, plain, traced)
    return plain, traced, dump


def case_sigfamily():
    plain, _, dump = pair("signal family", [target("guard_sigfamily")])
    out = check.text(plain.stdout)
    # The plain run itself is the truth; these lines say what it must show.
    T.check("signal family: sigset's handler reads back",
            "after sigset(SIGTERM): handler h1" in out, out)
    T.check("signal family: siginterrupt(1) makes signal() not restart",
            "after siginterrupt + signal(SIGINT): handler h3 restart 0" in out, out)
    rel.clean_dump(T, "signal family", dump, "exit")


def case_faults():
    leaks = 5
    for how, sig in (("segv", signal.SIGSEGV), ("kill-segv", signal.SIGSEGV),
                     ("bad-free", signal.SIGABRT), ("usr2", signal.SIGUSR2)):
        label = "fault " + how
        plain, traced, dump = pair(label, [target("guard_fault"), how, str(leaks)],
                                   env={"HEAPTRAIL_QUIET": "1"})
        T.eq(label + ": the plain run dies of signal %d" % sig, plain.returncode, -sig)
        cp, doc = check.report(dump)
        if not T.check(label + ": report reads the dump", doc is not None,
                       check.first_line(cp.stderr)):
            continue
        T.eq(label + ": the dump ends 'killed by signal %d'" % sig, doc["totals"].get("end"),
             {"how": "signal", "status": int(sig)})
        T.eq(label + ": the leaks made before", rel.site_sum(doc, "leak_here", "leaked_blocks"),
             leaks)


def case_mark_opt_in():
    d = check.fresh_dir(WORK, "mark")
    dump = os.path.join(d, "run.htr")
    r = rel.run([target("guard_fault"), "usr2", "3"],
                env=rel.shim_env(dump, {"HEAPTRAIL_MARK_SIGNAL": "USR2"}), cwd=d)
    T.eq("marker signal asked for: the process lives on (exit 3)", r.returncode, 3)
    cp, doc = check.analyze("snapshot", dump, "--at", "signal", "--top", "0")
    T.check("marker signal asked for: the 'signal' marker is in the dump",
            cp.returncode == 0 and doc is not None, check.first_line(cp.stderr))


def case_newhandler():
    plain, _, dump = pair("new_handler", [target("guard_newhandler")])
    T.eq("new_handler: the plain run got its block after one handler call",
         check.text(plain.stdout).strip(), "new[] ok, handler calls 1")
    doc = rel.clean_dump(T, "new_handler", dump, "exit")
    if doc:
        T.eq("new_handler: no block freed through the wrong family",
             doc["totals"].get("mismatches"), 0)
        # main also leaks stdout's buffer (printf): only the big block must be gone
        T.check("new_handler: the 3 GiB block was freed",
                rel.site_sum(doc, "main", "leaked_bytes") < (1 << 20),
                "main leaks %d bytes" % rel.site_sum(doc, "main", "leaked_bytes"))


def case_samplechurn():
    rounds = 30000
    plain, _, dump = pair("sample churn", [target("guard_samplechurn"), str(rounds)],
                          env={"HEAPTRAIL_SAMPLE": "1"})
    doc = rel.clean_dump(T, "sample churn", dump, "exit")
    if doc:
        T.eq("sample churn: every churned block recorded",
             rel.site_sum(doc, "churn_here", "allocations"), rounds * 64)
        T.eq("sample churn: none left", rel.site_sum(doc, "churn_here", "leaked_blocks"), 0)
        T.eq("sample churn: the kept blocks", rel.site_sum(doc, "keep_here", "leaked_blocks"), 7)


def case_sigalloc():
    n = 200000
    plain, traced, dump = pair("signal handler allocating", [target("guard_sigalloc"), str(n)])
    # the handler's blocks made inside the shim are counted lost: a warning, not a failure
    cp, doc = check.report(dump)
    T.eq("signal handler allocating: report exits 0", cp.returncode, 0)
    if doc:
        T.eq("signal handler allocating: every block of the interrupted loop recorded",
             rel.site_sum(doc, "loop_here", "allocations"), n)
        T.eq("signal handler allocating: no free of an unknown block",
             doc["totals"]["unknown_frees"], 0)


def case_unshare():
    exe = shutil.which("unshare", path="/usr/bin:/bin")
    if not exe:
        raise check.Skip("no unshare(1)")
    argv = [exe, "-r", "/bin/sh", "-c", "id -u"]
    d = check.fresh_dir(WORK, "unshare")
    plain = rel.run(argv, env=check.clean_env(), cwd=d)
    if plain.returncode != 0:
        raise check.Skip("user namespaces are not allowed here: %s" % check.first_line(plain.stderr))
    plain, _, dump = pair("unshare -r", argv)
    cp, doc = check.report(dump)
    T.check("unshare -r: the dump of unshare(1) reads", doc is not None, check.first_line(cp.stderr))


def main():
    cases = [("sigfamily", case_sigfamily), ("faults", case_faults),
             ("mark", case_mark_opt_in), ("newhandler", case_newhandler),
             ("samplechurn", case_samplechurn), ("sigalloc", case_sigalloc),
             ("unshare", case_unshare)]
    try:
        rel.run_cases(T, cases, "GUARD_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
