#!/usr/bin/env python3
"""test/same_tensors.py A.safetensors B.safetensors [--atol T] [--skip TEXT] — are the two
checkpoints' tensors (the parameters, and Adam's optimizer.m / optimizer.v when present) bitwise
the same (or, with --atol, within T of each other, F32 element by element)? --skip leaves out
the tensors whose names contain TEXT (from either file). Prints what it compared and the first tensor that differs
(with its largest difference); exit 0 when all agree, 1 otherwise. The metadata (time used,
...) is not compared. Python's standard library only."""
import argparse
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def largest_difference(x, y):
    """Largest |x - y| over two F32 tensors' bytes (inf when their sizes differ)."""
    if len(x) != len(y):
        return float("inf")
    xa = struct.unpack("<%df" % (len(x) // 4), x)
    xb = struct.unpack("<%df" % (len(y) // 4), y)
    return max((abs(p - q) for p, q in zip(xa, xb)), default=0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--atol", type=float, default=None)
    ap.add_argument("--skip", default=None)
    args = ap.parse_args()
    a, b = read(args.a), read(args.b)
    skipped = sum(1 for k in a if args.skip and args.skip in k)
    if args.skip:   # (a checkpoint and an average: Adam's state in the one only)
        a = {k: v for k, v in a.items() if args.skip not in k}
        b = {k: v for k, v in b.items() if args.skip not in k}
    if sorted(a) != sorted(b):
        print("tensor names differ: %s" % sorted(set(a) ^ set(b))[:5])
        return 1
    names = [n for n in sorted(a) if not (args.skip and args.skip in n)]
    floats, worst = 0, 0.0
    for name in names:
        (ta, sa, da), (tb, sb, db) = a[name], b[name]
        if da != db:
            d = largest_difference(da, db) if ta == tb == "F32" and sa == sb else float("inf")
            worst = max(worst, d)
            if args.atol is None or not d <= args.atol:
                print("%s differs (largest difference %.3g)" % (name, d))
                return 1
        floats += len(da) // 4
    what = "bitwise the same" if args.atol is None else "within %g (largest difference %.3g)" % (args.atol, worst)
    print("%d tensors, %d values: %s%s" % (len(names), floats, what,
                                           ", %d skipped" % skipped if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
