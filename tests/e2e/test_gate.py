#!/usr/bin/env python3
"""test_gate.py - end-to-end checks of 'heaptrail gate' and 'heaptrail diff' (issue 6).

The gate_* targets (tests/targets) count their own allocations
(tests/lib/truth.h); every check compares the gate's verdict and the
function, file and line it names with what the target itself wrote, never
with earlier output of the gate:

- a leaking program fails each limit it exceeds with exit 1 and names the
  leaking function and line; passes within the limits; passes with a
  suppression of that site (by function, file or module);
- clean C and C++ programs pass --max-leaked 0 (the built-in suppressions
  absorb the runtime's one-time blocks, and without them the run fails);
  blocks the program leaks through strdup() or an unclosed FILE are caught;
- a process tree with one leaking child fails and names that child's pid;
- 13 dumps of separate execs read together give every stack exactly as
  each dump read alone (modules the analyzer opened are kept for the next
  dump, which loaded them elsewhere), each leak at the counted line;
- --baseline (a saved file or dumps) fails on an increase and passes
  without one; --max-increase allows some;
- the program's own __lsan_default_suppressions() is honoured;
- --max-growth, --max-residue-per-client, --max-lost (when the shim scans);
- exit statuses 2 (usage, input) and 3 (the command failed);
- the JUnit file satisfies the Jenkins xUnit junit-10.xsd rules, checked by
  a validator written here from the schema's rules (no XSD library needed);
- 'diff' matches sites by symbol across two builds of one program.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("gate")
WORK = tempfile.mkdtemp(prefix="heaptrail-gate-")


target = check.target


def fresh(name):
    return check.fresh_dir(WORK, name)


def gate(args, cmd=None, env=None, cwd=None):
    """heaptrail gate ARGS [-- CMD]; returns (status, stdout text, stderr text)."""
    argv = [check.HEAPTRAIL, "gate"] + list(args)
    if cmd is not None:
        argv += ["--"] + list(cmd)
    cp = check.run(argv, env=check.clean_env(env), cwd=cwd)
    return cp.returncode, check.text(cp.stdout), check.text(cp.stderr)


def gate_json(args, cmd, env=None, cwd=None):
    """gate with --json=FILE (the command's own output stays on stdout)."""
    out = os.path.join(cwd or WORK, "gate-%d.json" % os.getpid())
    if os.path.exists(out):
        os.unlink(out)
    st, so, se = gate(list(args) + ["--json=" + out], cmd, env=env, cwd=cwd)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return st, doc, so, se


def truth(path, pred=None):
    lines = check.truth_lines(path)
    if pred:
        lines = [t for t in lines if pred(t)]
    if not lines:
        raise Skip("no truth line in %s" % path)
    return lines[-1]


def truth_site(t, function):
    m = [s for s in t["sites"] if s["function"] == function]
    if not m:
        raise Skip("the truth has no site %s" % function)
    return m[0]


def named(out, function, file, line):
    """The gate names a site 'function file:line'."""
    return re.search(r"\b%s %s:%d\b" % (re.escape(function), re.escape(file), line), out)


def expect(label, got, want, out="", err=""):
    T.check(label, got == want, "exit %r, want %r; %s | %s" % (
        got, want, check.first_line(out), check.first_line(err)))


def leak_run(mode, n=None, d=None):
    """Runs gate_leak once under 'record' for its truth; returns the truth line."""
    exe = target("gate_leak")
    d = d or fresh("truth-%s-%s" % (mode, n))
    tp = os.path.join(d, "truth.json")
    args = [exe, mode] + ([str(n)] if n is not None else [])
    check.record(os.path.join(d, "t.htr"), args, env={"TRUTH_OUT": tp}, cwd=d)
    return truth(tp), args


# --- a leaking program ------------------------------------------------------

def test_raw_exit():
    with T.case("raw exit_group"):
        d = fresh("rawexit")
        st, out, err = gate(["--max-leaked", "1GB"], [target("gate_leak"), "rawexit", "3"], cwd=d)
        expect("a program that never ran exit(): judged, passes its limit", st, 0, out, err)
        T.check("says its dump has no end record and may miss its last events",
                "no end record" in out and "last events may be missing" in out, out)
        st, out, err = gate(["--max-leaked", "1GB"], [target("gate_leak"), "blocks", "3"], cwd=d)
        T.check("a program that exits normally gets no such warning", "no end record" not in out,
                out)


def test_leaking_program():
    with T.case("leaking program"):
        t, cmd = leak_run("blocks", 3)
        site = truth_site(t, "leak_block")
        peak_site = truth_site(t, "peak_buffer")
        leaked = t["leaked_bytes"]
        T.eq("truth: the program leaked 3 blocks at leak_block", site["leaked_blocks"], 3)
        d = fresh("leaking")

        st, out, err = gate(["--max-leaked", "0"], cmd, cwd=d)
        expect("--max-leaked 0 fails", st, 1, out, err)
        T.check("names leak_block and its line", named(out, "leak_block", "gate_leak.c", site["line"]),
                out)
        st, out, err = gate(["--max-leaked", str(leaked - 1)], cmd, cwd=d)
        expect("--max-leaked one byte below the leak fails", st, 1, out, err)
        st, out, err = gate(["--max-leaked", str(leaked)], cmd, cwd=d)
        expect("--max-leaked equal to the leak passes", st, 0, out, err)
        st, out, err = gate(["--max-leaked", "1MB"], cmd, cwd=d)
        expect("--max-leaked 1MB (units) passes", st, 0, out, err)

        st, out, err = gate(["--max-leaked-per-site", str(site["leaked_bytes"] - 1)], cmd, cwd=d)
        expect("--max-leaked-per-site below the site fails", st, 1, out, err)
        T.check("per-site names leak_block", named(out, "leak_block", "gate_leak.c", site["line"]), out)
        st, out, err = gate(["--max-leaked-per-site", str(site["leaked_bytes"])], cmd, cwd=d)
        expect("--max-leaked-per-site equal to the site passes", st, 0, out, err)

        # The peak: the program's own 1 MiB buffer plus what the runtime held
        # then (the stdout buffer): at least the truth, at most 64 KiB more.
        peak = t["peak_live_bytes"]
        st, out, err = gate(["--max-peak", str(peak - 1)], cmd, cwd=d)
        expect("--max-peak below the program's peak fails", st, 1, out, err)
        T.check("peak names peak_buffer", named(out, "peak_buffer", "gate_leak.c", peak_site["line"]),
                out)
        st, out, err = gate(["--max-peak", str(peak + 65536)], cmd, cwd=d)
        expect("--max-peak above the peak passes", st, 0, out, err)

        st, doc, out, err = gate_json(["--max-leaked", "0", "--max-peak", "4GiB"], cmd, cwd=d)
        expect("--json=FILE: exit 1", st, 1, out, err)
        if doc is None:
            raise Skip("no JSON")
        T.eq("json result", doc["result"], "fail")
        procs = doc["processes"]
        T.eq("json: one process", len(procs), 1)
        T.eq("json: leaked_bytes is the program's", procs[0]["leaked_bytes"], leaked)
        chk = {c["limit"]: c for c in procs[0]["checks"]}
        T.eq("json: max-leaked failed", chk["max-leaked"]["result"], "fail")
        T.eq("json: max-peak passed", chk["max-peak"]["result"], "pass")
        top = chk["max-leaked"]["sites"][0] if chk["max-leaked"]["sites"] else {}
        T.eq("json: top site function", top.get("function"), "leak_block")
        T.eq("json: top site line", top.get("line"), site["line"])
        T.eq("json: top site leaked_bytes", top.get("leaked_bytes"), site["leaked_bytes"])
        T.check("json: site has a stack", isinstance(top.get("stack"), list) and top["stack"],
                repr(top)[:200])


def test_suppressions():
    with T.case("suppressions"):
        t, cmd = leak_run("blocks", 2)
        site = truth_site(t, "leak_block")
        d = fresh("supp")
        for label, pattern in (("function", "leak_block"), ("function glob", "leak_b*ck"),
                               ("anchored function", "^leak_block$"),
                               ("file", "gate_leak.c"), ("module", "tests/gate_leak")):
            f = os.path.join(d, "supp-%s.txt" % label.replace(" ", "-"))
            with open(f, "w") as fh:
                fh.write("# the known leak\n\nleak:%s\n" % pattern)
            st, out, err = gate(["--max-leaked", "0", "--suppressions", f, "--print-suppressions"],
                                cmd, cwd=d)
            expect("suppressed by %s passes" % label, st, 0, out, err)
            m = re.search(r"leak:%s .*\n.*\n?\s*matched (\S+ \S+) in (\d+) blocks?" % re.escape(pattern),
                          out)
            T.check("--print-suppressions shows leak:%s matched the site's blocks" % pattern,
                    m and int(m.group(2)) == site["leaked_blocks"], out[-600:])
        f = os.path.join(d, "other.txt")
        with open(f, "w") as fh:
            fh.write("leak:no_such_function\n")
        st, out, err = gate(["--suppressions", f], cmd, cwd=d)
        expect("a suppression of another site does not hide it", st, 1, out, err)
        f = os.path.join(d, "bad.txt")
        with open(f, "w") as fh:
            fh.write("race:leak_block\n")
        st, out, err = gate(["--suppressions", f], cmd, cwd=d)
        expect("an unsupported suppression type is a usage error", st, 2, out, err)
        T.check("... naming the file and line", "bad.txt:1" in err, err)
        st, out, err = gate(["--suppressions", os.path.join(d, "missing.txt")], cmd, cwd=d)
        expect("a missing suppressions file is an input error", st, 2, out, err)


def test_clean_programs():
    with T.case("clean programs"):
        d = fresh("clean")
        for name, args in (("gate_clean", []), ("gate_cleanxx", []), ("gate_cleanxx", ["unsync"])):
            exe = target(name)
            tp = os.path.join(d, name + ".truth")
            name = " ".join([name] + args)
            st, out, err = gate(["--max-leaked", "0"], [exe] + args, env={"TRUTH_OUT": tp}, cwd=d)
            expect("%s passes --max-leaked 0" % name, st, 0, out, err)
            t = truth(tp)
            T.eq("%s: truth says it leaked nothing" % name, t["leaked_bytes"], 0)
            st, out, err = gate(["--max-leaked", "0", "--no-builtin-suppressions"], [exe] + args,
                                cwd=d)
            expect("%s without the built-in suppressions fails (the runtime did keep blocks)"
                   % name, st, 1, out, err)
        # nothing of the program's own is hidden
        t, cmd = leak_run("strdup")
        s = truth_site(t, "dup_leak")
        st, out, err = gate(["--max-leaked", "0"], cmd, cwd=d)
        expect("a block leaked through strdup() fails", st, 1, out, err)
        T.check("... named at dup_leak's line", named(out, "dup_leak", "gate_leak.c", s["line"]), out)
        m = re.search(r"leaked (\d+) B in 1 block", out)
        T.check("... with exactly its bytes", m and int(m.group(1)) == s["leaked_bytes"], out)
        t, cmd = leak_run("fopen")
        st, out, err = gate(["--max-leaked", "0"], cmd, cwd=d)
        expect("a FILE left open fails", st, 1, out, err)
        T.check("... named at the fopen line",
                named(out, "leak_file", "gate_leak.c", t["facts"]["fopen_line"]), out)
        t, cmd = leak_run("none")
        st, out, err = gate([], cmd, cwd=d)
        expect("no limits given means --max-leaked 0, and a clean run passes", st, 0, out, err)


def test_process_tree():
    with T.case("process tree"):
        exe = target("gate_tree")
        d = fresh("tree")
        tp = os.path.join(d, "truth.json")
        junit = os.path.join(d, "tree.xml")
        st, doc, out, err = gate_json(["--max-leaked", "0", "--max-peak", "1MiB", "--junit", junit],
                                      [exe], env={"TRUTH_OUT": tp}, cwd=d)
        expect("a tree with one leaking child fails", st, 1, out, err)
        lines = check.truth_lines(tp)
        T.eq("truth lines: parent and three children", len(lines), 4)
        leaker = [t for t in lines if t["facts"].get("child") == 1]
        if not leaker:
            raise Skip("no truth of the leaking child")
        pid = leaker[0]["pid"]
        site = truth_site(leaker[0], "child_leak")
        T.check("the failure names the child by pid",
                re.search(r"FAIL gate_tree \(pid %d\): --max-leaked" % pid, out), out)
        T.check("... and its leaking line", named(out, "child_leak", "gate_tree.c", site["line"]), out)
        others = [t["pid"] for t in lines if t["pid"] != pid]
        T.check("no other process fails",
                not any(re.search(r"FAIL gate_tree \(pid %d\)" % p, out) for p in others), out)
        if doc:
            procs = {p["pid"]: p for p in doc["processes"]}
            T.eq("json: every process of the tree", sorted(procs), sorted(t["pid"] for t in lines))
            T.eq("json: the child's leak", procs.get(pid, {}).get("leaked_bytes"),
                 leaker[0]["leaked_bytes"])
            whole = {c["limit"]: c for c in doc["whole_run"]["checks"]}
            T.eq("json: the whole run fails --max-leaked", whole["max-leaked"]["result"], "fail")
            T.eq("json: the whole run's leak", doc["whole_run"]["leaked_bytes"],
                 sum(t["leaked_bytes"] for t in lines))
        check_junit(junit, processes=4, limits=2, failures=2)


def test_shell_tree():
    """'make check' in small: a shell starting test programs; sites summed over processes."""
    with T.case("shell and tests"):
        exe = target("gate_leak")
        d = fresh("shell")
        sh = shutil.which("sh") or "/bin/sh"
        t, _ = leak_run("blocks", 2)
        site = truth_site(t, "leak_block")
        script = "%s blocks 2; %s blocks 2" % (exe, exe)
        st, out, err = gate(["--max-leaked-per-site", str(site["leaked_bytes"] + 1)],
                            [sh, "-c", script], cwd=d)
        expect("each test within --max-leaked-per-site, their sum over it: fails", st, 1, out, err)
        T.check("... as a whole run", re.search(r"^FAIL whole run: --max-leaked-per-site", out, re.M),
                out)
        T.check("... and no single process fails", not re.search(r"^FAIL gate_leak", out, re.M), out)
        T.check("the shell is not judged", re.search(r"^not judged: \S+ \(pid \d+\) \S*sh", out, re.M)
                or "not judged: dash" in out or "not judged: bash" in out, out)
        st, out, err = gate(["--max-leaked-per-site", str(2 * site["leaked_bytes"])],
                            [sh, "-c", script], cwd=d)
        expect("... within twice the site: passes", st, 0, out, err)
        st, out, err = gate([], [sh, "-c", "exec %s none" % exe], cwd=d)
        expect("a shell that execs a clean program passes", st, 0, out, err)
        st, out, err = gate(["--judge", "gate_tree"], [sh, "-c", "%s strdup" % exe], cwd=d)
        expect("--judge of another program: the leaking one is not judged", st, 0, out, err)


def gate_stacks(doc, exe):
    """{pid of exe: [every failing site's stack as (function, file, line, module, offset)]}."""
    out = {}
    for p in doc["processes"]:
        if p["exe"] != exe:
            continue  # a shell: judged alone, not beside the tests it started
        out[p["pid"]] = [[(f.get("function"), f.get("file"), f.get("line"), f.get("module"),
                           f.get("offset")) for f in site.get("stack", [])]
                         for c in p["checks"] for site in c.get("sites", [])]
    return out


def gate_dumps_json(args, dumps, cwd):
    """gate ARGS --json=FILE DUMP...: (status, document or None, stdout, stderr)."""
    out = os.path.join(cwd, "gate-dumps.json")
    if os.path.exists(out):
        os.unlink(out)
    st, so, se = gate(list(args) + ["--json=" + out] + list(dumps), cwd=cwd)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return st, doc, so, se


def test_many_processes():
    """Dumps read one after another share the modules they open (each a
    separate exec, so libc and the program lie at other addresses in each):
    every stack must be what that dump alone gives, and each leak at the
    line the program counted.  A C++ program runs between the tests, so
    that the modules kept are not always those the next dump asks for."""
    with T.case("many processes"):
        exe = target("gate_leak")
        d = fresh("many")
        t, _ = leak_run("blocks", 1)
        site = truth_site(t, "leak_block")
        cxx = target("gate_cleanxx")
        # a C++ program between the tests: other modules, opened in another order
        script = "; ".join("%s blocks %d; %s >/dev/null" % (exe, k, cxx) for k in range(1, 13))
        keep = os.path.join(d, "run.htr")
        st, out, err = gate(["-o", keep, "--max-leaked", "1GB"], ["/bin/sh", "-c", script], cwd=d)
        expect("the run passes", st, 0, out, err)
        dumps = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("run.htr"))
        T.eq("a dump per process: the shell, 12 tests, 12 C++ programs", len(dumps), 25)
        st, doc, out, err = gate_dumps_json(["--max-leaked", "0"], dumps, d)
        expect("all the dumps: fails", st, 1, out, err)
        if not doc:
            return
        tests = [p for p in doc["processes"] if p["exe"] == exe]
        T.eq("every test's leak", sorted(p["leaked_bytes"] for p in tests),
             [k * site["leaked_bytes"] for k in range(1, 13)])
        tops = [s for p in tests for c in p["checks"] for s in c.get("sites", [])]
        T.eq("each named at the line the program counted",
             [(check.norm_function(s.get("function")), s.get("line")) for s in tops],
             [("leak_block", site["line"])] * 12)
        together = gate_stacks(doc, exe)
        differ = []
        for dump in dumps:
            st, one, out, err = gate_dumps_json(["--max-leaked", "0"], [dump], d)
            for pid, stacks in (gate_stacks(one, exe) if one else {}).items():
                if together.get(pid) != stacks:
                    differ.append(pid)
        T.eq("every stack as that dump alone gives it", differ, [])
        T.eq("... compared for every test", len(together), 12)
        trace = pool_trace(dumps, d)
        T.eq("the test's module kept from its second dump on, taken from its third",
             ([w for w, m in trace if m == exe].count("kept"),
              [w for w, m in trace if m == exe].count("taken")), (11, 10))
        # programs run once each (copies at other paths) are not kept
        copies = []
        for k in range(4):
            copies.append(os.path.join(d, "copy%d" % k))
            shutil.copy(exe, copies[-1])
        T.eq("a program read once is not kept (its debug info held for nothing)",
             [m for w, m in pool_trace(record_each(copies, d), d) if w == "kept" and m in copies],
             [])
        # nor one without debug info, read three times: a debug file may appear later
        stripped = os.path.join(d, "stripped")
        cp = check.run(["objcopy", "--strip-debug", exe, stripped])
        if cp.returncode != 0:
            raise Skip("objcopy: %s" % check.first_line(cp.stderr))
        T.eq("a program without debug info is not kept",
             [m for w, m in pool_trace(record_each([stripped] * 3, d), d)
              if w == "kept" and m == stripped], [])


