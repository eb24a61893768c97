"""packfa.torch on a CUDA device (issue 19, item 2). Exit 77 (ctest: skipped) without torch or a GPU.

    python3 tests/api/test_torch.py build-gpu/libpackfa_c.so [--pending]

1. pack_k_ / quantize_v_ round trip: every dequantized value within its block's rounding bound.
2. attention matches reference_attention (fp32, over the dequantized cache) within 2e-2 relative
   on decode, varlen batches, MTP rows, D 64..256, every V format, f16 K, both dot modes,
   head-major caches, mask / sinks / LSE / window / softcap / ALiBi / q_pos, a long split.
3. Every wrong argument raises TypeError / ValueError naming it, before any device work: no
   libpackfa call is made (the ctypes entry points are wrapped and counted) and the outputs /
   caches keep their sentinel contents.
4. A CUDA graph of 10 decode steps (pack_k_ + quantize_v_ + kv_len += 1 + attention) replays
   bitwise equal to the eager steps, twice.
5. torch.compile(fullgraph=True) of a step calling all three runs (no graph break) and equals eager.
6. torch.library.opcheck of the three ops (when torch has it).
7. Paged caches with a block table / slot_mapping (-1 skips), ggml ALiBi (llama.cpp's mask) and
   per-head masks against the same fp32 reference.
"""
import os
import sys
import traceback
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import torch
except ImportError:
    print("test_torch: torch not installed: skipped")
    sys.exit(77)
if not torch.cuda.is_available():
    print("test_torch: no CUDA device: skipped")
    sys.exit(77)

import packfa  # noqa: E402
import packfa.torch as pft  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
pft.load_library(args[0] if args else None)
PENDING = True  # the kernel side of paged caches / ggml ALiBi / per-head masks has landed
DEV = torch.device("cuda", torch.cuda.current_device())
print("torch %s, %s, registration: %s" % (torch.__version__, torch.cuda.get_device_name(DEV), pft.REGISTRATION))

# Count every call into libpackfa (packfa.torch calls them through the packfa module).
CALLS = [0]


def _counted(name):
    real = getattr(packfa, name)

    def f(*a, **k):
        CALLS[0] += 1
        return real(*a, **k)

    setattr(packfa, name, f)


for _n in ("forward", "workspace_bytes", "pack_k", "quantize_v"):
    _counted(_n)

results = []


def test(fn):
    name = fn.__name__
    try:
        fn()
        results.append((name, "ok", ""))
        print("PASS", name)
    except Skip as e:
        results.append((name, "skipped", str(e)))
        print("SKIP", name, "-", e)
    except Exception as e:  # noqa: BLE001
        results.append((name, "FAIL", "%s: %s" % (type(e).__name__, e)))
        print("FAIL", name)
        traceback.print_exc()
    return fn


class Skip(Exception):
    pass


def rel(a, b):
    return (a.float() - b.float()).norm().item() / max(b.float().norm().item(), 1e-30)


def gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def build(B, cap, G, D, v_format, *, layout="NHD", k_format="packed16", block=32, seed=0, batch_dim=True):
    """Random fp16 K/V [B, cap, G, D], written into a fresh cache with pack_k_ / quantize_v_ (f16 K
    copied); returns the cache dict plus K, V and the dequantized planes Kd, Vd ([B, cap, G, D])."""
    g = gen(seed)
    K = torch.randn(B, cap, G, D, generator=g, device=DEV).half()
    V = torch.randn(B, cap, G, D, generator=g, device=DEV).half()
    c = pft.alloc_cache(cap, G, D, v_format, batch=B if batch_dim else None, layout=layout, block=block,
                        k_format=k_format, device=DEV)
    planes = [c["k_cache"], c["k_scales"], c["v_cache"], c["v_scales"]]
    views = [p if (p is None or batch_dim) else p.unsqueeze(0) for p in planes]  # [B, ...] for the loop below
    for b in range(B):
        kb, ksb, vb, vsb = [None if p is None else p[b] for p in views]
        if k_format == "packed16":
            pft.pack_k_(K[b], kb, ksb, None, layout=layout)
        else:
            (kb.copy_(K[b].transpose(0, 1)) if layout == "HND" else kb.copy_(K[b]))
        pft.quantize_v_(V[b], vb, None, v_format=v_format, v_scales=vsb, layout=layout)
    nhd = [None if p is None else (p.transpose(-3, -2) if layout == "HND" else p) for p in views]
    Kd = pft.dequantize_k(nhd[0], nhd[1])
    Vd = pft.dequantize_v(nhd[2], v_format, nhd[3], head_dim=D)
    c.update(K=K, V=V, Kd=Kd, Vd=Vd)
    return c


