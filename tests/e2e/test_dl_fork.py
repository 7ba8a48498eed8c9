#!/usr/bin/env python3
"""test_dl_fork.py - the shim around the loader, fork, vfork, exec and exit (review findings 1, 2, 3, 5, 13, 17, 21, 23).

Targets: dlf_main (modes, see its comment), libdlf_outer.so (RUNPATH
$ORIGIN), libdlf_sib.so, libdlf_ctor.so, dlf_atexit with libdlf_static.so.
Each case compares what the program did (its output, the sizes it chose)
with the dump's reports; runs are bounded by a timeout that only guards
against a hang.

1   a library with RUNPATH $ORIGIN dlopens its sibling by bare name, and
    dlmopen(LM_ID_NEWLM) works: the output is the same with and without
    the shim (the shim does not wrap dlopen).
13  a dlopen'ed library's constructor's allocation is named.
    A library loaded, unloaded and loaded again elsewhere: both named.
    Two libraries with different frames taking turns at one address
    (dlr_swap): every stack through them walked with the rules of the
    one loaded then, libunwind's too (review of session 5).
17  5,000 dlopen/dlclose rounds allocating from 200 stacks each: the stack
    table does not fill.
21  the writer's queue flooded with marks while a library is loaded 200
    times: every allocation of the library is named.
2   threads hammer dlopen/dlclose and dl_iterate_phdr while the main
    thread forks 200 children: no child hangs, every child's dump reads.
    A fork while the writer is halfway through a clock update: the
    child does not hang (review of session 4).
3   vfork + exec and vfork + _exit do not end the parent's recording.
    A child of a raw clone system call (no fork handler ran: no writer of
    its own) that allocates past the buffers it inherited runs as plainly
    (it waited 5 s a buffer), and the parent's dump is whole.
5   frees by a static C++ destructor and by a library's exit destructors
    are seen: nothing they free is reported leaked.
23  a dump left by an earlier process with our pid (pid reuse) is not
    taken for this process's pre-exec image.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
import reliability as rel  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("dl_fork")
WORK = tempfile.mkdtemp(prefix="heaptrail-dlfork-")
LIBS = check.TARGETS


def need(*names):
    check.need_tools()
    for n in names:
        if not os.path.exists(os.path.join(LIBS, n)):
            raise Skip("%s is not built (make test-targets)" % n)
    return check.target("dlf_main")


def traced(name, argv, env=None):
    """Runs argv under the shim (LD_PRELOAD) in a fresh folder: (result, dump path)."""
    d = check.fresh_dir(WORK, name)
    dump = os.path.join(d, "run.htr")
    r = rel.run(argv, env=rel.shim_env(dump, env), cwd=d)
    T.check("no hang", not r.hung, "killed after %d s" % rel.TIMEOUT)
    return r, dump


def plain(argv):
    return rel.run(argv)


def leaks(dump):
    cp, doc = check.analyze("leaks", dump)
    T.check("leaks reads %s" % os.path.basename(dump), doc is not None,
            check.first_line(cp.stderr))
    return doc or {"sites": [], "totals": {}}


def leaked_at(doc, function, key="leaked_bytes"):
    return sum(s.get(key, 0) for s in doc["sites"]
               if check.function_matches(s.get("function"), function))


def modules_of(doc, function):
    return set(check.base(s.get("module")) for s in doc["sites"]
               if check.function_matches(s.get("function"), function))


def case_origin():
    exe = need("libdlf_outer.so", "libdlf_sib.so")
    argv = [exe, "origin", LIBS]
    p = plain(argv)
    T.eq("plain run finds the sibling", p.stdout, b"sibling ok\n")
    r, dump = traced("origin", argv)
    T.eq("same output under the shim (RUNPATH $ORIGIN of the caller)",
         r.stdout, p.stdout)
    T.eq("exit status", r.returncode, 0)
    doc = leaks(dump)
    T.eq("the sibling's leak at sib_leak", leaked_at(doc, "sib_leak"), 1111)
    T.eq("in libdlf_sib.so", modules_of(doc, "sib_leak"), {"libdlf_sib.so"})


def case_dlmopen():
    exe = need("libdlf_sib.so")
    argv = [exe, "dlmopen", LIBS]
    p = plain(argv)
    T.eq("plain run", p.stdout, b"dlmopen value 42\n")
    r, dump = traced("dlmopen", argv)
    T.eq("same output under the shim", r.stdout, p.stdout)
    T.eq("exit status", r.returncode, 0)
    cp, doc = check.report(dump)
    T.check("the dump reads", doc is not None, check.first_line(cp.stderr))


def case_ctor():
    exe = need("libdlf_ctor.so")
    r, dump = traced("ctor", [exe, "ctor", LIBS])
    T.eq("output", r.stdout, b"ctor 1\n")
    doc = leaks(dump)
    T.eq("the constructor's leak is named ctor_leak", leaked_at(doc, "ctor_leak"), 777)
    T.eq("in libdlf_ctor.so", modules_of(doc, "ctor_leak"), {"libdlf_ctor.so"})
    T.check("no unnamed leak of 777 bytes",
            not [s for s in doc["sites"] if s.get("leaked_bytes") == 777 and
                 not s.get("function")], "")


def case_twice():
    exe = need("libdlf_sib.so")
    r, dump = traced("twice", [exe, "twice", LIBS])
    T.eq("loaded again at another address", r.stdout, b"moved 1\n")
    doc = leaks(dump)
    sizes = sorted(s["leaked_bytes"] for s in doc["sites"]
                   if check.function_matches(s.get("function"), "sib_leak"))
    T.eq("both leaks named sib_leak", sizes, [1111, 2222])
    T.eq("in libdlf_sib.so", modules_of(doc, "sib_leak"), {"libdlf_sib.so"})


def case_swap():
    exe = check.target("dlr_swap")
    for lib in ("libdlr_x.so", "libdlr_y.so"):
        if not os.path.exists(os.path.join(LIBS, lib)):
            raise Skip("%s is not built (make test-targets)" % lib)
    argv = [exe, LIBS, "8"]
    p = plain(argv)
    facts = rel.output_facts(p.stdout)
    T.eq("plain run", p.returncode, 0)
    if facts.get("same_address", 0) < 4:
        raise Skip("the loader did not reuse the address (%r)" % facts)
    r, dump = traced("swap", argv)
    T.eq("exit status", r.returncode, 0)
    T.eq("same output under the shim", r.stdout, p.stdout)
    cp, doc = check.report(dump)
    T.check("the dump reads", doc is not None, check.first_line(cp.stderr))
    if doc is None:
        return
    through, wrong = 0, []
    for site in doc["sites"]:
        names = [check.norm_function(f.get("function")) for f in site.get("stack", [])]
        if "dlr_leaf" not in names:
            continue
        through += site.get("allocations", 0)
        i = names.index("dlr_leaf")
        if names[i + 1:i + 3] != ["dlr_entry", "dlr_outer"]:
            wrong.append(names[i:i + 4])
    T.eq("every allocation at dlr_leaf", through, facts.get("leaf_allocations"))
    T.eq("every stack goes dlr_leaf, dlr_entry, dlr_outer", wrong, [])
    # libunwind, asked for every stack beside the walk, must agree with it
    r2, _ = traced("swap_check", argv, {"HEAPTRAIL_UNWIND_CHECK": "1"})
    T.eq("HEAPTRAIL_UNWIND_CHECK=1: no stack differs from libunwind's",
         [l for l in check.text(r2.stderr).splitlines() if "differs" in l][:2], [])


def case_loop():
    exe = need("libdlf_sib.so")
    rounds = 5000
    r, dump = traced("loop", [exe, "loop", LIBS, str(rounds)])
    T.eq("output", r.stdout, ("rounds %d\n" % rounds).encode())
    cp, doc = check.report(dump)
    err = check.text(cp.stderr)
    if doc is None:
        T.fail("report reads", check.first_line(cp.stderr))
        return
    T.check("the stack table did not fill", "stack table full" not in err, err[:300])
    T.eq("every allocation of the 200 stacks kept its stack",
         rel.site_sum(doc, "depth_alloc", "allocations"), rounds * 200)
    doc = leaks(dump)
    T.eq("the last round's leak named sib_leak", leaked_at(doc, "sib_leak"), 3333)


def case_marks():
    exe = need("libdlf_sib.so")
    n = 200
    r, dump = traced("marks", [exe, "marks", LIBS, str(n)])
    T.eq("output", r.stdout, ("loads %d\n" % n).encode())
    doc = leaks(dump)
    T.eq("every load's leak named sib_leak (module records never lost)",
         leaked_at(doc, "sib_leak"), sum(100 + i for i in range(n)))
    T.eq("... and counted", leaked_at(doc, "sib_leak", "leaked_blocks"), n)


def case_forks():
    exe = need("libdlf_sib.so")
    n = 200
    r, dump = traced("forks", [exe, "forks", LIBS, str(n)])
    facts = rel.output_facts(r.stdout)
    T.eq("%d children forked" % n, facts.get("forks"), n)
    T.eq("no child hung (dl_iterate_phdr after a fork)", facts.get("hung"), 0)
    T.eq("every child exited 0", facts.get("bad"), 0)
    children = [f for f in rel.dumps_of(dump) if f != dump]
    T.eq("a dump per child", len(children), n)
    unread = []
    for f in children:
        cp, doc = check.report(f)
        if doc is None:
            unread.append("%s: %s" % (os.path.basename(f), check.first_line(cp.stderr)))
            continue
        end = doc["totals"].get("end")
        if rel.site_sum(doc, "depth_alloc", "allocations") != 8 or \
           not isinstance(end, dict) or end.get("how") != "exit":
            unread.append("%s: %d allocations at depth_alloc, end %r" % (
                os.path.basename(f), rel.site_sum(doc, "depth_alloc", "allocations"), end))
    T.check("every child's dump reads, with its 8 allocations and its end",
            not unread, "; ".join(unread[:5]))


def case_fork_clock():
    """A fork while the writer is halfway through a clock update (held there
    by HEAPTRAIL__CLOCK_STALL_MS, as a preempted writer would be): the
    child's events must not wait for an update nobody will finish."""
    exe = check.target("fork_clockfit")
    r, dump = traced("fork-clock", [exe], {"HEAPTRAIL__CLOCK_STALL_MS": "2000"})
    facts = rel.output_facts(r.stdout)
    T.eq("the child exited 0", facts.get("child_status"), 0)
    children = [f for f in rel.dumps_of(dump) if f != dump]
    T.eq("a dump for the child", len(children), 1)
    for f in children[:1]:
        doc = leaks(f)
        T.eq("the child's leaked blocks", leaked_at(doc, "leak_in_child", "leaked_blocks"),
             facts.get("child_blocks"))
        T.eq("... and bytes", leaked_at(doc, "leak_in_child"),
             (facts.get("child_blocks") or 0) * (facts.get("child_block_bytes") or 0))


