#!/usr/bin/env python3
"""test_matrix.py - real programs under the shim: unchanged, no hang, clean dumps (issue 9).

Each program runs twice, plainly and under the shim (LD_PRELOAD +
HEAPTRAIL_OUT), and must print the same and exit the same; every dump it
leaves (its own and those of the children it forks) must analyze cleanly:
'report' exits 0, prints no warning, and finds an END record and no lost
events.  Servers (redis-server, memcached) are driven by a client that
records every reply: the transcripts of the plain and the traced server
must be equal.  Programs that are not installed are skipped with a message.

  python3          json, hashlib, threads, sqlite3 module, a subprocess; exit 3;
                   once more under HEAPTRAIL_UNWIND_CHECK=1 (no stack may differ
                   from libunwind's: a difference is said on stderr)
  sqlite3          50,000 rows, indexes, joins, a window function; a failing
                   query; the first also under HEAPTRAIL_UNWIND_CHECK=1
  git              init, add, commit, log, diff, gc (forks and execs helpers), fsck
  redis-server     a command transcript, redis-benchmark, BGSAVE (a fork from a
                   threaded server), SHUTDOWN
  memcached        4 threads; a client speaking its text protocol: set, get,
                   multi-get, gets/cas, incr/decr, append/prepend, delete, big values
  rel_exceptions   C++ exceptions thrown, rethrown, nested, carried across threads;
                   bad_alloc through the shim with a new_handler (the truth: the
                   exceptions it counted are allocated at thrown_here)
  rel_jemalloc     a program linked with -ljemalloc: the shim's real allocator is
                   jemalloc (built here from tests/targets/optional/; skipped
                   without libjemalloc-dev)
  rel_rust         a Rust program, threads and a HashMap of Strings: its runtime
                   calls pthread_getattr_np() first thing in every thread (built
                   with rustc from tests/targets/optional/; skipped without it)
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
import reliability as rel  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("matrix")
WORK = tempfile.mkdtemp(prefix="heaptrail-matrix-")


def fresh_dir(name):
    return check.fresh_dir(WORK, name)


need_tools = check.need_tools


def program(name, *candidates):
    for c in candidates or (name,):
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.access(path, os.X_OK):
            return path
    raise Skip("%s is not installed" % name)


def compare_runs(label, argv, cwd=None, env=None, setup=None):
    """
    Plain run, then a traced run (setup(cwd) before each, for programs that
    change their directory); same output and status; every dump clean.
    Returns (plain, traced, [report documents]).
    """
    d = fresh_dir(label.replace(" ", "_").replace("/", "_"))
    wd = cwd or os.path.join(d, "wd")
    os.makedirs(wd, exist_ok=True)
    if setup:
        setup(wd)
    base = check.clean_env(env)
    plain = rel.run(argv, env=base, cwd=wd)
    if plain.hung:
        raise AssertionError("the plain run hung (killed after %d s)" % rel.TIMEOUT)
    if setup:
        setup(wd)
    dump = os.path.join(d, "run.htr")
    traced = rel.run(argv, env=rel.shim_env(dump, base=base), cwd=wd)
    rel.same_run(T, label, plain, traced)
    docs = []
    dumps = rel.dumps_of(dump)
    T.check(label + ": dump written", dump in dumps, "dumps: %r" % dumps)
    for f in dumps:
        doc = rel.clean_dump(T, "%s: %s" % (label, os.path.basename(f)), f)
        if doc is not None:
            docs.append(doc)
    return plain, traced, docs


# --- command-line programs -------------------------------------------------

PY_SCRIPT = r"""
import hashlib, json, re, sqlite3, subprocess, sys, threading, collections
d = {str(i): {"n": i, "s": "x" * (i % 50), "l": list(range(i % 20))} for i in range(30000)}
s = json.dumps(d, sort_keys=True)
back = json.loads(s)
words = collections.Counter(re.findall(r"[a-z]+", "the quick brown fox " * 5000))
out = []
def work(k):
    h = hashlib.sha256()
    for i in range(2000):
        h.update(("%d-%d" % (k, i)).encode() * 10)
    out.append((k, h.hexdigest()[:16]))