def call(c, q, kv_len, **kw):
    return pft.attention(q, c["k_cache"], c["k_scales"], c["v_cache"], kv_len, v_scales=c["v_scales"],
                         v_format=c["v_format"], layout=c["layout"], **kw)


# ---- 1. round trip ------------------------------------------------------------------------------
@test
def pack_roundtrip():
    for vf, bound in (("q8_0", 0.57), ("q8_0_planar", 0.57), ("q4_0", 1.07), ("f16", 0.0)):
        for layout in ("NHD", "HND"):
            c = build(2, 256, 4, 128, vf, layout=layout, seed=3)
            ks = c["k_scales"].transpose(-3, -2) if layout == "HND" else c["k_scales"]
            dk = ks.float().abs().repeat_interleave(32, dim=-1)
            ek = (c["Kd"] - c["K"].float()).abs()
            assert bool((ek <= 0.5 * dk * (1 + 1e-3) + 1e-6).all()), "K %s %s: max err/d %.3f" % (
                vf, layout, (ek / dk.clamp_min(1e-30)).max().item())
            ev = (c["Vd"] - c["V"].float()).abs()
            amax = c["V"].float().abs().reshape(2, 256, 4, 4, 32).amax(-1).repeat_interleave(32, dim=-1)
            d = amax / (127.0 if vf != "q4_0" else 8.0)
            lim = bound * d * (1 + 1e-3) + (1e-6 if vf != "f16" else 0.0)
            assert bool((ev <= lim).all()), "V %s %s: max err/d %.3f" % (vf, layout, (ev / d.clamp_min(1e-30)).max().item())
    # a batched head-major cache cannot take flat slots: one sequence's view can
    c = pft.alloc_cache(64, 2, 128, "q8_0", batch=2, layout="HND", device=DEV)
    try:
        pft.pack_k_(torch.zeros(3, 2, 128, device=DEV, dtype=torch.float16), c["k_cache"], c["k_scales"], None,
                    layout="HND")
        raise AssertionError("batched head-major pack_k_ did not raise")
    except ValueError as e:
        assert str(e).startswith("k_cache:"), e


# ---- 2. against the reference -------------------------------------------------------------------
CASES = [
    dict(name="decode q8_0 32/8 D128", B=1, nq=1, HQ=32, G=8, D=128, cap=1024, lens=[1000], v="q8_0"),
    dict(name="varlen batch q4_0", B=3, nq=1, HQ=8, G=2, D=128, cap=2048, lens=[17, 700, 2048], v="q4_0"),
    dict(name="MTP nq 4 causal f16 V D64", B=2, nq=4, HQ=8, G=2, D=64, cap=512, lens=[300, 512], v="f16"),
    dict(name="D256 planar window softcap", B=1, nq=2, HQ=16, G=2, D=256, cap=1024, lens=[900], v="q8_0_planar",
         kw=dict(window=100, softcap=30.0)),
    dict(name="D80 block 16 mask sinks lse", B=2, nq=3, HQ=8, G=4, D=80, cap=256, lens=[200, 256], v="f16",
         block=16, mask=True, sinks=True, lse=True),
    dict(name="ALiBi position, q_pos, non-causal", B=2, nq=2, HQ=8, G=2, D=128, cap=256, lens=[256, 100], v="q8_0",
         kw=dict(alibi_max_bias=8.0, causal=False), q_pos=[[10, 200], [50, 99]]),
    dict(name="head-major, bf16 q, f32 out", B=2, nq=1, HQ=16, G=4, D=128, cap=512, lens=[512, 333], v="q8_0",
         layout="HND", qdtype=torch.bfloat16, odtype=torch.float32),
    dict(name="dot f16", B=1, nq=1, HQ=32, G=8, D=128, cap=4096, lens=[4000], v="q8_0", kw=dict(dot="f16")),
    dict(name="f16 K + f16 V", B=2, nq=1, HQ=32, G=8, D=128, cap=1024, lens=[1024, 500], v="f16", k_format="f16"),
    dict(name="3-D cache, max_kv_len bound, bf16 V", B=1, nq=1, HQ=8, G=1, D=128, cap=2048, lens=[700], v="bf16",
         batch_dim=False, kw=dict(max_kv_len=1024)),
    dict(name="D96 q8_0", B=1, nq=1, HQ=12, G=4, D=96, cap=512, lens=[480], v="q8_0", maybe_missing=True),
    dict(name="D112 block 16 f16 V", B=1, nq=1, HQ=8, G=2, D=112, cap=512, lens=[480], v="f16", block=16,
         maybe_missing=True),
    dict(name="long split (claim counters, workspace)", B=1, nq=1, HQ=32, G=8, D=128, cap=65536, lens=[65536],
         v="q8_0"),
    dict(name="head-major q4_0 MTP nq 8", B=1, nq=8, HQ=32, G=8, D=128, cap=8192, lens=[8000], v="q4_0",
         layout="HND"),
    # kv_len_host: the split planner's host copy (a list, a CPU tensor, a stale copy: speed only)
    dict(name="kv_len_host list, uneven batch", B=4, nq=1, HQ=32, G=8, D=128, cap=8192,
         lens=[8192, 300, 5000, 1], v="q8_0", host_lens="list"),
    dict(name="kv_len_host CPU tensor, MTP nq 2", B=2, nq=2, HQ=8, G=2, D=128, cap=4096, lens=[4000, 900],
         v="q8_0", host_lens="tensor"),
    dict(name="kv_len_host stale (half the lengths)", B=3, nq=1, HQ=16, G=4, D=128, cap=4096,
         lens=[4096, 2000, 64], v="q4_0", host_lens="stale"),
]


