#!/usr/bin/env python3
"""Tabulates an A/B of packfa-bench JSON files (scripts/ab-bench.sh): per case, the median over
runs of each side's median microseconds, the ratio B/A, and the worst case."""
import glob
import json
import os
import statistics
import sys


def load(pattern):
    runs = []
    for f in sorted(glob.glob(pattern)):
        with open(f) as fh:
            runs.append(json.load(fh))
    return runs


def key(c):
    return (c["head_dim"], c["nq"], c["batch"], c["max_kv"], c["v_format"])


def main():
    d = sys.argv[1]
    a, b = load(os.path.join(d, "a-*.json")), load(os.path.join(d, "b-*.json"))
    if not a or not b:
        print("ab_table: no runs in", d)
        return 1
    def per_case(runs, field):
        out = {}
        for r in runs:
            for c in r["cases"]:
                out.setdefault(key(c), []).append(c[field])
        return out
    ua, ub = per_case(a, "median_us"), per_case(b, "median_us")
    copy_a = [r.get("copy_gb_per_s", 0) for r in a]
    copy_b = [r.get("copy_gb_per_s", 0) for r in b]
    print("copy GB/s A", copy_a, "B", copy_b)
    print("%-4s %-3s %-5s %-7s %-12s %10s %10s %7s" % ("D", "nq", "batch", "kv", "V", "A us", "B us", "B/A"))
    worst = (0, None)
    for k in sorted(ua):
        if k not in ub:
            continue
        ma, mb = statistics.median(ua[k]), statistics.median(ub[k])
        r = mb / ma
        worst = max(worst, (r, k))
        print("%-4d %-3d %-5d %-7d %-12s %10.1f %10.1f %7.3f" % (k + (ma, mb, r)))
    print("worst B/A %.3f at %s" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
