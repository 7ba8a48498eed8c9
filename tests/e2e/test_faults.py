#!/usr/bin/env python3
"""test_faults.py - the shim when things go wrong around it (issue 9).

The target is rel_churn (threads allocating, freeing and passing blocks
around; it prints what it allocated per site, deterministically).  In
each fault the target must keep its behaviour: the same stdout and exit
status as a plain run, and on stderr nothing but the plain run's output
plus at most the one line the fault deserves.

  disk full        the dump on a 1 MiB tmpfs (skipped when mount fails): one
                   warning line, the target runs on; the dump reads up to where
                   the disk filled, with a warning, and says events were lost
  unwritable dump  (also when the shim starts inside bindtextdomain(), under the
                   catalogs' lock: its message must not take it again: no hang)
                   a missing directory, a path under a regular file, a
                   directory, /proc: one line, the target runs untraced; the
                   same through 'heaptrail record'
  SIGKILL          mid-run, after the dump holds data: report, leaks and
                   timeline read it (warning: no end record), sites add up
  ulimit -v        300 MB and 100 MB of address space: the target runs as it
                   does plainly under the same limit (the shim may record
                   nothing, with one line saying so)
  bad HEAPTRAIL_*  each bad value: one line naming it, the default used, the
                   target traced and unchanged; all at once: one line each;
                   HEAPTRAIL_QUIET: none
  malloc ahead     another allocator before the shim in LD_PRELOAD (jemalloc,
                   tcmalloc, mimalloc: whichever is installed): the target
                   unchanged, one line naming it and saying to put the shim
                   first; the shim first, or a library without malloc
                   before it: no line; heaptrack's preload library (a
                   wrapper, hooking dlopen) before it: no hang, one line
"""

import os
import resource
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

T = check.Suite("faults")
WORK = tempfile.mkdtemp(prefix="heaptrail-faults-")


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


def churn():
    for p in (check.HEAPTRAIL, check.SHIM):
        if not os.path.exists(p):
            raise Skip("%s is not built (make)" % p)
    path = os.path.join(check.TARGETS, "rel_churn")
    if not os.access(path, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % path)
    return path


def shim_lines(stderr):
    return [l for l in check.text(stderr).splitlines() if l.startswith("heaptrail: ")]


def other_lines(stderr):
    return [l for l in check.text(stderr).splitlines() if not l.startswith("heaptrail: ")]


def unchanged_but_one_line(label, plain, traced, want_in_line=None, lines=1):
    """Same stdout and status; stderr = the plain one plus 'lines' heaptrail lines."""
    if traced.hung:
        T.fail(label + ": no hang", "killed after %d s" % rel.TIMEOUT)
        return []
    T.eq(label + ": exit status unchanged", traced.returncode, plain.returncode)
    T.check(label + ": stdout unchanged", traced.stdout == plain.stdout,
            "%r vs %r" % (traced.stdout[-200:], plain.stdout[-200:]))
    T.eq(label + ": the program's own stderr unchanged", other_lines(traced.stderr),
         other_lines(plain.stderr))
    got = shim_lines(traced.stderr)
    T.eq(label + ": %d line(s) from heaptrail" % lines, len(got), lines)
    if want_in_line and got:
        T.check(label + ": the line says '%s'" % want_in_line,
                all(want_in_line in l for l in got), repr(got))
    return got


def total_allocations(stdout):
    n = 0
    for line in check.text(stdout).splitlines():
        p = line.split()
        if len(p) == 6 and p[0] == "site":
            n += int(p[3])
    return n


# --- disk full ----------------------------------------------------------------