def record_each(programs, d):
    """Each program recorded once ('blocks 1'): their dumps."""
    dumps = []
    for k, prog in enumerate(programs):
        dumps.append(os.path.join(d, "each%d-%s.htr" % (k, os.path.basename(prog))))
        check.record(dumps[-1], [prog, "blocks", "1"], cwd=d)
    return dumps


def pool_trace(dumps, d):
    """gate over dumps: what the analyzer kept from one dump for the next, and
    took again, as [(kept|taken, module path)] (HEAPTRAIL__SYMPOOL_TRACE)."""
    cp = check.run([check.HEAPTRAIL, "gate", "--max-leaked", "0"] + dumps, cwd=d,
                   env=check.clean_env({"HEAPTRAIL__SYMPOOL_TRACE": "1"}))
    return [tuple(l.split()[2:4]) for l in check.text(cp.stderr).splitlines()
            if l.startswith("heaptrail: sympool: ")]


# --- JUnit -------------------------------------------------------------------

TIME_RE = re.compile(r"^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?$")


def junit_problems(path):
    """
    The rules of the Jenkins xUnit plugin's junit-10.xsd (which GitLab and the
    GitHub Actions JUnit reporters accept too), checked one by one.
    """
    p = []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return ["not well-formed XML: %s" % e]
    if root.tag != "testsuites":
        return ["root element is <%s>, not <testsuites>" % root.tag]

    def attrs(el, allowed, required=()):
        for a in required:
            if a not in el.attrib:
                p.append("<%s> lacks required attribute %s" % (el.tag, a))
        for a in el.attrib:
            if a not in allowed:
                p.append("<%s> has attribute %s, which the schema does not allow" % (el.tag, a))
        if "time" in el.attrib and not TIME_RE.match(el.attrib["time"]):
            p.append("<%s time=%r> is not a SUREFIRE_TIME" % (el.tag, el.attrib["time"]))

    attrs(root, ("name", "time", "tests", "failures", "errors", "disabled"))
    total = fails = 0
    for suite in root:
        if suite.tag != "testsuite":
            p.append("<testsuites> holds <%s>" % suite.tag)
            continue
        attrs(suite, ("name", "tests", "failures", "errors", "group", "time", "skipped",
                      "timestamp", "hostname", "id", "package", "file", "log", "url", "version"),
              ("name", "tests", "failures", "errors"))
        cases = [c for c in suite if c.tag == "testcase"]
        for child in suite:
            if child.tag not in ("testsuite", "properties", "testcase", "system-out", "system-err"):
                p.append("<testsuite> holds <%s>" % child.tag)
            if child.tag == "properties":
                for prop in child:
                    if prop.tag != "property":
                        p.append("<properties> holds <%s>" % prop.tag)
                    attrs(prop, ("name", "value"), ("name", "value"))
        nfail = nskip = 0
        for c in cases:
            attrs(c, ("name", "time", "classname", "group"), ("name",))
            for r in c:
                if r.tag not in ("skipped", "error", "failure", "rerunFailure", "rerunError",
                                 "flakyFailure", "flakyError", "system-out", "system-err"):
                    p.append("<testcase> holds <%s>" % r.tag)
                if r.tag in ("failure", "error", "skipped"):
                    attrs(r, ("type", "message"))
                    if len(r):
                        p.append("<%s> holds elements" % r.tag)
            nfail += any(r.tag == "failure" for r in c)
            nskip += any(r.tag == "skipped" for r in c)
        for a, want in (("tests", len(cases)), ("failures", nfail), ("skipped", nskip)):
            if a in suite.attrib and suite.attrib[a] != str(want):
                p.append("suite %r: %s=%s but it holds %d" % (suite.get("name"), a, suite.get(a), want))
        total += len(cases)
        fails += nfail
    for a, want in (("tests", total), ("failures", fails)):
        if a in root.attrib and root.attrib[a] != str(want):
            p.append("<testsuites %s=%s> but the suites hold %d" % (a, root.get(a), want))
    return p


