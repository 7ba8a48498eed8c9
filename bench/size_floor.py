#!/usr/bin/env python3
"""size_floor.py - what a dump would weigh holding only what heaptrack's holds.

usage: bench/size_floor.py DUMP [LEVEL]

DUMP is an unpacked dump (HEAPTRAIL_PACK=0).  Its events are encoded again
the way heaptrack keeps them after heaptrack_interpret: an allocation is
the index of its (size, stack) pair (a new pair is written once, with its
size and stack id), a free is the index of the pair of the block it frees
(found by replaying the pointers, which are then dropped), and time is
kept in milliseconds.  No pointer, no time finer than that, no usable
size: what 'frag', 'reach', 'clients' and the timeline's order need.
Chunk by chunk, as the shim writes them, then compressed with zstd at
LEVEL (default 1, the shim's) in frames of 1 MiB, twice: events as rows
(op byte and index together) and as columns.  Prints bytes per event.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))

import htrdump  # noqa: E402

MS = 1000000
varint = htrdump.put_u


def zstd_len(blob, level):
    return len(subprocess.run(["zstd", "-%d" % level, "-c"], input=bytes(blob),
                              capture_output=True, check=True).stdout)


def encode(path):
    """Per chunk: {'row', 'ops', 'index', 'time', 'pairs'} byte streams; events."""
    pair_of_ptr, pairs, chunks, events = {}, {}, [], 0
    for _flags, _tid, base, data in htrdump.chunks(path):
        if _flags & 16:
            sys.exit("size_floor: %s is packed; record it with HEAPTRAIL_PACK=0" % path)
        b = htrdump.Buf(data)
        st = {k: bytearray() for k in ("row", "ops", "index", "time", "pairs")}
        last_ms = base // MS

        def emit(op, t, idxs):
            nonlocal last_ms
            st["ops"].append(op)
            st["time"] += varint(t // MS - last_ms)
            last_ms = t // MS
            st["row"].append(op)
            for i in idxs:
                st["index"] += varint(i)
                st["row"] += varint(i)

        def pair(size, sid):
            key = (size, sid)
            if key not in pairs:
                pairs[key] = len(pairs)
                st["pairs"] += varint(size) + varint(sid)
            return pairs[key]

        for e in htrdump.chunk_events(b, len(data), base):
            if e[0] == "alloc":
                _, t, api, ptr, size, _extra, sid = e
                i = pair(size, sid)
                pair_of_ptr[ptr] = i
                emit(1 | api << 3, t, [i])
                events += 1
            elif e[0] == "free":
                _, t, api, ptr = e
                if ptr in pair_of_ptr:
                    emit(2 | api << 3, t, [pair_of_ptr.pop(ptr)])
                    events += 1
            elif e[0] == "realloc":
                _, _t1, t, api, old, new, size, _extra, sid = e
                i = pair_of_ptr.pop(old, 0)
                j = pair(size, sid)
                pair_of_ptr[new] = j
                emit(3 | api << 3, t, [i, j])
                events += 2
            elif e[0] == "stack":
                _, sid, ips = e
                st["pairs"] += varint(sid) + varint(len(ips))
                for ip in ips:
                    st["pairs"] += varint(ip)
        chunks.append(st)
    return chunks, events


def framed(chunks, keys, level):
    total, frame = 0, bytearray()
    for st in chunks:
        for k in keys:
            frame += st[k]
        if len(frame) >= 1 << 20:
            total += zstd_len(frame, level)
            frame = bytearray()
    return total + (zstd_len(frame, level) if frame else 0)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    level = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    chunks, events = encode(sys.argv[1])
    if not events:
        sys.exit("size_floor: no events")
    rows = framed(chunks, ("row", "time", "pairs"), level)
    cols = framed(chunks, ("ops", "time", "index", "pairs"), level)
    print("events %d  zstd -%d  rows %.3f  columns %.3f bytes/event"
          % (events, level, rows / events, cols / events))


if __name__ == "__main__":
    main()
