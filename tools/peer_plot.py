#!/usr/bin/env python3
"""Headline plot of a peer-bench run (bench/peers/peer_bench.py JSON): per case, packfa's
speedup over the best torch SDPA backend measured in the same run, against the target
(0.9 x the bytes ratio). Usage: tools/peer_plot.py RUN.json OUT.png (needs matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    run = json.load(open(sys.argv[1]))
    rows = [r for r in run["cases"] if r.get("speedup")]
    names = [r["name"] for r in rows]
    sp = [r["speedup"] for r in rows]
    tg = [r.get("target_speedup") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    x = range(len(rows))
    ax.bar(x, sp, color=["C2" if s >= t else "C3" for s, t in zip(sp, tg)], label="packfa / best SDPA fp16")
    ax.scatter(x, tg, marker="_", s=400, color="k", label="target: 0.9 x bytes ratio", zorder=3)
    ax.axhline(1.0, color="k", lw=0.8)
    for i, s in enumerate(sp):
        ax.text(i, s + 0.03, "%.2f" % s, ha="center", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("speedup (CUDA graphs, inputs past L2)")
    ax.set_title("packfa decode vs torch SDPA fp16 (%s, torch %s, %s, commit %s)" %
                 (run["gpu"], run["torch"], run["date"][:10], run["commit"]), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