ts = [threading.Thread(target=work, args=(k,)) for k in range(6)]
[t.start() for t in ts]
[t.join() for t in ts]
db = sqlite3.connect(":memory:")
db.execute("create table t(a, b)")
db.executemany("insert into t values (?, ?)", ((i, str(i) * 3) for i in range(20000)))
total = db.execute("select count(*), sum(a), max(b) from t").fetchone()
child = subprocess.run([sys.executable, "-c", "print(sum(range(1000)))"],
                       capture_output=True, text=True).stdout.strip()
print(len(s), hashlib.sha256(s.encode()).hexdigest()[:16], len(back), words["fox"])
print(sorted(out))
print(total, child)
sys.stderr.write("done\n")
sys.exit(3)
"""


def case_python():
    need_tools()
    py = program("python3", "/usr/bin/python3", "python3")
    compare_runs("python3", [py, "-c", PY_SCRIPT])
    # every stack also taken by libunwind: a difference is said on stderr
    compare_runs("python3, walk checked", [py, "-c", PY_SCRIPT],
                 env={"HEAPTRAIL_UNWIND_CHECK": "1"})
    compare_runs("python3 raises", [py, "-c", "import sys\nd = [0] * 100000\n"
                                    "raise ValueError('boom %d' % len(d))"])


SQL = """
create table t(a integer primary key, b text, c real);
with recursive n(x) as (select 1 union all select x + 1 from n where x < 50000)
  insert into t select x, printf('row-%06d', x), x * 0.5 from n;
create index tb on t(b);
create table u as select a % 100 as k, count(*) as n, sum(c) as s from t group by k;
select count(*), sum(a), min(b), max(b) from t;
select k, n, s from u where k in (0, 7, 99) order by k;
select t.a, u.n from t join u on t.a % 100 = u.k where t.a between 100 and 105 order by t.a;
select a, sum(c) over (order by a rows between 2 preceding and current row) from t limit 5;
delete from t where a % 3 = 0;
vacuum;
select count(*) from t;
"""


def case_sqlite():
    need_tools()
    sq = program("sqlite3")
    compare_runs("sqlite3", [sq, ":memory:", SQL])
    compare_runs("sqlite3, walk checked", [sq, ":memory:", SQL],
                 env={"HEAPTRAIL_UNWIND_CHECK": "1"})
    compare_runs("sqlite3 file db", [sq, "db.sqlite", SQL],
                 setup=lambda wd: [os.remove(os.path.join(wd, f)) for f in os.listdir(wd)
                                   if f.startswith("db.sqlite")])
    compare_runs("sqlite3 fails", [sq, ":memory:", "select * from no_such_table;"])


GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat",
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.org",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z"}


def case_git():
    need_tools()
    git = program("git")
    home = fresh_dir("git-home")
    env = dict(GIT_ENV, HOME=home)

    def make_repo(wd):
        for f in os.listdir(wd):
            p = os.path.join(wd, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        for i in range(40):
            with open(os.path.join(wd, "f%02d.txt" % i), "w") as f:
                f.write("line %d\n" % i * (i + 1))

    # One shell script of git commands: each is a process of its own, and
    # 'gc' forks and execs pack-objects and friends.
    script = "\n".join([
        "set -e",
        "git init -q -b main .",
        "git add .",
        "git commit -q -m first",
        "for i in 1 2 3; do echo change $i >> f01.txt; git commit -q -am change$i; done",
        "git log --stat --format='%H %s'",
        "git diff HEAD~2 --stat",
        "git branch side HEAD~1 && git checkout -q side && git merge -q --no-edit main",
        "git gc --quiet",
        "git count-objects -v | grep -v size",
        "git fsck --no-progress",
        "git rev-parse --verify no-such-ref || echo missing ref $?",
    ])
    plain, traced, docs = compare_runs("git", ["sh", "-c", script], env=env, setup=make_repo)
    T.check("git: the script ran to its end", b"missing ref 128" in plain.stdout,
            check.text(plain.stdout)[-300:])
    T.check("git: dumps of the shell, git and its helpers (>= 10)", len(docs) >= 10,
            "%d dumps" % len(docs))


# --- servers ----------------------------------------------------------------

def serve(label, argv, port, client, stop, env=None, cwd=None):
    """
    Starts a server, runs client(port) -> transcript, stops it with stop(port,
    proc); returns (transcript, Result of the server).
    """
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    transcript = None
    try:
        if not rel.wait_port(port, p):
            raise AssertionError("%s did not start listening: %s" %
                                 (label, p.stderr.read().decode("utf-8", "replace")[:300]))
        transcript = client(port)
        stop(port, p)
        out, err = p.communicate(timeout=rel.TIMEOUT)
        return transcript, rel.Result(p.returncode, out, err, False, 0)
    except subprocess.TimeoutExpired:
        rel.kill_group(p)
        out, err = p.communicate()
        return transcript, rel.Result(None, out, err, True, 0)
    finally:
        if p.poll() is None:
            rel.kill_group(p)
            p.wait()


def compare_servers(label, make_argv, client, stop, extra_dumps_min=0):
    """The same session against a plain and a traced server."""
    d = fresh_dir(label)
    runs = {}
    for mode in ("plain", "traced"):
        wd = os.path.join(d, mode)
        os.makedirs(wd)
        port = rel.free_port()
        env = check.clean_env()
        dump = os.path.join(d, "run.htr")
        if mode == "traced":
            env = rel.shim_env(dump, base=env)
        runs[mode] = serve(label, make_argv(port, wd), port, client, stop, env=env, cwd=wd)
    (tp, rp), (tt, rt) = runs["plain"], runs["traced"]
    if rt.hung:
        T.fail(label + ": no hang under the shim", "killed after %d s" % rel.TIMEOUT)
        return None
    T.eq(label + ": exit status unchanged", rt.returncode, rp.returncode)
    T.check(label + ": replies unchanged", tt == tp,
            "first difference: %r" % (first_difference(tp, tt),))
    dump = os.path.join(d, "run.htr")
    dumps = rel.dumps_of(dump)
    T.check(label + ": dump written", dump in dumps, "dumps %r" % dumps)
    T.check(label + ": %d dumps of forked children" % extra_dumps_min,
            len(dumps) - 1 >= extra_dumps_min, "dumps %r" % dumps)
    docs = [rel.clean_dump(T, "%s: %s" % (label, os.path.basename(f)), f) for f in dumps]
    return tp, docs


def first_difference(a, b):
    a, b = a or [], b or []
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (i, x, y)
    return (min(len(a), len(b)), "length %d vs %d" % (len(a), len(b)))


class Conn:
    """A line-oriented connection with a timeout (a guard only)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=rel.TIMEOUT)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise AssertionError("connection closed; had %r" % self.buf[:100])
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise AssertionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def close(self):
        self.s.close()