def check_junit(path, processes, limits, failures):
    if not os.path.exists(path):
        T.fail("JUnit file written", path)
        return
    probs = junit_problems(path)
    T.check("JUnit file validates against junit-10.xsd's rules", not probs, "; ".join(probs[:5]))
    root = ET.parse(path).getroot()
    suites = [s for s in root if s.tag == "testsuite"]
    procs = [s for s in suites if s.get("name") != "whole run"]
    T.eq("JUnit: one suite per process", len(procs), processes)
    T.check("JUnit: one case per process and limit",
            all(len([c for c in s if c.tag == "testcase"]) == limits for s in procs),
            [len(s) for s in procs])
    T.eq("JUnit: failures", int(root.get("failures")), failures)
    fail = [c for s in suites for c in s if c.tag == "testcase" and c.find("failure") is not None]
    T.check("JUnit: each failure has a type and a message",
            all(c.find("failure").get("type") and c.find("failure").get("message") for c in fail), "")


def test_junit_validator():
    """The validator itself must reject what the schema rejects."""
    with T.case("junit validator"):
        d = fresh("junit")
        bad = os.path.join(d, "bad.xml")
        with open(bad, "w") as f:
            f.write('<testsuites tests="1"><testsuite name="x" tests="1" failures="0">'
                    '<testcase classname="c"/></testsuite></testsuites>')
        probs = junit_problems(bad)
        T.check("rejects a suite without 'errors' and a case without 'name'",
                any("errors" in x for x in probs) and any("name" in x for x in probs), probs)