def case_disk_full():
    exe = churn()
    if os.getuid() != 0:
        raise Skip("mounting a tmpfs needs root")
    d = fresh_dir("disk-full")
    mnt = os.path.join(d, "mnt")
    os.makedirs(mnt)
    cp = rel.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt])
    if cp.returncode != 0:
        raise Skip("cannot mount a tmpfs: %s" % check.first_line(cp.stderr))
    try:
        # A steady rate (0.1 ms pauses) and 10 ms rounds: small frames, so the
        # disk fills after many of them whatever the machine's load.
        argv = [exe, "2", "150000", "-p", "100"]
        plain = rel.run(argv, cwd=d)
        for how in ("LD_PRELOAD", "record"):
            label = "disk full (%s)" % how
            for f in os.listdir(mnt):
                os.remove(os.path.join(mnt, f))
            dump = os.path.join(mnt, "full.htr")
            if how == "LD_PRELOAD":
                traced = rel.run(argv, env=rel.shim_env(dump, {"HEAPTRAIL_INTERVAL_MS": "10"}),
                                 cwd=d)
            else:
                traced = rel.run([check.HEAPTRAIL, "record", "-o", dump, "--interval", "10",
                                  "--"] + argv, cwd=d)
            got = shim_lines(traced.stderr)
            if how == "LD_PRELOAD":
                unchanged_but_one_line(label, plain, traced, "disk full")
            else:
                T.eq(label + ": exit status unchanged", traced.returncode, plain.returncode)
                T.check(label + ": stdout unchanged", traced.stdout == plain.stdout)
                T.check(label + ": says the disk is full",
                        any("disk full" in l for l in got), repr(got))
            # the shim takes back the frame it could not finish, so a few
            # blocks are free again afterwards
            st = os.statvfs(mnt)
            T.check(label + ": the file system filled up",
                    st.f_bavail * st.f_frsize < (64 << 10), "%d blocks free" % st.f_bavail)
            cp, doc = check.report(dump)
            T.eq(label + ": report reads the dump", cp.returncode, 0)
            T.check(label + ": with a warning that it ends early",
                    "warning" in check.text(cp.stderr), check.first_line(cp.stderr))
            if doc is None:
                continue
            want = total_allocations(plain.stdout)
            got_n = doc["totals"]["allocations"]
            T.check(label + ": the dump holds the run up to where the disk filled",
                    0 < got_n < want, "%d allocations of the program's %d" % (got_n, want))
            # The shim knows it dropped everything after the disk filled; the
            # dump should say so (a LOST/END marker), not look like SIGKILL.
            T.check(label + ": the dump says events were lost (disk full marker)",
                    doc["totals"].get("lost_events", 0) > 0 or
                    (doc["totals"].get("end") or {}).get("how") is not None,
                    "lost_events %r, end %r: the dump just stops" %
                    (doc["totals"].get("lost_events"), doc["totals"].get("end")))
    finally:
        rel.run(["umount", "-l", mnt])


# --- unwritable output path ------------------------------------------------------

def case_unwritable():
    exe = churn()
    d = fresh_dir("unwritable")
    afile = os.path.join(d, "a-file")
    with open(afile, "w") as f:
        f.write("x")
    adir = os.path.join(d, "a-dir")
    os.makedirs(adir)
    argv = [exe, "3", "2000"]
    plain = rel.run(argv, cwd=d)
    bad_plain = rel.run([exe, "bad-arguments"], cwd=d)
    T.eq("the target's usage error exits 2", bad_plain.returncode, 2)
    for label, path in (("missing directory", os.path.join(d, "no", "such", "x.htr")),
                        ("under a regular file", os.path.join(afile, "x.htr")),
                        ("a directory", adir),
                        ("in /proc", "/proc/heaptrail-x.htr")):
        traced = rel.run(argv, env=rel.shim_env(path), cwd=d)
        got = unchanged_but_one_line("unwritable, " + label, plain, traced, "cannot create")
        T.check("unwritable, %s: the line names the path and says untraced" % label,
                got and path in got[0] and "untraced" in got[0], repr(got))
        traced = rel.run([exe, "bad-arguments"], env=rel.shim_env(path), cwd=d)
        unchanged_but_one_line("unwritable, %s, failing target" % label, bad_plain, traced,
                               "cannot create")
    # Through 'record': the target's status and output; the shim's line first.
    path = os.path.join(d, "no", "such", "y.htr")
    traced = rel.run([check.HEAPTRAIL, "record", "-o", path, "--"] + argv, cwd=d)
    T.eq("unwritable via record: exit status unchanged", traced.returncode, plain.returncode)
    T.check("unwritable via record: stdout unchanged", traced.stdout == plain.stdout)
    got = shim_lines(traced.stderr)
    T.check("unwritable via record: says it cannot create the dump",
            got and "cannot create" in got[0] and path in got[0], repr(got))


