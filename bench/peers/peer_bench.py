#!/usr/bin/env python3
"""Peer bench (issue 18): packfa against torch SDPA fp16 on identical shapes, in one process.

    python3 bench/peers/peer_bench.py --lib build/libpackfa_c.so --out bench/results/ [--quick] [--check] [--prefill]

packfa runs through python/packfa (ctypes over libpackfa_c.so, device pointers of torch
tensors); its caches are built on the GPU by packfa.pack_k / packfa.quantize_v from random fp16
K / V. torch SDPA runs on fp16 K / V [batch, kv_heads, kv, D] with each of its backends alone
(cuDNN, flash, efficient; math excluded) and two ways of doing GQA: enable_gqa=True (torch >= 2.5)
and "fold" (the query heads of a KV head as extra query rows of it: exact for non-causal
attention, hence for every decode row here); the best is reported.

Timing (bench/peers/README.md): per backend a CUDA graph of N calls, each call on the next of
S distinct input sets (S sets hold > 2x the L2 cache in bytes, so no call finds its inputs in L2),
replayed after warm-up; median over replays of the replay time / N. Same-run device copy: torch
copy_ of 1 GiB (bytes read + written). Speedup = best SDPA us / packfa us; bytes ratio = SDPA
bytes / packfa bytes (what each must read: every visible key's K and V rows, Q and O).

Out: <gpu>-<date>-<commit>-peers[-quick].json / .md and -peers-{kv,batch,nq}.png (matplotlib if
present) in --out. --check first compares packfa and every SDPA variant with an fp32 reference
on a few shapes (exit 1 at the end if any disagrees). --prefill adds nq 512 / 2048 prefill rows,
non-causal and causal (TFLOP/s = 4 D heads (visible row-key pairs) / t). --budget stops starting new
cases after that many seconds.

Causal prefill (packfa's rule: the nq rows are the last nq positions, row i sees keys j <= kv - nq + i,
"bottom-right" aligned). SDPA's is_causal=True is top-left aligned (row i sees j <= i) and equals
packfa's rule only when nq == kv; for nq < kv (a cached prefix) SDPA gets the same visibility through
an explicit attn_mask, tril(ones(nq, kv), kv - nq) as fp16 0 / -inf built once ("+mask" variants,
each backend that takes a mask) and through torch.nn.attention.bias.causal_lower_right ("bias"
variants: that object dispatches itself to flash, then efficient attention, then a materialized mask,
regardless of the enabled backend; never cuDNN). Folding GQA into query rows is not exact under a causal mask, so causal rows use enable_gqa or
K/V repeated to every query head before the timed calls ("repeat").
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings

T0 = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import packfa  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("peer_bench: torch is not installed; nothing to measure")
    sys.exit(2)

V_ROW = {"f16": lambda d: 2 * d, "bf16": lambda d: 2 * d, "q8_0": lambda d: 34 * d // 32,
         "q4_0": lambda d: 18 * d // 32, "q8_0_planar": lambda d: d}
V_SCALE_ROW = {"q8_0_planar": lambda d: 2 * (d // 32)}


# ---- cases -----------------------------------------------------------------------------------------
def case(name, group, B=1, nq=1, H=32, G=8, D=128, kv=32768, v="q8_0", dot="int8", k="packed16", layout="token",
         lens="uniform", prefill=False, causal=None):
    # causal: decode rows causal (packfa's MTP semantics), prefill rows non-causal unless asked
    if causal is None:
        causal = not prefill
    return dict(name=name, group=group, batch=B, nq=nq, n_q_heads=H, n_kv_heads=G, head_dim=D, max_kv=kv,
                v_format=v, dot=dot, k_format=k, layout=layout, lengths=lens, prefill=prefill, causal=bool(causal))


def kname(kv):
    return "%dk" % (kv // 1024) if kv >= 1024 else str(kv)


def table_cases():
    """The issue's table (D 128, 32/8 heads, q8_0 V, token-major, one row unless noted)."""
    return [
        case("kv 128k", "table", kv=131072),
        case("kv 128k, q4_0 V", "table", kv=131072, v="q4_0"),
        case("kv 32k", "table", kv=32768),
        case("kv 4k", "table", kv=4096),
        case("batch 8 x kv 4k", "table", B=8, kv=4096),
        case("D 256, 16/2 heads, kv 32k", "table", H=16, G=2, D=256, kv=32768),
        case("D 64, kv 32k", "table", D=64, kv=32768),
        case("nq 2, kv 32k", "table", nq=2),
        case("nq 4, kv 32k", "table", nq=4),
        case("nq 8, kv 32k", "table", nq=8),
        case("nq 16, kv 32k", "table", nq=16),
        case("kv 128k, fp16-Q dot", "table", kv=131072, dot="f16"),
        case("f16 K + f16 V, kv 32k", "table", k="f16", v="f16"),
    ]


def sweep_cases():
    cs = []
    for kv in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288):
        for v in ("q8_0", "q4_0", "f16", "q8_0_planar"):
            cs.append(case("kv %s, %s V" % (kname(kv), v), "kv", kv=kv, v=v))
    for B in (1, 2, 4, 8, 16, 32, 64, 128):
        cs.append(case("batch %d x kv 4k" % B, "batch", B=B, kv=4096))
    for B in (4, 16, 64, 128):
        cs.append(case("batch %d x kv 1k..4k (varied)" % B, "batch_varied", B=B, kv=4096, lens="varied"))
    for B in (4, 16):
        cs.append(case("batch %d x kv 32k" % B, "batch32k", B=B, kv=32768))
    for nq in (1, 2, 3, 4, 6, 8, 12, 16):
        cs.append(case("nq %d, kv 32k" % nq, "nq", nq=nq))
    for nq in (1, 2, 4, 8, 16):
        cs.append(case("nq %d, kv 32k, q8_0_planar V" % nq, "nq_planar", nq=nq, v="q8_0_planar"))
    for nq in (1, 2, 4, 8, 16):
        cs.append(case("nq %d, kv 4k" % nq, "nq4k", nq=nq, kv=4096))
    for nq in (4, 6, 8):  # 16-24-32 rows a KV head past L2 (decision "row-class-32")
        cs.append(case("nq %d, kv 128k" % nq, "nq128k", nq=nq, kv=131072))
    cs += [case("D 64, kv 32k, f16 V", "d", D=64, v="f16"),
           case("D 80, kv 32k, f16 V (block 16)", "d", D=80, v="f16"),
           case("D 128, kv 32k, f16 V", "d", v="f16"),
           case("D 256, 16/2 heads, kv 32k, f16 V", "d", H=16, G=2, D=256, v="f16"),
           case("D 256, 24/4 heads, kv 32k", "d", H=24, G=4, D=256),
           case("D 256, 16/2 heads, kv 128k", "d", H=16, G=2, D=256, kv=131072),
           case("D 256, 16/2 heads, kv 32k, q8_0_planar V", "d", H=16, G=2, D=256, v="q8_0_planar")]
    for kv in (4096, 32768, 131072):
        for v in ("q8_0", "q4_0", "f16", "q8_0_planar"):
            cs.append(case("head-major kv %s, %s V" % (kname(kv), v), "head_major", kv=kv, v=v, layout="head"))
    cs += [case("head-major batch 8 x kv 4k", "head_major", B=8, kv=4096, layout="head"),
           case("head-major D 256, 16/2 heads, kv 32k", "head_major", H=16, G=2, D=256, layout="head"),
           case("head-major nq 4, kv 32k", "head_major", nq=4, layout="head")]
    for kv in (4096, 32768, 131072):
        for v in ("q8_0", "f16"):
            cs.append(case("fp16-Q dot kv %s, %s V" % (kname(kv), v), "dot_f16", kv=kv, v=v, dot="f16"))
    cs.append(case("fp16-Q dot nq 4, kv 32k", "dot_f16", nq=4, dot="f16"))
    for kv in (4096, 32768, 131072):
        cs.append(case("f16 K + f16 V kv %s" % kname(kv), "f16k", kv=kv, k="f16", v="f16"))
    cs.append(case("f16 K + q8_0 V kv 32k", "f16k", k="f16", v="q8_0"))
    return cs