def case_vfork():
    exe = need()
    r, dump = traced("vfork", [exe, "vfork", LIBS])
    T.eq("output", r.stdout, b"vfork leaks 3\n")
    T.eq("exit status", r.returncode, 0)
    doc = leaks(dump)
    T.eq("the parent's leaks after the vfork children", leaked_at(doc, "after_vfork_leak"),
         3000)
    T.eq("... 3 blocks", leaked_at(doc, "after_vfork_leak", "leaked_blocks"), 3)
    cp, rep = check.report(dump)
    end = rep["totals"].get("end") if rep else None
    T.eq("the parent's dump ends with its own exit", end, {"how": "exit", "status": 0})


def case_raw_clone():
    """A child of the clone system call itself runs no fork handler: no writer of its own."""
    need("rawclone_churn")
    exe = os.path.join(LIBS, "rawclone_churn")
    n = 3000000
    r, dump = traced("raw-clone", [exe, str(n)])
    want = b"child sum %d\nparent leaked 3500, child status 0\n" % (7 * n)
    T.eq("raw clone: the output (the child ran to its end)", r.stdout, want)
    T.eq("raw clone: exit status", r.returncode, 0)
    doc = leaks(dump)
    T.eq("raw clone: the parent's leak is in its dump", leaked_at(doc, "raw_parent_leak"), 3500)
    cp, rep = check.report(dump)
    end = rep["totals"].get("end") if rep else None
    T.eq("raw clone: the parent's dump ends with its exit", end, {"how": "exit", "status": 0})


