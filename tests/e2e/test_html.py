#!/usr/bin/env python3
"""test_html.py - end-to-end checks of 'heaptrail html' (issue 7).

html_mix knows its own sites (tests/lib/truth.h): what each leaked, the
peak buffer's bytes, the temporaries, the clients and their residue.  The
report of its dump is opened in headless Chromium, driven over the DevTools
protocol (a small websocket client below, standard library only): the
page must load from disk without any network request or console error,
and its charts and tables must be filled with those sites and figures.
Clicks zoom the flame graph, sort the tables and switch the theme.  Light
and dark screenshots are written (KEEP_TEST_FILES=1 keeps them) and their
brightness checked.  Skipped without chromium.
"""

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

import check  # noqa: E402
from check import Skip  # noqa: E402

T = check.Suite("html")
WORK = tempfile.mkdtemp(prefix="heaptrail-html-")
KEEP = os.environ.get("KEEP_TEST_FILES") == "1"
# html_mix.c's MARK_NASTY: a marker label that must not break the page
NASTY = 'a<b & "c" </script><!--'


target = check.built_target


def run_target(name):
    dump, lines = check.run_with_truth(T, target(name), check.fresh_dir(WORK, name))
    return dump, lines[-1]


def truth_site(truth, fn):
    """A function's figures, summed over its allocating lines (keep_pinned has two)."""
    m = [s for s in truth["sites"] if s["function"] == fn]
    if not m:
        return None
    return {k: sum(s[k] for s in m) for k in ("allocations", "allocated_bytes", "leaked_bytes", "leaked_blocks")}


def embedded(page):
    m = re.search(r'<script id="heaptrail-data" type="application/json">\n(.*?)</script>', page, re.S)
    if not m:
        raise AssertionError("no embedded JSON document")
    return json.loads(m.group(1))


# ---- a DevTools protocol client: websocket framing by hand --------------