def prefill_cases():
    cs = []
    for nq in (512, 2048):
        for kv in (4096, 32768):
            for v in ("q8_0", "f16"):
                cs.append(case("prefill nq %d, kv %s, %s V" % (nq, kname(kv), v), "prefill", nq=nq, kv=kv, v=v,
                               prefill=True))
    # causal: a chunk after a cached prefix of kv - nq keys (SDPA: explicit lower-right mask / CausalBias) ...
    for nq in (512, 2048):
        for kv in (4096, 32768):
            for v in ("q8_0", "f16"):
                cs.append(case("prefill causal nq %d, kv %s (prefix %d), %s V" % (nq, kname(kv), kv - nq, v),
                               "prefill_causal", nq=nq, kv=kv, v=v, prefill=True, causal=True))
    # ... and whole prompts, nq == kv, where SDPA's is_causal=True is the same rule
    for n in (2048, 4096, 8192):
        for v in ("q8_0", "f16"):
            cs.append(case("prefill causal nq %d, kv %s (no prefix), %s V" % (n, kname(n), v), "prefill_causal",
                           nq=n, kv=n, v=v, prefill=True, causal=True))
    # issue 17's other head dims and the long cache: D 64 / 256 (16 / 2 heads at 256, as models with
    # that head dim run), a chunk against 128k cached keys
    for D, H, G in ((64, 32, 8), (256, 16, 2)):
        for nq in (512, 2048):
            cs.append(case("prefill D %d, nq %d, kv 4k, q8_0 V" % (D, nq), "prefill_d", nq=nq, kv=4096, H=H, G=G,
                           D=D, prefill=True))
    for v in ("q8_0", "f16"):
        cs.append(case("prefill nq 512, kv 128k, %s V" % v, "prefill_long", nq=512, kv=131072, v=v, prefill=True))
        cs.append(case("prefill causal nq 512, kv 128k (prefix %d), %s V" % (131072 - 512, v), "prefill_long",
                       nq=512, kv=131072, v=v, prefill=True, causal=True))
    return cs


def causal_kind(c):
    """How SDPA gets packfa's visibility: "none", "is_causal" (nq == kv) or "lower_right" (nq < kv). Decode
    rows: "none" (SDPA non-causal, see causal_of)."""
    if not c["prefill"] or not c["causal"]:
        return "none"
    return "is_causal" if c["nq"] == c["max_kv"] else "lower_right"


def visible_pairs(c):
    """(row, key) pairs packfa computes: row i of a sequence of length L sits at L - nq + i."""
    nq = c["nq"]
    total = 0
    for L in lengths(c):
        if c["causal"]:
            total += sum(max(0, min(L, L - nq + i + 1)) for i in range(nq)) if nq > L else nq * L - nq * (nq - 1) // 2
        else:
            total += nq * L
    return total


def plan_cases(cases, only=""):
    """Each configuration once (the sweeps repeat some table rows), with every group it is in."""
    seen, todo = {}, []
    for c in cases:
        if only and not any(o in c["name"] for o in only.split("|")):
            continue
        k = config_key(c)
        if k in seen:
            seen[k]["groups"].append(c["group"])
            continue
        c = dict(c, groups=[c["group"]])
        seen[k] = c
        todo.append(c)
    return todo


def config_key(c):
    return tuple(c[k] for k in ("batch", "nq", "n_q_heads", "n_kv_heads", "head_dim", "max_kv", "v_format", "dot",
                                "k_format", "layout", "lengths", "prefill", "causal"))


def sdpa_key(c):  # SDPA reads every key of every sequence (padded batch), whatever packfa's format
    return tuple(c[k] for k in ("batch", "nq", "n_q_heads", "n_kv_heads", "head_dim", "max_kv")) + (causal_kind(c),)


