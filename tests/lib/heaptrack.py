"""heaptrack.py - run a program under heaptrack and read its exact figures.

heaptrack_print rounds bytes ("124.50K"), so the exact figures come from the
data file itself (zstd-compressed text: 'a SIZE TRACE' defines an allocation
kind, '+ IDX' allocates one, '- IDX' frees one, 't'/'i'/'s' describe stacks).
The printed lines are read as well and must agree with the exact figures
formatted the way heaptrack_print formats them: that checks this parser.

libstdc++'s emergency exception pool (72,704 bytes with GCC 12, allocated by
libstdc++'s own initializer) needs care: heaptrack's shim is C++, so
heaptrack brings libstdc++ and that pool into every program, C programs
included, and frees it at exit (__gnu_cxx::__freeres).  heaptrail's shim is
C: a C program has no pool under it, and a C++ program's pool is never freed.
normalized() turns heaptrack's figures into what heaptrail must report.
"""

import os
import shutil
import subprocess

RUNTIME_PREFIXES = ("libstdc++.so",)


def available():
    return shutil.which("heaptrack") is not None and \
        shutil.which("heaptrack_print") is not None and \
        shutil.which("zstdcat") is not None


def run(argv, out_base, env=None, cwd=None, timeout=600):
    """Runs argv under heaptrack; returns (completed process, data file)."""
    for f in (out_base + ".zst", out_base + ".gz", out_base):
        if os.path.exists(f):
            os.unlink(f)
    cp = subprocess.run(["heaptrack", "-o", out_base] + list(argv),
                        env=env, cwd=cwd, capture_output=True, text=True,
                        timeout=timeout)
    for f in (out_base + ".zst", out_base + ".gz"):
        if os.path.exists(f):
            return cp, f
    return cp, None


def _read_lines(path):
    if path.endswith(".zst"):
        data = subprocess.run(["zstdcat", path], capture_output=True,
                              check=True).stdout
    elif path.endswith(".gz"):
        data = subprocess.run(["zcat", path], capture_output=True,
                              check=True).stdout
    else:
        with open(path, "rb") as f:
            data = f.read()
    return data.decode("utf-8", "replace").splitlines()


class Raw:
    """The exact figures of one heaptrack data file."""

    def __init__(self, path):
        self.strings = [None]       # 1-based
        self.ips = [None]           # 1-based: (module string index, [function string index...])
        self.traces = [(0, 0)]      # 1-based: (ip index, parent trace index)
        self.kinds = []             # 0-based: (size, trace index)
        self.events = []            # ('+' or '-', kind index)
        for line in _read_lines(path):
            if not line or line[0] == "#":
                continue
            tag, rest = line[0], line[2:]
            if tag == "s":
                # 's LEN STRING' (format 3); older files have no length.
                parts = rest.split(" ", 1)
                try:
                    n = int(parts[0], 16)
                    s = parts[1] if len(parts) > 1 else ""
                    self.strings.append(s[:n] if len(s) >= n else s)
                except ValueError:
                    self.strings.append(rest)
            elif tag == "i":
                f = [int(x, 16) for x in rest.split()]
                # ip, module, then (function, file, line) triples
                self.ips.append((f[1], f[2::3]))
            elif tag == "t":
                f = [int(x, 16) for x in rest.split()]
                self.traces.append((f[0], f[1]))
            elif tag == "a":
                f = [int(x, 16) for x in rest.split()]
                self.kinds.append((f[0], f[1]))
            elif tag in "+-":
                self.events.append((tag, int(rest, 16)))

    def trace_modules(self, trace):
        """Basenames of the modules of a stack, innermost first."""
        mods = []
        seen = 0
        while trace and seen < 10000:
            ip, trace = self.traces[trace]
            seen += 1
            mod = self.ips[ip][0] if ip < len(self.ips) else 0
            name = self.strings[mod] if 0 < mod < len(self.strings) else ""
            mods.append(os.path.basename(name or ""))
        return mods

    def is_emergency_pool(self, kind):
        """libstdc++ allocating for itself at start-up (no frame of the program)."""
        size, trace = self.kinds[kind]
        mods = self.trace_modules(trace)
        return size == 72704 and any(m.startswith(RUNTIME_PREFIXES) for m in mods) \
            and not any(m and not m.startswith(("lib", "ld-")) for m in mods)

    def figures(self, drop_pool=False, keep_pool_alive=False):
        """allocations, leaked bytes and blocks, peak live bytes."""
        live = blocks = peak = allocs = 0
        pool = set(k for k in range(len(self.kinds)) if self.is_emergency_pool(k))
        for tag, k in self.events:
            if k in pool and (drop_pool or (keep_pool_alive and tag == "-")):
                continue
            size = self.kinds[k][0]
            if tag == "+":
                allocs += 1
                live += size
                blocks += 1
                peak = max(peak, live)
            else:
                live -= size
                blocks -= 1
        return {"allocations": allocs, "leaked_bytes": live,
                "leaked_blocks": blocks, "peak_live_bytes": peak,
                "pool_seen": bool(pool)}


def fmt_bytes(n):
    """heaptrack_print's formatBytes: 1000-based units, two decimals."""
    units = ["B", "K", "M", "G", "T", "P", "E", "Z", "Y"]
    v = float(n)
    i = 0
    while i < len(units) - 1 and abs(v) > 1000.0:
        v /= 1000.0
        i += 1
    if i == 0:
        return "%d%s" % (n, units[0])
    return "%.2f%s" % (v, units[i])


def printed(path):
    """The summary lines of heaptrack_print, as strings."""
    cp = subprocess.run(["heaptrack_print", "--disable-builtin-suppressions",
                         "--print-peaks=0", "--print-allocators=0",
                         "--print-temporary=0", "--print-leaks=0", "-f", path],
                        capture_output=True, text=True)
    out = {}
    for line in cp.stdout.splitlines():
        if line.startswith("calls to allocation functions:"):
            out["allocations"] = int(line.split(":")[1].split()[0])
        elif line.startswith("peak heap memory consumption:"):
            out["peak_live_bytes"] = line.split(":")[1].strip()
        elif line.startswith("total memory leaked:"):
            out["leaked_bytes"] = line.split(":")[1].strip()
    return out


def links_libstdcxx(exe):
    cp = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True)
    return "libstdc++" in cp.stdout


def normalized(path, exe):
    """
    What heaptrail must report for the same run, from heaptrack's file, and
    a list of disagreements between the raw parse and heaptrack_print.
    """
    raw = Raw(path)
    plain = raw.figures()
    problems = []
    shown = printed(path)
    if shown.get("allocations") != plain["allocations"]:
        problems.append("heaptrack_print says %s allocations, its file %d" %
                        (shown.get("allocations"), plain["allocations"]))
    for key in ("peak_live_bytes", "leaked_bytes"):
        if shown.get(key) != fmt_bytes(plain[key]):
            problems.append("heaptrack_print says %s %s, its file %d (%s)" %
                            (key, shown.get(key), plain[key], fmt_bytes(plain[key])))
    if links_libstdcxx(exe):
        want = raw.figures(keep_pool_alive=True)
    else:
        want = raw.figures(drop_pool=True)
    return want, problems
