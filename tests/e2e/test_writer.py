#!/usr/bin/env python3
"""test_writer.py - the shim's writer thread and its dump file (review findings 4, 7, 27, 28).

  bursty program     idle, busy, idle, ... many times (writer_burst): every
                     event recorded, no line on stderr (zstd's context grows
                     and shrinks with the frames; the writer's memory must
                     not run out over that, nor the loss be blamed on the disk)
  concurrent starts  processes started at the same moment with the same
                     HEAPTRAIL_OUT, over a stale dump of a dead process: one
                     writes OUT, each other one OUT.PID and says so in one
                     line; every dump is whole and holds its own process only
  over a longer dump OUT holds a whole dump, ten times longer, of a process
                     that has ended: the new dump replaces it, no byte of
                     the old one left behind it to be read as more frames
                     (the old file is cut to one byte, not to none: ext4
                     writes back on close a file cut to none)
  header not written OUT holds an old dump and the header cannot be written
                     (RLIMIT_FSIZE 0): the program runs as without the shim,
                     and OUT is left empty, not with the one byte it was cut
                     to, so the analyzer says "empty file"
  held name          OUT locked by a starter that has not written its header
                     yet: left alone, the dump goes to OUT.PID
  dup2 onto the dump a program thread dup2()s a file of its own onto the
                     dump's descriptor, again and again (writer_dup2): no
                     byte of the dump lands in the program's file, no event
                     is lost
  lowest free fd     the writer never takes a low descriptor, not even for a
                     moment (writer_lowfd): dup() returns the lowest free
                     number every time
  packed chunks      the shim packs chunks into columns (HTR_PF_PACKED):
                     scripts/htrdump.py, the independent decoder, unpacks
                     every chunk of a run and finds the program's own
                     allocations and frees (the analyzer's side is every
                     other e2e test)
"""

import fcntl
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))

import check  # noqa: E402
import htrdump  # noqa: E402
import reliability as rel  # noqa: E402

T = check.Suite("writer")
WORK = tempfile.mkdtemp(prefix="heaptrail-writer-")


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def shim_lines(stderr):
    return [l for l in check.text(stderr).splitlines() if l.startswith("heaptrail: ")]


def site_allocations(doc, function):
    return rel.site_sum(doc, function, "allocations")


# --- review finding 4: bursty programs -------------------------------------------

def case_bursty():
    exe = check.built_target("writer_burst")
    d = fresh_dir("bursty")
    dump = os.path.join(d, "b.htr")
    # 1 ms rounds: each quiet spell of 150 ms is ~150 tiny frames, after
    # which zstd trades its context for a smaller one; each burst needs the
    # large one again.  30 cycles did 18 before the writer ran dry.
    argv = [exe, "30", "100000", "150"]
    traced = rel.run(argv, env=rel.shim_env(dump, {"HEAPTRAIL_INTERVAL_MS": "1"}), cwd=d)
    T.eq("bursty: exits 0", traced.returncode, 0)
    T.eq("bursty: nothing from heaptrail on stderr", shim_lines(traced.stderr), [])
    want = rel.output_facts(traced.stdout).get("allocations")
    doc = rel.clean_dump(T, "bursty", dump, "exit")
    if doc is not None:
        T.eq("bursty: every burst allocation recorded",
             site_allocations(doc, "burst_alloc"), want)


# --- review finding 7: concurrent starters ----------------------------------------

def stale_dump(path):
    """A dump header left by a process that no longer lives."""
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    with open(path, "wb") as f:
        f.write(b"HTRDUMP\n" + struct.pack("<IIII", 1, 64, dead, 0) + bytes(40))


def start_together(argv, env, cwd, n):
    """Forks n children that wait on one pipe, then exec argv at once;
    returns [(pid, status, stdout, stderr)]."""
    r, w = os.pipe()
    kids = []
    for i in range(n):
        out = os.path.join(cwd, "out.%d" % i)
        err = os.path.join(cwd, "err.%d" % i)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(w)
                fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fo, 1)
                os.dup2(fe, 2)
                os.chdir(cwd)
                os.read(r, 1)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        kids.append((pid, out, err))
    os.close(r)
    os.write(w, b"x" * n)
    os.close(w)
    res = []
    for pid, out, err in kids:
        _, status = os.waitpid(pid, 0)
        with open(out, "rb") as f:
            o = f.read()
        with open(err, "rb") as f:
            e = f.read()
        res.append((pid, os.waitstatus_to_exitcode(status), o, e))
    return res