class Socket:
    """A client websocket (RFC 6455) on a plain TCP connection."""

    def __init__(self, url):
        m = re.match(r"ws://([^:/]+):(\d+)(/.*)", url)
        self.s = socket.create_connection((m.group(1), int(m.group(2))))
        self.s.settimeout(check.HANG_GUARD / 3)  # a hung browser fails the case, not the run
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n" %
                        (m.group(3), m.group(1), m.group(2), key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(4096)
            if not chunk:
                raise OSError("websocket handshake: connection closed")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("websocket handshake refused: %r" % head[:100])

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise OSError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        self.s.sendall(head + mask + masked)

    def recv(self):
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 9:  # ping
                self.s.sendall(struct.pack("!BB", 0x8A, 0x80 | len(data)) + b"\0\0\0\0" + data)
                continue
            if op == 8:
                raise OSError("websocket closed by the browser")
            parts.append(data)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def close(self):
        self.s.close()


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise Skip("chromium is not installed (scripts/install-deps.sh --test)")
        self.profile = tempfile.mkdtemp(prefix="heaptrail-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             "--disable-extensions", "--user-data-dir=" + self.profile,
             "--remote-debugging-port=0", "--window-size=1366,768", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        for _ in range(600):  # a guard against a browser that never starts, not a timing test
            if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
                break
            if self.proc.poll() is not None:
                raise Skip("chromium exited at start (status %d)" % self.proc.returncode)
            time.sleep(0.1)
        else:
            self.close()
            raise Skip("chromium did not open its DevTools port")
        port = open(port_file).read().split("\n")[0].strip()
        pages = []
        for _ in range(100):
            with urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port) as r:
                pages = [p for p in json.load(r) if p.get("type") == "page"]
            if pages:
                break
            time.sleep(0.1)
        self.ws = Socket(pages[0]["webSocketDebuggerUrl"])
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise AssertionError("%s: %s" % (method, msg["error"].get("message")))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e["method"] == method:
                return self.events.pop(i)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self.events.append(msg)

    def open(self, url):
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError("javascript: %s: %s" % (
                expr[:60], r["exceptionDetails"].get("exception", {}).get("description", r["exceptionDetails"].get("text"))))
        return r["result"].get("value")

    def screenshot(self, path):
        h = self.js("Math.ceil(document.documentElement.scrollHeight)")
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": 1366, "height": h, "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def problems(self):
        """Console errors and warnings, uncaught exceptions, failed loads, requests off disk."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append("exception: %s" % p["exceptionDetails"].get("exception", {}).get("description", p["exceptionDetails"].get("text")))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append("console.%s: %s" % (p["type"], " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))))
            elif e["method"] == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                out.append("log: %s" % p["entry"].get("text"))
            elif e["method"] == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith(("file:", "data:", "about:")):
                    out.append("network request: %s" % url)
        return out

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


# ---- PNG brightness, to see that a screenshot is light or dark -----------

def png_mean(path):
    """Mean of the pixels' (r + g + b) / 3 over an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError("%s is no PNG" % path)
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack("!I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack("!IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise AssertionError("unexpected PNG layout")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    total = count = 0
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 4 == 0:  # every fourth row is plenty for a mean
            for x in range(0, stride, bpp * 4):
                total += line[x] + line[x + 1] + line[x + 2]
                count += 3
        prev = line
    return total / count if count else 0


# ---- the checks ---------------------------------------------------------

def test_file(dump, truth):
    with T.case("page"):
        out = os.path.join(WORK, "report.html")
        cp = check.run([check.HEAPTRAIL, "html", dump, "-o", out])
        T.eq("html exits 0", cp.returncode, 0)
        T.eq("nothing on stdout", cp.stdout, b"")
        T.eq("nothing on stderr (no terminal: no progress line)", cp.stderr, b"")
        page = open(out, encoding="utf-8").read()
        T.check("no external resource (src=, href=http, @import, url(http)",
                not re.search(r'<(script|img|link|iframe)[^>]*\s(src|href)=|@import|url\(\s*["\']?https?:|href="https?:', page))
        T.check("one file: no other file written", sorted(os.listdir(WORK)) == ["html_mix", "report.html"],
                "%s" % os.listdir(WORK))
        doc = embedded(page)
        T.eq("embedded dump path", doc["dump"], dump)
        T.eq("totals leaked = truth", doc["totals"]["leaked_bytes"], truth["leaked_bytes"])
        T.eq("totals peak = truth", doc["totals"]["peak_live_bytes"], truth["peak_live_bytes"])
        T.eq("totals allocations = truth", doc["totals"]["allocations"], truth["allocations"])
        by_fn = {s["function"]: s for s in doc["sites"] if s["function"]}
        for fn in ("leak_config", "grow_history", "client_residue", "keep_pinned"):
            t = truth_site(truth, fn)
            T.eq("%s leaked in the document" % fn, by_fn.get(fn, {}).get("leaked_bytes"), t["leaked_bytes"])
        T.eq("a marker label with '</script>' survives", [m["label"] for m in doc["timeline"]["markers"]],
             ["start", "peak", "end", NASTY])
        T.check("'</script>' written escaped", page.count("</script>") == 2, "%d" % page.count("</script>"))
        return out


def site_rows(b, table):
    """{function: {key: value}} of a sites table as the page shows it."""
    return b.js("""(() => {
        const out = {};
        for (const tr of document.querySelectorAll('table[data-table="%s"] tbody tr[data-site]')) {
            const fn = tr.querySelector('td.site .mono').textContent;
            const row = {rank: out.__n = (out.__n || 0) + 1};
            for (const td of tr.querySelectorAll('td[data-key]'))
                row[td.dataset.key] = isNaN(Number(td.dataset.value)) ? td.dataset.value : Number(td.dataset.value);
            row.text = Array.from(tr.querySelectorAll('td')).map(t => t.textContent);
            out[fn] = row;
        }
        delete out.__n;
        return out;
    })()""" % table)


def test_browser(page, truth):
    b = Browser()
    try:
        with T.case("browser"):
            url = "file://" + page
            b.call("Emulation.setDeviceMetricsOverride", width=1366, height=768, deviceScaleFactor=1, mobile=False)
            b.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "light"}])
            b.open(url)
            T.eq("the script ran to its end", b.js("document.body.dataset.ready"), "1")
            T.eq("no error shown on the page", b.js("document.getElementById('errors').textContent"), "")
            T.eq("title names the program", b.js("document.title"), "heaptrail: html_mix")

            # summary cards
            cards = b.js("Object.fromEntries(Array.from(document.querySelectorAll('.card')).map(c => [c.dataset.card, c.querySelector('.v').textContent]))")
            T.eq("card: leaked", cards.get("leaked"), b.js("(%d / 1024).toFixed(1) + ' KiB'" % truth["leaked_bytes"]))
            T.check("card: residue", "residue" in cards, repr(cards))

            # timeline
            series = b.js("Array.from(document.querySelectorAll('svg[data-chart=memory] path[data-series]')).map(p => [p.dataset.series, p.getAttribute('d').length])")
            T.eq("memory chart draws RSS, allocator-held and live heap", sorted(s for s, n in series if n > 20), ["allocator", "heap", "rss"])
            marks = b.js("Array.from(document.querySelectorAll('svg[data-chart=memory] text[data-marker]')).map(t => t.textContent)")
            T.eq("markers on the time axis", marks, ["start", "peak", "end", NASTY])
            lanes = b.js("document.querySelectorAll('svg[data-chart=memory] g.clients line[data-client]').length")
            T.eq("each client's connection on the time axis", lanes, truth["facts"]["clients"])
            drawn = b.js("Array.from(document.querySelectorAll('svg[data-chart=sites] path[data-series]')).map(p => p.dataset.series)")
            T.check("site curves drawn", len(drawn) >= 4, repr(drawn))
            legend = b.js("document.querySelector('#timeline .chartbox:nth-of-type(2) .legend') ? document.querySelectorAll('#timeline .legend')[1].textContent : ''")
            for fn in ("peak_buffer", "grow_history"):
                T.check("site curve legend names %s" % fn, fn in legend, legend[:200])

            # the four tables
            leaked = site_rows(b, "leaked")
            for fn in ("grow_history", "leak_config", "keep_pinned", "client_residue"):
                t = truth_site(truth, fn)
                T.eq("leaked table: %s" % fn, leaked.get(fn, {}).get("leaked_bytes"), t["leaked_bytes"])
            T.eq("leaked table sorted, grow_history first", leaked.get("grow_history", {}).get("rank"), 1)
            peak = site_rows(b, "peak")
            T.eq("peak table: peak_buffer first", peak.get("peak_buffer", {}).get("rank"), 1)
            T.eq("peak table: peak_buffer's bytes at the peak", peak.get("peak_buffer", {}).get("peak_bytes"),
                 truth["facts"]["peak_buffer_bytes"])
            growth = site_rows(b, "growth")
            T.eq("growth table: grow_history first", growth.get("grow_history", {}).get("rank"), 1)
            T.check("growth table: grow_history is growing", "growing" in growth.get("grow_history", {}).get("text", []),
                    repr(growth.get("grow_history")))
            allocs = site_rows(b, "allocations")
            T.eq("allocations table: make_temp first", allocs.get("make_temp", {}).get("rank"), 1)
            T.eq("allocations table: make_temp's count", allocs.get("make_temp", {}).get("allocations"), truth["facts"]["temps"])
            T.eq("allocations table: make_temp's temporaries", allocs.get("make_temp", {}).get("temporary"), truth["facts"]["temps"])

            # sorting by a click on a column header
            b.js("document.querySelector('table[data-table=leaked] th[data-key=leaked_blocks]').click()")
            leaked = site_rows(b, "leaked")
            T.eq("click on Blocks sorts by blocks: keep_pinned first", leaked.get("keep_pinned", {}).get("rank"), 1)
            b.js("document.querySelector('table[data-table=leaked] tr[data-site]').click()")
            stack = b.js("document.querySelector('table[data-table=leaked] tr.detail ol.stack').textContent")
            T.check("click on a row shows its stack", "keep_pinned" in stack and "main" in stack, stack[:200])
            b.js("document.querySelector('button[data-tab=peak]').click()")
            T.eq("tab button shows the peak table", b.js("getComputedStyle(document.querySelector('[data-table-wrap=peak]')).display"), "block")

            # flame graph
            total = b.js("Number(document.querySelector('svg[data-chart=flame]').dataset.total)")
            T.eq("flame graph of leaked bytes adds up to the truth", total, truth["leaked_bytes"])
            fl = b.js("Object.fromEntries(Array.from(document.querySelectorAll('svg[data-chart=flame] g[data-name]')).map(g => [g.dataset.name, Number(g.dataset.value)]))")
            for fn in ("grow_history", "leak_config", "keep_pinned", "client_residue"):
                T.eq("flame: %s" % fn, fl.get(fn), truth_site(truth, fn)["leaked_bytes"])
            T.eq("flame: main holds everything", fl.get("main"), truth["leaked_bytes"])
            w = b.js("""(() => {
                const g = document.querySelector('svg[data-chart=flame] g[data-name=leak_config]');
                g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
                const z = document.querySelector('svg[data-chart=flame] g[data-name=leak_config] rect');
                const svg = document.querySelector('svg[data-chart=flame]');
                return [Number(z.getAttribute('width')), Number(svg.getAttribute('width')),
                        document.querySelectorAll('svg[data-chart=flame] g[data-name=grow_history]').length];
            })()""")
            T.check("click zooms: leak_config spans the width", w[0] >= w[1] - 2, repr(w))
            T.eq("click zooms: grow_history is out of view", w[2], 0)
            b.js("document.querySelector('#flame button').click()")
            T.eq("reset zoom brings it back", b.js("document.querySelectorAll('svg[data-chart=flame] g[data-name=grow_history]').length"), 1)
            b.js("(() => { const s = document.querySelector('#flame select'); s.value = 'allocations'; s.dispatchEvent(new Event('change')); })()")
            T.eq("flame graph of allocations adds up to the truth",
                 b.js("Number(document.querySelector('svg[data-chart=flame]').dataset.total)"), truth["allocations"])
            b.js("(() => { const s = document.querySelector('#flame select'); s.value = 'residue'; s.dispatchEvent(new Event('change')); })()")
            T.eq("flame graph of residue = clients x residue",
                 b.js("Number(document.querySelector('svg[data-chart=flame]').dataset.total)"),
                 truth["facts"]["clients"] * truth["facts"]["residue"])

            # clients
            bars = b.js("Array.from(document.querySelectorAll('svg[data-chart=residue] rect[data-client]')).map(r => Number(r.dataset.value))")
            T.eq("residue chart: one bar per client, each its residue", bars,
                 [truth["facts"]["residue"]] * truth["facts"]["clients"])
            T.check("cumulative residue curve drawn", b.js("!!document.querySelector('svg[data-chart=residue-cumulative] path[data-series]')"))
            res = site_rows(b, "residue")
            T.eq("residue table: client_residue", res.get("client_residue", {}).get("residue_bytes"),
                 truth["facts"]["clients"] * truth["facts"]["residue"])
            T.check("residue table: client_residue grows", "grows" in res.get("client_residue", {}).get("text", []))

            # fragmentation
            cells = b.js("Array.from(document.querySelectorAll('canvas[data-chart=pagemap]')).map(c => Number(c.dataset.cells))")
            T.check("page map drawn", cells and all(c > 0 for c in cells), repr(cells))
            pin = site_rows(b, "pinners")
            T.eq("pinning table: keep_pinned first", pin.get("keep_pinned", {}).get("rank"), 1)

            # theme: the toggle, then the system's dark preference
            light = b.js("getComputedStyle(document.body).backgroundColor")
            shot_light = os.path.join(WORK, "report-light.png")
            b.js("window.scrollTo(0, 0)")
            b.screenshot(shot_light)
            b.js("document.getElementById('theme').click(); document.getElementById('theme').click()")
            T.eq("toggle: light, then dark", b.js("document.documentElement.dataset.theme"), "dark")
            T.check("toggle to dark darkens the page", b.js("getComputedStyle(document.body).backgroundColor") != light)
            b.js("document.getElementById('theme').click()")
            T.eq("toggle back to auto", b.js("document.documentElement.dataset.theme || 'auto'"), "auto")
            b.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
            b.open(url)
            T.eq("dark: the script ran", b.js("document.body.dataset.ready"), "1")
            T.eq("prefers-color-scheme: dark gives the dark page", b.js("getComputedStyle(document.body).backgroundColor"), "rgb(20, 22, 27)")
            shot_dark = os.path.join(WORK, "report-dark.png")
            b.screenshot(shot_dark)
            ml, md = png_mean(shot_light), png_mean(shot_dark)
            T.check("light screenshot is light (mean %.0f)" % ml, ml > 180)
            T.check("dark screenshot is dark (mean %.0f)" % md, md < 90)
            if KEEP:
                print("screenshots: %s %s" % (shot_light, shot_dark))

            # a narrow window still draws without errors
            b.call("Emulation.setDeviceMetricsOverride", width=800, height=700, deviceScaleFactor=2, mobile=False)
            b.open(url)
            T.eq("narrow, high-DPI window: ready", b.js("document.body.dataset.ready"), "1")
            problems = b.problems()
            T.check("no console error, exception or network request", not problems, "; ".join(problems[:5]))
    finally:
        b.close()


