"""pychurn.py - the python3 workload: dicts, lists and strings built and dropped.

usage: PYTHONMALLOC=malloc python3 pychurn.py [ROUNDS]

The benchmark runs it with PYTHONMALLOC=malloc in every configuration (plain
too), as one does to profile Python with a malloc profiler: otherwise
CPython's pymalloc serves every object up to 512 bytes from its own arenas
and the profiler sees only ~2% of the allocations.  Records, tag lists and
text are built and dropped in batches; a bounded set is kept.  Deterministic.
"""
import random
import sys


def build_record(rng, i):
    rec = {"id": i, "name": "user%06d" % rng.randrange(1000000),
           "tags": [("t%d" % rng.randrange(50)) for _ in range(rng.randrange(1, 12))]}
    rec["text"] = "-".join(rec["tags"]) * rng.randrange(1, 40)
    rec["fields"] = {("f%d" % k): k * i for k in range(rng.randrange(2, 30))}
    return rec


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 25
    rng = random.Random(7)
    keep = {}
    total = 0
    for r in range(rounds):
        batch = [build_record(rng, r * 1000 + i) for i in range(1000)]
        index = {}
        for rec in batch:
            index.setdefault(rec["name"][:6], []).append(rec)
        lines = [rec["name"] + ":" + rec["text"] for rec in batch]
        blob = "\n".join(lines)
        total += len(blob) + len(index)
        for rec in batch[::10]:
            keep[rec["id"]] = rec
        if len(keep) > 2000:
            for k in sorted(keep)[:1000]:
                del keep[k]
    print("pychurn: rounds=%d kept=%d total=%d" % (rounds, len(keep), total))


if __name__ == "__main__":
    main()