def case_over_longer():
    exe = check.built_target("rel_churn")
    d = fresh_dir("over_longer")
    old = os.path.join(d, "old.htr")
    dump = os.path.join(d, "same.htr")
    big = rel.run([exe, "4", "20000"], env=rel.shim_env(old), cwd=d)
    T.eq("over a longer dump: the old run exits 0", big.returncode, 0)
    with open(old, "rb") as f:
        old_bytes = f.read()
    with open(dump, "wb") as f:
        f.write(old_bytes)
    argv = [exe, "2", "2000"]
    plain = rel.run(argv, env=check.clean_env(None), cwd=d)
    traced = rel.run(argv, env=rel.shim_env(dump), cwd=d)
    rel.same_run(T, "over a longer dump", plain, traced)
    T.eq("over a longer dump: no other file", sorted(f for f in os.listdir(d)
                                                     if f.startswith("same.htr")), ["same.htr"])
    size = os.path.getsize(dump)
    T.check("over a longer dump: shorter than the old one", size < len(old_bytes) // 4,
            "%d bytes, the old one %d" % (size, len(old_bytes)))
    doc = rel.clean_dump(T, "over a longer dump", dump, "exit")
    if doc is None:
        return
    facts = rel.site_facts(plain.stdout)
    T.check("over a longer dump: the program counted its sites", len(facts) >= 4, repr(facts))
    for name, (n, nbytes) in sorted(facts.items()):
        T.eq("over a longer dump: allocations at %s, the new run's only" % name,
             rel.site_sum(doc, name, "allocations"), n)
        T.eq("over a longer dump: bytes at %s, the new run's only" % name,
             rel.site_sum(doc, name, "allocated_bytes"), nbytes)
    T.eq("over a longer dump: leaked, the new run's only",
         rel.site_sum(doc, "churn_leak", "leaked_bytes"),
         rel.output_facts(plain.stdout).get("leaked_bytes"))


def no_file_size():
    """preexec: no file may grow (SIGXFSZ ignored: write() fails with EFBIG)."""
    import resource
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def case_header_fails():
    exe = check.built_target("rel_churn")
    d = fresh_dir("header_fails")
    dump = os.path.join(d, "same.htr")
    with open(dump, "wb") as f:
        f.write(b"HTRDUMP\n" + bytes(4000))
    argv = [exe, "2", "200"]
    plain = rel.run(argv, env=check.clean_env(None), cwd=d, preexec_fn=no_file_size)
    traced = rel.run(argv, env=rel.shim_env(dump), cwd=d, preexec_fn=no_file_size)
    T.eq("header not written: exit status as without the shim", traced.returncode,
         plain.returncode)
    T.eq("header not written: output as without the shim", traced.stdout, plain.stdout)
    T.eq("header not written: the old dump is cut to nothing", os.path.getsize(dump), 0)
    cp = check.analyze("leaks", dump)[0]
    T.eq("header not written: the analyzer exits 2", cp.returncode, 2)
    T.check("header not written: one line, an empty file",
            check.text(cp.stderr).count("\n") == 1 and "empty file" in check.text(cp.stderr),
            check.text(cp.stderr)[:200])