def case_unwritable_in_ctor():
    """The shim starts inside bindtextdomain() (a library's constructor), cannot create its dump."""
    d = fresh_dir("unwritable-nls")
    opt = os.path.join(check.TOP, "tests", "targets", "optional")
    lib = os.path.join(d, "libnls_ctor.so")
    exe = os.path.join(d, "nls_main")
    cc = os.environ.get("CC", "cc")
    for argv in ([cc, "-shared", "-fPIC", "-o", lib, os.path.join(opt, "nls_ctor.c")],
                 [cc, "-o", exe, os.path.join(opt, "nls_main.c"), "-L" + d,
                  "-Wl,--no-as-needed", "-lnls_ctor", "-Wl,-rpath," + d]):
        cp = rel.run(argv, cwd=d)
        if cp.returncode != 0:
            raise Skip("cannot build the bindtextdomain targets: %s" % check.first_line(cp.stderr))
    plain = rel.run([exe], cwd=d)
    T.eq("bindtextdomain target: plain run prints", check.text(plain.stdout), "bound 3\n")
    traced = rel.run([exe], env=rel.shim_env(os.path.join(d, "no", "such", "x.htr")), cwd=d)
    unchanged_but_one_line("unwritable, starting inside bindtextdomain", plain, traced,
                           "cannot create")


# --- SIGKILL mid-run ------------------------------------------------------------------

