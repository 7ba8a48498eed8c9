#!/usr/bin/env python3
"""htrdump.py - print the raw records of a heaptrail dump (a debugging aid).

An independent decoder of the format in common/htr_format.h, written apart
from the analyzer so that each can check the other.  Needs the zstd CLI.

usage: scripts/htrdump.py DUMP [--events] [--summary]
"""
import struct
import subprocess
import sys

REC = {1: "PROCESS", 2: "MODULE_LOAD", 3: "MODULE_UNLOAD", 4: "CHUNK", 5: "SAMPLE",
       6: "WATERMARK", 7: "LOST", 8: "END", 9: "MARK", 10: "REACH"}


class Buf:
    def __init__(self, data):
        self.d = data
        self.i = 0

    def u(self):
        v = 0
        shift = 0
        while True:
            b = self.d[self.i]
            self.i += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def s(self):
        v = self.u()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n):
        out = self.d[self.i:self.i + n]
        self.i += n
        return out

    def str(self):
        return self.raw(self.u())

    def done(self):
        return self.i >= len(self.d)


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"HTRDUMP\n":
        sys.exit("not a heaptrail dump")
    version, hsize, pid = struct.unpack_from("<III", data, 8)
    yield ("header", {"version": version, "pid": pid})
    off = hsize
    while off + 16 <= len(data):
        magic, csize, rsize, check = struct.unpack_from("<IIII", data, off)
        if magic != 0x52465448 or off + 16 + csize > len(data):
            yield ("truncated", off)
            return
        z = data[off + 16:off + 16 + csize]
        raw = subprocess.run(["zstd", "-dc"], input=z, capture_output=True, check=True).stdout
        assert len(raw) == rsize, (len(raw), rsize)
        yield ("frame", raw)
        off += 16 + csize


FLAGS = {"ticks": 0, "units": False, "packed": False}   # from the process record (HTR_PF_*)


def pdelta(v):
    """A pointer delta: HTR_PF_PTR_UNITS' encoding, or plain zigzag."""
    if not FLAGS["units"]:
        return (v >> 1) ^ -(v & 1)
    w = v >> 1
    d = (w >> 1) ^ -(w & 1)
    return d if v & 1 else d * 16


# --- HTR_PF_PACKED: the writer's columns back into events (common/htr_chunkpack.h) ---

NSTREAMS = 12
OPS, TIME, PTR, PTR_HI, REUSE, REUSE_HI, SIZE, SIZE_HI, EXTRA, STACKID, IPS, OTHER = range(12)
HI = {PTR: PTR_HI, REUSE: REUSE_HI, SIZE: SIZE_HI}


def glibc_extra(size):
    chunk = max((size + 8 + 15) & ~15, 32)
    return 0 if size > (1 << 62) else chunk - 8 - size