def case_concurrent():
    exe = check.built_target("rel_churn")
    d = fresh_dir("concurrent")
    # one second each, so that every process still runs when the last starts
    argv = [exe, "1", "-s", "1"]
    n = 12
    for rnd in range(3):
        sub = fresh_dir("concurrent/%d" % rnd)
        dump = os.path.join(sub, "same.htr")
        stale_dump(dump)
        res = start_together(argv, rel.shim_env(dump), sub, n)
        label = "concurrent round %d" % rnd
        T.eq(label + ": every process exits 0", [r[1] for r in res], [0] * n)
        dumps = sorted(f for f in os.listdir(sub) if f.startswith("same.htr"))
        names = {"same.htr"} | {"same.htr.%d" % r[0] for r in res}
        T.check(label + ": one dump per process, OUT or OUT.PID",
                len(dumps) == n and set(dumps) <= names, "%r" % dumps)
        lines = [shim_lines(r[3]) for r in res]
        T.eq(label + ": every later starter says where it writes, once",
             sorted(len(ls) for ls in lines), [0] + [1] * (n - 1))
        T.check(label + ": the line names both files",
                all("'%s'" % dump in ls[0] and "'%s.%d'" % (dump, r[0]) in ls[0]
                    for r, ls in zip(res, lines) if ls), repr([ls for ls in lines if ls][:2]))
        by_pid = {r[0]: r for r in res}
        for f in dumps:
            path = os.path.join(sub, f)
            doc = rel.clean_dump(T, "%s: %s" % (label, f), path, "exit")
            if doc is None:
                continue
            with open(path, "rb") as fh:
                pid = struct.unpack("<I", fh.read(20)[16:20])[0]
            T.check("%s: %s is one of the processes" % (label, f), pid in by_pid, "pid %d" % pid)
            if pid not in by_pid:
                continue
            want = rel.site_facts(by_pid[pid][2])
            got = {name: rel.site_sum(doc, name, "allocations") for name in want}
            T.eq("%s: %s holds its process's allocations" % (label, f), got,
                 {name: c for name, (c, _) in want.items()})


def case_held():
    """A starter that holds the name's lock but has not written its header
    yet (a concurrent start caught in the act): the file is left alone."""
    exe = check.built_target("rel_churn")
    d = fresh_dir("held")
    dump = os.path.join(d, "held.htr")
    with open(dump, "wb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(b"HTRDUMP\n")
        f.flush()
        traced = rel.run([exe, "1", "2000"], env=rel.shim_env(dump), cwd=d)
        with open(dump, "rb") as g:
            T.eq("held: the holder's file is untouched", g.read(), b"HTRDUMP\n")
    T.eq("held: exits 0", traced.returncode, 0)
    lines = shim_lines(traced.stderr)
    T.check("held: one line says where the dump goes instead",
            len(lines) == 1 and "'%s'" % dump in lines[0] and ".htr.' " not in lines[0],
            repr(lines))
    others = [f for f in os.listdir(d) if f.startswith("held.htr.")]
    T.eq("held: the dump is written as OUT.PID", len(others), 1)
    for f in others:
        rel.clean_dump(T, "held: " + f, os.path.join(d, f), "exit")


# --- review finding 27: dup2 onto the dump's descriptor -----------------------------

def case_dup2():
    exe = check.built_target("writer_dup2")
    d = fresh_dir("dup2")
    for rnd in range(3):
        dump = os.path.join(d, "d%d.htr" % rnd)
        victim = os.path.join(d, "victim%d" % rnd)
        label = "dup2 round %d" % rnd
        # the dump must exist before the program looks for its inode: the
        # shim creates it before main
        traced = rel.run([exe, dump, victim, "3000000"],
                         env=rel.shim_env(dump, {"HEAPTRAIL_INTERVAL_MS": "1"}), cwd=d)
        T.eq(label + ": exits 0", traced.returncode, 0)
        T.eq(label + ": nothing from heaptrail on stderr", shim_lines(traced.stderr), [])
        facts = rel.output_facts(traced.stdout)
        T.check(label + ": the program moved the dump's descriptor",
                facts.get("moves", 0) > 100, "%r" % facts)
        T.eq(label + ": no dump bytes in the program's file", facts.get("victim_bytes"), 0)
        doc = rel.clean_dump(T, label, dump, "exit")
        if doc is not None:
            T.eq(label + ": every allocation recorded", site_allocations(doc, "churn_alloc"),
                 facts.get("allocations"))


# --- review finding 28: short-lived low descriptors -------------------------------------

def case_lowfd():
    exe = check.built_target("writer_lowfd")
    d = fresh_dir("lowfd")
    for label, extra in (("lowfd", []), ("lowfd after closefrom", ["closefrom"])):
        dump = os.path.join(d, "l%d.htr" % len(extra))
        traced = rel.run([exe, "1500"] + extra,
                         env=rel.shim_env(dump, {"HEAPTRAIL_INTERVAL_MS": "1",
                                                 "HEAPTRAIL_PACK": "auto"}), cwd=d)
        T.eq(label + ": exits 0", traced.returncode, 0)
        facts = rel.output_facts(traced.stdout)
        T.check(label + ": the program checked often", facts.get("checks", 0) > 1000,
                "%r" % facts)
        T.eq(label + ": dup() always returned the lowest free number", facts.get("misses"), 0)
        rel.clean_dump(T, label, dump, "exit")


# --- packed chunks, read by the independent decoder ------------------------------------

def case_packed():
    exe = check.built_target("writer_burst")
    d = fresh_dir("packed")
    dump = os.path.join(d, "p.htr")
    traced = rel.run([exe, "3", "60000", "0"], env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "1"}),
                     cwd=d)
    T.eq("packed: exits 0", traced.returncode, 0)
    want = rel.output_facts(traced.stdout).get("allocations")
    flags, counts = None, {}
    biggest, live, unknown, back = 0, set(), 0, 0
    last_time = {}
    for flags, tid, base, data in htrdump.chunks(dump):
        plain = htrdump.unpack_chunk(data)
        biggest = max(biggest, len(plain))
        for e in htrdump.chunk_events(htrdump.Buf(plain), len(plain), base):
            counts[e[0]] = counts.get(e[0], 0) + 1
            # a chunk joins several buffers of a thread: each one's first time
            # and pointer are written again to continue from the one before
            if e[0] in ("alloc", "free"):
                if e[1] < last_time.get(tid, 0):
                    back += 1
                last_time[tid] = e[1]
            if e[0] == "alloc":
                live.add(e[3])
            elif e[0] == "free":
                if e[3] in live:
                    live.discard(e[3])
                else:
                    unknown += 1
    T.check("packed: chunks join several of a thread's 32 KiB buffers",
            biggest > 3 * 32768, "largest chunk %d bytes" % biggest)
    T.eq("packed: every free is of a block allocated before (pointers continue "
         "across joined buffers)", unknown, 0)
    T.eq("packed: no event is timed before the thread's previous one", back, 0)
    T.check("packed: the process record announces packed chunks",
            flags is not None and flags & 16, "flags %r" % flags)
    # the C library allocates a few blocks of its own (stdio)
    T.check("packed: htrdump finds the program's allocations",
            want is not None and want <= counts.get("alloc", 0) <= want + 16,
            "%r vs %r" % (counts, want))
    T.check("packed: and its frees", want is not None and want <= counts.get("free", 0) <= want + 16,
            "%r vs %r" % (counts, want))


