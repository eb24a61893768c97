"""packfa.torch's argument checks and stride derivation (python/packfa/_torch_args.py) on a fake
tensor class: no torch, no GPU. Each derived parameter set is also handed to libpackfa_c's own
validation (packfa_fa_workspace_bytes; pack / quantize with n_tokens = 0), which must accept it
(on a build without a GPU backend it answers not_compiled after validating), and every wrong
argument must raise the documented exception naming the argument.

    python3 tests/api/test_torch_args.py build-cpu/libpackfa_c.so
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import packfa  # noqa: E402
from packfa import _torch_args as A  # noqa: E402

LIB = packfa.load(sys.argv[1]) if len(sys.argv) > 1 else None
ES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}


class DType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    def __eq__(self, o):
        return isinstance(o, DType) and o.name == self.name


class Device:
    def __init__(self, s="cuda:0"):
        self.type, _, idx = s.partition(":")
        self.index = int(idx) if idx else None

    def __str__(self):
        return self.type + ("" if self.index is None else ":%d" % self.index)


_next = [0x1000000]


class T:
    """Just enough of torch.Tensor: dtype, device, shape, stride(), element_size(), numel(), data_ptr(),
    tolist() (of the values given, for host tensors)."""

    def __init__(self, shape, dtype, strides=None, device="cuda:0", ptr=None, values=None):
        self.shape = tuple(shape)
        self._values = values
        self.dtype = DType(dtype)
        self.device = Device(device)
        if strides is None:
            strides, acc = [], 1
            for n in reversed(self.shape):
                strides.insert(0, acc)
                acc *= max(n, 1)
        self._strides = tuple(strides)
        if ptr is None:
            ptr = _next[0]
            _next[0] += 1 << 24
        self._ptr = ptr

    def stride(self):
        return self._strides

    def element_size(self):
        return ES[self.dtype.name]

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def dim(self):
        return len(self.shape)

    def data_ptr(self):
        return self._ptr

    def tolist(self):
        if self.device.type != "cpu":
            raise AssertionError("tolist() of a %s tensor: a device sync packfa must not cause" % self.device)
        return list(self._values)

    def transpose(self, a, b):
        sh, st = list(self.shape), list(self._strides)
        sh[a], sh[b] = sh[b], sh[a]
        st[a], st[b] = st[b], st[a]
        return T(sh, self.dtype.name, st, str(self.device), self._ptr)

    def __getitem__(self, i):  # index dim 0
        return T(self.shape[1:], self.dtype.name, self._strides[1:], str(self.device),
                 self._ptr + i * self._strides[0] * self.element_size())


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def c_accepts_attention(kw, what):
    if LIB is None:
        return
    try:
        packfa.workspace_bytes(LIB, packfa.AttnParams(**kw))
    except packfa.Error as e:
        check(e.code != 1, "%s: libpackfa_c rejects the derived params: %s" % (what, e))


def c_accepts_pack(fn, cls, kw, what):
    if LIB is None:
        return
    try:
        fn(LIB, cls(**dict(kw, n_tokens=0)))
    except packfa.Error as e:
        check(False, "%s: libpackfa_c rejects the derived params: %s" % (what, e))


def expect(exc, name, fn, *a, **k):
    try:
        fn(*a, **k)
    except exc as e:
        check(str(e).startswith(name + ":"), "%s: message should start with %r: %r" % (name, name + ":", str(e)))
        return
    except Exception as e:  # noqa: BLE001
        check(False, "%s: expected %s, got %s: %s" % (name, exc.__name__, type(e).__name__, e))
        return
    check(False, "%s: no %s raised" % (name, exc.__name__))


B, NQ, HQ, G, D, CAP = 2, 1, 8, 2, 128, 256


def cache(v_format="q8_0", layout="NHD", batch=B, cap=CAP, g=G, d=D, block=32, paged_pages=0, page=0):
    if paged_pages:
        lead = (paged_pages, page)
    else:
        lead = (cap,) if batch is None else (batch, cap)

    def plane(last, dt):
        if layout == "HND":
            return T(lead[:-1] + (g, lead[-1], last), dt)
        return T(lead + (g, last), dt)

    vdt = {"f16": "float16", "bf16": "bfloat16", "q8_0": "uint8", "q4_0": "uint8", "q8_0_planar": "int8"}[v_format]
    return dict(k_cache=plane(d, "int8"), k_scales=plane(d // block, "float16"),
                v_cache=plane(A._V_PLANE[v_format][1](d), vdt),
                v_scales=plane(d // 32, "float16") if v_format == "q8_0_planar" else None)


def good(**change):
    c = cache()
    a = dict(q=T((B, NQ, HQ, D), "float16"), k_cache=c["k_cache"], k_scales=c["k_scales"], v_cache=c["v_cache"],
             kv_len=T((B,), "int32"), out=T((B, NQ, HQ, D), "float16"))
    a.update(change)
    return a


def plan(**a):
    a = dict(a)
    pos = [a.pop(n) for n in ("q", "k_cache", "k_scales", "v_cache", "kv_len")]
    return A.attention_plan(*pos, **a)


# ---- derived strides ------------------------------------------------------------------------
kw = plan(**good())
row = G * D
check(kw["k_strides"] == (CAP * row, row, D), "NHD k strides %s" % (kw["k_strides"],))
check(kw["k_scale_strides"] == (CAP * G * 8, G * 8, 8), "NHD k scale strides %s" % (kw["k_scale_strides"],))
check(kw["v_strides"] == (CAP * G * 136, G * 136, 136), "NHD v strides %s" % (kw["v_strides"],))
check(kw["q_strides"] == (NQ * HQ * D, HQ * D, D), "q strides %s" % (kw["q_strides"],))
check(kw["max_kv_len"] == CAP and kw["k_block"] == 32 and kw["v_format"] == 2 and kw["k_format"] == 0,
      "NHD scalars %s" % ({k: kw[k] for k in ("max_kv_len", "k_block", "v_format", "k_format")},))
check(kw["page_size"] == 0 and kw["block_table"] is None, "not paged")
c_accepts_attention(kw, "NHD q8_0")

# head-major: HND dims, and the same storage as an NHD view, give the same byte strides
h = cache(layout="HND")
kw_h = plan(**good(k_cache=h["k_cache"], k_scales=h["k_scales"], v_cache=h["v_cache"]), layout="HND")
check(kw_h["k_strides"] == (G * CAP * D, D, CAP * D), "HND k strides %s" % (kw_h["k_strides"],))
check(kw_h["v_strides"] == (G * CAP * 136, 136, CAP * 136), "HND v strides %s" % (kw_h["v_strides"],))
kw_v = plan(**good(k_cache=h["k_cache"].transpose(1, 2), k_scales=h["k_scales"].transpose(1, 2),
                   v_cache=h["v_cache"].transpose(1, 2)))
for f in ("k_strides", "k_scale_strides", "v_strides", "k", "v"):
    check(kw_v[f] == kw_h[f], "HND view vs layout=HND differ in %s: %s %s" % (f, kw_v[f], kw_h[f]))
c_accepts_attention(kw_h, "HND q8_0")

# 3-D cache (batch 1): no seq stride
c3 = cache(batch=None)
kw3 = plan(**good(q=T((1, 4, HQ, D), "float16"), out=T((1, 4, HQ, D), "float32"), kv_len=T((1,), "int32"),
                  k_cache=c3["k_cache"], k_scales=c3["k_scales"], v_cache=c3["v_cache"]), max_kv_len=100)
check(kw3["k_strides"] == (0, row, D) and kw3["max_kv_len"] == 100 and kw3["o_type"] == 0 and kw3["nq"] == 4,
      "3-D cache %s" % ({k: kw3[k] for k in ("k_strides", "max_kv_len", "o_type", "nq")},))
c_accepts_attention(kw3, "3-D cache")

# every V format, f16 K, D = 80 with block 16, D = 256
for vf, code in (("f16", 0), ("bf16", 1), ("q8_0", 2), ("q4_0", 3), ("q8_0_planar", 4)):
    c = cache(vf)
    kwv = plan(**good(k_cache=c["k_cache"], k_scales=c["k_scales"], v_cache=c["v_cache"]), v_scales=c["v_scales"])
    check(kwv["v_format"] == code, "%s inferred as %d" % (vf, kwv["v_format"]))
    check(kwv["v_strides"][2] == A.v_row_bytes(vf, D), "%s v row %s" % (vf, kwv["v_strides"]))
    if vf == "q8_0_planar":
        check(kwv["v_scale_strides"] == (CAP * G * 8, G * 8, 8), "planar scale strides %s" % (kwv["v_scale_strides"],))
    c_accepts_attention(kwv, "V " + vf)
f16k = T((B, CAP, G, D), "float16")
kwf = plan(**good(k_cache=f16k, k_scales=None, v_cache=T((B, CAP, G, D), "float16")))
check(kwf["k_format"] == 1 and kwf["k_strides"] == (CAP * G * D * 2, G * D * 2, D * 2) and kwf["k_scales"] is None,
      "f16 K %s" % (kwf["k_strides"],))
c_accepts_attention(kwf, "f16 K")
c80 = cache("f16", d=80, block=16)
kw80 = plan(**good(q=T((B, NQ, HQ, 80), "float16"), out=T((B, NQ, HQ, 80), "float16"), k_cache=c80["k_cache"],
                   k_scales=c80["k_scales"], v_cache=c80["v_cache"]))
check(kw80["k_block"] == 16 and kw80["k_scale_strides"][2] == 10, "D 80 block %d" % kw80["k_block"])
c_accepts_attention(kw80, "D 80")

# paged: [pages, page_size, G, X] + block_table
pg = cache(paged_pages=40, page=16)
bt = T((B, 8), "int32")
kwp = plan(**good(k_cache=pg["k_cache"], k_scales=pg["k_scales"], v_cache=pg["v_cache"]), block_table=bt)
check(kwp["page_size"] == 16 and kwp["num_pages"] == 40 and kwp["block_table_stride"] == 8 and
      kwp["max_kv_len"] == 128 and kwp["k_strides"] == (16 * row, row, D) and kwp["block_table"] == bt.data_ptr(),
      "paged %s" % ({k: kwp[k] for k in ("page_size", "num_pages", "block_table_stride", "max_kv_len", "k_strides")},))
c_accepts_attention(kwp, "paged")
pgh = cache(paged_pages=40, page=16, layout="HND")  # vLLM's HND pages [pages, G, page_size, X]
kwph = plan(**good(k_cache=pgh["k_cache"], k_scales=pgh["k_scales"], v_cache=pgh["v_cache"]), block_table=bt,
            layout="HND", page_size=16)
check(kwph["k_strides"] == (16 * row, D, 16 * D), "paged HND %s" % (kwph["k_strides"],))

# masks: [nq, L] broadcast, [B, nq, L], per-head [B, HQ, nq, L], ALiBi / sinks / q_pos / lse
for m, want in ((T((NQ, CAP), "float16"), (0, CAP, 0)), (T((B, NQ, CAP + 8), "float16"), (NQ * (CAP + 8), CAP + 8, 0)),
                (T((B, HQ, NQ, CAP), "float16"), (HQ * NQ * CAP, CAP, NQ * CAP)),
                (T((1, 1, NQ, CAP), "float16"), (0, CAP, 0))):
    kwm = plan(**good(), mask=m)
    got = kwm["mask_strides"] + (kwm["mask_head_stride"],)
    check(got == want, "mask %s strides %s, want %s" % (m.shape, got, want))
    c_accepts_attention(kwm, "mask %s" % (m.shape,))
kwx = plan(**good(), sinks=T((HQ,), "float32"), q_pos=T((B, NQ), "int32"), lse=T((B, NQ, HQ), "float32"),
           errors=T((3,), "int32"), alibi_max_bias=8.0, alibi_mode="ggml", causal=False, window=64, softcap=30.0,
           scale=0.1, dot="f16", num_splits=4, pdl=0, k_smooth_scale=T((G, D), "float32"))
check(kwx["alibi_mode"] == 1 and kwx["dot"] == 1 and kwx["causal"] == 0 and kwx["lse"] and kwx["errors"] and
      kwx["k_smooth_scale"], "options %s" % ({k: kwx[k] for k in ("alibi_mode", "dot", "causal")},))
c_accepts_attention(kwx, "options")
check(plan(**good(), lse=T((0,), "float32"))["lse"] is None, "an empty lse tensor means none")

# kv_len_host: the split planner's host copy of kv_len -> a ctypes int32 array the struct keeps alive
check(kw["kv_len_host"] is None, "no kv_len_host: None (NULL)")
for src in ([17, CAP], (0, 5), T((B,), "int64", device="cpu", values=[3, 200])):
    kwh = plan(**good(), kv_len_host=src)
    want = src.tolist() if isinstance(src, T) else list(src)
    arr = kwh["kv_len_host"]
    check(isinstance(arr, ctypes.Array) and arr._type_ is ctypes.c_int32 and list(arr) == want,
          "kv_len_host %r -> %r" % (src, arr))
    p = packfa.AttnParams(**kwh)
    check([p.kv_len_host[i] for i in range(B)] == want, "AttnParams.kv_len_host %r" % (src,))
    c_accepts_attention(kwh, "kv_len_host %r" % (src,))
check(plan(**good(), kv_len_host=[7, 8], pointers=False)["kv_len_host"] is None, "kv_len_host fake planning: None")
kwh = plan(**good(), kv_len_host=[100, 0], max_kv_len=100)
check(list(kwh["kv_len_host"]) == [100, 0], "kv_len_host == max_kv_len is in range")
c_accepts_attention(kwh, "kv_len_host at max_kv_len")
if LIB is not None:  # the C side checks the appended field itself (the struct layouts agree)
    for bad in ([5, -1], [5, 101]):
        try:
            packfa.workspace_bytes(LIB, packfa.AttnParams(**dict(kwh, kv_len_host=bad)))
            check(False, "libpackfa_c accepts kv_len_host %r" % (bad,))
        except packfa.Error as e:
            check(e.code == 1 and "kv_len_host" in str(e), "libpackfa_c on kv_len_host %r: %s" % (bad, e))

# ---- wrong arguments: the exception type and the argument's name -------------------------------
E = expect
E(TypeError, "q", plan, **good(q=T((B, NQ, HQ, D), "int32")))
E(TypeError, "q", plan, **good(q=[1, 2]))
E(ValueError, "q", plan, **good(q=T((B, NQ, HQ, D), "float16", device="cpu")))
E(ValueError, "q", plan, **good(q=T((B, HQ, D), "float16")))
E(ValueError, "q", plan, **good(q=T((B, NQ, HQ, 100), "float16")))
E(ValueError, "q", plan, **good(q=T((B, NQ, HQ, D), "float16", strides=(HQ * D * 2, HQ * D * 2, D * 2, 2))))
E(TypeError, "k_cache", plan, **good(k_cache=T((B, CAP, G, D), "float32")))
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, G, D), "int8", device="cuda:1")))
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, G, 64), "int8")))
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, 3, D), "int8"), k_scales=T((B, CAP, 3, 4), "float16"),
                                      v_cache=T((B, CAP, 3, 136), "uint8")))
E(ValueError, "k_cache", plan, **good(k_cache=T((3, CAP, G, D), "int8"), k_scales=T((3, CAP, G, 4), "float16"),
                                      v_cache=T((3, CAP, G, 136), "uint8")))
E(ValueError, "k_cache", plan, **good(k_cache=T((CAP, G, D), "int8"), k_scales=T((CAP, G, 4), "float16"),
                                      v_cache=T((CAP, G, 136), "uint8")))  # 3-D with batch 2
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, G, D), "int8", ptr=0x1000008)))  # payload not 16-aligned
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, G, D), "int8", strides=(CAP * G * 136, G * 136, 136, 1))))
E(ValueError, "k_cache", plan, **good(k_cache=T((B, CAP, G, D), "int8", strides=(CAP * G * D, G * D, D, 2))))
E(TypeError, "k_scales", plan, **good(k_scales=None))
E(TypeError, "k_scales", plan, **good(k_scales=T((B, CAP, G, 4), "float32")))
E(ValueError, "k_scales", plan, **good(k_scales=T((B, CAP, G, 5), "float16")))
E(ValueError, "k_scales", plan, **good(k_scales=T((B, CAP + 1, G, 4), "float16")))
E(ValueError, "k_scales", plan, **good(k_cache=T((B, CAP, G, D), "float16"), v_cache=T((B, CAP, G, D), "float16")))
E(ValueError, "v_cache", plan, **good(v_cache=T((B, CAP, G, 100), "uint8")))
E(ValueError, "v_cache", plan, **good(), v_format="q4_0")
E(ValueError, "v_format", plan, **good(), v_format="q5_0")
E(TypeError, "v_format", plan, **good(), v_format=3)
E(TypeError, "v_cache", plan, **good(v_cache=T((B, CAP, G, D), "float32")))
E(ValueError, "v_cache", plan, **good(v_cache=T((B, CAP + 1, G, 136), "uint8")))
E(ValueError, "v_cache", plan, **good(v_cache=T((B, CAP, G, 136), "uint8", strides=(CAP * (G * 136 + 1), G * 136 + 1, 136, 1))))
E(ValueError, "v_cache", plan, **good(v_cache=T((B, CAP, G, 136), "uint8", ptr=0x1000001)))
E(ValueError, "v_cache", plan, **good(v_cache=T((B, CAP, G, D), "float16", strides=(CAP * G * 68, G * 68, 68, 1))))
E(TypeError, "v_scales", plan, **good(v_cache=T((B, CAP, G, D), "int8")))
E(ValueError, "v_scales", plan, **good(v_cache=T((B, CAP, G, D), "int8")), v_scales=T((B, CAP, G, 8), "float16"))
E(ValueError, "v_scales", plan, **good(), v_scales=T((B, CAP, G, 4), "float16"))
E(ValueError, "v_format", plan, **good(q=T((B, NQ, HQ, 80), "float16"), out=T((B, NQ, HQ, 80), "float16"),
                                       k_cache=c80["k_cache"], k_scales=c80["k_scales"],
                                       v_cache=T((B, CAP, G, 80), "uint8")), v_format="q8_0")
E(TypeError, "kv_len", plan, **good(kv_len=T((B,), "int64")))
E(TypeError, "kv_len", plan, **good(kv_len=[5, 6]))
E(ValueError, "kv_len", plan, **good(kv_len=T((B + 1,), "int32")))
E(ValueError, "kv_len", plan, **good(kv_len=T((B,), "int32", device="cpu")))
E(ValueError, "kv_len", plan, **good(kv_len=T((B,), "int32", strides=(2,))))
E(TypeError, "out", plan, **good(out=None))
E(ValueError, "out", plan, **good(out=T((B, NQ, HQ + 1, D), "float16")))
E(TypeError, "out", plan, **good(out=T((B, NQ, HQ, D), "int8")))
E(ValueError, "lse", plan, **good(), lse=T((B, NQ), "float32"))
E(TypeError, "lse", plan, **good(), lse=T((B, NQ, HQ), "float16"))
E(ValueError, "errors", plan, **good(), errors=T((2,), "int32"))
E(TypeError, "q_pos", plan, **good(), q_pos=T((B, NQ), "int64"))
E(ValueError, "q_pos", plan, **good(), q_pos=T((B, NQ + 1), "int32"))
E(TypeError, "mask", plan, **good(), mask=T((B, NQ, CAP), "float32"))
E(ValueError, "mask", plan, **good(), mask=T((B, NQ, CAP - 1), "float16"))
E(ValueError, "mask", plan, **good(), mask=T((B, NQ + 1, CAP), "float16"))
E(ValueError, "mask", plan, **good(), mask=T((B + 1, NQ, CAP), "float16"))
E(ValueError, "mask", plan, **good(), mask=T((B, 3, NQ, CAP), "float16"))
E(ValueError, "mask", plan, **good(), mask=T((B, NQ, CAP), "float16", strides=(NQ * CAP * 2, CAP * 2, 2)))
E(ValueError, "sinks", plan, **good(), sinks=T((HQ + 1,), "float32"))
E(ValueError, "k_smooth_scale", plan, **good(), k_smooth_scale=T((G, D + 1), "float32"))
E(ValueError, "window", plan, **good(), window=-1)
E(TypeError, "window", plan, **good(), window=1.5)
E(ValueError, "softcap", plan, **good(), softcap=-1.0)
E(ValueError, "softcap", plan, **good(), softcap=float("nan"))
E(TypeError, "softcap", plan, **good(), softcap="big")
E(ValueError, "scale", plan, **good(), scale=0.0)
E(ValueError, "alibi_max_bias", plan, **good(), alibi_max_bias=float("inf"))
E(ValueError, "alibi_mode", plan, **good(), alibi_mode="slope")
E(ValueError, "dot", plan, **good(), dot="fp8")
E(TypeError, "causal", plan, **good(), causal=1)
E(ValueError, "max_kv_len", plan, **good(), max_kv_len=CAP + 1)
E(ValueError, "max_kv_len", plan, **good(), max_kv_len=0)
E(TypeError, "max_kv_len", plan, **good(), max_kv_len=True)
E(ValueError, "num_splits", plan, **good(), num_splits=-1)
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5])                 # length != batch
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5, 6, 7])
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5, -1])             # < 0
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5, CAP + 1])        # > max_kv_len (the capacity)
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5, 101], max_kv_len=100)  # > the max_kv_len given
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=[5, -1], pointers=False)   # fake planning checks too
E(TypeError, "kv_len_host", plan, **good(), kv_len_host=[5, True])
E(TypeError, "kv_len_host", plan, **good(), kv_len_host=[5, 6.0])
E(TypeError, "kv_len_host", plan, **good(), kv_len_host=5)
E(TypeError, "kv_len_host", plan, **good(), kv_len_host="56")
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=T((B,), "int32"))  # a CUDA tensor: must be on the host
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=T((B,), "int32", device="cuda:1"))
E(TypeError, "kv_len_host", plan, **good(), kv_len_host=T((B,), "float32", device="cpu", values=[1.0, 2.0]))
E(ValueError, "kv_len_host", plan, **good(), kv_len_host=T((1, B), "int32", device="cpu", values=[[1, 2]]))
try:
    plan(**good(), kv_len_host=T((B,), "int32"))
except ValueError as e:
    check("host" in str(e), "a CUDA kv_len_host: the message says it must be on the host: %s" % e)
E(ValueError, "pdl", plan, **good(), pdl=3)
E(ValueError, "layout", plan, **good(), layout="NCHW")
E(ValueError, "page_size", plan, **good(), page_size=16)
E(TypeError, "block_table", plan, **good(k_cache=pg["k_cache"], k_scales=pg["k_scales"], v_cache=pg["v_cache"]),
  block_table=T((B, 8), "int64"))
E(ValueError, "block_table", plan, **good(k_cache=pg["k_cache"], k_scales=pg["k_scales"], v_cache=pg["v_cache"]),
  block_table=T((B + 1, 8), "int32"))
E(ValueError, "page_size", plan, **good(k_cache=pg["k_cache"], k_scales=pg["k_scales"], v_cache=pg["v_cache"]),
  block_table=bt, page_size=32)
pg24 = cache(paged_pages=40, page=24)
E(ValueError, "k_cache", plan, **good(k_cache=pg24["k_cache"], k_scales=pg24["k_scales"], v_cache=pg24["v_cache"]),
  block_table=bt)

# ---- pack-on-write ---------------------------------------------------------------------------
c = cache()
knew = T((5, G, D), "float16")
sm = T((5,), "int32")
pk = A.pack_k_plan(knew, c["k_cache"], c["k_scales"], sm)
check(pk["dst_payload_strides"] == (0, row, D) and pk["n_slots"] == B * CAP and pk["page_size"] == 0 and
      pk["src_token_stride"] == G * D and pk["block"] == 32 and pk["slots"] == sm.data_ptr(), "pack flat %s" % (pk,))
c_accepts_pack(packfa.pack_k, packfa.PackKParams, pk, "pack 4-D flat")
h = cache(layout="HND")
E(ValueError, "k_cache", A.pack_k_plan, knew, h["k_cache"], h["k_scales"], sm, layout="HND")  # batched head-major
pkh = A.pack_k_plan(knew, h["k_cache"][1], h["k_scales"][1], sm, layout="HND")  # one sequence's view
check(pkh["dst_payload_strides"] == (0, D, CAP * D) and pkh["n_slots"] == CAP and
      pkh["dst_payload"] == h["k_cache"].data_ptr() + G * CAP * D, "pack HND sequence view %s" % (pkh,))
c_accepts_pack(packfa.pack_k, packfa.PackKParams, pkh, "pack HND view")
pkp = A.pack_k_plan(knew, pg["k_cache"], pg["k_scales"], sm, page_size=16)
check(pkp["dst_payload_strides"] == (16 * row, row, D) and pkp["n_slots"] == 640 and pkp["page_size"] == 16,
      "pack paged %s" % (pkp,))
c_accepts_pack(packfa.pack_k, packfa.PackKParams, pkp, "pack paged")
pkb = A.pack_k_plan(knew, c["k_cache"], c["k_scales"], None, base_slot=7)
check(pkb["slots"] is None and pkb["base_slot"] == 7, "pack base_slot")
E(TypeError, "k_new", A.pack_k_plan, T((5, G, D), "int8"), c["k_cache"], c["k_scales"], sm)
E(ValueError, "k_new", A.pack_k_plan, T((5, G + 1, D), "float16"), c["k_cache"], c["k_scales"], sm)
E(ValueError, "k_new", A.pack_k_plan, T((5, G, D), "float16", device="cpu"), c["k_cache"], c["k_scales"], sm)
E(TypeError, "k_cache", A.pack_k_plan, knew, T((B, CAP, G, D), "float16"), c["k_scales"], sm)
E(TypeError, "slot_mapping", A.pack_k_plan, knew, c["k_cache"], c["k_scales"], T((5,), "int64"))
E(ValueError, "slot_mapping", A.pack_k_plan, knew, c["k_cache"], c["k_scales"], T((6,), "int32"))
E(ValueError, "k_scales", A.pack_k_plan, knew, c["k_cache"], T((B, CAP, G, 3), "float16"), sm)
E(ValueError, "page_size", A.pack_k_plan, knew, pg["k_cache"], pg["k_scales"], sm, page_size=32)
E(ValueError, "page_size", A.pack_k_plan, knew, c3["k_cache"], c3["k_scales"], sm, page_size=16)
E(ValueError, "base_slot", A.pack_k_plan, knew, c["k_cache"], c["k_scales"], None, base_slot=-1)
E(ValueError, "counters", A.pack_k_plan, knew, c["k_cache"], c["k_scales"], sm, counters=T((3,), "int32"))
E(ValueError, "smooth_shift", A.pack_k_plan, knew, c["k_cache"], c["k_scales"], sm, smooth_shift=T((G,), "float32"))

vnew = T((5, G, D), "float32")
for vf in A.V_FORMATS:
    cv = cache(vf)
    qv = A.quantize_v_plan(vnew, cv["v_cache"], sm, v_scales=cv["v_scales"])
    check(qv["v_format"] == A.V_FORMATS.index(vf) and qv["dst_strides"] == (0, G * A.v_row_bytes(vf, D),
                                                                             A.v_row_bytes(vf, D)),
          "quantize %s %s" % (vf, qv["dst_strides"]))
    c_accepts_pack(packfa.quantize_v, packfa.QuantizeVParams, qv, "quantize " + vf)
E(ValueError, "v_cache", A.quantize_v_plan, vnew, c["v_cache"], sm, v_format="q4_0")
E(TypeError, "v_scales", A.quantize_v_plan, vnew, cache("q8_0_planar")["v_cache"], sm)
E(ValueError, "slot_mapping", A.quantize_v_plan, vnew, c["v_cache"], T((5,), "int32", device="cpu"))
E(ValueError, "v_cache", A.quantize_v_plan, T((5, G, 64), "float16"), c["v_cache"], sm)  # rows of D = 128
E(ValueError, "v_new", A.quantize_v_plan, T((5, G, 100), "float16"), c["v_cache"], sm)
E(ValueError, "v_new", A.quantize_v_plan, T((5, G + 1, D), "float16"), c["v_cache"], sm)
E(ValueError, "v_cache", A.quantize_v_plan, vnew, h["v_cache"], sm, layout="HND")

if failures:
    print("torch args: %d FAILED" % len(failures))
    sys.exit(1)
print("torch args: all checks passed%s" % ("" if LIB else " (no library given: C-side validation not exercised)"))
