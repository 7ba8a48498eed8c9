#!/usr/bin/env python3
"""test_clients.py - end-to-end checks of per-client residue (issue 4).

Test servers (tests/targets/server_threads.c, server_epoll.c) run under the
shim over real sockets: TCP on 127.0.0.1 and Unix sockets in /tmp.  This
script is their client: it knows how many connections it made and from
which ports; the servers know what each client allocates (truth.h: a
LEAK_BYTES leak per client at leak_per_client, a shared cache of
CACHE_SLOTS entries at cache_put, sessions freed after close).
'heaptrail clients --json' must agree: the client count equals the
connections made, the labels are the clients' addresses, residue per client
at the leaking site equals LEAK_BYTES exactly and grows, the cache's residue
equals what the cache holds at exit and is bounded, and freed per-client
state leaves nothing.  Then redis-server (not written here) driven by
redis-benchmark: the client count matches the connections redis itself
counted, redis behaves normally, and the residue report is plausible.
"""

import os
import re
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

T = check.Suite("clients")
WORK = tempfile.mkdtemp(prefix="heaptrail-clients-")
REQUESTS = 3		# per connection


target = check.target


need_tools = check.need_tools


def shim_env(dump, mode, truth=None):
    env = {"LD_PRELOAD": check.SHIM, "HEAPTRAIL_OUT": dump}
    if mode:
        env["HEAPTRAIL_CLIENTS"] = mode
    if truth:
        env["TRUTH_OUT"] = truth
    return check.clean_env(env)


def connect(where, port):
    if where == "tcp":
        return socket.create_connection(("127.0.0.1", port))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(where[5:])
    return s