# --- baselines -----------------------------------------------------------------

def test_baseline():
    with T.case("baseline"):
        exe = target("gate_leak")
        d = fresh("baseline")
        base = os.path.join(d, "base.json")
        st, out, err = gate(["--max-leaked", "1MB", "--save-baseline", base],
                            [exe, "blocks", "2"], cwd=d)
        expect("a run within --max-leaked saves its baseline", st, 0, out, err)
        T.check("baseline file written", os.path.exists(base), err)
        with open(base) as f:
            b = json.load(f)
        t2, _ = leak_run("blocks", 2)
        T.eq("baseline holds the program's leak", b.get("leaked_bytes"), t2["leaked_bytes"])
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", base], [exe, "blocks", "3"], cwd=d)
        expect("one more leaked block fails against the baseline", st, 1, out, err)
        T.check("... saying --max-increase", "--max-increase" in out, out)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", base], [exe, "blocks", "2"], cwd=d)
        expect("the same leak passes", st, 0, out, err)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", base], [exe, "blocks", "1"], cwd=d)
        expect("fewer leaks pass", st, 0, out, err)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", base, "--max-increase", "60"],
                            [exe, "blocks", "3"], cwd=d)
        expect("+50% passes --max-increase 60", st, 0, out, err)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", base, "--max-increase", "40%"],
                            [exe, "blocks", "3"], cwd=d)
        expect("+50% fails --max-increase 40%", st, 1, out, err)
        # a dump as the baseline
        dump = os.path.join(d, "base.htr")
        cp = check.record(dump, [exe, "blocks", "2"], cwd=d)
        T.eq("record the baseline dump", cp.returncode, 0)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", dump], [exe, "blocks", "3"], cwd=d)
        expect("a dump as baseline: an increase fails", st, 1, out, err)
        st, out, err = gate(["--max-leaked", "1MB", "--baseline", dump], [exe, "blocks", "2"], cwd=d)
        expect("a dump as baseline: no increase passes", st, 0, out, err)
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "something else"}')
        st, out, err = gate(["--baseline", bad], [exe, "none"], cwd=d)
        expect("a file that is no baseline is an input error", st, 2, out, err)
        st, out, err = gate(["--max-increase", "5"], [exe, "none"], cwd=d)
        expect("--max-increase without --baseline is a usage error", st, 2, out, err)