def lengths(c):
    B, kv = c["batch"], c["max_kv"]
    if c["lengths"] == "uniform" or B == 1:
        return [kv] * B
    return [kv // 4 + (kv * 3 // 4) * b // (B - 1) for b in range(B)]  # as packfa-bench: kv/4 .. kv


def block_of(D):
    return 32 if D % 32 == 0 else 16


def packfa_row_bytes(c):
    D = c["head_dim"]
    k = D if c["k_format"] == "packed16" else 2 * D
    s = 2 * D // block_of(D) if c["k_format"] == "packed16" else 0
    v = V_ROW[c["v_format"]](D)
    vs = V_SCALE_ROW.get(c["v_format"], lambda d: 0)(D)
    return k, s, v, vs


def io_bytes(c):
    return 2 * 2 * c["batch"] * c["nq"] * c["n_q_heads"] * c["head_dim"]  # fp16 Q in, O out


def packfa_bytes(c):
    return sum(lengths(c)) * c["n_kv_heads"] * sum(packfa_row_bytes(c)) + io_bytes(c)


def sdpa_bytes(c):
    return c["batch"] * c["max_kv"] * c["n_kv_heads"] * 4 * c["head_dim"] + io_bytes(c)


# ---- timing -------------------------------------------------------------------------------------------
def median(xs):
    return statistics.median(xs) if xs else float("nan")


def est_call_us(calls):
    """Eager estimate of one call (after a warm-up call), to size the graph."""
    calls[0]()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = min(len(calls), 4)
    a.record()
    for f in calls[:n]:
        f()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def graph_time(calls, args):
    """Median us per call of a CUDA graph of N calls cycling over the given per-set callables."""
    est = max(est_call_us(calls), 1.0)
    nsets = len(calls)
    n = max(nsets, min(args.calls, int(math.ceil(args.replay_ms * 1e3 / est))))
    seq = [calls[i % nsets] for i in range(n)]
    reps = int(max(5, min(args.reps, args.graph_ms * 1e3 / (n * est))))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in seq:
            f()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    us = sorted(a.elapsed_time(b) * 1e3 / n for a, b in ev)
    del g
    return dict(us=median(us), p10=us[len(us) // 10], p90=us[(len(us) * 9) // 10], calls=n, sets=nsets, reps=reps)


def n_sets(set_bytes, l2):
    return int(max(2, min(64, math.ceil(2.5 * l2 / max(set_bytes, 1)))))


def copy_gbs():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_(0, 255)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    res = []
    for _ in range(15):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        res.append(2.0 * n / (s.elapsed_time(e) * 1e-3) / 1e9)
    del a, b
    torch.cuda.empty_cache()
    return median(res)


# ---- SDPA -----------------------------------------------------------------------------------------------
def sdpa_backends():
    """name -> context-manager factory restricting SDPA to that backend alone (math excluded)."""
    out = {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name, attr in (("cudnn", "CUDNN_ATTENTION"), ("flash", "FLASH_ATTENTION"),
                           ("efficient", "EFFICIENT_ATTENTION")):
            if hasattr(SDPBackend, attr):
                out[name] = (lambda be=getattr(SDPBackend, attr): sdpa_kernel([be]))
        return out
    except ImportError:
        pass
    ctx = torch.backends.cuda.sdp_kernel  # torch < 2.3
    import inspect
    has_cudnn = "enable_cudnn" in inspect.signature(ctx).parameters
    base = dict(enable_flash=False, enable_math=False, enable_mem_efficient=False)
    if has_cudnn:
        base["enable_cudnn"] = False
        out["cudnn"] = lambda: ctx(**dict(base, enable_cudnn=True))
    out["flash"] = lambda: ctx(**dict(base, enable_flash=True))
    out["efficient"] = lambda: ctx(**dict(base, enable_mem_efficient=True))
    return out


def lower_right_mask(nq, kv):
    """packfa's causal rule as a boolean mask (True = attend): row i sees keys j <= kv - nq + i."""
    return torch.ones(nq, kv, dtype=torch.bool, device="cuda").tril(diagonal=kv - nq)


def lower_right_bias(nq, kv):
    """The same as an additive fp16 SDPA attn_mask (0 / -inf), built once: a boolean attn_mask would be
    converted to this inside every timed call."""
    return torch.zeros(nq, kv, dtype=torch.float16, device="cuda").masked_fill(~lower_right_mask(nq, kv),
                                                                               float("-inf"))


def sdpa_call(mode, q, k, v, causal="none", mask=None):
    """q [B, H, nq, D]; k, v [B, G, L, D] (mode "repeat": G == H, K/V already repeated). Returns [B, H, nq, D].
    causal (causal_kind): "none"; "is_causal" (nq == L: SDPA's top-left rule is packfa's); "lower_right":
    mask (lower_right_bias) as attn_mask, or for mode "bias" torch's CausalBias lower-right."""
    B, H, nq, D = q.shape
    G = k.shape[1]
    gqa = dict(enable_gqa=True) if G != H else {}
    if causal == "lower_right":
        if mode == "bias":
            from torch.nn.attention.bias import causal_lower_right
            return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(nq, k.shape[2]), **gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **gqa)
    if causal == "is_causal":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
    if mode in ("gqa", "repeat"):
        return F.scaled_dot_product_attention(q, k, v, **gqa)
    # fold: query head h = g * rep + r of KV head g becomes query row r * nq + i of head g (exact only
    # without a causal mask)
    qf = q.reshape(B, G, (H // G) * nq, D)
    return F.scaled_dot_product_attention(qf, k, v).reshape(B, H, nq, D)


def sdpa_variants(c, backends):
    """(backend name, GQA mode) pairs to try for c; backend "bias" = CausalBias dispatching itself."""
    kind, G, H = causal_kind(c), c["n_kv_heads"], c["n_q_heads"]
    if kind == "none":
        modes = ["gqa"] + (["fold"] if G != H else [])
    else:
        modes = ["gqa"] + (["repeat"] if G != H else [])
    out = [(name, m) for name in backends for m in modes]
    if kind == "lower_right":
        out += [("bias", m) for m in modes]
    return out


def first_line(e):
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:200]


def backend_ctx(backends, name):
    if name == "bias":  # CausalBias picks its own kernel (torch/nn/attention/bias.py)
        import contextlib
        return contextlib.nullcontext()
    return backends[name]()


def try_sdpa(backends, name, mode, q, k, v, causal="none", mask=None):
    """Runs one eager call; returns (ok, reason)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with backend_ctx(backends, name):
                sdpa_call(mode, q, k, v, causal, mask)
            torch.cuda.synchronize()
            return True, ""
        except Exception as e:  # noqa: BLE001 - unsupported shape / backend / torch version
            why = [str(x.message).splitlines()[0][:160] for x in w if "kernel" in str(x.message).lower()]
            return False, first_line(e) + ((" | " + why[0]) if why else "")


def time_sdpa(c, args, l2, backends):
    B, H, G, D, kv, nq = c["batch"], c["n_q_heads"], c["n_kv_heads"], c["head_dim"], c["max_kv"], c["nq"]
    set_bytes = B * G * kv * D * 2 * 2
    ns = n_sets(set_bytes, l2)
    q = torch.randn(B, H, nq, D, device="cuda", dtype=torch.float16)
    k0 = torch.randn(B, G, kv, D, device="cuda", dtype=torch.float16)
    v0 = torch.randn(B, G, kv, D, device="cuda", dtype=torch.float16)
    sets = [(k0, v0)] + [(k0.clone(), v0.clone()) for _ in range(ns - 1)]
    kind = causal_kind(c)
    mask = lower_right_bias(nq, kv) if kind == "lower_right" else None
    rsets = None  # K/V repeated to H heads ("repeat"), built once, outside the timed calls
    res, errs = {}, {}
    for name, mode in sdpa_variants(c, backends):
        key = "%s/%s" % (name, mode) + ("+mask" if kind == "lower_right" and name != "bias" else "")
        if mode == "repeat" and rsets is None:
            rsets = [(kk.repeat_interleave(H // G, 1), vv.repeat_interleave(H // G, 1)) for kk, vv in sets]
        use = rsets if mode == "repeat" else sets
        ok, why = try_sdpa(backends, name, mode, q, use[0][0], use[0][1], kind, mask)
        if not ok:
            errs[key] = why
            continue
        try:
            with backend_ctx(backends, name):
                calls = [(lambda kk=kk, vv=vv: sdpa_call(mode, q, kk, vv, kind, mask)) for kk, vv in use]
                res[key] = graph_time(calls, args)
        except Exception as e:  # noqa: BLE001
            errs[key] = "graph: " + first_line(e)
            torch.cuda.synchronize()
    del sets, rsets, k0, v0, q, mask
    return res, errs


# ---- packfa -----------------------------------------------------------------------------------------------
class Packfa:
    def __init__(self, lib_path):
        self.lib = packfa.load(lib_path)

    def strides(self, c, row):
        B, G, kv = c["batch"], c["n_kv_heads"], c["max_kv"]
        if c["layout"] == "head":
            return (G * kv * row, row, kv * row)
        return (kv * G * row, G * row, row)

    def build(self, c, K, V):
        """One cache set from fp16 K, V [B, kv, G, D] (token-major): packed16 K (or f16 K), V in
        c's format; returned in c's layout (head-major: a permuted copy of the same bytes)."""
        B, G, D, kv = c["batch"], c["n_kv_heads"], c["head_dim"], c["max_kv"]
        n = B * kv
        blk = block_of(D)
        planes = {}
        stream = torch.cuda.current_stream().cuda_stream
        if c["k_format"] == "packed16":
            kp = torch.empty(n, G, D, dtype=torch.int8, device="cuda")
            ks = torch.empty(n, G, D // blk, dtype=torch.float16, device="cuda")
            packfa.pack_k(self.lib, packfa.PackKParams(
                n_tokens=n, n_kv_heads=G, head_dim=D, src_type=packfa.DTYPE["f16"], src=K.data_ptr(),
                src_token_stride=G * D, src_head_stride=D, dst_payload=kp.data_ptr(), dst_payload_strides=(0, G * D, D),
                dst_scales=ks.data_ptr(), dst_scale_strides=(0, G * (D // blk) * 2, (D // blk) * 2), block=blk,
                base_slot=0), stream)
            planes["k"], planes["ks"] = kp, ks
        else:
            planes["k"] = K.reshape(n, G, D).clone()
        vf = c["v_format"]
        if vf == "f16":
            planes["v"] = V.reshape(n, G, D).clone()
        else:
            vrow = V_ROW[vf](D)
            vt = torch.empty(n, G, vrow, dtype=torch.uint8 if vf in ("q8_0", "q4_0") else torch.int8, device="cuda")
            kw = {}
            if vf == "q8_0_planar":
                vs = torch.empty(n, G, D // 32, dtype=torch.float16, device="cuda")
                kw = dict(dst_scales=vs.data_ptr(), dst_scale_strides=(0, G * (D // 32) * 2, (D // 32) * 2))
                planes["vs"] = vs
            packfa.quantize_v(self.lib, packfa.QuantizeVParams(
                n_tokens=n, n_kv_heads=G, head_dim=D, src_type=packfa.DTYPE["f16"], src=V.data_ptr(),
                src_token_stride=G * D, src_head_stride=D, v_format=packfa.V_FORMAT[vf], dst=vt.data_ptr(),
                dst_strides=(0, G * vrow, vrow), base_slot=0, **kw), stream)
            planes["v"] = vt
        for key in list(planes):
            t = planes[key].view(B, kv, G, -1)
            planes[key] = t.permute(0, 2, 1, 3).contiguous() if c["layout"] == "head" else t
        return planes

    def params(self, c, planes, q, o, kv_len, causal, host_lens=None):
        """host_lens: the lengths on the host too (AttnParams::kv_len_host, the planner's one-round
        rule for batches), as an engine that knows them passes them."""
        B, nq, H, G, D = c["batch"], c["nq"], c["n_q_heads"], c["n_kv_heads"], c["head_dim"]
        kr, sr, vr, vsr = packfa_row_bytes(c)
        kw = dict(batch=B, nq=nq, n_q_heads=H, n_kv_heads=G, head_dim=D, max_kv_len=c["max_kv"],
                  q_type=packfa.DTYPE["f16"], q=q.data_ptr(), q_strides=(nq * H * D, H * D, D),
                  o_type=packfa.DTYPE["f16"], o=o.data_ptr(), o_strides=(nq * H * D, H * D, D),
                  k_format=packfa.K_FORMAT[c["k_format"]], k=planes["k"].data_ptr(), k_strides=self.strides(c, kr),
                  v_format=packfa.V_FORMAT[c["v_format"]], v=planes["v"].data_ptr(), v_strides=self.strides(c, vr),
                  kv_len=kv_len.data_ptr(), causal=int(causal), dot=packfa.DOT[c["dot"]])
        if "ks" in planes:
            kw.update(k_scales=planes["ks"].data_ptr(), k_scale_strides=self.strides(c, sr), k_block=block_of(D))
        if "vs" in planes:
            kw.update(v_scales=planes["vs"].data_ptr(), v_scale_strides=self.strides(c, vsr))
        if host_lens is not None:
            kw.update(kv_len_host=(ctypes.c_int32 * B)(*host_lens))  # kept alive by the struct
        return packfa.AttnParams(**kw)

    def forward(self, p):
        packfa.forward(self.lib, p, torch.cuda.current_stream().cuda_stream)


def causal_of(c):
    # decode rows: causal (packfa's MTP semantics; identical visibility for one row), SDPA non-causal: for
    # nq > 1 decode rows it sees up to nq - 1 more keys per row than packfa (< 0.05% of the work at
    # kv >= 32k). Prefill rows: as the case says, SDPA with the same visibility (causal_kind).
    return c["causal"]


def random_kv(B, kv, G, D):
    g = torch.Generator(device="cuda").manual_seed(1)
    return (torch.randn(B, kv, G, D, generator=g, device="cuda", dtype=torch.float16),
            torch.randn(B, kv, G, D, generator=g, device="cuda", dtype=torch.float16))


def time_packfa(pf, c, args, l2, K, V):
    B, nq, H, D = c["batch"], c["nq"], c["n_q_heads"], c["head_dim"]
    base = pf.build(c, K, V)
    set_bytes = sum(t.numel() * t.element_size() for t in base.values())
    ns = n_sets(set_bytes, l2)
    sets = [base] + [{k: t.clone() for k, t in base.items()} for _ in range(ns - 1)]
    q = torch.randn(B, nq, H, D, device="cuda", dtype=torch.float16)
    o = torch.empty_like(q)
    kv_len = torch.tensor(lengths(c), dtype=torch.int32, device="cuda")
    host = None if args.no_host_lens else lengths(c)
    ps = [pf.params(c, s, q, o, kv_len, causal_of(c), host) for s in sets]
    ws = packfa.workspace_bytes(pf.lib, ps[0], torch.cuda.current_device())
    wbuf = torch.empty(max(ws, 16), dtype=torch.uint8, device="cuda")
    for p in ps:  # a caller-provided workspace: the library's own buffer cannot grow inside a capture
        p.workspace, p.workspace_bytes = wbuf.data_ptr(), ws
    try:  # the kernel the timed calls ran (a library older than the query cannot say)
        kname, ksplits = packfa.select_kernel(pf.lib, ps[0], torch.cuda.current_device())
    except AttributeError:
        kname, ksplits = None, None
    calls = [(lambda p=p: pf.forward(p)) for p in ps]
    r = graph_time(calls, args)
    r["workspace_bytes"] = ws
    r["kernel"], r["splits"] = kname, ksplits
    del sets, base, q, o, wbuf
    return r


# ---- --check ------------------------------------------------------------------------------------------------
def check_cases():
    return [case("check kv 4k q8_0", "check", kv=4096), case("check kv 4k q4_0", "check", kv=4096, v="q4_0"),
            case("check kv 4k f16 V", "check", kv=4096, v="f16"),
            case("check kv 4k q8_0_planar head-major", "check", kv=4096, v="q8_0_planar", layout="head"),
            case("check kv 4k fp16-Q dot", "check", kv=4096, dot="f16"),
            case("check D 256 16/2 kv 4k", "check", H=16, G=2, D=256, kv=4096),
            case("check D 64 kv 4k", "check", D=64, kv=4096),
            case("check D 80 kv 4k f16 V", "check", D=80, kv=4096, v="f16"),
            case("check nq 4 kv 4k", "check", nq=4, kv=4096),
            case("check batch 4 varied kv 2k", "check", B=4, kv=2048, lens="varied"),
            case("check f16 K + f16 V kv 4k", "check", kv=4096, k="f16", v="f16"),
            case("check prefill nq 512 kv 4k", "check", nq=512, kv=4096, prefill=True),
            case("check prefill causal nq 512 kv 4k", "check", nq=512, kv=4096, prefill=True, causal=True),
            case("check prefill causal nq 1024 kv 1k", "check", nq=1024, kv=1024, prefill=True, causal=True)]


def tolerance(c):
    if c["k_format"] == "f16" and c["v_format"] == "f16":
        return 5e-3
    return 0.15 if c["v_format"] == "q4_0" else 3e-2


def run_checks(pf, backends):
    out, ok_all = [], True
    for c in check_cases():
        B, nq, H, G, D, kv = c["batch"], c["nq"], c["n_q_heads"], c["n_kv_heads"], c["head_dim"], c["max_kv"]
        torch.manual_seed(1)
        K = torch.randn(B, kv, G, D, device="cuda", dtype=torch.float16)
        V = torch.randn(B, kv, G, D, device="cuda", dtype=torch.float16)
        q = (2 * torch.randn(B, nq, H, D, device="cuda")).half()
        lens = lengths(c)
        row = dict(name=c["name"], tolerance=tolerance(c))
        try:
            planes = pf.build(c, K, V)
            o = torch.empty_like(q)
            kv_len = torch.tensor(lens, dtype=torch.int32, device="cuda")
            # decode check rows non-causal like SDPA (one decode row: the same); prefill rows as the case says
            causal = c["causal"] if c["prefill"] else nq == 1
            kind = causal_kind(dict(c, causal=causal))
            pf.forward(pf.params(c, planes, q, o, kv_len, causal, lens))
            torch.cuda.synchronize()
            qh = q.permute(0, 2, 1, 3).float()  # [B, H, nq, D]
            ref = torch.empty_like(qh)
            for b in range(B):
                kb = K[b, :lens[b]].float().permute(1, 0, 2).repeat_interleave(H // G, 0)  # [H, L, D]
                vb = V[b, :lens[b]].float().permute(1, 0, 2).repeat_interleave(H // G, 0)
                s = qh[b] @ kb.transpose(1, 2) * D ** -0.5
                if causal:  # packfa's rule: row i at position L - nq + i
                    s = s.masked_fill(~lower_right_mask(nq, lens[b]), float("-inf"))
                ref[b] = torch.softmax(s, dim=-1) @ vb
            ref = ref.permute(0, 2, 1, 3)
            err = lambda a: ((a.float() - ref).norm() / ref.norm()).item()  # noqa: E731
            row["packfa_rel_err"] = err(o)
            good = row["packfa_rel_err"] < row["tolerance"]
            if c["lengths"] == "uniform":  # SDPA over the same fp16 K / V (padded batches would differ)
                kh, vh = K.permute(0, 2, 1, 3).contiguous(), V.permute(0, 2, 1, 3).contiguous()
                mask = lower_right_bias(nq, kv) if kind == "lower_right" else None
                row["sdpa_rel_err"], row["packfa_vs_sdpa"] = {}, {}
                for name, mode in sdpa_variants(dict(c, causal=causal), backends):
                    kk, vv = kh, vh
                    if mode == "repeat":
                        kk, vv = kh.repeat_interleave(H // G, 1), vh.repeat_interleave(H // G, 1)
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            with backend_ctx(backends, name):
                                so = sdpa_call(mode, q.permute(0, 2, 1, 3).contiguous(), kk, vv, kind, mask)
                        torch.cuda.synchronize()
                    except Exception:  # noqa: BLE001 - not available for this shape: nothing to compare
                        continue
                    so = so.permute(0, 2, 1, 3)
                    key = "%s/%s" % (name, mode)
                    row["sdpa_rel_err"][key] = err(so)
                    row["packfa_vs_sdpa"][key] = ((o.float() - so.float()).norm() / so.float().norm()).item()
                    good &= row["sdpa_rel_err"][key] < 5e-3 and row["packfa_vs_sdpa"][key] < row["tolerance"]
            row["ok"] = bool(good)
        except Exception as e:  # noqa: BLE001
            row["ok"], row["error"] = False, first_line(e)
        ok_all &= row["ok"]
        print("check %-40s %s  packfa err %s  sdpa %s" % (
            c["name"], "ok  " if row["ok"] else "FAIL", "%.2e" % row["packfa_rel_err"] if "packfa_rel_err" in row
            else row.get("error"), " ".join("%s %.1e" % kv for kv in sorted(row.get("sdpa_rel_err", {}).items()))))
        out.append(row)
        del K, V
        torch.cuda.empty_cache()
    return out, ok_all


# ---- report ----------------------------------------------------------------------------------------------------
def target_ratio(row):
    # issue 18: every decode case at >= 0.9 x its bytes ratio; f16 K + f16 V (ratio 1) at >= 0.95x
    if row["k_format"] == "f16" and row["v_format"] == "f16":
        return 0.95
    return 0.9 * row["bytes_ratio"]


def kernel_cell(r):
    """The instance the timed calls ran and its key splits (packfa_fa_select_kernel), e.g. `fa_prefill<…> ×1`."""
    k = r.get("packfa_kernel")
    return ("`%s` ×%d" % (k, r.get("packfa_splits") or 0)) if k else ""


def write_markdown(path, meta, rows, checks):
    L = ["# Peer bench: packfa vs torch SDPA (fp16)", "",
         "%s, %s, commit %s, torch %s (CUDA %s, cuDNN %s), same-run device copy %.0f GB/s. " % (
             meta["gpu"], meta["date"], meta["commit"], meta["torch"], meta["cuda"], meta["cudnn"], meta["copy_gb_per_s"]),
         "Method: %s" % meta["method"], "",
         "| case | packfa µs | % copy | SDPA best µs | backend | SDPA % copy | speedup | bytes ratio | target | met "
         "| packfa kernel |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("prefill") and not r.get("error"):
            continue  # own table below
        if r.get("error"):
            L.append("| %s | error: %s | | | | | | | | | |" % (r["name"], r["error"].replace("|", "/")))
            continue
        sp = r.get("speedup")
        L.append("| %s | %.1f | %.1f%% | %s | %s | %s | %s | %.2f× | %.2f× | %s | %s |" % (
            r["name"], r["packfa_us"], r["packfa_pct_copy"],
            "%.1f" % r["sdpa_best_us"] if r.get("sdpa_best_us") else "n/a", r.get("sdpa_best", "n/a"),
            "%.1f%%" % r["sdpa_pct_copy"] if r.get("sdpa_pct_copy") else "", "%.2f×" % sp if sp else "",
            r["bytes_ratio"], target_ratio(r), ("yes" if r["meets_target"] else "**no**") if sp else "",
            kernel_cell(r)))
    pre = [r for r in rows if r.get("prefill") and not r.get("error")]
    if pre:
        L += ["", "Prefill (TFLOP/s = 4·D·heads·visible (row, key) pairs / t: nq·kv non-causal, nq·kv − nq(nq−1)/2 "
              "causal; causal SDPA: is_causal when nq == kv, else a lower-right mask or CausalBias, see the backend):", "",
              "| case | causal | packfa µs | packfa TFLOP/s | SDPA best µs | backend | SDPA TFLOP/s | speedup "
              "| packfa kernel |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in pre:
            L.append("| %s | %s | %.1f | %.1f | %s | %s | %s | %s | %s |" % (
                r["name"], "yes" if r.get("causal") else "no", r["packfa_us"], r["packfa_tflops"],
                "%.1f" % r["sdpa_best_us"] if r.get("sdpa_best_us") else "n/a", r.get("sdpa_best", "n/a"),
                "%.1f" % r["sdpa_tflops"] if r.get("sdpa_tflops") else "", "%.2f×" % r["speedup"] if r.get("speedup") else "",
                kernel_cell(r)))
    if checks:
        L += ["", "Correctness (--check, rel. L2 error vs an fp32 reference over the original fp16 K/V):", "",
              "| case | packfa | tolerance | SDPA variants (max) | ok |", "|---|---|---|---|---|"]
        for c in checks:
            se = c.get("sdpa_rel_err") or {}
            L.append("| %s | %s | %.0e | %s | %s |" % (c["name"], "%.2e" % c["packfa_rel_err"] if "packfa_rel_err" in c
                                                     else c.get("error", ""), c["tolerance"],
                                                     "%.1e" % max(se.values()) if se else "", "yes" if c["ok"] else "**no**"))
    if meta.get("skipped_for_time"):
        L += ["", "Not run (time budget): " + ", ".join(meta["skipped_for_time"])]
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


V_COLOR = {"q8_0": "C0", "q4_0": "C1", "f16": "C2", "q8_0_planar": "C3", "bf16": "C4"}


def write_plots(prefix, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        print("peer_bench: no plots (matplotlib unavailable: %s)" % first_line(e))
        return []
    ok = [r for r in rows if not r.get("error") and r.get("packfa_us")]
    made = []

    def std(r):  # D 128, 32/8 heads
        return r["head_dim"] == 128 and r["n_q_heads"] == 32 and r["n_kv_heads"] == 8

    def figure(fname, title, styles, keep, xkey, xlabel, logx):
        series, style_of = {}, {}
        for r in ok:
            g = next((g for g in r.get("groups", [r["group"]]) if g in styles), None)
            if g is not None and keep(r):
                label = series_of(dict(r, group=g))
                series.setdefault(label, []).append(r)
                style_of[label] = styles[g]
        if not series:
            return
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5))
        drawn, target_labelled = set(), False
        for label, rs in sorted(series.items()):
            rs = sorted(rs, key=lambda r: r[xkey])
            ls = style_of[label]
            col = V_COLOR.get(rs[0]["v_format"], "C5")
            xs = [r[xkey] for r in rs]
            a1.plot(xs, [r["packfa_us"] for r in rs], ls, marker="o", ms=3, color=col, label="packfa " + label)
            sp = [r for r in rs if r.get("speedup")]
            if sp:
                a2.plot([r[xkey] for r in sp], [r["speedup"] for r in sp], ls, marker="o", ms=3, color=col, label=label)
                if ls == "-":  # the target of the plain variant of each V format
                    a2.plot([r[xkey] for r in sp], [target_ratio(r) for r in sp], ":", color=col, lw=1, alpha=0.7,
                            label=None if target_labelled else "target (0.9 x bytes ratio)")
                    target_labelled = True
            pts = [(r[xkey], round(r["sdpa_best_us"], 3)) for r in rs if r.get("sdpa_best_us")]
            if pts and not set(pts) <= drawn:  # one SDPA line per distinct set of shapes
                drawn |= set(pts)
                a1.plot([p[0] for p in pts], [p[1] for p in pts], "k" + ls, alpha=0.6, lw=1.2,
                        label="SDPA fp16 best (%s)" % label)
        for a in (a1, a2):
            a.set_xlabel(xlabel)
            if logx:
                a.set_xscale("log", base=2)
            a.grid(True, alpha=0.3)
        a1.set_yscale("log")
        a1.set_ylabel("us per call (CUDA graph, inputs past L2)")
        a2.set_ylabel("speedup vs best SDPA backend")
        a2.axhline(1.0, color="k", lw=0.8)
        a1.legend(fontsize=6.5, ncol=2)
        a2.legend(fontsize=6.5, ncol=2)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(prefix + fname, dpi=110)
        plt.close(fig)
        made.append(prefix + fname)

    kv_style = {"kv": "-", "head_major": "--", "dot_f16": "-.", "f16k": ":"}
    figure("-kv.png", "decode, one row, D 128, 32 q / 8 KV heads (solid: token-major int8 dot; dashed: head-major; "
           "dash-dot: fp16-Q dot; dotted: f16 K)", kv_style,
           lambda r: r["batch"] == 1 and r["nq"] == 1 and std(r), "max_kv", "kv length", True)
    figure("-batch.png", "decode batches, D 128, 32/8 heads, q8_0 V (dashed: lengths kv/4..kv, SDPA padded to kv)",
           {"batch": "-", "batch_varied": "--", "batch32k": "-."}, std, "batch", "batch", True)
    figure("-nq.png", "query rows per sequence (MTP / speculative), D 128, 32/8 heads",
           {"nq": "-", "nq_planar": "--", "nq4k": "-.", "nq128k": ":"}, std, "nq", "nq", False)
    return made


def series_of(c):
    if c["group"] in ("kv",):
        return c["v_format"] + " V"
    if c["group"] == "head_major":
        return "head-major " + c["v_format"] + " V"
    if c["group"] == "dot_f16":
        return "fp16-Q dot, " + c["v_format"] + " V"
    if c["group"] == "f16k":
        return "f16 K, " + c["v_format"] + " V"
    if c["group"] == "batch":
        return "kv 4k uniform"
    if c["group"] == "batch_varied":
        return "kv 1k..4k varied (SDPA padded)"
    if c["group"] == "batch32k":
        return "kv 32k uniform"
    if c["group"] == "nq":
        return "kv 32k q8_0 V"
    if c["group"] == "nq_planar":
        return "kv 32k q8_0_planar V"
    if c["group"] == "nq4k":
        return "kv 4k q8_0 V"
    if c["group"] == "nq128k":
        return "kv 128k q8_0 V"
    return c["group"]


# ---- main ---------------------------------------------------------------------------------------------------
def git_commit():
    if os.environ.get("PACKFA_COMMIT"):
        return os.environ["PACKFA_COMMIT"]
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (c + ("-dirty" if dirty else "")) if c else "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def find_lib(path):
    for p in ([path] if path else []) + [os.environ.get("PACKFA_LIB"), os.path.join(ROOT, "build", "libpackfa_c.so"),
                                         os.path.join(ROOT, "build-gpu", "libpackfa_c.so")]:
        if p and os.path.exists(p):
            return p
    sys.exit("peer_bench: libpackfa_c.so not found (--lib PATH)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="libpackfa_c.so (default: $PACKFA_LIB, build/, build-gpu/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--quick", action="store_true", help="the issue's table only")
    ap.add_argument("--check", action="store_true", help="compare outputs with an fp32 reference first")
    ap.add_argument("--prefill", action="store_true",
                    help="add prefill rows: nq 512 / 2048 x kv 4k / 32k non-causal and causal (cached prefix), "
                         "causal nq == kv 2k / 4k / 8k")
    ap.add_argument("--only", default="", help="run the cases whose name contains this (alternatives: a|b)")
    ap.add_argument("--reps", type=int, default=30, help="timed replays per graph (at most)")
    ap.add_argument("--calls", type=int, default=20, help="calls per graph (at least the number of input sets)")
    ap.add_argument("--replay-ms", type=float, default=4.0, help="aim for replays of about this length")
    ap.add_argument("--graph-ms", type=float, default=400.0, help="time per graph, replays included (reps shrink)")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds for the timed cases (after set-up and --check); no new case after it "
                         "(default 80 with --quick, else 300)")
    ap.add_argument("--commit", default="", help="commit to record (default $PACKFA_COMMIT or git)")
    ap.add_argument("--tag", default="", help="file name suffix")
    ap.add_argument("--no-host-lens", action="store_true",
                    help="packfa without kv_len_host (its planner then sees max_kv_len only)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("peer_bench: no CUDA device; nothing to measure")
        return 2
    budget = args.budget or (80.0 if args.quick else 300.0)
    lib = find_lib(args.lib)
    pf = Packfa(lib)
    dev = torch.cuda.current_device()
    prop = torch.cuda.get_device_properties(dev)
    l2 = getattr(prop, "L2_cache_size", 0) or (50 << 20)
    backends = sdpa_backends()
    commit = args.commit or git_commit()
    now = datetime.datetime.now(datetime.timezone.utc)
    meta = dict(gpu=prop.name, sms=prop.multi_processor_count, l2_bytes=l2, date=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                commit=commit, torch=torch.__version__, cuda=torch.version.cuda,
                cudnn=str(torch.backends.cudnn.version()), packfa=packfa.version(pf.lib), lib=lib,
                sdpa_backends=sorted(backends), quick=args.quick)
    meta["copy_gb_per_s"] = copy_gbs()
    meta["method"] = (
        "per backend one CUDA graph of N calls over S input sets (S sets > 2.5 x L2 bytes; N >= S, >= %d or a %.0f ms "
        "replay); median over <= %d replays of replay time / N after 3 warm-up replays; packfa with a caller workspace "
        "(PDL as the library decides), decode rows causal, prefill rows non-causal or causal as named; SDPA fp16 "
        "non-causal for decode and non-causal prefill, each backend alone (math excluded), GQA by enable_gqa or by "
        "folding the group into query rows; causal prefill: is_causal when nq == kv, else packfa's bottom-right rule "
        "as a boolean attn_mask (+mask) or torch's causal_lower_right CausalBias (bias/: it picks its own kernel), "
        "GQA by enable_gqa or K/V repeated before the timed calls; best reported; copy = torch copy_ of 1 GiB, "
        "bytes read + written; packfa %s the lengths on the host too (kv_len_host)"
        % (args.calls, args.replay_ms, args.reps, "without" if args.no_host_lens else "with"))
    meta["host_lens"] = not args.no_host_lens
    print("peer_bench: %s (%d SMs, L2 %d MB), torch %s, copy %.0f GB/s, commit %s, SDPA backends %s" % (
        prop.name, prop.multi_processor_count, l2 >> 20, torch.__version__, meta["copy_gb_per_s"], commit,
        ",".join(sorted(backends))))

    checks, checks_ok = [], True
    if args.check:
        checks, checks_ok = run_checks(pf, backends)

    cases = table_cases() + ([] if args.quick else sweep_cases()) + (prefill_cases() if args.prefill else [])
    todo = plan_cases(cases, args.only)

    sdpa_cache, rows, skipped = {}, [], []
    master_key, master = None, None
    stem = "%s-%s-%s-peers%s%s" % (
        "h200" if "H200" in prop.name else "".join(ch if ch.isalnum() else "-" for ch in prop.name.lower()).strip("-"),
        now.strftime("%Y-%m-%d"), commit, "-quick" if args.quick else "", ("-" + args.tag) if args.tag else "")
    os.makedirs(args.out, exist_ok=True)
    prefix = os.path.join(args.out, stem)
    t_cases = time.time()
    try:
        for c in todo:
            if time.time() - t_cases > budget:
                skipped.append(c["name"])
                continue
            row = dict(c)
            row.update(keys=sum(lengths(c)), packfa_bytes=packfa_bytes(c), sdpa_bytes=sdpa_bytes(c))
            row["bytes_ratio"] = row["sdpa_bytes"] / row["packfa_bytes"]
            try:
                sk = sdpa_key(c)
                if sk not in sdpa_cache:
                    sdpa_cache[sk] = time_sdpa(c, args, l2, backends)
                res, errs = sdpa_cache[sk]
                row["sdpa"] = {k: round(v["us"], 3) for k, v in res.items()}
                row["sdpa_detail"] = res
                row["sdpa_errors"] = errs
                if res:
                    best = min(res, key=lambda k: res[k]["us"])
                    row["sdpa_best"], row["sdpa_best_us"] = best, res[best]["us"]
                    row["sdpa_gbs"] = row["sdpa_bytes"] / (row["sdpa_best_us"] * 1e3)
                    row["sdpa_pct_copy"] = 100.0 * row["sdpa_gbs"] / meta["copy_gb_per_s"]
                mk = (c["batch"], c["max_kv"], c["n_kv_heads"], c["head_dim"])
                if mk != master_key:  # random fp16 K / V, shared by the cases of one shape
                    master_key, master = None, None
                    torch.cuda.empty_cache()
                    master_key, master = mk, random_kv(*mk)
                r = time_packfa(pf, c, args, l2, *master)
                row.update(packfa_us=r["us"], packfa_p10=r["p10"], packfa_p90=r["p90"], packfa_calls=r["calls"],
                           packfa_sets=r["sets"], packfa_reps=r["reps"], workspace_bytes=r["workspace_bytes"],
                           packfa_kernel=r["kernel"], packfa_splits=r["splits"])
                row["packfa_gbs"] = row["packfa_bytes"] / (row["packfa_us"] * 1e3)
                row["packfa_pct_copy"] = 100.0 * row["packfa_gbs"] / meta["copy_gb_per_s"]
                if row.get("sdpa_best_us"):
                    row["speedup"] = row["sdpa_best_us"] / row["packfa_us"]
                    if not c["prefill"]:  # the bytes-ratio target is a decode target
                        row["target_speedup"] = target_ratio(row)
                        row["meets_target"] = row["speedup"] >= row["target_speedup"]
                if c["prefill"]:  # equal work on both sides: SDPA gets packfa's visibility (causal_kind)
                    row["visible_pairs"] = visible_pairs(c)
                    flop = 4.0 * row["visible_pairs"] * c["head_dim"] * c["n_q_heads"]
                    row["packfa_tflops"] = flop / (row["packfa_us"] * 1e-6) / 1e12
                    if row.get("sdpa_best_us"):
                        row["sdpa_tflops"] = flop / (row["sdpa_best_us"] * 1e-6) / 1e12
            except Exception as e:  # noqa: BLE001 - record it, go on with the next case
                row["error"] = "%s: %s" % (type(e).__name__, first_line(e))
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001 - the context is gone: stop here
                    rows.append(row)
                    print("peer_bench: CUDA context lost after %s; stopping" % c["name"])
                    break
            rows.append(row)
            print("%-46s packfa %9s us %6s  SDPA %9s us (%s)  speedup %6s  ratio %.2f  [%.0f s]" % (
                c["name"], "%.1f" % row["packfa_us"] if row.get("packfa_us") else "-",
                ("%.0f TF/s" % row["packfa_tflops"] if row.get("packfa_tflops") else "") if c["prefill"] else
                ("%.1f%%" % row["packfa_pct_copy"] if row.get("packfa_pct_copy") else ""),
                "%.1f" % row["sdpa_best_us"] if row.get("sdpa_best_us") else "-", row.get("sdpa_best", "-"),
                "%.2fx" % row["speedup"] if row.get("speedup") else "-", row["bytes_ratio"], time.time() - T0)
                  + ("  " + kernel_cell(row) if row.get("packfa_kernel") else ""))
            if row.get("error"):
                print("    error: " + row["error"])
    finally:
        master = None
        meta["skipped_for_time"] = skipped
        meta["wall_s"] = round(time.time() - T0, 1)
        meta["check_ok"] = checks_ok if args.check else None
        with open(prefix + ".json", "w") as f:
            json.dump(dict(meta, cases=rows, check=checks), f, indent=1)
        write_markdown(prefix + ".md", meta, rows, checks)
        plots = write_plots(prefix, rows)
        print("peer_bench: wrote %s.json, %s.md%s (%.0f s)" % (prefix, prefix, "".join(", " + p for p in plots),
                                                               time.time() - T0))
        if skipped:
            print("peer_bench: %d cases not run (time budget %.0f s)" % (len(skipped), budget))
    return 0 if checks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