def case_sigkill():
    exe = churn()
    d = fresh_dir("sigkill")
    dump = os.path.join(d, "killed.htr")
    p = subprocess.Popen([exe, "4", "-s", "60"], env=rel.shim_env(dump), cwd=d,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        for _ in range(1200):	# up to 60 s: a hang guard; usually 0.3 s
            if os.path.exists(dump) and os.path.getsize(dump) > 256 << 10:
                break
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate(timeout=rel.TIMEOUT)
    finally:
        if p.poll() is None:
            rel.kill_group(p)
            p.wait()
    T.eq("SIGKILL: killed", p.returncode, -signal.SIGKILL)
    T.eq("SIGKILL: nothing on stderr", check.text(err), "")
    cp, doc = check.report(dump)
    T.eq("SIGKILL: report exits 0", cp.returncode, 0)
    if doc is None:
        raise AssertionError("no report: %s" % check.first_line(cp.stderr))
    tot = doc["totals"]
    T.check("SIGKILL: events up to the kill", tot["allocations"] > 1000, "%r" % tot)
    T.eq("SIGKILL: no END record", (tot.get("end") or {}).get("how"), None)
    txt = check.run([check.HEAPTRAIL, "report", dump])
    said = check.text(txt.stdout + txt.stderr).lower()
    T.check("SIGKILL: the report says the dump has no end record", "no end record" in said,
            said[:300])
    T.eq("SIGKILL: sites add up to the totals", sum(s["leaked_bytes"] for s in doc["sites"]),
         tot["leaked_bytes"])
    T.eq("SIGKILL: allocations add up", sum(s["allocations"] for s in doc["sites"]),
         tot["allocations"])
    for verb in ("leaks", "timeline", "growth"):
        cp, _ = check.analyze(verb, dump)
        T.eq("SIGKILL: %s reads the dump" % verb, cp.returncode, 0)


# --- ulimit -v ---------------------------------------------------------------------------

def limit_as(mib):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return set_limit


def case_ulimit():
    exe = churn()
    d = fresh_dir("ulimit")
    py = shutil.which("python3", path="/usr/bin:/bin")
    programs = [("rel_churn, 4 threads", [exe, "4", "20000"]),
                ("rel_churn, 1 thread", [exe, "1", "20000"])]
    if py:
        programs.append(("python3", [py, "-c", "import json; d = [str(i) * 10 for i in "
                                     "range(200000)]; print(len(json.dumps(d)))"]))
    for mib in (300, 100):
        for name, argv in programs:
            if mib == 100 and "4 threads" in name:
                # near 100 MB, whether 4 threads fit depends on which of them
                # get a malloc arena of their own: it fails now and then
                # without the shim too
                continue
            label = "ulimit -v %d MB, %s" % (mib, name)
            plain = rel.run(argv, cwd=d, preexec_fn=limit_as(mib))
            if plain.returncode != 0:
                T.skip(label, "fails without the shim too (exit %r)" % plain.returncode)
                continue
            # The shim's libraries (libunwind, zstd, lzma) map ~3 MB even when
            # it runs untraced: a program that needs the limit to the last
            # few megabytes fails with any preloaded library.
            # Three times: how much a threaded program needs varies from run
            # to run (which threads get a malloc arena of their own).
            for _ in range(3):
                tight = rel.run(argv, cwd=d, preexec_fn=limit_as(mib - 8))
                if tight.returncode != 0:
                    break
            if tight.returncode != 0:
                T.skip(label, "the program needs all but 8 MB of the limit (exit %r at %d MB)"
                       % (tight.returncode, mib - 8))
                continue
            dump = os.path.join(d, "u%d.htr" % mib)
            traced = rel.run(argv, env=rel.shim_env(dump), cwd=d, preexec_fn=limit_as(mib))
            if traced.returncode is not None and traced.returncode < 0:
                T.fail(label + ": the target was not killed",
                       "signal %d under the shim" % -traced.returncode)
            got = shim_lines(traced.stderr)
            unchanged_but_one_line(label, plain, traced, lines=len(got) if len(got) <= 1 else 1)
            if got:
                print("# %s: %s" % (label, got[0]))


# --- bad HEAPTRAIL_* values -----------------------------------------------------------------

BAD = [("HEAPTRAIL_DEPTH", "1000"), ("HEAPTRAIL_DEPTH", "abc"), ("HEAPTRAIL_DEPTH", "0"),
       ("HEAPTRAIL_DEPTH", ""), ("HEAPTRAIL_DEPTH", "-5"),
       ("HEAPTRAIL_INTERVAL_MS", "0"), ("HEAPTRAIL_INTERVAL_MS", "10ms"),
       ("HEAPTRAIL_INTERVAL_MS", "99999999999999999999999"),
       ("HEAPTRAIL_FOLLOW", "2"), ("HEAPTRAIL_FOLLOW", "yes"),
       ("HEAPTRAIL_UNWIND", "magic"), ("HEAPTRAIL_SAMPLE", "-1"), ("HEAPTRAIL_SAMPLE", "1e6"),
       ("HEAPTRAIL_CLIENTS", "all"), ("HEAPTRAIL_MARK_SIGNAL", "KILL"),
       ("HEAPTRAIL_MARK_SIGNAL", "9"), ("HEAPTRAIL_MARK_SIGNAL", "99"),
       ("HEAPTRAIL_REACH", "yes")]


def case_bad_values():
    exe = churn()
    d = fresh_dir("bad-values")
    argv = [exe, "2", "3000"]
    plain = rel.run(argv, cwd=d)
    for i, (var, value) in enumerate(BAD):
        label = "%s=%r" % (var, value)
        dump = os.path.join(d, "b%d.htr" % i)
        traced = rel.run(argv, env=rel.shim_env(dump, {var: value}), cwd=d)
        got = unchanged_but_one_line(label, plain, traced)
        T.check(label + ": the line names the variable and the value",
                got and got[0].startswith("heaptrail: ignoring %s='%s'" % (var, value)),
                repr(got))
        rel.clean_dump(T, label, dump, "exit")
    # A path too long for HEAPTRAIL_OUT: the default name, in the working directory.
    sub = fresh_dir("bad-values-out")
    traced = rel.run(argv, env=rel.shim_env("/tmp/" + "x" * 2000 + ".htr"), cwd=sub)
    unchanged_but_one_line("HEAPTRAIL_OUT too long", plain, traced, "HEAPTRAIL_OUT")
    T.eq("HEAPTRAIL_OUT too long: the dump gets the default name",
         [f.startswith("heaptrail.rel_churn.") for f in os.listdir(sub)], [True])
    # All of them at once (one value per variable): one line each.
    once = {}
    for var, value in BAD:
        once.setdefault(var, value)
    dump = os.path.join(d, "all.htr")
    traced = rel.run(argv, env=rel.shim_env(dump, once), cwd=d)
    got = unchanged_but_one_line("all bad at once", plain, traced, "ignoring", lines=len(once))
    T.eq("all bad at once: one line per variable",
         sorted(l.split("=")[0].split()[-1] for l in got), sorted(once))
    rel.clean_dump(T, "all bad at once", dump, "exit")
    traced = rel.run(argv, env=rel.shim_env(dump, dict(once, HEAPTRAIL_QUIET="1")), cwd=d)
    unchanged_but_one_line("all bad, HEAPTRAIL_QUIET", plain, traced, lines=0)


# --- another malloc ahead of the shim ----------------------------------------------------

ALLOCATORS = ["/usr/lib/x86_64-linux-gnu/" + n for n in
              ("libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libmimalloc.so.2")]


def case_malloc_ahead():
    exe = churn()
    found = [a for a in ALLOCATORS if os.path.exists(a)]
    if not found:
        raise Skip("no other allocator installed (libjemalloc2, libtcmalloc-minimal4, "
                   "libmimalloc2.0)")
    d = fresh_dir("ahead")
    argv = [exe, "3", "2000"]
    for lib in found:
        name = os.path.basename(lib)
        env = check.clean_env()
        env["LD_PRELOAD"] = lib
        plain = rel.run(argv, env=env, cwd=d)
        T.eq("%s alone: exits 0" % name, plain.returncode, 0)
        env = rel.shim_env(os.path.join(d, name + ".htr"))
        env["LD_PRELOAD"] = lib + " " + check.SHIM
        traced = rel.run(argv, env=env, cwd=d)
        got = unchanged_but_one_line("%s ahead of the shim" % name, plain, traced, lib)
        T.check("%s ahead of the shim: the line says to put the shim first" % name,
                got and "put libheaptrail.so first" in got[0], repr(got))
        env["LD_PRELOAD"] = check.SHIM + " " + lib
        traced = rel.run(argv, env=env, cwd=d)
        unchanged_but_one_line("%s after the shim" % name, plain, traced, lines=0)
    # a wrapper that hooks dlopen() under a lock it holds while it allocates
    # (heaptrack's preload library, without heaptrack): the shim's start
    # once called dlopen() from inside that allocation and waited for ever
    wrapper = "/usr/lib/heaptrack/libheaptrack_preload.so"
    if os.path.exists(wrapper):
        env = check.clean_env()
        env["LD_PRELOAD"] = wrapper
        plain = rel.run(argv, env=env, cwd=d)
        env = rel.shim_env(os.path.join(d, "wrapper.htr"))
        env["LD_PRELOAD"] = wrapper + " " + check.SHIM
        traced = rel.run(argv, env=env, cwd=d)
        unchanged_but_one_line("heaptrack's preload library ahead of the shim", plain, traced,
                               wrapper)
    # a library before the shim that defines no malloc: nothing to say
    other = os.path.join(check.TARGETS, "libonecall.so")
    if os.path.exists(other):
        plain = rel.run(argv, cwd=d)
        env = rel.shim_env(os.path.join(d, "other.htr"))
        env["LD_PRELOAD"] = other + " " + check.SHIM
        traced = rel.run(argv, env=env, cwd=d)
        unchanged_but_one_line("a library without malloc ahead of the shim", plain, traced,
                               lines=0)


def main():
    cases = [("disk full", case_disk_full), ("unwritable", case_unwritable),
             ("unwritable in a constructor", case_unwritable_in_ctor),
             ("sigkill", case_sigkill), ("ulimit", case_ulimit),
             ("bad values", case_bad_values), ("malloc ahead", case_malloc_ahead)]
    try:
        rel.run_cases(T, cases, "FAULTS_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
