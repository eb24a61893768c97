#!/usr/bin/env python3
"""Writes docs/rdna.md from the HIP ISA gate's JSON (per-kernel VGPRs, SGPRs, scratch, per
gfx target, read from the compiled code objects) and tools/fa_layout_table's JSON (the
kernel's dynamic LDS, which the code object's metadata cannot show).

  python3 tools/rdna_doc.py --isa build/isa/hip_kernels.json [--isa more.json] --layout layout.json \
      [--bench bench/results/<h200>.json] > docs/rdna.md
Several --isa files merge (a later file adds the (kernel, target) pairs the earlier lack).
Everything AMD in the output is compile-level or modelled; nothing was measured on AMD.
"""
import argparse
import os
import json
import re

VNAMES = ["f16", "bf16", "q8_0", "q4_0", "q8_0_planar"]
QNAMES = ["packed16_int8", "packed16_f16", "f16k"]
# datasheet memory bandwidth, GB/s (AMD product pages)
GPUS = [("RX 7900 XTX (gfx1100)", 960), ("RX 7800 XT (gfx1101)", 624), ("RX 7600 (gfx1102)", 288),
        ("Strix Halo 8060S (gfx1151)", 256), ("RX 9070 XT (gfx1201)", 640)]
VGPR_FILE = {"gfx1100": (1536, 24), "gfx1101": (1536, 24), "gfx1151": (1536, 24), "gfx1201": (1536, 24),
             "gfx1102": (1024, 16), "gfx1103": (1024, 16)}