# --- the program's own suppressions, growth, residue, reachability ------------

def test_target_suppressions():
    with T.case("__lsan_default_suppressions"):
        exe = target("gate_lsan")
        d = fresh("lsan")
        tp = os.path.join(d, "truth.json")
        st, out, err = gate(["--print-suppressions"], [exe, "both"], env={"TRUTH_OUT": tp}, cwd=d)
        if "cannot read the suppressions" in err:
            raise Skip("the program's suppressions could not be read here: %s" % check.first_line(err))
        expect("a leak outside the program's suppressions fails", st, 1, out, err)
        t = truth(tp)
        vis = truth_site(t, "visible_leak")
        hid = truth_site(t, "suppressed_by_target")
        T.check("names visible_leak", named(out, "visible_leak", "gate_lsan.c", vis["line"]), out)
        T.check("does not name suppressed_by_target as a failure",
                not re.search(r"^\s+\S+ \S+\s+suppressed_by_target", out, re.M), out)
        T.check("--print-suppressions shows the program's rule",
                "leak:suppressed_by_target" in out and "__lsan_default_suppressions" in out, out)
        m = re.search(r"leak:suppressed_by_target .*\n\s+matched (\d+\.?\d*) (\S+) in (\d+) block", out)
        T.check("... matching the hidden block", m and int(m.group(3)) == hid["leaked_blocks"], out)
        st, out, err = gate([], [exe, "target"], cwd=d)
        expect("only the program's suppressed leak: passes", st, 0, out, err)
        st, out, err = gate(["--no-target-suppressions"], [exe, "target"], cwd=d)
        expect("--no-target-suppressions: fails", st, 1, out, err)