def test_usage(dump):
    with T.case("usage"):
        cp = check.run([check.HEAPTRAIL, "html"])
        T.eq("no dump: exit 2", cp.returncode, 2)
        cp = check.run([check.HEAPTRAIL, "html", os.path.join(WORK, "missing.htr"), "-o", os.path.join(WORK, "x.html")])
        T.eq("missing dump: exit 2", cp.returncode, 2)
        T.eq("missing dump: one line", len(check.text(cp.stderr).strip().splitlines()), 1)
        T.check("missing dump: no page left", not os.path.exists(os.path.join(WORK, "x.html")))
        cp = check.run([check.HEAPTRAIL, "html", dump, "-o", os.path.join(WORK, "no", "such", "dir.html")])
        T.eq("unwritable output: exit 2", cp.returncode, 2)
        T.check("unwritable output: says so", "cannot write" in check.text(cp.stderr), check.text(cp.stderr))
        cp = check.run([check.HEAPTRAIL, "html", dump, "--bogus"])
        T.eq("unknown option: exit 2", cp.returncode, 2)
        d = os.path.join(WORK, "default")
        os.makedirs(d)
        cp = check.run([check.HEAPTRAIL, "html", dump], cwd=d)
        T.eq("default name: exit 0", cp.returncode, 0)
        T.eq("default name: the dump's, in the current directory", os.listdir(d), ["out.html"])
        cp = check.run([check.HEAPTRAIL, "html", dump, "-o", "-"])
        T.check("-o -: the page on stdout", cp.returncode == 0 and cp.stdout.startswith(b"<!DOCTYPE html>"))
        h1 = check.run([check.HEAPTRAIL, "help", "html"]).stdout
        h2 = check.run([check.HEAPTRAIL, "html", "--help"]).stdout
        T.check("help html == html --help", h1 == h2 and b"usage: heaptrail html" in h1)


def test_assets():
    with T.case("assets"):
        gen = os.path.join(check.TOP, "analyzer", "html", "gen_assets.py")
        cp = check.run([sys.executable, gen, "--check"])
        T.eq("analyzer/html_assets.c matches analyzer/html/report.*", cp.returncode, 0)


def main():
    test_assets()
    dump = truth = page = None
    with T.case("record"):
        dump, truth = run_target("html_mix")
    if dump:
        page = test_file(dump, truth)
    if page:
        with T.case("chromium"):
            test_browser(page, truth)
    if dump:
        test_usage(dump)
    if not KEEP:
        shutil.rmtree(WORK, ignore_errors=True)
    T.finish()


if __name__ == "__main__":
    main()
