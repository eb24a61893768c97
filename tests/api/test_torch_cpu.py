"""packfa.torch's torch-side helpers without a GPU: dequantize_k / dequantize_v on hand-made ggml
blocks, reference_attention against an independent scalar loop (docs/format.md semantics), the op
registration and its fake / meta implementation. Exit 77 (skipped) without torch.

    python3 tests/api/test_torch_cpu.py
"""
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import torch
except ImportError:
    print("test_torch_cpu: torch not installed: skipped")
    sys.exit(77)
import packfa.torch as pft  # noqa: E402

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def f16_bytes(x):
    return list(struct.pack("<e", x))


# ---- dequantize ----------------------------------------------------------------------------------
rng = random.Random(1)
D = 64
q8 = [[rng.randint(-127, 127) for _ in range(32)] for _ in range(2)]
ds = [0.5, -0.03125]
row = []
for b in range(2):
    row += f16_bytes(ds[b]) + [v & 0xFF for v in q8[b]]
v = torch.tensor(row, dtype=torch.uint8).view(1, 1, 68)
got = pft.dequantize_v(v, "q8_0")
want = torch.tensor([q8[b][i] * ds[b] for b in range(2) for i in range(32)]).view(1, 1, 64)
check(torch.equal(got, want), "q8_0 dequantize")
check(torch.equal(pft.dequantize_v(v, None, head_dim=D), want), "q8_0 inferred from the row length")

n4 = [[rng.randint(0, 15) for _ in range(32)] for _ in range(2)]
row = []
for b in range(2):
    row += f16_bytes(ds[b]) + [n4[b][j] | (n4[b][j + 16] << 4) for j in range(16)]
v = torch.tensor(row, dtype=torch.uint8).view(1, 1, 36)
got = pft.dequantize_v(v, "q4_0")
want = torch.tensor([(n4[b][i] - 8) * ds[b] for b in range(2) for i in range(32)]).view(1, 1, 64)
check(torch.equal(got, want), "q4_0 dequantize (byte j: element j low nibble, j + 16 high)")
check(torch.equal(pft.dequantize_v(v, None, head_dim=D), want), "q4_0 inferred")

qv = torch.tensor([x for b in range(2) for x in q8[b]], dtype=torch.int8).view(1, 1, 64)
sc = torch.tensor(ds, dtype=torch.float16).view(1, 1, 2)
check(torch.equal(pft.dequantize_v(qv, "q8_0_planar", sc), qv.float() * sc.float().repeat_interleave(32, -1)),
      "q8_0_planar dequantize")