def test_growth():
    with T.case("growth"):
        exe = target("gate_grow")
        d = fresh("growth")
        tp = os.path.join(d, "truth.json")
        env = {"HEAPTRAIL_INTERVAL_MS": "10", "TRUTH_OUT": tp}
        st, doc, out, err = gate_json(["--max-growth", "1MiB/s", "--max-leaked", "1GB"], [exe],
                                      env=env, cwd=d)
        expect("about 6 MiB/s fails --max-growth 1MiB/s", st, 1, out, err)
        t = truth(tp)
        s = truth_site(t, "grow")
        T.check("names the growing line", named(out, "grow", "gate_grow.c", s["line"]), out)
        if doc:
            g = doc["processes"][0]["growth_bytes_per_second"]
            T.check("growth is positive and below what 60 blocks in no time would be",
                    g is not None and 0 < g, "growth %r" % g)
        st, out, err = gate(["--max-growth", "1GiB", "--max-leaked", "1GB"], [exe], env=env, cwd=d)
        expect("the same passes --max-growth 1GiB", st, 0, out, err)


def test_residue():
    with T.case("residue per client"):
        exe = target("gate_clients")
        d = fresh("residue")
        tp = os.path.join(d, "truth.json")
        st, doc, out, err = gate_json(["--max-residue-per-client", "1499"], [exe, "5", "1500"],
                                      env={"TRUTH_OUT": tp}, cwd=d)
        expect("1500 bytes per client fail --max-residue-per-client 1499", st, 1, out, err)
        t = truth(tp)
        s = truth_site(t, "remember_client")
        T.check("names remember_client", named(out, "remember_client", "gate_clients.c", s["line"]), out)
        if doc:
            p = doc["processes"][0]
            T.eq("json: clients that disconnected", p["clients_disconnected"], t["facts"]["clients"])
            T.eq("json: residue per client", p["residue_per_client_bytes"],
                 s["leaked_bytes"] // t["facts"]["clients"])
        st, out, err = gate(["--max-residue-per-client", "1500"], [exe, "5", "1500"], cwd=d)
        expect("... and pass 1500", st, 0, out, err)


def test_lost():
    with T.case("max-lost"):
        exe = target("gate_leak")
        d = fresh("lost")
        dump = os.path.join(d, "noreach.htr")
        check.record(dump, [exe, "blocks", "1"], cwd=d)
        st, out, err = gate(["--max-lost", "0", dump], cwd=d)
        expect("a dump without a reachability scan: --max-lost is an input error", st, 2, out, err)
        T.check("... saying how to record one", "HEAPTRAIL_REACH=exit" in err, err)
        test_lost_synthetic(d)
        st, out, err = gate(["--max-lost", "0"], [exe, "blocks", "2"], cwd=d)
        if st == 2 and "reachability" in err:
            T.skip("--max-lost on a run", "this shim writes no reachability scan yet")
            return
        expect("blocks nobody points to fail --max-lost 0", st, 1, out, err)


def synthetic_dump(d, name, how="exit"):
    """tests/unit/gate_dumps.c: a dump whose reachability figures are known."""
    gen = os.path.join(d, "gate_dumps")
    if not os.path.exists(gen):
        cc = shutil.which("cc") or shutil.which("gcc")
        unit = os.path.join(check.TOP, "tests", "unit")
        if not cc:
            raise Skip("no C compiler")
        cp = subprocess.run([cc, "-std=gnu11", "-I", os.path.join(check.TOP, "common"), "-I", unit,
                             "-o", gen, os.path.join(unit, "gate_dumps.c"),
                             os.path.join(unit, "dumpgen.c"), "-lzstd"], capture_output=True)
        if cp.returncode:
            raise Skip("cannot build gate_dumps: %s" % check.first_line(cp.stderr))
    out = os.path.join(d, name)
    cp = subprocess.run([gen, out, how], capture_output=True)
    if cp.returncode:
        raise Skip("gate_dumps failed: %s" % check.first_line(cp.stderr))
    return out


def test_lost_synthetic(d):
    # definitely lost 200 + indirectly lost 50; possibly lost 70 and reachable 300 do not count
    dump = synthetic_dump(d, "reach.htr")
    st, out, err = gate(["--max-lost", "249", dump], cwd=d)
    expect("a scanned dump: 250 lost bytes fail --max-lost 249", st, 1, out, err)
    T.check("... naming the definitely lost site first", re.search(r"200 B\s+0x401000", out), out)
    cp = check.run([check.HEAPTRAIL, "gate", "--json", "--max-lost", "250", "--max-leaked", "620",
                    dump])
    doc = json.loads(check.text(cp.stdout)) if cp.returncode in (0, 1) else None
    T.eq("... and pass --max-lost 250 (with --max-leaked 620)", cp.returncode, 0)
    if doc:
        T.eq("json: lost_bytes", doc["processes"][0]["lost_bytes"], 250)
        T.eq("json: leaked_bytes", doc["processes"][0]["leaked_bytes"], 620)
    for how, why in (("exec", "ended by exec"), ("signal", "was killed by a signal")):
        dump = synthetic_dump(d, "%s.htr" % how, how)
        st, out, err = gate(["--max-leaked", "0", "--max-peak", "1MB", dump], cwd=d)
        expect("a dump of an image that %s is not judged for leaks" % why, st, 0, out, err)
        T.check("... and says so", why in out, out)


# --- statuses, dumps, diff ---------------------------------------------------------

def test_statuses():
    with T.case("exit statuses"):
        exe = target("gate_leak")
        d = fresh("status")
        st, out, err = gate(["--max-leaked", "lots"], [exe], cwd=d)
        expect("a bad size is a usage error", st, 2, out, err)
        st, out, err = gate(["--max-leaked", "0"], cwd=d)
        expect("nothing to judge is a usage error", st, 2, out, err)
        st, out, err = gate(["--max-leaked", "1MB"], ["/bin/sh", "-c", "exit 7"], cwd=d)
        expect("the command failing is status 3", st, 3, out, err)
        T.check("... and its status is shown", "exited with status 7" in out, out)
        st, out, err = gate(["--max-leaked", "1MB"], ["/bin/sh", "-c", "kill -SEGV $$"], cwd=d)
        expect("the command killed by a signal is status 3", st, 3, out, err)
        T.check("... naming the signal", "SIGSEGV" in out, out)
        st, out, err = gate([], [os.path.join(d, "no-such-program")], cwd=d)
        expect("a command that does not exist is a usage error", st, 2, out, err)
        # dumps given on the command line
        t, cmd = leak_run("blocks", 2)
        site = truth_site(t, "leak_block")
        dump = os.path.join(d, "x.htr")
        check.record(dump, cmd, cwd=d)
        st, out, err = gate(["--max-leaked", "0", dump], cwd=d)
        expect("gate DUMP: a leaking dump fails", st, 1, out, err)
        T.check("gate DUMP names the line", named(out, "leak_block", "gate_leak.c", site["line"]), out)
        st, out, err = gate(["--max-leaked", str(t["leaked_bytes"]), dump], cwd=d)
        expect("gate DUMP within the limit passes", st, 0, out, err)
        st, out, err = gate(["--max-leaked", "0", exe], cwd=d)
        expect("a program without '--' is a usage error", st, 2, out, err)
        T.check("... that says to put '--'", "'--'" in err, err)
        # -o keeps the dumps under the given name
        keep = os.path.join(d, "kept.htr")
        st, out, err = gate(["-o", keep, "--max-leaked", "1MB"], cmd, cwd=d)
        expect("-o: passes", st, 0, out, err)
        T.check("-o keeps the dump", os.path.exists(keep), err)


def diff_json(old, new):
    cp = check.run([check.HEAPTRAIL, "diff", "--json", old, new])
    try:
        return cp, json.loads(check.text(cp.stdout)) if cp.returncode == 0 else None
    except ValueError:
        return cp, None


def test_diff():
    with T.case("diff"):
        exe = target("gate_leak")
        d = fresh("diff")
        a, b = os.path.join(d, "a.htr"), os.path.join(d, "b.htr")
        ta = os.path.join(d, "a.truth")
        tb = os.path.join(d, "b.truth")
        check.record(a, [exe, "blocks", "2"], env={"TRUTH_OUT": ta}, cwd=d)
        # a second build: functions aligned differently, so every address moves
        other = os.path.join(d, "gate_leak_other")
        truth_o = os.path.join(check.TARGETS, "obj", "truth.o")
        src = os.path.join(check.TOP, "tests", "targets", "gate_leak.c")
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc or not os.path.exists(truth_o):
            raise Skip("no compiler or no %s" % truth_o)
        cp = subprocess.run([cc, "-std=gnu11", "-O0", "-g", "-fno-omit-frame-pointer",
                             "-falign-functions=256", "-I", os.path.join(check.TOP, "tests", "lib"),
                             "-I", os.path.join(check.TOP, "include"), "-o", other, src, truth_o,
                             "-ldl", "-pthread"], capture_output=True)
        if cp.returncode:
            raise Skip("cannot build a second gate_leak: %s" % check.first_line(cp.stderr))
        check.record(b, [other, "blocks", "5"], env={"TRUTH_OUT": tb}, cwd=d)
        cp, doc = diff_json(a, b)
        T.eq("diff --json exits 0", cp.returncode, 0)
        if doc is None:
            raise Skip("no JSON: %s" % check.first_line(cp.stderr))
        A, B = truth(ta), truth(tb)
        sa, sb = truth_site(A, "leak_block"), truth_site(B, "leak_block")
        m = [s for s in doc["sites"] if s.get("function") == "leak_block"]
        T.eq("leak_block is one site in both builds (matched by symbol)", len(m), 1)
        if m:
            s = m[0]
            T.eq("status", s["status"], "changed")
            T.eq("old leaked_bytes", s["old"]["leaked_bytes"], sa["leaked_bytes"])
            T.eq("new leaked_bytes", s["new"]["leaked_bytes"], sb["leaked_bytes"])
            T.eq("leaked change", s["change"]["leaked_bytes"], sb["leaked_bytes"] - sa["leaked_bytes"])
            T.eq("allocations change", s["change"]["allocations"], sb["allocations"] - sa["allocations"])
            T.eq("line", s["line"], sb["line"])
        T.check("no site of the program shows up as new or gone",
                not [s for s in doc["sites"] if s["status"] in ("new", "gone") and
                     (s.get("module") or "").endswith(("gate_leak", "gate_leak_other"))],
                [s.get("function") for s in doc["sites"] if s["status"] in ("new", "gone")])
        cp, doc = diff_json(a, a)
        T.check("a dump against itself: no site changed", doc is not None and doc["sites"] == [],
                check.first_line(cp.stdout))
        cp = check.run([check.HEAPTRAIL, "diff", a, b])
        T.eq("text diff exits 0", cp.returncode, 0)
        T.check("text diff names leak_block at its line",
                named(check.text(cp.stdout), "leak_block", "gate_leak.c", sb["line"]),
                check.text(cp.stdout)[:400])
        cp = check.run([check.HEAPTRAIL, "diff", a])
        T.eq("diff with one dump is a usage error", cp.returncode, 2)


def main():
    missing = [p for p in (check.HEAPTRAIL, check.SHIM) if not os.path.exists(p)]
    if missing:
        T.fail("build", "not built: %s (run make all test-targets)" % ", ".join(missing))
        T.finish()
    try:
        test_leaking_program()
        test_raw_exit()
        test_suppressions()
        test_clean_programs()
        test_process_tree()
        test_shell_tree()
        test_many_processes()
        test_junit_validator()
        test_baseline()
        test_target_suppressions()
        test_growth()
        test_residue()
        test_lost()
        test_statuses()
        test_diff()
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
