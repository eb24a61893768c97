#!/usr/bin/env python3
"""The README's headline plot from a peer-bench JSON (peer_bench.py --quick writes it): one bar
per case, packfa's speedup over the best torch SDPA fp16 backend, the target (0.9 x the bytes
ratio; 0.95 for f16 K + f16 V) as a tick, green where it is met.

    python3 bench/peers/plot_quick.py bench/results/<gpu>-<date>-<commit>-peers-quick.json
writes the same path with .png (matplotlib) and always with .svg (plain text, no dependency:
the CPU machine has no matplotlib).
"""
import json
import os
import sys


def bars_of(d):
    rows = [c for c in d["cases"] if c.get("speedup") and not c.get("prefill")]
    return [c["name"] for c in rows], [c["speedup"] for c in rows], [c["target_speedup"] for c in rows]


def title_of(d):
    return "packfa decode vs torch SDPA fp16 (%s, torch %s, %s, commit %s)" % (d["gpu"], d["torch"], d["date"][:10],
                                                                              d["commit"])


def write_svg(d, out):
    """The same bars as the PNG, as SVG text: green where the target tick is met, red elsewhere."""
    names, sp, tg = bars_of(d)
    w, h, left, top, bottom = 60 * len(names) + 90, 430, 60, 40, 150
    ymax = max(max(sp), max(tg)) * 1.1
    y = lambda v: top + (h - top - bottom) * (1 - v / ymax)
    esc = lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' % (w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="13" text-anchor="middle">%s</text>' % (w // 2, esc(title_of(d)))]
    tick = 0.0
    while tick <= ymax:
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, w - 20, y(tick), y(tick)))
        o.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%.1f</text>' % (left - 5, y(tick) + 3, tick))
        tick += 0.5
    o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black"/>' % (left, w - 20, y(1.0), y(1.0)))
    for i, (n, s, t) in enumerate(zip(names, sp, tg)):
        x = left + 15 + 60 * i
        o.append('<rect x="%d" y="%.1f" width="36" height="%.1f" fill="%s"/>'
                 % (x, y(s), y(0) - y(s), "#2ca02c" if s >= t else "#d62728"))
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>' % (x - 4, x + 40, y(t), y(t)))
        o.append('<text x="%d" y="%.1f" font-size="10" text-anchor="middle">%.2f</text>' % (x + 18, y(s) - 4, s))
        o.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end" transform="rotate(-35 %d %.1f)">%s</text>'
                 % (x + 18, y(0) + 14, x + 18, y(0) + 14, esc(n)))
    o.append('<text x="14" y="%.1f" font-size="11" transform="rotate(-90 14 %.1f)" text-anchor="middle">'
             'speedup vs best SDPA fp16 (tick: target)</text>'
             % ((top + h - bottom) / 2, (top + h - bottom) / 2))
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    if len(sys.argv) != 2 or not sys.argv[1].endswith(".json"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = sys.argv[1]
    with open(path) as f:
        d = json.load(f)
    svg = os.path.splitext(path)[0] + ".svg"
    write_svg(d, svg)
    print(svg)
    try:
        import matplotlib
    except ImportError:
        return 0

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, sp, tg = bars_of(d)
    fig, ax = plt.subplots(figsize=(12, 5))
    xs = range(len(names))
    bars = ax.bar(xs, sp, color=["C2" if s >= t else "C3" for s, t in zip(sp, tg)], label="packfa / best SDPA fp16")
    for x, t in zip(xs, tg):
        ax.hlines(t, x - 0.25, x + 0.25, color="k", lw=1.5, label="target: 0.9 x bytes ratio" if x == 0 else None)
    for b, s in zip(bars, sp):
        ax.text(b.get_x() + b.get_width() / 2, s + 0.02, "%.2f" % s, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("speedup (CUDA graphs, inputs past L2)")
    ax.set_title(title_of(d), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=100)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