def case_pack_auto():
    """HEAPTRAIL_PACK=auto packs while CPU is spare and stops when it is not, in one dump."""
    import json
    exe = check.built_target("pack_phases")
    d = fresh_dir("pack-auto")
    dump = os.path.join(d, "a.htr")
    probe = os.path.join(d, "probe")
    # spare CPU as the writer is to believe it, phase by phase (thousandths)
    traced = rel.run([exe, probe, "400", "2000", "0", "2000", "0"],
                     env=rel.shim_env(dump, {"HEAPTRAIL_PACK": "auto",
                                             "HEAPTRAIL__PACK_PROBE": probe}), cwd=d)
    T.eq("pack auto: exits 0", traced.returncode, 0)
    facts = rel.output_facts(traced.stdout)
    flags, modes = htrdump.chunk_modes(dump)
    T.check("pack auto: the dump announces packed chunks", flags is not None and flags & 16,
            "flags %r" % flags)
    runs = []
    for m in modes:
        if not runs or runs[-1][0] != m:
            runs.append([m, 0])
        runs[-1][1] += 1
    # raw until the first window, then packed, raw, packed, raw as told
    T.check("pack auto: chunks packed and left raw by turns as the spare CPU went",
            [m for m, _ in runs][-4:] == [1, 0, 1, 0] and all(n >= 3 for _, n in runs[-4:]),
            "runs of (mode, chunks): %r" % runs)
    cp = check.run([check.HEAPTRAIL, "report", "--json", dump])
    T.eq("pack auto: report reads the mixed dump", cp.returncode, 0)
    sites = [s for s in json.loads(cp.stdout)["sites"] if s["function"] == "phase_alloc"]
    T.eq("pack auto: every allocation of the program is there",
         sum(s["allocations"] for s in sites), facts.get("allocations"))
    T.eq("pack auto: and its leaked blocks", sum(s["leaked_blocks"] for s in sites),
         facts.get("leaked_blocks"))
    T.eq("pack auto: and bytes", sum(s["leaked_bytes"] for s in sites), facts.get("leaked_bytes"))


