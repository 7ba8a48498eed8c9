"""reliability.py - helpers of the reliability tests (test_matrix, test_stress, test_faults, soak).

The question each of those asks: does a program behave under the shim as
it does without it (same output, same exit status, no hang), and is the
dump it leaves one the analyzer reads cleanly?  Runs are bounded by a
timeout that kills the whole process group, so a hang is a failure with a
message, not a stuck test suite.  The timeout is a guard only: no test
measures time.
"""

import os
import signal
import socket
import subprocess
import time

import check

# A run that takes longer than this is hung (the slowest one takes ~2 s).
TIMEOUT = 120


class Result:
    """What a bounded run did: returncode (None when it hung), stdout, stderr."""

    def __init__(self, returncode, stdout, stderr, hung, seconds):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.hung = hung
        self.seconds = seconds


def run(argv, env=None, cwd=None, timeout=TIMEOUT, stdin=None, preexec_fn=None):
    """Runs argv in a new process group; on timeout kills the group."""
    start = time.monotonic()
    p = subprocess.Popen(argv, env=env if env is not None else check.clean_env(), cwd=cwd,
                         stdin=stdin if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=preexec_fn)
    try:
        out, err = p.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        hung = True
    return Result(None if hung else p.returncode, out, err, hung, time.monotonic() - start)


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass


def shim_env(dump, extra=None, base=None):
    """The environment of a run under the shim writing 'dump'."""
    env = dict(base) if base is not None else check.clean_env()
    env["LD_PRELOAD"] = check.SHIM
    if dump is not None:
        env["HEAPTRAIL_OUT"] = dump
    env.update(extra or {})
    return env


def dumps_of(dump):
    """The dump and the dumps of its followed children (DUMP.PID, DUMP.PID.N)."""
    d = os.path.dirname(dump) or "."
    b = os.path.basename(dump)
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if f == b or f.startswith(b + "."))


def same_run(T, label, plain, traced):
    """The traced run printed and exited as the plain one did."""
    if traced.hung:
        T.fail(label + ": no hang under the shim",
               "killed after %d s; stderr: %r" % (TIMEOUT, traced.stderr[-300:]))
        return False
    ok = T.eq(label + ": exit status unchanged", traced.returncode, plain.returncode)
    ok &= T.check(label + ": stdout unchanged", traced.stdout == plain.stdout,
                  "%r vs %r" % (traced.stdout[-300:], plain.stdout[-300:]))
    ok &= T.check(label + ": stderr unchanged", traced.stderr == plain.stderr,
                  "%r vs %r" % (traced.stderr[-300:], plain.stderr[-300:]))
    return ok


def clean_dump(T, label, dump, end_how=None):
    """
    'report --json' reads the dump with exit 0, no warning on stderr, and an
    END record (of kind end_how when given).  Returns the document or None.
    """
    if not os.path.exists(dump):
        T.fail(label + ": dump written", "no file %s" % dump)
        return None
    cp, doc = check.report(dump)
    err = check.text(cp.stderr).strip()
    T.check(label + ": report exits 0", cp.returncode == 0 and doc is not None,
            "exit %d: %s" % (cp.returncode, check.first_line(cp.stderr)))
    T.check(label + ": no warning", err == "", err[:300])
    if doc is None:
        return None
    end = doc["totals"].get("end")
    if end_how is None:
        T.check(label + ": dump has an END record",
                isinstance(end, dict) and end.get("how") is not None, "end %r" % (end,))
    else:
        T.eq(label + ": dump ends with '%s'" % end_how,
             end.get("how") if isinstance(end, dict) else end, end_how)
    T.eq(label + ": no lost events", doc["totals"].get("lost_events"), 0)
    return doc


def site_sum(doc, function, key, line=None):
    """Sum of 'key' over the sites whose top frame is 'function' (and line)."""
    return sum(s[key] for s in doc["sites"]
               if check.function_matches(s.get("function"), function) and
               (line is None or s.get("line") == line))


def output_facts(stdout):
    """'name N' lines of a target's output as {name: N}."""
    facts = {}
    for line in check.text(stdout).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            facts[parts[0]] = int(parts[1])
    return facts


def site_facts(stdout):
    """'site NAME allocations N bytes B' lines of a target's output as
    {NAME: (N, B)}."""
    sites = {}
    for line in check.text(stdout).splitlines():
        p = line.split()
        if len(p) == 6 and p[0] == "site":
            sites[p[1]] = (int(p[3]), int(p[5]))
    return sites


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, tries=2400):
    """Waits (0.05 s steps, a hang guard) until something listens on port."""
    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return True
        except OSError:
            if proc.poll() is not None:
                return False
            time.sleep(0.05)
    return False


def run_cases(T, cases, only_var):
    """Runs each (name, function) of CASES as a case of suite T; the
    environment variable ONLY_VAR ("a,b") runs only the cases it names."""
    only = os.environ.get(only_var)
    for name, fn in cases:
        if only and name not in only.split(","):
            continue
        with T.case(name):
            fn()