def recv_lines(s, n):
    got = b""
    while got.count(b"\n") < n:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def serve(name, where, nclients, batch, mode, extra=()):
    """Runs a test server under the shim and talks to it.

    Connections are made in batches of 'batch' open at once, their requests
    interleaved.  Returns (dump, truth, labels of our sockets as the server
    sees them, answers ok, server's CompletedProcess-like tuple).
    """
    dump = os.path.join(WORK, "%s.%s.htr" % (name, mode or "api"))
    truth = os.path.join(WORK, "%s.%s.truth" % (name, mode or "api"))
    for f in (dump, truth):
        if os.path.exists(f):
            os.unlink(f)
    argv = [target(name), where, str(nclients)] + list(extra)
    p = subprocess.Popen(argv, env=shim_env(dump, mode, truth), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    labels = []
    answers_ok = True
    try:
        first = p.stdout.readline().decode().split()
        if len(first) != 2 or first[0] != "listening":
            raise AssertionError("server did not start: %r %r" %
                                 (first, p.stderr.read().decode(errors="replace")))
        port = int(first[1]) if where == "tcp" else None
        made = 0
        while made < nclients:
            socks = [connect(where, port) for _ in range(min(batch, nclients - made))]
            made += len(socks)
            for s in socks:
                labels.append("127.0.0.1:%d" % s.getsockname()[1] if where == "tcp" else "unix")
            for _ in range(REQUESTS):
                for s in socks:
                    s.sendall(b"request\n")
                for s in socks:
                    answers_ok &= recv_lines(s, 1) == b"ok\n"
            for s in socks:
                s.close()
        out, err = p.communicate(timeout=check.HANG_GUARD)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return dump, truth, labels, answers_ok, (p.returncode, err)


def sites_at(doc, function, line):
    return [s for s in doc["sites"]
            if s.get("line") == line and check.function_matches(s.get("function"), function)]


def truth_site(truth, function):
    for s in truth["sites"]:
        if s["function"] == function:
            return s
    raise AssertionError("no truth for %s" % function)


def check_server(name, where, nclients, batch, mode, extra=(), label_check=True):
    need_tools()
    dump, truth_path, labels, answers_ok, (rc, err) = serve(name, where, nclients, batch,
                                                             mode, extra)
    T.eq("server exit status", rc, 0)
    T.check("every request answered", answers_ok)
    cp, doc = check.analyze("clients", dump, "--top", "0")
    if not T.check("clients --json runs", doc is not None,
                   check.first_line(cp.stderr) or "exit %d" % cp.returncode):
        return
    truth = check.truth_lines(truth_path)[-1]
    facts = truth["facts"]
    leak_bytes = facts["leak_bytes"]

    T.eq("client count = connections made", doc["clients"], nclients)
    T.eq("every client disconnected", doc["disconnected"], nclients)
    T.eq("every client judged (the server exited)", doc["judged"], nclients)
    if label_check:
        T.eq("labels = the clients' addresses",
             sorted(c["label"] for c in doc["per_client"]), sorted(labels))

    leak = truth_site(truth, "leak_per_client")
    got = sites_at(doc, "leak_per_client", leak["line"])
    T.eq("leak site: residue = what leaked", sum(s["residue_bytes"] for s in got),
         leak["leaked_bytes"])
    T.eq("leak site: residue per client = LEAK_BYTES",
         [s["residue_per_client_bytes"] for s in got], [leak_bytes])
    T.eq("leak site: every client left it", [s["clients_with_residue"] for s in got],
         [nclients])
    T.eq("leak site: trend", [s["trend"] for s in got], ["grows"])

    cache = truth_site(truth, "cache_put")
    got = sites_at(doc, "cache_put", cache["line"])
    T.eq("cache: residue = what the cache holds at exit",
         sum(s["residue_bytes"] for s in got), cache["leaked_bytes"])
    T.eq("cache: holds CACHE_SLOTS entries", cache["leaked_bytes"],
         facts["cache_slots"] * facts["cache_entry_bytes"])
    T.eq("cache: trend", [s["trend"] for s in got], ["bounded"])

    for s in truth["sites"]:
        if s["leaked_bytes"] == 0:
            T.eq("no residue at %s:%d (freed)" % (s["function"], s["line"]),
                 sites_at(doc, s["function"], s["line"]), [])

    per = doc["per_client"]
    T.check("each client left at least its leak",
            all(c["residue_bytes"] >= leak_bytes for c in per),
            "residues %r" % sorted(c["residue_bytes"] for c in per)[:5])
    T.eq("residue total = sum over clients", doc["residue_bytes"],
         sum(c["residue_bytes"] for c in per))
    T.check("median residue >= LEAK_BYTES", doc["residue_median_bytes"] >= leak_bytes)
    p = doc["process"]
    T.eq("process: growth = attributed + connected + unattributed", p["growth_bytes"],
         p["attributed_residue_bytes"] + p["connected_bytes"] + p["unattributed_growth_bytes"])
    T.check("process: the leaks are attributed",
            p["attributed_residue_bytes"] >= nclients * leak_bytes + cache["leaked_bytes"],
            "attributed %d" % p["attributed_residue_bytes"])

    # the text output says the same in words
    cp = check.run([check.HEAPTRAIL, "clients", dump])
    out = check.text(cp.stdout)
    T.check("text: count line", out.startswith("%d clients in " % nclients), out[:80])
    T.check("text: leak site shown", re.search(r"1000 B\s+%d\s+grows\s+leak_per_client" % nclients,
                                               out), out)


def unix_path(tag):
    return "unix:/tmp/heaptrail-%s-%d.sock" % (tag, os.getpid())


def case_off():
    """Without HEAPTRAIL_CLIENTS the servers run and the dump has no client."""
    need_tools()
    dump, _, _, answers_ok, (rc, _) = serve("server_epoll", "tcp", 5, 5, None)
    T.eq("server exit status", rc, 0)
    T.check("every request answered", answers_ok)
    cp, doc = check.analyze("clients", dump)
    T.check("clients --json runs", doc is not None, check.first_line(cp.stderr))
    if doc is not None:
        T.eq("no clients", doc["clients"], 0)
        T.eq("no sites", doc["sites"], [])
    cp = check.run([check.HEAPTRAIL, "clients", dump])
    T.check("text says there are none", check.text(cp.stdout).startswith("no clients in"))


def case_bad_usage():
    need_tools()
    cp = check.run([check.HEAPTRAIL, "clients"])
    T.eq("no dump: exit 2", cp.returncode, 2)
    cp = check.run([check.HEAPTRAIL, "clients", "--grace", "soon", "x.htr"])
    T.eq("bad --grace: exit 2", cp.returncode, 2)
    T.check("bad --grace: says why", "--grace" in check.text(cp.stderr), check.text(cp.stderr))
    cp = check.run([check.HEAPTRAIL, "clients", os.path.join(WORK, "missing.htr")])
    T.eq("missing dump: exit 2", cp.returncode, 2)
    T.check("missing dump: one line", check.first_line(cp.stderr).startswith("heaptrail: cannot"),
            check.text(cp.stderr))


# --- redis ------------------------------------------------------------------

def redis_cmd(port, *args):
    """One command on a new connection (RESP); returns the raw reply."""
    s = socket.create_connection(("127.0.0.1", port))
    try:
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        s.settimeout(60)
        data = b""
        while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


def case_redis():
    need_tools()
    server = shutil.which("redis-server")
    bench = shutil.which("redis-benchmark")
    if not server or not bench:
        raise Skip("redis-server or redis-benchmark is not installed")
    port = rel.free_port()
    dump = os.path.join(WORK, "redis.htr")
    log = os.path.join(WORK, "redis.log")
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
            "--dir", WORK, "--logfile", log]
    p = subprocess.Popen(argv, env=shim_env(dump, "sockets"), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    ours = 0		# connections this script makes
    try:
        for _ in range(3000):	# until it listens: a guard against a hang only
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                ours += 1
                break
            except OSError:
                if p.poll() is not None:
                    raise AssertionError("redis-server exited: %s" % p.stderr.read().decode())
                time.sleep(0.05)
        T.eq("redis answers PING", redis_cmd(port, "PING"), b"+PONG\r\n")
        ours += 1
        clients, requests, rounds = 50, 20000, 3
        for r in range(rounds):
            cp = check.run([bench, "-h", "127.0.0.1", "-p", str(port), "-c", str(clients),
                            "-n", str(requests), "-t", "set,get,lpush", "--csv"])
            T.eq("redis-benchmark round %d: exit status" % r, cp.returncode, 0)
            rows = [l for l in check.text(cp.stdout).splitlines() if l.startswith('"') and
                    not l.startswith('"test"')]
            T.eq("redis-benchmark round %d: 3 tests" % r,
                 [row.split(",")[0].strip('"') for row in rows], ["SET", "GET", "LPUSH"])
        llen = rounds * requests
        T.eq("the list holds every LPUSH", redis_cmd(port, "LLEN", "mylist"),
             b":%d\r\n" % llen)
        T.eq("a value reads back", redis_cmd(port, "SET", "heaptrail", "residue") +
             redis_cmd(port, "GET", "heaptrail"), b"+OK\r\n$7\r\nresidue\r\n")
        ours += 3
        info = check.text(redis_cmd(port, "INFO", "stats"))
        ours += 1
        m = re.search(r"total_connections_received:(\d+)", info)
        received = int(m.group(1)) if m else -1
        bench_conns = received - ours
        # redis-benchmark: -c connections per test, plus one for CONFIG GET
        T.eq("redis counted the benchmark's connections", bench_conns,
             rounds * (3 * clients + 1))
        redis_cmd(port, "SHUTDOWN", "NOSAVE")	# closes without a reply
        received += 1
        p.wait(timeout=check.HANG_GUARD)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.wait()
    T.eq("redis-server exit status", p.returncode, 0)
    with open(log) as f:
        text = f.read()
    T.check("redis logged a normal start and end",
            "Ready to accept connections" in text and "ready to exit" in text, text[-300:])

    cp, doc = check.analyze("clients", dump, "--top", "0")
    if not T.check("clients --json runs", doc is not None, check.first_line(cp.stderr)):
        return
    T.eq("client count = connections redis received", doc["clients"], received)
    # the connection that sent SHUTDOWN is still open when redis exits
    T.eq("every client but the SHUTDOWN one disconnected and was judged",
         (doc["disconnected"], doc["judged"], doc["connected_at_end"]),
         (received - 1, received - 1, 1))
    labels = [c["label"] or "" for c in doc["per_client"]]
    T.check("labels are loopback addresses",
            all(re.fullmatch(r"127\.0\.0\.1:\d+", l) for l in labels), labels[:3])
    busy = [c for c in doc["per_client"] if c["allocations"] > 0]
    T.check("benchmark clients allocate", len(busy) >= 3 * clients, "%d" % len(busy))
    # plausibility: residue is what the data set keeps (the list, the last
    # values), not every client's buffers
    p = doc["process"]
    T.check("residue below the live heap at the last disconnect",
            0 < doc["residue_bytes"] <= p["after_last_disconnect_bytes"],
            "residue %d, live %r" % (doc["residue_bytes"], p["after_last_disconnect_bytes"]))
    T.check("residue per client is small (< 64 KiB)",
            doc["residue_per_client_bytes"] < 64 << 10, "%d" % doc["residue_per_client_bytes"])
    T.eq("process: growth = attributed + connected + unattributed", p["growth_bytes"],
         p["attributed_residue_bytes"] + p["connected_bytes"] + p["unattributed_growth_bytes"])
    T.check("sites carry a trend", all(s["trend"] in ("grows", "bounded", "unknown")
                                       for s in doc["sites"]))

    def with_frame(name):
        return [s for s in doc["sites"]
                if any(f.get("function") == name for f in s["stack"][:6])]
    # the list LPUSH fills: data the clients leave on purpose, rising with every round
    lists = with_frame("quicklistPushHead")
    T.check("the list is residue that grows", lists and
            max(lists, key=lambda s: s["residue_bytes"])["trend"] == "grows",
            [(s["residue_bytes"], s["trend"]) for s in lists])
    T.check("the list's residue holds its payload (3 bytes an element)",
            sum(s["residue_bytes"] for s in lists) >= 3 * llen,
            "%d" % sum(s["residue_bytes"] for s in lists))
    # redis 7 keeps a latency histogram per command, made by its first caller
    hist = with_frame("hdr_init")
    T.check("latency histograms are bounded",
            all(s["trend"] == "bounded" for s in hist), [(s["residue_bytes"], s["trend"])
                                                          for s in hist])
    print("redis: %d clients, residue %d bytes (mean %d, median %d, max %d per client); "
          "live before the first client %d, after the last disconnect %d" %
          (doc["clients"], doc["residue_bytes"], doc["residue_per_client_bytes"],
           doc["residue_median_bytes"], doc["residue_max_bytes"],
           p["before_first_client_bytes"], p["after_last_disconnect_bytes"]))
    for s in doc["sites"][:8]:
        print("  %8d B  %6d B/client  %3d clients  %-8s %s (%s:%s)" % (
            s["residue_bytes"], s["residue_per_client_bytes"], s["clients_with_residue"],
            s["trend"], s["function"], check.base(s["file"]), s["line"]))


def main():
    cases = [
        ("thread per connection, TCP",
         lambda: check_server("server_threads", "tcp", 24, 3, "sockets")),
        ("thread per connection, unix",
         lambda: check_server("server_threads", unix_path("threads"), 16, 4, "sockets")),
        ("epoll, TCP", lambda: check_server("server_epoll", "tcp", 30, 6, "sockets")),
        ("epoll, unix", lambda: check_server("server_epoll", unix_path("epoll"), 20, 5, "sockets")),
        # 24 clients: with fewer, the trend's quarter means rest on a few samples
        ("threads mode", lambda: check_server("server_threads", "tcp", 24, 3, "threads",
                                              label_check=False)),
        ("heaptrail.h clients", lambda: check_server("server_epoll", "tcp", 12, 4, None,
                                                     extra=("api",), label_check=False)),
        ("clients off", case_off),
        ("usage errors", case_bad_usage),
        ("redis-server", case_redis),
    ]
    for name, fn in cases:
        with T.case(name):
            fn()
    shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