k16 = torch.tensor(list(range(-40, 40)), dtype=torch.int8).view(1, 1, 80)
s16 = torch.tensor([0.25, 0.5, 1.0, 2.0, 4.0], dtype=torch.float16).view(1, 1, 5)
wk = torch.tensor([(i - 40) * [0.25, 0.5, 1.0, 2.0, 4.0][i // 16] for i in range(80)]).view(1, 1, 80)
check(torch.equal(pft.dequantize_k(k16, s16), wk), "packed16 block 16 dequantize")


# ---- reference_attention against a scalar loop ------------------------------------------------------
def slopes(h, max_bias):
    n2 = 2 ** int(math.floor(math.log2(h)))
    m0, m1 = 2 ** (-max_bias / n2), 2 ** (-max_bias / 2 / n2)
    return [m0 ** (i + 1) if i < n2 else m1 ** (2 * (i - n2) + 1) for i in range(h)]


def scalar(q, k, v, lens, causal, window, mask, softcap, sinks, max_bias, mode, scale, q_pos):
    B, nq, hq, d = q.shape
    g = k.shape[2]
    sl = slopes(hq, max_bias) if max_bias > 0 else [1.0] * hq
    out = torch.zeros(B, nq, hq, d, dtype=torch.float64)
    lse = torch.zeros(B, nq, hq, dtype=torch.float64)
    for b in range(B):
        for i in range(nq):
            pos = int(q_pos[b][i]) if q_pos is not None else lens[b] - nq + i
            for h in range(hq):
                kh = h // (hq // g)
                logits = []
                for j in range(lens[b]):
                    if causal and j > pos:
                        continue
                    if window > 0 and j <= pos - window:
                        continue
                    s = sum(float(q[b, i, h, c]) * float(k[b, j, kh, c]) for c in range(d)) * scale
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    m = 0.0
                    if mask is not None:
                        if mask.dim() == 2:
                            m = float(mask[i, j])
                        elif mask.dim() == 3:
                            m = float(mask[b if mask.shape[0] > 1 else 0, i, j])
                        else:
                            m = float(mask[b if mask.shape[0] > 1 else 0, h if mask.shape[1] > 1 else 0, i, j])
                    if max_bias > 0 and mode == "ggml":
                        s += sl[h] * m
                    else:
                        s += m + (sl[h] * (j - pos) if max_bias > 0 else 0.0)
                    if s != float("-inf"):
                        logits.append((j, s))
                mx = max([s for _, s in logits] + ([float(sinks[h])] if sinks is not None else []), default=None)
                if mx is None:
                    lse[b, i, h] = float("-inf")
                    continue
                den = sum(math.exp(s - mx) for _, s in logits) + (math.exp(float(sinks[h]) - mx) if sinks is not None else 0)
                lse[b, i, h] = mx + math.log(den)
                for j, s in logits:
                    out[b, i, h] += math.exp(s - mx) / den * v[b, j, kh].double()
    return out, lse


torch.manual_seed(0)
B, NQ, HQ, G, D, L = 2, 3, 4, 2, 8, 10
q = torch.randn(B, NQ, HQ, D)
k = torch.randn(B, L, G, D)
v = torch.randn(B, L, G, D)
lens = [10, 6]
m3 = torch.randn(B, NQ, L)
m3[0, 1, 2] = float("-inf")
m4 = torch.randn(1, HQ, NQ, L)
llama_alibi = torch.tensor([[-abs(j - (lens[0] - NQ + i)) * 1.0 for j in range(L)] for i in range(NQ)])
cases = [
    dict(),
    dict(causal=False),
    dict(window=3),
    dict(softcap=2.0, scale=0.7),
    dict(mask=m3),
    dict(mask=m4, causal=False),
    dict(mask=llama_alibi, max_bias=8.0, mode="ggml"),
    dict(mask=m3, max_bias=8.0, mode="position"),
    dict(sinks=torch.tensor([0.5, -1.0, 2.0, 0.0])),
    dict(q_pos=torch.tensor([[2, 5, 9], [0, 1, 5]], dtype=torch.int32), window=4),
    dict(q_pos=torch.tensor([[0, 0, 0], [0, 0, 0]], dtype=torch.int32), window=1, mask=m3),
]
for cs in cases:
    a = dict(causal=True, window=0, mask=None, softcap=0.0, sinks=None, max_bias=0.0, mode="position", scale=D ** -0.5,
             q_pos=None)
    a.update(cs)
    want_o, want_l = scalar(q, k, v, lens, a["causal"], a["window"], a["mask"], a["softcap"], a["sinks"], a["max_bias"],
                            a["mode"], a["scale"], a["q_pos"])
    got_o, got_l = pft.reference_attention(q, k, v, lens, q_pos=a["q_pos"], causal=a["causal"], window=a["window"],
                                           mask=a["mask"], softcap=a["softcap"], sinks=a["sinks"],
                                           alibi_max_bias=a["max_bias"], alibi_mode=a["mode"], scale=a["scale"])
    eo = (got_o.double() - want_o).abs().max().item()
    fin = torch.isfinite(want_l)
    el = (got_l.double()[fin] - want_l[fin]).abs().max().item() if bool(fin.any()) else 0.0
    same_inf = bool((torch.isfinite(got_l) == fin).all())
    check(eo < 1e-5 and el < 1e-5 and same_inf, "reference %s: O err %.2e, lse err %.2e, finite %s" % (
        sorted(cs), eo, el, same_inf))

# ---- registration and the fake / meta implementation -----------------------------------------------
check(pft.REGISTRATION in ("custom_op", "library", "existing"), "ops registered: %s" % pft.REGISTRATION)
meta = dict(device="meta")
mq = torch.empty(2, 1, 8, 128, dtype=torch.float16, **meta)
mc = pft.alloc_cache(256, 2, 128, "q8_0", batch=2, device="meta")
ml = torch.empty(2, dtype=torch.int32, **meta)
mo = torch.empty_like(mq)
e = torch.empty(0, **meta)
ei = torch.empty(0, dtype=torch.int32, **meta)
op_args = [mq, mc["k_cache"], mc["k_scales"], mc["v_cache"], None, ml, mo, e, ei, None, None, None, None, None, "",
           "NHD", 0, 0, None, True, 0, 0.0, 0.0, "position", 0.0, "int8", 0, -1]
KV_LEN_HOST = 18  # op_args index of kv_len_host (int[]?, after max_kv_len)
try:
    torch.ops.packfa.attention(*op_args)
except Exception as ex:  # noqa: BLE001
    check(False, "fake/meta attention on a good call raised %s: %s" % (type(ex).__name__, ex))
bad = list(op_args)
bad[3] = torch.empty(2, 256, 2, 100, dtype=torch.uint8, **meta)
try:
    torch.ops.packfa.attention(*bad)
    check(False, "fake/meta attention accepted a bad v_cache")
except Exception as ex:  # noqa: BLE001 - the dispatcher may wrap it; the message must name the argument
    check("v_cache:" in str(ex), "fake/meta error names v_cache: %s" % ex)
# kv_len_host through the op: a host list is planned (and checked) by the fake / meta implementation
hl = list(op_args)
hl[KV_LEN_HOST] = [17, 256]
try:
    torch.ops.packfa.attention(*hl)
except Exception as ex:  # noqa: BLE001
    check(False, "fake/meta attention with kv_len_host raised %s: %s" % (type(ex).__name__, ex))
for wrong in ([17], [17, -1], [17, 257]):  # length != batch; entries outside [0, max_kv_len = 256]
    hl[KV_LEN_HOST] = wrong
    try:
        torch.ops.packfa.attention(*hl)
        check(False, "fake/meta attention accepted kv_len_host %r" % (wrong,))
    except Exception as ex:  # noqa: BLE001
        check("kv_len_host:" in str(ex), "fake/meta error names kv_len_host: %s" % ex)
try:
    torch.ops.packfa.pack_k(torch.empty(3, 2, 128, dtype=torch.float16, **meta), mc["k_cache"], mc["k_scales"], ei,
                            torch.empty(3, dtype=torch.int32, **meta), None, None, 0, "NHD", 0, -1)
    torch.ops.packfa.quantize_v(torch.empty(3, 2, 128, dtype=torch.float16, **meta), mc["v_cache"],
                                torch.empty(0, dtype=torch.float16, **meta), None, "q8_0", 0, "NHD", 0, -1)
except Exception as ex:  # noqa: BLE001
    check(False, "fake/meta pack_k / quantize_v raised %s: %s" % (type(ex).__name__, ex))
# the wrapper refuses CPU tensors with a named error before anything runs
try:
    pft.attention(torch.zeros(2, 1, 8, 128, dtype=torch.float16), mc["k_cache"], mc["k_scales"], mc["v_cache"], ml)
    check(False, "CPU q accepted")
except ValueError as ex:
    check(str(ex).startswith("q:"), "CPU q message: %s" % ex)
# kv_len_host must be a host copy: a device tensor is refused by name before any .tolist() (a sync)
for dev_lens in (torch.tensor([3, 4], dtype=torch.int32, device="meta"),):
    try:
        pft.attention(mq, mc["k_cache"], mc["k_scales"], mc["v_cache"], ml, kv_len_host=dev_lens)
        check(False, "kv_len_host on %s accepted" % dev_lens.device)
    except ValueError as ex:
        check(str(ex).startswith("kv_len_host:") and "host" in str(ex), "device kv_len_host message: %s" % ex)
check(pft._args.host_values(torch.tensor([3, 4])) == [3, 4], "a CPU kv_len_host tensor becomes a list")

if fails:
    print("test_torch_cpu: %d FAILED" % len(fails))
    sys.exit(1)
print("test_torch_cpu: all checks passed (torch %s, registration %s)" % (torch.__version__, pft.REGISTRATION))