def waves_per_simd(target, vgprs):
    total, granule = VGPR_FILE[target]
    alloc = max(granule, -(-vgprs // granule) * granule)
    return min(16, total // alloc)


def target_cells(per_target, targets):
    """'VGPRs / waves per SIMD' for each target ('-' where absent) and the largest scratch."""
    cells, scratch = [], 0
    for t in targets:
        k = per_target.get(t)
        if not k:
            cells.append("-")
            continue
        scratch = max(scratch, k.get("scratch_bytes", 0))
        cells.append(f"{k['vgprs']} / {waves_per_simd(t, k['vgprs'])}")
    return cells, scratch


def parse_fa(name):
    """(D, V, Q·K, rows) and whether the instance reads a paged cache (the template's last flag)."""
    m = re.search(r"fa_split_kernel<(\d+), \(packfa::VFormat\)(\d), \(packfa::QKMode\)(\d), (\d+)(?:, (true|false))?>",
                  name)
    if not m:
        return None
    return (int(m.group(1)), VNAMES[int(m.group(2))], QNAMES[int(m.group(3))], int(m.group(4))), m.group(5) == "true"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", required=True, action="append")
    ap.add_argument("--layout", required=True)
    ap.add_argument("--bench")
    ap.add_argument("--source", action="append", default=[],
                    help="a line naming what the data came from (commit, build), printed in the header")
    a = ap.parse_args()
    kernels, seen, targets = [], set(), []
    for path in a.isa:
        isa = json.load(open(path))
        targets += [t for t in isa["targets"] if t not in targets]
        for k in isa["kernels"]:
            if (k["kernel"], k["target"]) not in seen:
                seen.add((k["kernel"], k["target"]))
                kernels.append(k)
    layout = {(l["head_dim"], l["v"], l["qk"], l["rows"]): l for l in json.load(open(a.layout)) if l["backend"] == "hip"}
    sources = a.source or [", ".join(a.isa)]
    rows = {}
    paged = {}  # paged-cache instances (the same stages over the paged KV view)
    other = {}
    for k in kernels:
        key = parse_fa(k.get("demangled", ""))
        if key is None:
            short = re.sub(r"\(.*", "", k.get("demangled", k["kernel"])).replace("void packfa::device::", "")
            other.setdefault(short, {})[k["target"]] = k
        else:
            key, is_paged = key
            (paged if is_paged else rows).setdefault(key, {})[k["target"]] = k
    out = []
    w = out.append
    w("# packfa on RDNA3 / RDNA3.5 / RDNA4: compiled, not measured")
    w("")
    w("There is no AMD GPU in this project's reach. Everything below is read from the code")
    w("objects that Debian 12's clang-19 builds for each target (`cmake/hip.cmake`), or is a")
    w("bandwidth model. **No AMD figure here is a measurement.**")
    w("")
    w("Regenerate: build with HIP and the full instance set (`./packfa test` without `CI=true`),")
    w("then")
    w("`g++ -std=c++17 -Iinclude tools/fa_layout_table.cpp -o /tmp/fl && /tmp/fl > /tmp/layout.json &&`")
    w("`python3 tools/rdna_doc.py --isa build/isa/hip_kernels.json --layout /tmp/layout.json "
      "--bench bench/results/<h200 run>.json > docs/rdna.md`.")
    w("A lean build (`PACKFA_INSTANCES=lean`, CI) also compiles the full attention set for the targets")
    w("in `PACKFA_HIP_GATE_FULL_ARCHS`: pass its `build/isa/hip_kernels_full_<gfx>.json` files first and")
    w("`hip_kernels.json` last (pack and combine).")
    w(f"This file: {', '.join(sources)}.")
    w("")
    w("## How the kernel is built for RDNA")
    w("")
    w("* Same template as on NVIDIA (`include/packfa/device/fa_packed16.hpp`), wave32")
    w("  (static_assert), Q·K on `v_dot4_i32_iu8` (`__builtin_amdgcn_sudot4`, both operands")
    w("  signed), xor shuffles as DPP row_xmask / `v_permlanex16`, `v_exp_f32`.")
    w("* Differences, all compile-time: one staging buffer per wave instead of two (there is")
    w("  no cp.async; copies are synchronous), wave count chosen to fit 64 KB of LDS per")
    w("  workgroup, and P·V on the scalar fp32 path (the NVIDIA build uses mma.sync; an RDNA")
    w("  WMMA path is future work).")
    w("* LDS is dynamic (`extern __shared__`), so the code object's group segment is 0; the")
    w("  LDS column below is the dispatcher's launch size (`fa_layout.hpp`).")
    w("")
    w("## Resources per attention instance (from the code objects)")
    w("")
    w("VGPRs / waves per SIMD allowed by VGPRs (gfx1100/1101/1151/1201: 1536 VGPRs per lane,")
    w("granule 24; gfx1102/1103: 1024, granule 16). Aim: ≤ 96 resp. ≤ 64 VGPRs. Scratch must")
    w("be 0 (the ISA gates fail otherwise). LDS per workgroup also bounds occupancy: a WGP")
    w("(4 SIMD32) has 128 KB, so at most floor(128 KB / LDS) workgroups share it; the column")
    w("\"by LDS\" gives the waves per SIMD that leaves (workgroups x waves per workgroup / 4). For")
    w("most instances it, not the VGPR count, bounds occupancy. Listed: every instance of")
    w("the full instance set (`PACKFA_INSTANCES=all`). Rows: query rows one workgroup serves; the")
    w("wide row class (5-16 rows) runs 8 rows per workgroup at D = 256 (two workgroups for 9-16")
    w("rows): with 16, the accumulators and softmax state needed 256 VGPRs and spilled to scratch")
    w("(`fa_rows_per_block` in `include/packfa/device/fa_instances.hpp`).")
    w("")
    def by_lds(lay):
        if not lay:
            return "?"
        per = min(16.0, (131072 // lay["smem_bytes"]) * lay["waves"] / 4)
        return f"{per:g}"
    w("| D | V | Q·K | rows | waves/WG | LDS (B) | by LDS | " + " | ".join(targets) + " | scratch |")
    w("|---|---|---|---|---|---|---|" + "---|" * len(targets) + "---|")
    for key in sorted(rows, key=lambda k: (k[0], VNAMES.index(k[1]), QNAMES.index(k[2]), k[3])):
        d, v, q, r = key
        lay = layout.get(key)
        cells, scratch = target_cells(rows[key], targets)
        w(f"| {d} | {v} | {q} | {r} | {lay['waves'] if lay else '?'} | {lay['smem_bytes'] if lay else '?'} | "
          f"{by_lds(lay)} | " + " | ".join(cells) + f" | {scratch} |")
    if paged:
        w("")
        w("Paged-cache instances (the same stages over the paged KV view; the library's instance set,")
        w("launch sizes as the contiguous instance's):")
        w("")
        w("| D | V | Q·K | rows | " + " | ".join(targets) + " | scratch |")
        w("|" + "---|" * (5 + len(targets)))
        for key in sorted(paged, key=lambda k: (k[0], VNAMES.index(k[1]), QNAMES.index(k[2]), k[3])):
            d, v, q, r = key
            cells, scratch = target_cells(paged[key], targets)
            w(f"| {d} | {v} | {q} | {r} | " + " | ".join(cells) + f" | {scratch} |")
    def count_over(big, pick):
        n = m = 0
        for key, per in rows.items():
            if not pick(key):
                continue
            m += 1
            if any(kk["vgprs"] > (96 if big else 64) for t, kk in per.items() if (VGPR_FILE[t][0] == 1536) == big):
                n += 1
        return f"{n} of {m}"
    def span(pick):
        v = [kk["vgprs"] for key, per in rows.items() if pick(key) for kk in per.values()]
        return f"{min(v)}-{max(v)}" if v else "-"
    decode = lambda key: key[3] == 4
    decode128 = lambda key: key[3] == 4 and key[0] <= 128
    decode256 = lambda key: key[3] == 4 and key[0] > 128
    wide = lambda key: key[3] > 4
    scratch = sum(1 for per in rows.values() for kk in per.values() if kk.get("scratch_bytes", 0))
    w("")
    w(f"Over the VGPR aim (above 96 on gfx1100/1101/1151/1201; above 64 on gfx1102/1103):")
    w(f"4-row instances, D <= 128: {count_over(True, decode128)} resp. {count_over(False, decode128)} "
      f"({span(decode128)} VGPRs); D = 256: {count_over(True, decode256)} resp. {count_over(False, decode256)} "
      f"({span(decode256)}); wide class: {count_over(True, wide)} resp. {count_over(False, wide)} ({span(wide)}).")
    w("Why: each lane keeps rows x DPL fp32 accumulators (D = 256: 8 dims a lane) plus per-row softmax")
    w("state and the chunk's Q·K temporaries; the wide class holds 8-16 rows of these. A VGPR cap")
    w("(`amdgpu_num_vgpr(96)`, tried on gfx1100) made the compiler spill instead: D = 128 fp16-Q")
    w("4 rows 28 B of scratch, D = 256 int8 4 rows 80-204 B; and the \"by LDS\" column bounds these")
    w("instances' occupancy below what 96 VGPRs would allow anyway. Lowering both (an RDNA WMMA P·V,")
    w("fewer live Q·K temporaries, smaller stages) is open work.")
    w(f"Scratch: {'none in any instance' if scratch == 0 else str(scratch) + ' (kernel, target) pairs use scratch'}.")
    if other:
        w("")
        w("Other kernels (VGPRs / waves per SIMD):")
        w("")
        w("| kernel | " + " | ".join(targets) + " | scratch |")
        w("|---|" + "---|" * len(targets) + "---|")
        for name in sorted(other):
            cells, scratch = target_cells(other[name], targets)
            w(f"| `{name}` | " + " | ".join(cells) + f" | {scratch} |")
    w("")
    w("## Bandwidth model for the bench's decode cases (modelled, not measured)")
    w("")
    w("Bytes: what a perfect kernel must move (packed16 K payload + scales + V of every key,")
    w("Q and O), as `packfa-bench` counts them. Floor = bytes / datasheet bandwidth. The")
    w("second number scales the floor by the fraction of copy bandwidth the same case reached")
    w("on the H200 (CUDA build, same template) — a guess at what this code would do if RDNA")
    w("behaved like Hopper, which nothing here has checked. Since 2f1f7d6 the H200's 4-row")
    w("decode cases (D <= 128, V other than q4_0) also move work between splits through claim")
    w("counters, which the RDNA instances do not compile (FaTraits::kClaims): for those rows the")
    w("second number leans optimistic.")
    w("")
    cases = []
    if a.bench:
        b = json.load(open(a.bench))
        for c in b["cases"]:
            if c["nq"] == 1 and c["batch"] == 1:
                cases.append((c["head_dim"], c["n_q_heads"], c["n_kv_heads"], c["max_kv"], c["v_format"], c["bytes"],
                              c["pct_of_copy"]))
        w(f"H200 reference run: {b['gpu']}, {b['date']}, commit {b['commit']} (its kernels as they were then:")
        w("the model is only as current as that run).")
        w("")
    w("| case | MB | " + " | ".join(g for g, _ in GPUS) + " |")
    w("|---|---|" + "---|" * len(GPUS))
    for d, h, g, kv, v, nbytes, pct in cases:
        cells = []
        for _, bw in GPUS:
            floor = nbytes / (bw * 1e9) * 1e6
            cells.append(f"{floor:.0f} µs / {floor / (pct / 100):.0f} µs")
        w(f"| D{d} {h}/{g} kv {kv // 1024}k {v} | {nbytes / 1e6:.0f} | " + " | ".join(cells) + " |")
    # the prefill kernel's section: static text (its reasoning and model), kept beside this script
    prefill = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdna_doc_prefill.md")
    if os.path.exists(prefill):
        w("")
        w(open(prefill).read().rstrip("\n"))
    print("\n".join(out))


if __name__ == "__main__":
    main()