def cpu_quota_cgroup(d):
    """A cgroup limited to one CPU (v1 or v2), or None: (path, procs file)."""
    name = "heaptrail-test-%d" % os.getpid()
    for base, files in (("/sys/fs/cgroup/cpu", (("cpu.cfs_period_us", "100000"),
                                                ("cpu.cfs_quota_us", "100000"))),
                        ("/sys/fs/cgroup", (("cpu.max", "100000 100000"),))):
        path = os.path.join(base, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        try:
            for f, v in files:
                with open(os.path.join(path, f), "w") as fh:
                    fh.write(v)
            return path
        except OSError:
            os.rmdir(path)
    return None


def case_pack_auto_quota():
    """Under a one-CPU quota a busy one-thread program leaves no CPU to spare,
    however idle the machine: auto does not pack."""
    if os.getuid() != 0:
        raise check.Skip("a cgroup with a CPU quota needs root")
    exe = check.built_target("writer_burst")
    d = fresh_dir("pack-quota")
    cg = cpu_quota_cgroup(d)
    if cg is None:
        raise check.Skip("no writable cgroup cpu controller (v1 cpu or v2 cpu.max)")
    try:
        dump = os.path.join(d, "q.htr")
        env = rel.shim_env(dump, {"HEAPTRAIL_PACK": "auto"})
        env["HT_SHIM"] = env.pop("LD_PRELOAD")	# the program's, not the shell's
        traced = rel.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && '
                          'LD_PRELOAD="$HT_SHIM" exec "$@"', cg,
                          exe, "1", "3000000", "0"], env=env, cwd=d)
        T.eq("pack auto under a quota: exits 0", traced.returncode, 0)
        flags, modes = htrdump.chunk_modes(dump)
        later = modes[len(modes) // 4:]	# after the first 100 ms windows
        T.check("pack auto under a one-CPU quota: (nearly) nothing packed",
                later and sum(m == 1 for m in later) <= len(later) // 10,
                "%d of %d later chunks packed" % (sum(m == 1 for m in later), len(later)))
    finally:
        try:
            os.rmdir(cg)
        except OSError:
            pass


def process_flags(dump):
    """The PROCESS record's flags (the first record of the first frame)."""
    for kind, payload in htrdump.frames(dump):
        if kind != "frame":
            continue
        b = htrdump.Buf(payload)
        if b.d[b.i] != 1:
            return None
        b.i += 1
        for _ in range(5):
            b.u()
        b.str()
        b.str()
        return [b.u() for _ in range(5)][3]
    return None


def case_record_pack():
    exe = check.built_target("writer_burst")
    d = fresh_dir("record-pack")
    for opt, want in (("1", 16), ("0", 0)):
        dump = os.path.join(d, "r%s.htr" % opt)
        cp = check.record(dump, [exe, "1", "2000", "0"], cwd=d, options=["--pack=" + opt])
        T.eq("record --pack=%s: exits 0" % opt, cp.returncode, 0)
        flags = process_flags(dump)
        T.eq("record --pack=%s: the dump says packed %s" % (opt, bool(want)),
             None if flags is None else flags & 16, want)


def main():
    cases = [("bursty program", case_bursty), ("concurrent starts", case_concurrent),
             ("over a longer dump", case_over_longer),
             ("header not written", case_header_fails), ("held name", case_held),
             ("dup2 onto the dump", case_dup2), ("lowest free fd", case_lowfd),
             ("packed chunks", case_packed), ("record --pack", case_record_pack),
             ("pack auto", case_pack_auto), ("pack auto under a CPU quota", case_pack_auto_quota)]
    try:
        rel.run_cases(T, cases, "WRITER_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