def case_atexit():
    check.need_tools()
    exe = check.target("dlf_atexit")
    if not os.path.exists(os.path.join(LIBS, "libdlf_static.so")):
        raise Skip("libdlf_static.so is not built")
    r, dump = traced("atexit", [exe, LIBS])
    T.eq("output", r.stdout, b"ready\n")
    doc = leaks(dump)
    T.eq("the static object's destructor freed its block (Holder::fill)",
         leaked_at(doc, "Holder::fill"), 0)
    T.eq("the library's exit destructors freed theirs (static_make)",
         leaked_at(doc, "static_make"), 0)
    T.eq("the block kept on purpose leaks (static_keep)", leaked_at(doc, "static_keep"),
         4242)
    T.eq("no block the destructors free is reported leaked, named or not",
         sorted(s["leaked_bytes"] for s in doc["sites"]
                if s.get("leaked_bytes") in (3001, 3002, 5005)), [])
    cp, rep = check.report(dump)
    T.eq("allocations at static_make, both seen",
         rel.site_sum(rep, "static_make", "allocations") if rep else None, 2)


def case_pid_reuse():
    exe = need("libdlf_ctor.so")
    d = check.fresh_dir(WORK, "pid-reuse")
    dump = os.path.join(d, "run.htr")
    env = rel.shim_env(dump)
    pid = os.fork()
    if pid == 0:
        try:
            # a dump "written" an hour ago by a process that had this pid
            hdr = struct.pack("<8sIIIIQ32s", b"HTRDUMP\n", 1, 64, os.getpid(), 0,
                              int((time.time() - 3600) * 1e9), b"\0" * 32)
            with open(dump, "wb") as f:
                f.write(hdr)
            os.chdir(d)
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            os.execve(exe, [exe, "ctor", LIBS], env)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    T.eq("the program exits 0", status, 0)
    T.eq("the stale dump is replaced, no second file",
         [os.path.basename(f) for f in rel.dumps_of(dump)], ["run.htr"])
    cp = check.run([check.HEAPTRAIL, "report", dump])
    out = check.text(cp.stdout)
    T.check("the dump is the program's", cp.returncode == 0 and
            ("pid            %d" % pid) in out, check.first_line(cp.stderr) or out[:200])
    T.check("not taken for an image started by exec", "started by exec" not in out,
            out[:300])


def main():
    cases = [("origin", case_origin), ("dlmopen", case_dlmopen), ("ctor", case_ctor),
             ("twice", case_twice), ("swap", case_swap), ("loop", case_loop), ("marks", case_marks),
             ("forks", case_forks), ("fork clock", case_fork_clock), ("vfork", case_vfork), ("raw clone", case_raw_clone), ("atexit", case_atexit),
             ("pid reuse", case_pid_reuse)]
    only = os.environ.get("DL_FORK_CASE")
    for name, fn in cases:
        if only and name != only:
            continue
        with T.case(name):
            fn()
    check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