def put_u(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def put_ptr(delta):
    zz = lambda v: ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    if not FLAGS["units"]:
        return put_u(zz(delta))
    if delta % 16 == 0:
        return put_u(zz(delta // 16) << 1)
    return put_u(zz(delta) << 1 | 1)


def unpack_chunk(data):
    """The events of a packed chunk, byte for byte as the shim wrote them."""
    if data[0] == 0:
        return data[1:]
    if data[0] != 1:
        raise ValueError("packed chunk of unknown kind %d" % data[0])
    b = Buf(data)
    b.i = 1
    plain = b.u()
    lens = [b.u() for _ in range(NSTREAMS - 1)]
    st, off = [], b.i
    for n in lens:
        st.append(Buf(data[off:off + n]))
        off += n
    st.append(Buf(data[off:]))
    out = bytearray()
    mask = (1 << 64) - 1

    def fetch(s):
        src, raw, v, sh = st[s], bytearray(), 0, 0
        while True:
            c = src.d[src.i]
            src.i += 1
            raw.append(c)
            v |= (c & 0x7F) << sh
            sh += 7
            if not c & 0x80:
                return bytes(raw), v
            src = st[HI.get(s, s)]

    def take(s):
        raw, v = fetch(s)
        out.extend(raw)
        return v

    prev = [0]
    aptr, fptr = [], []

    def ptr_field():
        v = take(PTR)
        prev[0] = (prev[0] + pdelta(v)) & mask
        return prev[0]

    def modelled(reused, slots):
        if not reused:
            return ptr_field()
        _, n = fetch(REUSE)
        p = slots[len(slots) - 1 - n]
        d = (p - prev[0]) & mask
        out.extend(put_ptr(d - (1 << 64) if d >> 63 else d))
        prev[0] = p
        return p

    ops = st[OPS]
    while not ops.done():
        byte = ops.d[ops.i]
        ops.i += 1
        reused = byte >> 7
        byte &= 0x7F
        out.append(byte)
        typ = byte & 7
        if typ == 1:
            take(TIME)
            aptr.append(modelled(reused, fptr))
            size = take(SIZE)
            _, z = fetch(EXTRA)
            out.extend(put_u((((z >> 1) ^ -(z & 1)) + glibc_extra(size)) & mask))
            take(STACKID)
        elif typ == 2:
            take(TIME)
            fptr.append(modelled(reused, aptr))
        elif typ == 3:
            take(TIME); take(TIME)
            old = ptr_field(); new = ptr_field()
            if new != old:
                fptr.append(old)
            aptr.append(new)
            size = take(SIZE)
            _, z = fetch(EXTRA)
            out.extend(put_u((((z >> 1) ^ -(z & 1)) + glibc_extra(size)) & mask))
            take(STACKID)
        elif typ == 4:
            take(OTHER)
            for _ in range(take(OTHER)):
                take(IPS)
        elif typ == 5:
            take(TIME)
            sub = take(OTHER)
            if sub in (1, 5, 6, 8):
                take(OTHER)
            elif sub == 3:
                n = take(OTHER); out.extend(st[OTHER].raw(n))
            elif sub in (4, 7):
                take(OTHER); n = take(OTHER); out.extend(st[OTHER].raw(n))
            elif sub == 9:
                take(OTHER); ptr_field(); take(SIZE); take(STACKID)
            elif sub == 10:
                take(OTHER); ptr_field()
            elif sub != 2:
                raise ValueError("bad control %d in a packed chunk" % sub)
        else:
            raise ValueError("bad event type %d in a packed chunk" % typ)
    if len(out) != plain or not all(x.done() for x in st):
        raise ValueError("packed chunk does not add up")
    return bytes(out)


def chunk_events(b, n, base):
    end = b.i + n
    t = base
    ptr = 0
    out = []
    sh = FLAGS["ticks"]
    while b.i < end:
        byte = b.d[b.i]
        b.i += 1
        typ, api = byte & 7, byte >> 3
        if typ == 1:
            t += b.u() << sh; ptr += pdelta(b.u()); size = b.u(); extra = b.u(); sid = b.u()
            out.append(("alloc", t, api, ptr, size, extra, sid))
        elif typ == 2:
            t += b.u() << sh; ptr += pdelta(b.u())
            out.append(("free", t, api, ptr))
        elif typ == 3:
            t += b.u() << sh; t1 = t; t += b.u() << sh
            old = ptr + pdelta(b.u()); new = old + pdelta(b.u())
            size = b.u(); extra = b.u(); sid = b.u()
            out.append(("realloc", t1, t, api, old, new, size, extra, sid))
            ptr = new
        elif typ == 4:
            sid = b.u(); depth = b.u(); ip = 0; ips = []
            for k in range(depth):
                ip = b.u() if k == 0 else ip + b.s()
                ips.append(ip)
            out.append(("stack", sid, ips))
        elif typ == 5:
            t += b.u() << sh; sub = b.u()
            if sub == 1:
                out.append(("thread_start", t, b.u()))
            elif sub == 2:
                out.append(("thread_exit", t))
            elif sub == 3:
                out.append(("thread_name", t, b.str()))
            elif sub in (4, 7):
                out.append(("client_begin" if sub == 4 else "pool_create", t, b.u(), b.str()))
            elif sub in (5, 6, 8):
                out.append(({5: "client_end", 6: "client_set", 8: "pool_destroy"}[sub], t, b.u()))
            elif sub == 9:
                pool = b.u(); ptr += pdelta(b.u()); out.append(("pool_alloc", t, pool, ptr, b.u(), b.u()))
            elif sub == 10:
                pool = b.u(); ptr += pdelta(b.u()); out.append(("pool_free", t, pool, ptr))
            else:
                raise ValueError("bad control %d" % sub)
        else:
            raise ValueError("bad event type %d" % typ)
    return out


def skip_record(b, r):
    """Steps over the body of top-level record r at b (a CHUNK unread)."""
    if r == 1:
        for _ in range(5):
            b.u()
        b.str()
        b.str()
        for _ in range(5):
            b.u()
    elif r == 2:
        b.u(), b.u(), b.u()
        b.str()
        b.str()
        for _ in range(b.u()):
            b.u(), b.u()
    elif r == 4:
        b.u(), b.u()
        b.raw(b.u())
    elif r in (3, 5, 6, 7, 8, 9):
        for _ in range({3: 2, 5: 8, 6: 1, 7: 3, 8: 5, 9: 1}[r]):
            b.u()
        if r == 9:
            b.str()
    elif r == 10:
        b.u(), b.u()
        for _ in range(b.u()):
            b.s(), b.u()
    else:
        raise ValueError("unknown record %d at %d" % (r, b.i))


def chunks(path):
    """Each CHUNK record of a dump as (PROCESS flags, tid, base_time, its
    bytes as written: packed when flags & 16); FLAGS follows the process."""
    flags = None
    for kind, payload in frames(path):
        if kind != "frame":
            continue
        b = Buf(payload)
        while not b.done():
            r = b.d[b.i]
            b.i += 1
            if r == 1:
                for _ in range(5):
                    b.u()
                b.str()
                b.str()
                flags = [b.u() for _ in range(5)][3]
                FLAGS.update(ticks=6 if flags & 4 else 0, units=bool(flags & 8),
                             packed=bool(flags & 16))
            elif r == 4:
                tid, base = b.u(), b.u()
                yield flags, tid, base, b.raw(b.u())
            else:
                skip_record(b, r)


def chunk_modes(path):
    """(PROCESS flags, [each CHUNK's pack mode byte in file order, None when
    the dump is not packed]) of a dump."""
    flags, modes = None, []
    for flags, _, _, data in chunks(path):
        modes.append(data[0] if flags & 16 else None)
    return flags, modes

def main():
    path = sys.argv[1]
    show_events = "--events" in sys.argv
    counts = {}
    for kind, payload in frames(path):
        if kind != "frame":
            print(kind, payload)
            continue
        b = Buf(payload)
        while not b.done():
            r = b.d[b.i]
            b.i += 1
            name = REC.get(r, "?%d" % r)
            counts[name] = counts.get(name, 0) + 1
            if r == 1:
                pid, ppid, mono, rt, page = b.u(), b.u(), b.u(), b.u(), b.u()
                exe = b.str(); cmd = b.str()
                rest = [b.u() for _ in range(5)]
                FLAGS["ticks"] = 6 if rest[3] & 4 else 0
                FLAGS["units"] = bool(rest[3] & 8)
                FLAGS["packed"] = bool(rest[3] & 16)
                print("PROCESS pid=%d ppid=%d exe=%s cmd=%r sample,unwind,depth,flags,gen=%s" % (pid, ppid, exe.decode(), cmd, rest))
            elif r == 2:
                t, mid, bias = b.u(), b.u(), b.u(); p = b.str(); bid = b.str(); nseg = b.u()
                segs = [(b.u(), b.u()) for _ in range(nseg)]
                print("MODULE_LOAD t=%d id=%d bias=%#x %s bid=%s segs=%d" % (t, mid, bias, p.decode(), bid.hex()[:12], len(segs)))
            elif r == 3:
                print("MODULE_UNLOAD t=%d id=%d" % (b.u(), b.u()))
            elif r == 4:
                tid, base, n = b.u(), b.u(), b.u()
                if FLAGS["packed"]:
                    plain = unpack_chunk(b.raw(n))
                    ev = chunk_events(Buf(plain), len(plain), base)
                else:
                    ev = chunk_events(b, n, base)
                for e in ev:
                    counts[e[0]] = counts.get(e[0], 0) + 1
                if show_events:
                    print("CHUNK tid=%d base=%d n=%d" % (tid, base, n))
                    for e in ev:
                        print("   ", e)
            elif r == 5:
                vals = [b.u() for _ in range(8)]
                if show_events:
                    print("SAMPLE", vals)
            elif r == 6:
                w = b.u()
                if show_events:
                    print("WATERMARK", w)
            elif r == 7:
                print("LOST t=%d n=%d reason=%d" % (b.u(), b.u(), b.u()))
            elif r == 8:
                print("END t=%d how=%d status=%d written=%d lost=%d" % tuple(b.u() for _ in range(5)))
            elif r == 9:
                print("MARK t=%d %s" % (b.u(), b.str()))
            elif r == 10:
                t, kind, n = b.u(), b.u(), b.u()
                for _ in range(n):
                    b.s(); b.u()
                print("REACH t=%d kind=%d n=%d" % (t, kind, n))
            else:
                sys.exit("unknown record %d at %d" % (r, b.i))
    print("counts:", counts)


if __name__ == "__main__":
    main()
