#!/usr/bin/env python3
"""Tabulates an A/B of packfa-bench JSON files (scripts/ab-bench.sh): per case, the median over
runs of each side's median microseconds, each ratio to the first side, and the worst case.

    tools/ab_table.py DIR [LABEL ...]     (DIR/<label>-<i>.json; labels default to a b)
"""
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


def key(c):  # decode sweep and prefill cases alike (prefill rows add causal; the dot mode both)
    return (c["head_dim"], c.get("n_q_heads", 0), c.get("n_kv_heads", 0), c["nq"], c["batch"], c["max_kv"],
            c["v_format"], c.get("dot", "int8"), str(c.get("causal", "")))


def main():
    d = sys.argv[1]
    labels = sys.argv[2:] or ["a", "b"]
    sides = [load(os.path.join(d, "%s-*.json" % l)) for l in labels]
    if len(labels) < 2 or any(not s for s in sides):
        print("ab_table: need runs of at least two sides in", d, "for", labels)
        return 1

    def per_case(runs):
        out = {}
        for r in runs:
            for c in r["cases"]:
                out.setdefault(key(c), []).append(c["median_us"])
        return out

    us = [per_case(s) for s in sides]
    for l, s in zip(labels, sides):
        print("copy GB/s %s %s" % (l, [r.get("copy_gb_per_s", 0) for r in s]))
    head = "%-4s %-5s %-5s %-5s %-7s %-12s %-5s %-6s" % ("D", "H/G", "nq", "batch", "kv", "V", "dot", "causal")
    head += "".join(" %10s" % (l + " us") for l in labels) + "".join(" %9s" % ("%s/%s" % (l, labels[0])) for l in labels[1:])
    print(head)
    worst = {l: (0, None) for l in labels[1:]}
    for k in sorted(us[0], key=str):
        if any(k not in u for u in us[1:]):
            continue
        m = [statistics.median(u[k]) for u in us]
        line = "%-4d %-5s %-5d %-5d %-7d %-12s %-5s %-6s" % (k[0], "%d/%d" % (k[1], k[2]), k[3], k[4], k[5], k[6], k[7], k[8])
        line += "".join(" %10.1f" % x for x in m) + "".join(" %9.3f" % (x / m[0]) for x in m[1:])
        print(line)
        for l, x in zip(labels[1:], m[1:]):
            worst[l] = max(worst[l], (x / m[0], k))
    for l in labels[1:]:
        print("worst %s/%s %.3f at %s" % (l, labels[0], worst[l][0], worst[l][1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
