#!/usr/bin/env python3
"""The README's headline plot from a peer-bench JSON (peer_bench.py --quick writes it): one bar
per case, packfa's speedup over the best torch SDPA fp16 backend, the target (0.9 x the bytes
ratio; 0.95 for f16 K + f16 V) as a tick, green where it is met.

    python3 bench/peers/plot_quick.py bench/results/<gpu>-<date>-<commit>-peers-quick.json
writes the same path with .png (needs matplotlib).
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 2 or not sys.argv[1].endswith(".json"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = sys.argv[1]
    with open(path) as f:
        d = json.load(f)
    rows = [c for c in d["cases"] if c.get("speedup") and not c.get("prefill")]
    names = [c["name"] for c in rows]
    sp = [c["speedup"] for c in rows]
    tg = [c["target_speedup"] for c in rows]
    fig, ax = plt.subplots(figsize=(12, 5))
    xs = range(len(rows))
    bars = ax.bar(xs, sp, color=["C2" if s >= t else "C3" for s, t in zip(sp, tg)], label="packfa / best SDPA fp16")
    for x, t in zip(xs, tg):
        ax.hlines(t, x - 0.25, x + 0.25, color="k", lw=1.5, label="target: 0.9 x bytes ratio" if x == 0 else None)
    for b, s in zip(bars, sp):
        ax.text(b.get_x() + b.get_width() / 2, s + 0.02, "%.2f" % s, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("speedup (CUDA graphs, inputs past L2)")
    ax.set_title("packfa decode vs torch SDPA fp16 (%s, torch %s, %s, commit %s)"
                 % (d["gpu"].replace("NVIDIA ", "NVIDIA "), d["torch"], d["date"][:10], d["commit"]), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=100)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