# redis ---------------------------------------------------------------------

def resp(*args):
    req = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        req += b"$%d\r\n%s\r\n" % (len(a), a)
    return req


def resp_reply(c):
    """One RESP reply, as a nested Python value."""
    line = c.line()
    kind, rest = line[:1], line[1:]
    if kind in (b"+", b"-", b":"):
        return line
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = c.exact(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [resp_reply(c) for _ in range(n)]
    raise AssertionError("bad RESP line %r" % line)


REDIS_SCRIPT = [
    ("SET", "k1", "v1"), ("GET", "k1"), ("APPEND", "k1", "x" * 1000), ("STRLEN", "k1"),
    ("INCRBY", "n", 41), ("INCR", "n"), ("LPUSH", "l", *range(200)), ("LRANGE", "l", 0, 9),
    ("LTRIM", "l", 0, 49), ("LLEN", "l"),
    ("HSET", "h", *[x for i in range(100) for x in ("f%d" % i, "v" * i)]), ("HLEN", "h"),
    ("HGET", "h", "f42"), ("SADD", "s", *range(300)), ("SCARD", "s"),
    ("ZADD", "z", *[x for i in range(100) for x in (i * 1.5, "m%d" % i)]),
    ("ZRANGE", "z", 0, 4, "WITHSCORES"), ("ZRANGEBYSCORE", "z", 10, 20),
    ("SORT", "l", "LIMIT", 0, 5), ("EVAL", "return redis.call('GET', KEYS[1])", 1, "k1"),
    ("SET", "big", "b" * 200000), ("STRLEN", "big"), ("DEL", "big", "nosuch"),
    ("EXPIRE", "k1", 1000), ("PERSIST", "k1"), ("TTL", "k1"), ("TYPE", "h"), ("NOSUCHCOMMAND",),
]


def redis_client(port, bench):
    c = Conn(port)
    out = []
    for cmd in REDIS_SCRIPT:
        c.send(resp(*cmd))
        out.append(resp_reply(c))
    cp = rel.run([bench, "-h", "127.0.0.1", "-p", str(port), "-q", "-c", "20", "-n", "10000",
                  "-t", "set,get,incr,lpush,hset,lrange_100"])
    out.append(("redis-benchmark exit", cp.returncode, cp.hung))
    for cmd in (("DBSIZE",), ("GET", "k1"), ("LLEN", "l"), ("SCARD", "s"), ("HLEN", "h")):
        c.send(resp(*cmd))
        out.append(resp_reply(c))
    # BGSAVE forks the (multi-threaded) server; the child writes dump.rdb.
    c.send(resp("BGSAVE"))
    out.append(resp_reply(c))
    for _ in range(2400):	# a hang guard: 0.05 s steps
        c.send(resp("INFO", "persistence"))
        info = resp_reply(c)
        if b"rdb_bgsave_in_progress:0" in info:
            break
        time.sleep(0.05)
    out.append([ln for ln in info.split(b"\r\n") if ln.startswith(b"rdb_last_bgsave_status")])
    c.close()
    return out


def redis_stop(port, p):
    c = Conn(port)
    c.send(resp("SHUTDOWN", "NOSAVE"))
    try:
        c.line()	# no reply: the server closes
    except (AssertionError, OSError):
        pass
    c.close()


def case_redis():
    need_tools()
    server = program("redis-server")
    bench = program("redis-benchmark")

    def argv(port, wd):
        return [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
                "--dir", wd, "--logfile", os.path.join(wd, "redis.log")]

    r = compare_servers("redis-server", argv, lambda port: redis_client(port, bench),
                        redis_stop, extra_dumps_min=1)
    if r:
        transcript = r[0]
        T.check("redis-server: redis-benchmark succeeded",
                ("redis-benchmark exit", 0, False) in transcript, repr(transcript[-9:]))
        T.check("redis-server: BGSAVE succeeded",
                [b"rdb_last_bgsave_status:ok"] in transcript, repr(transcript[-2:]))


# memcached -------------------------------------------------------------------

def mc_client(port):
    out = []
    conns = [Conn(port) for _ in range(4)]

    def storage(c, cmd, key, value, extra=b""):
        c.send(b"%s %s 5 0 %d%s\r\n%s\r\n" % (cmd, key, len(value), extra, value))
        return c.line()

    def get(c, *keys):
        c.send(b"get " + b" ".join(keys) + b"\r\n")
        got = []
        while True:
            line = c.line()
            if line == b"END":
                return got
            _, key, flags, n = line.split()[:4]
            got.append((key, flags, c.exact(int(n) + 2)[:-2]))

    for i in range(3000):
        c = conns[i % 4]
        key = b"key%d" % (i % 700)
        value = bytes([65 + i % 26]) * (1 + (i * 37) % 3000)
        if i % 97 == 0:
            value = b"B" * (50000 + i * 10)		# big values, other slab classes
        out.append(storage(c, b"set", key, value))
        if i % 5 == 0:
            out.append(get(c, key))
        if i % 11 == 0:
            out.append(storage(c, b"append", key, b"-tail"))
            out.append(storage(c, b"prepend", key, b"head-"))
        if i % 13 == 0:
            c.send(b"delete %s\r\n" % key)
            out.append(c.line())
        if i % 17 == 0:
            out.append(storage(c, b"add", key, b"added"))
            out.append(storage(c, b"replace", b"nokey%d" % i, b"x"))
    c = conns[0]
    out.append(get(c, *[b"key%d" % i for i in range(0, 700, 7)]))
    out.append(storage(c, b"set", b"counter", b"10"))
    for _ in range(50):
        c.send(b"incr counter 7\r\n")
        out.append(c.line())
    c.send(b"decr counter 1000\r\n")
    out.append(c.line())
    c.send(b"gets counter\r\n")
    line = c.line()
    cas = line.split()[4]
    value = c.line()
    out.append((line.split()[:4], value, c.line()))
    out.append(storage(c, b"cas", b"counter", b"99", b" " + cas))
    out.append(storage(c, b"cas", b"counter", b"98", b" " + cas))	# EXISTS now
    c.send(b"touch counter 100\r\n")
    out.append(c.line())
    c.send(b"bogus command\r\n")
    out.append(c.line())
    for c in conns:
        c.close()
    return out


def mc_stop(port, p):
    p.send_signal(signal.SIGTERM)


def case_memcached():
    need_tools()
    server = program("memcached")
    user = ["-u", "root"] if os.getuid() == 0 else []

    def argv(port, wd):
        return [server, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "4",
                "-m", "64"] + user

    r = compare_servers("memcached", argv, mc_client, mc_stop)
    if r:
        T.check("memcached: the session stored and read values",
                r[0].count(b"STORED") > 2000, "%d STORED" % r[0].count(b"STORED"))


# --- C++ exceptions and jemalloc --------------------------------------------

def case_exceptions():
    need_tools()
    exe = os.path.join(check.TARGETS, "rel_exceptions")
    if not os.access(exe, os.X_OK):
        raise Skip("%s is not built (make test-targets)" % exe)
    plain, traced, docs = compare_runs("rel_exceptions", [exe])
    facts = rel.output_facts(plain.stdout)
    T.check("rel_exceptions: bad_alloc caught 4 times, new_handler called 3 times",
            b"bad_alloc caught 4, new_handler called 3 times" in plain.stdout,
            check.text(plain.stdout))
    if docs:
        # Every exception object comes from __cxa_allocate_exception; those
        # thrown at thrown_here are the ones the program counted.
        doc = docs[0]
        # (a static function in a namespace: its name with or without it)
        n = sum(s["allocations"] for s in doc["sites"]
                if check.norm_function(s.get("function")) in ("rel::thrown_here", "thrown_here")
                and
                s.get("stack") and s["stack"][0].get("function") == "__cxa_allocate_exception")
        T.eq("rel_exceptions: exceptions allocated at thrown_here", n, facts.get("thrown_here"))


JEMALLOC_SRC = os.path.join(check.TOP, "tests", "targets", "optional", "rel_jemalloc.c")


def case_jemalloc():
    need_tools()
    exe = os.path.join(check.TARGETS, "rel_jemalloc")
    cc = os.environ.get("CC", "cc")
    cp = rel.run([cc, "-std=gnu11", "-O0", "-g", "-fno-omit-frame-pointer", "-pthread",
                  "-Wall", "-Wextra", "-Werror", JEMALLOC_SRC, "-o", exe, "-ljemalloc"])
    if cp.returncode != 0:
        raise Skip("cannot build rel_jemalloc with -ljemalloc (install libjemalloc-dev): %s"
                   % check.first_line(cp.stderr))
    plain, traced, docs = compare_runs("rel_jemalloc", [exe])
    T.check("rel_jemalloc: jemalloc is the allocator",
            plain.stdout.startswith(b"allocator jemalloc\n"), check.first_line(plain.stdout))
    facts = rel.output_facts(plain.stdout)
    T.eq("rel_jemalloc: the program saw no bad block", facts.get("bad"), 0)
    if docs:
        doc = docs[0]
        T.eq("rel_jemalloc: allocations at je_site", rel.site_sum(doc, "je_site", "allocations"),
             facts.get("je_site"))
        T.eq("rel_jemalloc: leaked blocks at je_keep",
             rel.site_sum(doc, "je_keep", "leaked_blocks"), facts.get("je_keep"))


RUST_SRC = os.path.join(check.TOP, "tests", "targets", "optional", "rel_rust.rs")


def case_rust():
    need_tools()
    rustc = shutil.which("rustc")
    if not rustc:
        raise Skip("rustc is not installed")
    exe = os.path.join(check.TARGETS, "rel_rust")
    cp = rel.run([rustc, "-O", "-g", RUST_SRC, "-o", exe])
    if cp.returncode != 0:
        raise Skip("cannot build rel_rust: %s" % check.first_line(cp.stderr))
    plain, traced, docs = compare_runs("rel_rust", [exe])
    facts = rel.output_facts(plain.stdout)
    T.eq("rel_rust: the program ran its threads", facts.get("threads"), 4)
    if docs:
        # Rust names: main::leak_here::h0123..., under the allocator's frames
        n = sum(s["leaked_blocks"] for s in docs[0]["sites"]
                if any("leak_here" in (f.get("function") or "") for f in s.get("stack", [])))
        T.eq("rel_rust: a block leaked at leak_here by each thread", n, facts.get("leak_here"))


def main():
    cases = [("python3", case_python), ("sqlite3", case_sqlite), ("git", case_git),
             ("redis-server", case_redis), ("memcached", case_memcached),
             ("rel_exceptions", case_exceptions), ("rel_jemalloc", case_jemalloc),
             ("rel_rust", case_rust)]
    try:
        rel.run_cases(T, cases, "MATRIX_ONLY")
    finally:
        check.clean_up(WORK)
    T.finish()


if __name__ == "__main__":
    main()