def run_case(cs):
    B, nq, HQ, G, D, cap = cs["B"], cs["nq"], cs["HQ"], cs["G"], cs["D"], cs["cap"]
    c = build(B, cap, G, D, cs["v"], layout=cs.get("layout", "NHD"), k_format=cs.get("k_format", "packed16"),
              block=cs.get("block", 32), batch_dim=cs.get("batch_dim", True), seed=zlib.crc32(cs["name"].encode()) % 1000)
    g = gen(7)
    q = (2.0 * torch.randn(B, nq, HQ, D, generator=g, device=DEV)).to(cs.get("qdtype", torch.float16))
    kv_len = torch.tensor(cs["lens"], dtype=torch.int32, device=DEV)
    kw = dict(cs.get("kw", {}))
    ref_kw = {k: v for k, v in kw.items() if k not in ("dot", "max_kv_len")}
    if cs.get("mask"):
        m = torch.randn(B, nq, cap, generator=g, device=DEV)
        m[torch.rand(B, nq, cap, generator=g, device=DEV) < 0.1] = float("-inf")
        kw["mask"] = ref_kw["mask"] = m.half()
    if cs.get("sinks"):
        kw["sinks"] = ref_kw["sinks"] = torch.randn(HQ, generator=g, device=DEV)
    if "q_pos" in cs:
        kw["q_pos"] = ref_kw["q_pos"] = torch.tensor(cs["q_pos"], dtype=torch.int32, device=DEV)
    if "odtype" in cs:
        kw["out_dtype"] = cs["odtype"]
    if cs.get("host_lens") == "list":
        kw["kv_len_host"] = list(cs["lens"])
    elif cs.get("host_lens") == "tensor":
        kw["kv_len_host"] = torch.tensor(cs["lens"], dtype=torch.int32)
    elif cs.get("host_lens") == "stale":
        kw["kv_len_host"] = [n // 2 for n in cs["lens"]]
    try:
        res = call(c, q, kv_len, return_lse=bool(cs.get("lse")), **kw)
    except packfa.Error as e:
        if cs.get("maybe_missing") and e.code == 2:
            return "not compiled in this build (%s)" % e
        raise
    o, lse = res if cs.get("lse") else (res, None)
    ro, rl = pft.reference_attention(q, c["Kd"], c["Vd"], cs["lens"], **ref_kw)
    torch.cuda.synchronize()
    err = rel(o, ro)
    assert o.dtype == cs.get("odtype", q.dtype), o.dtype
    assert err < 2e-2, "%s: relative error %.3e" % (cs["name"], err)
    msg = "rel err %.2e" % err
    if lse is not None:
        fin = torch.isfinite(rl)
        assert bool(fin.any()) and bool((torch.isfinite(lse) == fin).all()), "lse finiteness differs"
        le = (lse[fin] - rl[fin]).abs().max().item()
        assert le < 2e-2, "%s: lse max abs error %.3e" % (cs["name"], le)
        msg += ", lse err %.2e" % le
    return msg


@test
def matches_reference():
    for cs in CASES:
        print("   %-40s %s" % (cs["name"], run_case(cs)))


# ---- 3. wrong arguments -----------------------------------------------------------------------------
@test
def wrong_arguments_raise_before_device_work():
    B, HQ, G, D, cap = 2, 8, 2, 128, 256
    c = build(B, cap, G, D, "q8_0")
    q = torch.randn(B, 1, HQ, D, device=DEV).half()
    kv_len = torch.tensor([100, 256], dtype=torch.int32, device=DEV)
    out = torch.empty(B, 1, HQ, D, device=DEV, dtype=torch.float16)
    good = dict(q=q, k_cache=c["k_cache"], k_scales=c["k_scales"], v_cache=c["v_cache"], kv_len=kv_len, out=out)
    knew = torch.randn(3, G, D, device=DEV).half()
    slots = torch.tensor([5, 6, 7], dtype=torch.int32, device=DEV)

    def attn(**ch):
        a = dict(good)
        a.update(ch)
        pos = [a.pop(n) for n in ("q", "k_cache", "k_scales", "v_cache", "kv_len")]
        return pft.attention(*pos, **a)

    def pack(**ch):
        a = dict(k_new=knew, k_cache=c["k_cache"], k_scales=c["k_scales"], slot_mapping=slots)
        a.update(ch)
        return pft.pack_k_(a.pop("k_new"), a.pop("k_cache"), a.pop("k_scales"), a.pop("slot_mapping"), **a)

    def quant(**ch):
        a = dict(v_new=knew, v_cache=c["v_cache"], slot_mapping=slots)
        a.update(ch)
        return pft.quantize_v_(a.pop("v_new"), a.pop("v_cache"), a.pop("slot_mapping"), **a)

    attn()  # the good call works
    torch.cuda.synchronize()

    def misaligned(t, offset):
        flat = torch.empty(t.numel() * t.element_size() + 64, dtype=torch.uint8, device=DEV)
        return flat[offset:offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)

    planar = pft.alloc_cache(cap, G, D, "q8_0_planar", batch=B, device=DEV)
    hnd = pft.alloc_cache(cap, G, D, "q8_0", batch=B, layout="HND", device=DEV)
    odd_v = torch.empty(B, cap, G * 136 + 1, dtype=torch.uint8, device=DEV).as_strided(
        (B, cap, G, 136), (cap * (G * 136 + 1), G * 136 + 1, 136, 1))
    padded_k = torch.empty(B, cap, G, 136, dtype=torch.int8, device=DEV)[..., :128]
    cases = [
        (TypeError, "q", attn, dict(q=q.int())),
        (TypeError, "q", attn, dict(q=q.tolist())),
        (ValueError, "q", attn, dict(q=q.cpu())),
        (ValueError, "q", attn, dict(q=q[0])),
        (ValueError, "q", attn, dict(q=torch.zeros(B, 1, HQ, 100, device=DEV).half())),
        (ValueError, "q", attn, dict(q=torch.zeros(B, 1, D, HQ, device=DEV).half().transpose(2, 3))),
        (TypeError, "k_cache", attn, dict(k_cache=c["k_cache"].float())),
        (ValueError, "k_cache", attn, dict(k_cache=c["k_cache"].cpu())),
        (ValueError, "k_cache", attn, dict(k_cache=misaligned(c["k_cache"], 8))),
        (ValueError, "k_cache", attn, dict(k_cache=padded_k)),
        (ValueError, "k_cache", attn, dict(k_cache=c["k_cache"][:1], k_scales=c["k_scales"][:1],
                                           v_cache=c["v_cache"][:1])),
        (TypeError, "k_scales", attn, dict(k_scales=None)),
        (TypeError, "k_scales", attn, dict(k_scales=c["k_scales"].float())),
        (ValueError, "k_scales", attn, dict(k_scales=c["k_scales"][:, :100])),
        (ValueError, "v_cache", attn, dict(v_cache=c["v_cache"][..., :100])),
        (ValueError, "v_cache", attn, dict(v_cache=odd_v)),
        (ValueError, "v_cache", attn, dict(v_cache=misaligned(c["v_cache"], 1))),
        (ValueError, "v_cache", attn, dict(v_format="q4_0")),
        (ValueError, "v_format", attn, dict(v_format="q5_0")),
        (TypeError, "v_scales", attn, dict(v_cache=planar["v_cache"])),
        (TypeError, "kv_len", attn, dict(kv_len=kv_len.long())),
        (TypeError, "kv_len", attn, dict(kv_len=[100, 256])),
        (ValueError, "kv_len", attn, dict(kv_len=kv_len.cpu())),
        (ValueError, "kv_len", attn, dict(kv_len=kv_len[:1])),
        (ValueError, "out", attn, dict(out=out[:, :, :4])),
        (TypeError, "out", attn, dict(out=out.to(torch.int8))),
        (ValueError, "lse", attn, dict(lse=torch.empty(B, 1, device=DEV))),
        (TypeError, "q_pos", attn, dict(q_pos=torch.zeros(B, 1, dtype=torch.int64, device=DEV))),
        (ValueError, "q_pos", attn, dict(q_pos=torch.zeros(B, 2, dtype=torch.int32, device=DEV))),
        (TypeError, "mask", attn, dict(mask=torch.zeros(B, 1, cap, device=DEV))),
        (ValueError, "mask", attn, dict(mask=torch.zeros(B, 1, cap - 1, device=DEV).half())),
        (ValueError, "sinks", attn, dict(sinks=torch.zeros(HQ + 1, device=DEV))),
        (ValueError, "window", attn, dict(window=-1)),
        (ValueError, "softcap", attn, dict(softcap=float("nan"))),
        (ValueError, "scale", attn, dict(scale=0.0)),
        (ValueError, "dot", attn, dict(dot="fp8")),
        (ValueError, "alibi_mode", attn, dict(alibi_mode="slope")),
        (TypeError, "causal", attn, dict(causal=1)),
        (ValueError, "max_kv_len", attn, dict(max_kv_len=cap + 1)),
        (ValueError, "kv_len_host", attn, dict(kv_len_host=[100])),
        (ValueError, "kv_len_host", attn, dict(kv_len_host=[100, -1])),
        (ValueError, "kv_len_host", attn, dict(kv_len_host=[100, cap + 1])),
        (ValueError, "kv_len_host", attn, dict(kv_len_host=[100, 200], max_kv_len=150)),
        (TypeError, "kv_len_host", attn, dict(kv_len_host=[100, 2.5])),
        (ValueError, "kv_len_host", attn, dict(kv_len_host=kv_len)),  # a CUDA tensor: must be on the host
        (ValueError, "page_size", attn, dict(page_size=16)),
        (ValueError, "layout", attn, dict(layout="BSHD")),
        (ValueError, "num_splits", attn, dict(num_splits=-1)),
        (ValueError, "pdl", attn, dict(pdl=2)),
        (TypeError, "k_new", pack, dict(k_new=knew.to(torch.int8))),
        (ValueError, "k_new", pack, dict(k_new=knew[:, :1])),
        (ValueError, "k_new", pack, dict(k_new=knew.cpu())),
        (TypeError, "k_cache", pack, dict(k_cache=c["k_cache"].half())),
        (ValueError, "k_cache", pack, dict(k_cache=hnd["k_cache"], k_scales=hnd["k_scales"], layout="HND")),
        (TypeError, "slot_mapping", pack, dict(slot_mapping=slots.long())),
        (ValueError, "slot_mapping", pack, dict(slot_mapping=slots[:2])),
        (ValueError, "page_size", pack, dict(page_size=32)),
        (ValueError, "base_slot", pack, dict(slot_mapping=None, base_slot=-1)),
        (ValueError, "v_cache", quant, dict(v_format="q4_0")),
        (TypeError, "v_scales", quant, dict(v_cache=planar["v_cache"])),
        (ValueError, "slot_mapping", quant, dict(slot_mapping=slots.cpu())),
        (TypeError, "v_new", quant, dict(v_new=knew.to(torch.int32))),
    ]
    snap = [t.clone() for t in (c["k_cache"], c["k_scales"], c["v_cache"])]
    bad = []
    for exc, name, fn, ch in cases:
        out.fill_(7.0)
        torch.cuda.synchronize()
        CALLS[0] = 0
        try:
            fn(**ch)
            bad.append("%s %s: no exception" % (fn.__name__, name))
            continue
        except exc as e:
            if not str(e).startswith(name + ":"):
                bad.append("%s %s: message %r does not start with %r" % (fn.__name__, name, str(e), name + ":"))
        except Exception as e:  # noqa: BLE001
            bad.append("%s %s: %s instead of %s: %s" % (fn.__name__, name, type(e).__name__, exc.__name__, e))
        torch.cuda.synchronize()
        if CALLS[0]:
            bad.append("%s %s: %d libpackfa call(s) before the error" % (fn.__name__, name, CALLS[0]))
        if not bool((out == 7.0).all()):
            bad.append("%s %s: out was written" % (fn.__name__, name))
        for s, t in zip(snap, (c["k_cache"], c["k_scales"], c["v_cache"])):
            if not torch.equal(s.view(torch.uint8), t.view(torch.uint8)):  # bytes: NaN != NaN
                bad.append("%s %s: the cache was written" % (fn.__name__, name))
                t.copy_(s)
    assert not bad, "\n".join(bad)
    print("   %d wrong-argument cases" % len(cases))


# ---- 4. CUDA graph --------------------------------------------------------------------------------------
def decode_steps(B=2, HQ=16, G=4, D=128, cap=1024, steps=10, lens0=(300, 700), seed=11):
    c = build(B, cap, G, D, "q8_0", seed=seed)
    g = gen(seed)
    st = dict(
        c=c, cap=cap, lens0=list(lens0),
        knew=torch.randn(steps, B, G, D, generator=g, device=DEV).half(),
        vnew=torch.randn(steps, B, G, D, generator=g, device=DEV).half(),
        q=torch.randn(steps, B, 1, HQ, D, generator=g, device=DEV).half(),
        slots=torch.tensor([[b * cap + lens0[b] + s for b in range(B)] for s in range(steps)], dtype=torch.int32,
                           device=DEV),
        kv_len=torch.tensor(lens0, dtype=torch.int32, device=DEV),
        outs=torch.zeros(steps, B, 1, HQ, D, device=DEV, dtype=torch.float16))
    st["snap"] = [t.clone() for t in (c["k_cache"], c["k_scales"], c["v_cache"], st["kv_len"])]
    return st


def restore(st):
    c = st["c"]
    for s, t in zip(st["snap"], (c["k_cache"], c["k_scales"], c["v_cache"], st["kv_len"])):
        t.copy_(s)
    st["outs"].zero_()


def run_steps(st):
    c = st["c"]
    for s in range(st["q"].shape[0]):
        pft.pack_k_(st["knew"][s], c["k_cache"], c["k_scales"], st["slots"][s])
        pft.quantize_v_(st["vnew"][s], c["v_cache"], st["slots"][s])
        st["kv_len"].add_(1)
        call(c, st["q"][s], st["kv_len"], out=st["outs"][s], max_kv_len=st["cap"])


@test
def cuda_graph_replays_bitwise():
    st = decode_steps()
    restore(st)
    run_steps(st)
    torch.cuda.synchronize()
    eager = st["outs"].clone()
    eager_k = st["c"]["k_cache"].clone()
    assert not torch.equal(eager[0], eager[-1]), "steps should differ"
    restore(st)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_steps(st)
    for rep in range(2):
        restore(st)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(st["outs"], eager), "replay %d differs from eager: max %.3e" % (
            rep, (st["outs"].float() - eager.float()).abs().max().item())
        assert torch.equal(st["c"]["k_cache"], eager_k), "replay %d: cache differs" % rep
        assert st["kv_len"].tolist() == [x + 10 for x in st["lens0"]], st["kv_len"].tolist()
    # the graph reads live inputs: new queries give new outputs, equal to eager with them
    st["q"].mul_(-1.0)
    restore(st)
    graph.replay()
    torch.cuda.synchronize()
    replay_neg = st["outs"].clone()
    restore(st)
    run_steps(st)
    torch.cuda.synchronize()
    assert torch.equal(replay_neg, st["outs"]) and not torch.equal(replay_neg, eager), "live-input replay"


# ---- 5. torch.compile ---------------------------------------------------------------------------------
@test
def torch_compile_fullgraph():
    if not pft.REGISTRATION.startswith(("custom_op", "library", "existing")):
        raise AssertionError("ops not registered: %s" % pft.REGISTRATION)
    st = decode_steps(steps=1, seed=5)
    c = st["c"]

    def step(q, knew, vnew, slots, kc, ks, vc, kv_len, host):
        pft.pack_k_(knew, kc, ks, slots)
        pft.quantize_v_(vnew, vc, slots)
        o = pft.attention(q, kc, ks, vc, kv_len, max_kv_len=1024, kv_len_host=host)
        return o.float() * 2.0

    notes = []
    # kv_len_host None, and a host list (the op's int[]? argument; the fake plans with it too)
    for host in (None, [n + 1 for n in st["lens0"]]):
        a = lambda: (st["q"][0], st["knew"][0], st["vnew"][0], st["slots"][0], c["k_cache"],  # noqa: E731
                     c["k_scales"], c["v_cache"], st["kv_len"], host)
        restore(st)
        st["kv_len"].add_(1)
        want = step(*a())
        want_k, want_v = c["k_cache"].clone(), c["v_cache"].clone()
        tag = "kv_len_host %s" % ("list" if host else "None")
        for backend in ("inductor", "aot_eager"):
            torch._dynamo.reset()
            try:
                f = torch.compile(step, fullgraph=True, backend=backend)
                restore(st)
                st["kv_len"].add_(1)
                got = f(*a())
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                if backend == "inductor" and "triton" in str(e).lower():
                    notes.append("inductor unavailable (%s)" % str(e).splitlines()[0][:120])
                    continue
                raise
            assert torch.equal(got, want), "%s, %s: compiled result differs (max %.3e)" % (
                backend, tag, (got - want).abs().max().item())
            assert torch.equal(c["k_cache"], want_k) and torch.equal(c["v_cache"], want_v), \
                "%s, %s: cache writes" % (backend, tag)
            notes.append("%s ok (%s)" % (backend, tag))
            break
        else:
            raise AssertionError("no backend ran (%s): %s" % (tag, notes))
    print("   " + "; ".join(notes))


# ---- 6. opcheck -----------------------------------------------------------------------------------------
@test
def library_opcheck():
    if not hasattr(torch.library, "opcheck"):
        raise Skip("torch.library.opcheck not in torch %s" % torch.__version__)
    B, HQ, G, D, cap = 1, 8, 2, 128, 256
    c = build(B, cap, G, D, "q8_0", seed=9)
    q = torch.randn(B, 1, HQ, D, device=DEV).half()
    kv_len = torch.tensor([200], dtype=torch.int32, device=DEV)
    o = torch.empty_like(q)
    lse = torch.empty(B, 1, HQ, device=DEV)
    err = torch.zeros(3, dtype=torch.int32, device=DEV)
    torch.library.opcheck(torch.ops.packfa.attention.default,
                          (q, c["k_cache"], c["k_scales"], c["v_cache"], None, kv_len, o, lse, err, None, None, None,
                           None, None, "q8_0", "NHD", 0, 0, None, True, 0, 0.0, 0.0, "position", 0.0, "int8", 0, -1))
    torch.library.opcheck(torch.ops.packfa.attention.default,
                          (q, c["k_cache"], c["k_scales"], c["v_cache"], None, kv_len, o, lse, err, None, None, None,
                           None, None, "q8_0", "NHD", 0, 0, [200], True, 0, 0.0, 0.0, "position", 0.0, "int8", 0, -1))
    knew = torch.randn(2, G, D, device=DEV).half()
    slots = torch.tensor([3, 4], dtype=torch.int32, device=DEV)
    cnt = torch.zeros(2, dtype=torch.int32, device=DEV)
    torch.library.opcheck(torch.ops.packfa.pack_k.default,
                          (knew, c["k_cache"], c["k_scales"], cnt, slots, None, None, 0, "NHD", 0, -1))
    torch.library.opcheck(torch.ops.packfa.quantize_v.default,
                          (knew, c["v_cache"], torch.empty(0, dtype=torch.float16, device=DEV), slots, "q8_0", 0,
                           "NHD", 0, -1))


# ---- paged caches, ggml ALiBi, per-head masks ---------------------------------------------
@test
def paged_and_ggml():
    B, HQ, G, D, ps, maxp, pool = 2, 16, 4, 128, 16, 16, 40
    lens = [100, 230]
    g = gen(21)
    K = torch.randn(B, maxp * ps, G, D, generator=g, device=DEV).half()
    V = torch.randn(B, maxp * ps, G, D, generator=g, device=DEV).half()
    for layout in ("NHD", "HND"):
        c = pft.alloc_cache(pool * ps, G, D, "q8_0", page_size=ps, layout=layout, device=DEV)
        perm = torch.randperm(pool, generator=torch.Generator().manual_seed(1))[:B * maxp].view(B, maxp)
        bt = perm.to(torch.int32).to(DEV)
        for b in range(B):
            j = torch.arange(lens[b], device=DEV)
            sm = (bt[b, j // ps].long() * ps + j % ps).to(torch.int32)
            pft.pack_k_(K[b, :lens[b]].contiguous(), c["k_cache"], c["k_scales"], sm, page_size=ps, layout=layout)
            pft.quantize_v_(V[b, :lens[b]].contiguous(), c["v_cache"], sm, page_size=ps, layout=layout)
        kc = c["k_cache"].transpose(1, 2) if layout == "HND" else c["k_cache"]
        ksc = c["k_scales"].transpose(1, 2) if layout == "HND" else c["k_scales"]
        vc = c["v_cache"].transpose(1, 2) if layout == "HND" else c["v_cache"]
        Kd = pft.dequantize_k(kc, ksc)[bt.long()].reshape(B, maxp * ps, G, D)
        Vd = pft.dequantize_v(vc, "q8_0", head_dim=D)[bt.long()].reshape(B, maxp * ps, G, D)
        q = torch.randn(B, 1, HQ, D, generator=g, device=DEV).half() * 2
        kv_len = torch.tensor(lens, dtype=torch.int32, device=DEV)
        o = call(c, q, kv_len, block_table=bt)
        ro, _ = pft.reference_attention(q, Kd, Vd, lens)
        e = rel(o, ro)
        assert e < 2e-2, "paged %s: rel err %.3e" % (layout, e)
        print("   paged %s rel err %.2e" % (layout, e))
    # ggml ALiBi with llama.cpp's mask (-|i - j| on visible keys), causal and non-causal; per-head mask
    c = build(1, 512, G, D, "q8_0", seed=4)
    q = torch.randn(1, 2, HQ, D, generator=g, device=DEV).half() * 2
    kv_len = torch.tensor([500], dtype=torch.int32, device=DEV)
    pos = torch.tensor([498.0, 499.0], device=DEV)
    j = torch.arange(512, device=DEV, dtype=torch.float32)
    for causal in (True, False):
        m = -(j[None, :] - pos[:, None]).abs()
        if causal:
            m = torch.where(j[None, :] <= pos[:, None], m, torch.full_like(m, float("-inf")))
        m = m.half()[None]
        o = call(c, q, kv_len, mask=m, alibi_max_bias=8.0, alibi_mode="ggml", causal=causal)
        ro, _ = pft.reference_attention(q, c["Kd"], c["Vd"], [500], mask=m, alibi_max_bias=8.0, alibi_mode="ggml",
                                        causal=causal)
        e = rel(o, ro)
        assert e < 2e-2, "ggml ALiBi causal=%s: rel err %.3e" % (causal, e)
        print("   ggml ALiBi causal=%s rel err %.2e" % (causal, e))
    mh = torch.randn(1, HQ, 2, 512, generator=g, device=DEV).half()
    o = call(c, q, kv_len, mask=mh)
    ro, _ = pft.reference_attention(q, c["Kd"], c["Vd"], [500], mask=mh)
    e = rel(o, ro)
    assert e < 2e-2, "per-head mask: rel err %.3e" % e
    print("   per-head mask rel err %.2e" % e)


failed = [r for r in results if r[1] == "FAIL"]
print("\ntest_torch: %d passed, %d skipped, %d failed" % (sum(r[1] == "ok" for r in results),
                                                          sum(r[1] == "skipped" for r in results), len(failed)))
for r in failed:
    print("  FAILED %s: %s" % (r[0], r[2].splitlines()[0] if r[2] else ""))
sys.exit(1 if failed else 0)
