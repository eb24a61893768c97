"""Argument checks and stride derivation of packfa.torch, without importing torch.

Everything here works on duck-typed tensors (``.dtype``, ``.device``, ``.shape``,
``.stride()``, ``.element_size()``, ``.numel()``, ``.data_ptr()``), so it runs on real torch
tensors, on torch.compile's fake tensors (``pointers=False``: no ``data_ptr``), and on the
fake tensor class of tests/api/test_torch_args.py (no torch, no GPU). Each ``*_plan`` either
raises ``TypeError`` / ``ValueError`` whose message starts with the argument's name, or returns
the keyword arguments of the ctypes struct (packfa.AttnParams / PackKParams / QuantizeVParams).

Cache planes are described by their logical dims ``[..., slot, kv_head, last]`` (NHD, vLLM's
and llama.cpp's token-major order); ``layout="HND"`` means the tensors' dims are
``[..., kv_head, slot, last]`` instead. Either way any strides work (a head-major cache is
also just an NHD view with other strides, e.g. ``cache_hnd.transpose(-3, -2)``): the byte
strides {seq, slot, head} come from the tensors' own strides.
"""

import ctypes
import functools
import math
import threading

# While a plan runs for a fake / meta implementation (pointers=False), "meta" counts as a device:
# torch < 2.2 traces with meta tensors (a Meta kernel), later versions with fake CUDA tensors.
_FAKE = threading.local()


def _fake_aware(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        prev = getattr(_FAKE, "on", False)
        _FAKE.on = not k.get("pointers", True)
        try:
            return fn(*a, **k)
        finally:
            _FAKE.on = prev
    return wrapper

HEAD_DIMS = (64, 80, 96, 112, 128, 256)
PAGE_SIZES = (16, 32, 64, 128, 256)
V_FORMATS = ("f16", "bf16", "q8_0", "q4_0", "q8_0_planar")
DOTS = ("int8", "f16")
ALIBI_MODES = ("position", "ggml")
LAYOUTS = ("NHD", "HND")
DTYPE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}  # packfa.DTYPE f32 / f16 / bf16

# V plane per format: (tensor dtype, row length in elements as a function of D, alignment)
_V_PLANE = {
    "f16": ("float16", lambda d: d, 16),
    "bf16": ("bfloat16", lambda d: d, 16),
    "q8_0": ("uint8", lambda d: 34 * d // 32, 2),
    "q4_0": ("uint8", lambda d: 18 * d // 32, 2),
    "q8_0_planar": ("int8", lambda d: d, 16),
}


def v_row_bytes(v_format, head_dim):
    """Bytes of one (slot, KV head) V row (docs/format.md)."""
    dt, n, _ = _V_PLANE[v_format]
    return n(head_dim) * (2 if dt in ("float16", "bfloat16") else 1)


# ---- small helpers ----------------------------------------------------------------------------

def _te(name, msg):
    return TypeError("%s: %s" % (name, msg))


def _ve(name, msg):
    return ValueError("%s: %s" % (name, msg))


def dtype_name(t):
    """'float16', 'int8', ... for a torch dtype (or anything whose str() is 'torch.<name>')."""
    s = str(t.dtype)
    return s[6:] if s.startswith("torch.") else s


def is_tensor(t):
    return all(hasattr(t, a) for a in ("dtype", "device", "shape", "stride", "element_size"))


def _tensor(name, t, dtypes, device=None, dims=None, optional=False):
    """Type, dtype, device and rank of one argument; returns (shape, strides) as tuples."""
    if t is None:
        if optional:
            return None
        raise _te(name, "is required (a CUDA tensor)")
    if not is_tensor(t):
        raise _te(name, "must be a torch.Tensor, got %s" % type(t).__name__)
    dn = dtype_name(t)
    if dn not in dtypes:
        raise _te(name, "must have dtype %s, got %s" % (" or ".join("torch." + d for d in dtypes), "torch." + dn))
    if t.device.type != "cuda" and not (t.device.type == "meta" and getattr(_FAKE, "on", False)):
        raise _ve(name, "must be on a CUDA device, got %s" % (t.device,))
    if device is not None and t.device.index != device.index:
        raise _ve(name, "must be on %s (the device of q), got %s" % (device, t.device))
    shape, strides = tuple(t.shape), tuple(t.stride())
    if dims is not None and len(shape) not in dims:
        raise _ve(name, "must have %s dims, got shape %s" % (" or ".join(str(d) for d in dims), list(shape)))
    return shape, strides


def _contiguous(name, shape, strides):
    """Row-major (dims of size 1 may have any stride)."""
    want = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            raise _ve(name, "must be contiguous, got shape %s strides %s" % (list(shape), list(strides)))
        want *= n


def _last_contiguous(name, shape, strides):
    if shape[-1] != 1 and strides[-1] != 1:
        raise _ve(name, "the last dim must be contiguous (stride 1), got strides %s" % (list(strides),))


_INT32_MAX = 2**31 - 1  # the C struct's int fields


def _int(name, v, lo=None, hi=None):
    # bool is an int subclass but never a count; other integer types (numpy, SymInt) have __index__
    if isinstance(v, (bool, float)) or not (isinstance(v, int) or hasattr(v, "__index__") or
                                            type(v).__name__ == "SymInt"):
        raise _te(name, "must be an int, got %s" % type(v).__name__)
    if lo is not None and v < lo:
        raise _ve(name, "must be >= %d, got %s" % (lo, v))
    if hi is not None and v > hi:
        raise _ve(name, "must be <= %d, got %s" % (hi, v))
    return v


def _float(name, v, allow_zero=True):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _te(name, "must be a float, got %s" % type(v).__name__)
    v = float(v)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise _ve(name, "must be finite and %s, got %r" % (">= 0" if allow_zero else "> 0", v))
    return v


def _choice(name, v, choices):
    if not isinstance(v, str):
        raise _te(name, "must be a str (one of %s), got %s" % (", ".join(choices), type(v).__name__))
    if v not in choices:
        raise _ve(name, "must be one of %s, got %r" % (", ".join(choices), v))
    return v


_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def host_values(kv_len_host, name="kv_len_host"):
    """None, or the entries of a host sequence / CPU integer tensor (1-D) as a list. A device
    tensor is refused: reading it would synchronize the device (kv_len is the device copy)."""
    if kv_len_host is None:
        return None
    if is_tensor(kv_len_host):
        if kv_len_host.device.type != "cpu":
            raise _ve(name, "must be on the host (a list of ints or a CPU tensor: reading a device tensor would "
                      "synchronize the device; kv_len is the device copy), got a tensor on %s" % (kv_len_host.device,))
        dn = dtype_name(kv_len_host)
        if dn not in _INT_DTYPES:
            raise _te(name, "a tensor must have an integer dtype, got torch.%s" % dn)
        if len(kv_len_host.shape) != 1:
            raise _ve(name, "must be 1-D [batch], got shape %s" % (list(kv_len_host.shape),))
        return kv_len_host.tolist()
    if isinstance(kv_len_host, (str, bytes)) or not hasattr(kv_len_host, "__len__"):
        raise _te(name, "must be None, a sequence of ints or a CPU integer tensor, got %s"
                  % type(kv_len_host).__name__)
    return list(kv_len_host)


def _host_lens(kv_len_host, batch, max_kv_len):
    """The split planner's host copy of kv_len: None, a sequence of ints or a CPU integer tensor
    of length batch, each entry in [0, max_kv_len]. Returns the entries as a list (or None)."""
    name = "kv_len_host"
    values = host_values(kv_len_host, name)
    if values is None:
        return None
    if len(values) != batch:
        raise _ve(name, "must have batch = %d entries (one kv length per sequence), got %d" % (batch, len(values)))
    for i, v in enumerate(values):
        if isinstance(v, (bool, float)) or not (isinstance(v, int) or hasattr(v, "__index__") or
                                                type(v).__name__ == "SymInt"):
            raise _te(name, "entry %d must be an int, got %s" % (i, type(v).__name__))
        if v < 0 or v > max_kv_len:
            raise _ve(name, "entry %d must be in [0, max_kv_len = %d], got %s" % (i, max_kv_len, v))
    return values


def _ptr(t, pointers):
    return t.data_ptr() if (pointers and t is not None) else None


def _nhd(shape, strides, layout):
    """Logical [..., slot, head, last] from the tensor's dims (HND: [..., head, slot, last])."""
    if layout == "HND" and len(shape) >= 3:
        shape = shape[:-3] + (shape[-2], shape[-3], shape[-1])
        strides = strides[:-3] + (strides[-2], strides[-3], strides[-1])
    return shape, strides


class _Plane:
    """One cache plane: logical shape, element strides, element size and pointer."""

    def __init__(self, name, t, dtypes, device, layout, dims, pointers):
        shape, strides = _tensor(name, t, dtypes, device, dims)
        self.name, self.t = name, t
        self.shape, self.strides = _nhd(shape, strides, layout)
        self.es = t.element_size()
        self.ptr = _ptr(t, pointers)
        _last_contiguous(name, self.shape, self.strides)

    def byte_strides(self, seq_from_dim0):
        s = self.strides
        seq = s[0] * self.es if seq_from_dim0 else 0
        return (seq, s[-3] * self.es, s[-2] * self.es)

    def check_align(self, strides, align, what):
        for axis, v in zip(("seq", "slot", "head"), strides):
            if v % align:
                raise _ve(self.name, "%s stride must be a multiple of %d bytes (%s), got %d bytes"
                          % (axis, align, what, v))
        if self.ptr is not None and self.ptr % align:
            raise _ve(self.name, "data must be %d-byte aligned (%s), got address 0x%x" % (align, what, self.ptr))


def _same_lead(plane, ref, name_ref):
    if plane.shape[:-1] != ref.shape[:-1]:
        dims = "[pages, page_size, kv_heads]" if len(ref.shape) == 4 else "[..., slots, kv_heads]"
        raise _ve(plane.name, "leading dims %s must equal %s's %s (%s)"
                  % (list(plane.shape[:-1]), name_ref, list(ref.shape[:-1]), dims))


def infer_v_format(v_cache, v_scales, head_dim):
    """f16 / bf16 from the dtype; int8 = q8_0_planar; uint8 rows of 34·D/32 (q8_0) or 18·D/32
    (q4_0) bytes."""
    if not is_tensor(v_cache):
        raise _te("v_cache", "must be a torch.Tensor, got %s" % type(v_cache).__name__)
    dn = dtype_name(v_cache)
    if dn == "float16":
        return "f16"
    if dn == "bfloat16":
        return "bf16"
    if dn == "int8":
        return "q8_0_planar"
    if dn == "uint8" and len(v_cache.shape) >= 1:
        last = v_cache.shape[-1]
        if last == 34 * head_dim // 32 and head_dim % 32 == 0:
            return "q8_0"
        if last == 18 * head_dim // 32 and head_dim % 32 == 0:
            return "q4_0"
        raise _ve("v_cache", "uint8 rows of %s bytes are neither q8_0 (%d) nor q4_0 (%d) for head_dim %d"
                  % (last, 34 * head_dim // 32, 18 * head_dim // 32, head_dim))
    raise _te("v_cache", "must have dtype torch.float16, torch.bfloat16, torch.uint8 (q8_0 / q4_0 blocks) or "
              "torch.int8 (q8_0_planar), got torch.%s" % dn)


def _v_planes(v_cache, v_scales, v_format, head_dim, device, layout, dims, pointers, name="v_cache",
              scales_name="v_scales"):
    if v_format is None:
        v_format = infer_v_format(v_cache, v_scales, head_dim)
    _choice("v_format", v_format, V_FORMATS)
    dt, n, align = _V_PLANE[v_format]
    if v_format in ("q8_0", "q4_0", "q8_0_planar") and head_dim % 32:
        raise _ve("v_format", "%s needs head_dim %% 32 == 0, got head_dim %d" % (v_format, head_dim))
    v = _Plane(name, v_cache, (dt,), device, layout, dims, pointers)
    if v.shape[-1] != n(head_dim):
        unit = "bytes" if dt in ("uint8", "int8") else "values"
        raise _ve(name, "%s rows must hold %d %s (head_dim %d), got last dim %d"
                  % (v_format, n(head_dim), unit, head_dim, v.shape[-1]))
    vs = None
    if v_format == "q8_0_planar":
        if v_scales is None:
            raise _te(scales_name, "is required for q8_0_planar (fp16 block scales, [..., kv_heads, head_dim/32])")
        vs = _Plane(scales_name, v_scales, ("float16",), device, layout, dims, pointers)
        if vs.shape[-1] != head_dim // 32:
            raise _ve(scales_name, "last dim must be head_dim/32 = %d, got %d" % (head_dim // 32, vs.shape[-1]))
    elif v_scales is not None and not (hasattr(v_scales, "numel") and v_scales.numel() == 0):
        raise _ve(scales_name, "only q8_0_planar has a scale plane (v_format %s)" % v_format)
    return v_format, v, vs, align


def _k_planes(k_cache, k_scales, head_dim, device, layout, dims, pointers, name="k_cache",
              scales_name="k_scales", allow_f16=True):
    if not is_tensor(k_cache):
        raise _te(name, "must be a torch.Tensor, got %s" % type(k_cache).__name__)
    kdt = ("int8", "float16") if allow_f16 else ("int8",)
    k = _Plane(name, k_cache, kdt, device, layout, dims, pointers)
    packed = dtype_name(k_cache) == "int8"
    if k.shape[-1] != head_dim:
        raise _ve(name, "last dim must be head_dim = %d, got %d" % (head_dim, k.shape[-1]))
    ks, block = None, 0
    if packed:
        if k_scales is None:
            raise _te(scales_name, "is required for an int8 (packed16) K cache: fp16 [..., kv_heads, head_dim/32]")
        ks = _Plane(scales_name, k_scales, ("float16",), device, layout, dims, pointers)
        nb = ks.shape[-1]
        block = head_dim // nb if nb and head_dim % nb == 0 else 0
        if block not in (16, 32):
            raise _ve(scales_name, "last dim must be head_dim/32 = %d or head_dim/16 = %d (the block size), got %d"
                      % (head_dim // 32, head_dim // 16, nb))
        _same_lead(ks, k, name)
    elif k_scales is not None:
        raise _ve(scales_name, "must be None for an fp16 K cache (only int8 packed16 K has scales)")
    return k, ks, packed, block


# ---- attention -------------------------------------------------------------------------------

@_fake_aware
def attention_plan(q, k_cache, k_scales, v_cache, kv_len, *, v_scales=None, v_format=None, block_table=None,
                   page_size=0, layout="NHD", q_pos=None, causal=True, window=0, mask=None, softcap=0.0,
                   sinks=None, alibi_max_bias=0.0, alibi_mode="position", scale=None, dot="int8", out=None,
                   lse=None, errors=None, k_smooth_scale=None, max_kv_len=None, kv_len_host=None, num_splits=0,
                   pdl=-1, pointers=True):
    """Checks every argument of packfa.torch.attention; returns packfa.AttnParams kwargs.

    q: [batch, nq, n_q_heads, D] f16/bf16/f32. Caches (NHD logical dims): contiguous
    [batch, slots, kv_heads, X] (or [slots, kv_heads, X] when batch == 1), paged (block_table
    given) [pages, page_size, kv_heads, X]; X = D (int8 payload / fp16 K / fp16, bf16 V /
    int8 q8_0_planar V), D/32 or D/16 (fp16 scales), 34·D/32 or 18·D/32 (uint8 q8_0 / q4_0 V).
    kv_len_host: optional host copy of kv_len (a sequence of ints or a CPU integer tensor, each in
    [0, max_kv_len]); returned as a ctypes int32 array (None with pointers=False).
    """
    layout = _choice("layout", layout, LAYOUTS)
    qs, qst = _tensor("q", q, ("float16", "bfloat16", "float32"), None, (4,))
    device = q.device
    batch, nq, hq, d = qs
    if d not in HEAD_DIMS:
        raise _ve("q", "head_dim (last dim) must be one of %s, got %d" % (", ".join(map(str, HEAD_DIMS)), d))
    if batch < 1 or nq < 1 or hq < 1:
        raise _ve("q", "batch, nq and n_q_heads must be >= 1, got shape %s" % (list(qs),))
    _last_contiguous("q", qs, qst)
    paged = block_table is not None
    dims = (4,) if (paged or batch > 1) else (3, 4)
    k, ks, packed, block = _k_planes(k_cache, k_scales, d, device, layout, dims, pointers)
    g = k.shape[-2]
    if g < 1 or hq % g:
        raise _ve("k_cache", "kv_heads (dim -2 in NHD) = %d must divide n_q_heads = %d" % (g, hq))
    v_format, v, vs, valign = _v_planes(v_cache, v_scales, v_format, d, device, layout, dims, pointers)
    _same_lead(v, k, "k_cache")
    if vs is not None:
        _same_lead(vs, k, "k_cache")

    page_size = _int("page_size", page_size, 0)
    table_stride, num_pages = 0, 0
    if paged:
        bs, bst = _tensor("block_table", block_table, ("int32",), device, (2,))
        if bs[0] != batch:
            raise _ve("block_table", "must have batch = %d rows, got shape %s" % (batch, list(bs)))
        _last_contiguous("block_table", bs, bst)
        ps = k.shape[1]
        if page_size and page_size != ps:
            raise _ve("page_size", "is %d but k_cache holds pages of %d slots (dim 1 in NHD)" % (page_size, ps))
        if ps not in PAGE_SIZES:
            raise _ve("k_cache", "page size (dim 1 in NHD) must be one of %s, got %d"
                      % (", ".join(map(str, PAGE_SIZES)), ps))
        page_size, table_stride, num_pages = ps, bst[0], k.shape[0]
        capacity = bs[1] * ps
    else:
        if page_size:
            raise _ve("page_size", "is %d but no block_table was given" % page_size)
        if len(k.shape) == 4 and k.shape[0] != batch:
            raise _ve("k_cache", "dim 0 must be batch = %d (or pass block_table for a paged cache), got shape %s"
                      % (batch, list(k.shape)))
        capacity = k.shape[-3]
    seq_dim0 = len(k.shape) == 4

    if max_kv_len is None:
        max_kv_len = capacity
    max_kv_len = _int("max_kv_len", max_kv_len, 1, capacity)

    # byte strides and the alignment the kernels rely on (validate.cpp)
    kst = k.byte_strides(seq_dim0)
    k.check_align(kst, 16, "packed16 payload rows" if packed else "f16 K rows")
    kss = (0, 0, 0)
    if packed:
        kss = ks.byte_strides(seq_dim0)
        ks.check_align(kss, 2, "fp16 scales")
    vst = v.byte_strides(seq_dim0)
    v.check_align(vst, valign, v_format + " V rows")
    vss = (0, 0, 0)
    if vs is not None:
        vss = vs.byte_strides(seq_dim0)
        vs.check_align(vss, 2, "fp16 scales")

    ls, lst = _tensor("kv_len", kv_len, ("int32",), device, (1,))
    if ls[0] != batch:
        raise _ve("kv_len", "must have shape [batch] = [%d], got %s" % (batch, list(ls)))
    _contiguous("kv_len", ls, lst)
    host_lens = _host_lens(kv_len_host, batch, max_kv_len)
    kv_len_host = None
    if host_lens is not None and pointers:
        kv_len_host = (ctypes.c_int32 * batch)(*(int(v) for v in host_lens))

    # outputs
    if out is None:
        raise _te("out", "is required here (packfa.torch.attention allocates it when you pass None)")
    os_, ost = _tensor("out", out, ("float16", "bfloat16", "float32"), device, (4,))
    if os_ != qs:
        raise _ve("out", "must have q's shape %s, got %s" % (list(qs), list(os_)))
    _last_contiguous("out", os_, ost)
    lse_ptr = None
    if lse is not None and lse.numel() != 0:
        lss, lsst = _tensor("lse", lse, ("float32",), device, (3,))
        if lss != (batch, nq, hq):
            raise _ve("lse", "must have shape [batch, nq, n_q_heads] = %s, got %s" % ([batch, nq, hq], list(lss)))
        _contiguous("lse", lss, lsst)
        lse_ptr = _ptr(lse, pointers)
    err_ptr = None
    if errors is not None and errors.numel() != 0:
        es, est = _tensor("errors", errors, ("int32",), device, (1,))
        if es[0] != 3:
            raise _ve("errors", "must have shape [3] (kv_len, q_pos, page id counters), got %s" % (list(es),))
        _contiguous("errors", es, est)
        err_ptr = _ptr(errors, pointers)

    # optional inputs
    qpos_ptr = None
    if q_pos is not None:
        ps_, pst = _tensor("q_pos", q_pos, ("int32",), device, (2,))
        if ps_ != (batch, nq):
            raise _ve("q_pos", "must have shape [batch, nq] = %s, got %s" % ([batch, nq], list(ps_)))
        _contiguous("q_pos", ps_, pst)
        qpos_ptr = _ptr(q_pos, pointers)
    mask_ptr, mseq, mrow, mhead = None, 0, 0, 0
    if mask is not None:
        ms, mst = _tensor("mask", mask, ("float16",), device, (2, 3, 4))
        _last_contiguous("mask", ms, mst)
        if ms[-2] != nq:
            raise _ve("mask", "dim -2 must be nq = %d (one row per query row), got shape %s" % (nq, list(ms)))
        if ms[-1] < max_kv_len:
            raise _ve("mask", "last dim must cover max_kv_len = %d keys, got %d" % (max_kv_len, ms[-1]))
        if len(ms) >= 3:
            if ms[0] not in (1, batch):
                raise _ve("mask", "dim 0 must be batch = %d or 1, got shape %s" % (batch, list(ms)))
            mseq = mst[0] if ms[0] > 1 else 0
        if len(ms) == 4:
            if ms[1] not in (1, hq):
                raise _ve("mask", "dim 1 must be n_q_heads = %d or 1, got shape %s" % (hq, list(ms)))
            mhead = mst[1] if ms[1] > 1 else 0
        mrow = mst[-2]
        mask_ptr = _ptr(mask, pointers)
    sinks_ptr = None
    if sinks is not None:
        ss, sst = _tensor("sinks", sinks, ("float32",), device, (1,))
        if ss[0] != hq:
            raise _ve("sinks", "must have shape [n_q_heads] = [%d], got %s" % (hq, list(ss)))
        _contiguous("sinks", ss, sst)
        sinks_ptr = _ptr(sinks, pointers)
    smooth_ptr = None
    if k_smooth_scale is not None:
        if not packed:
            raise _ve("k_smooth_scale", "smoothing applies to an int8 (packed16) K cache only")
        ss, sst = _tensor("k_smooth_scale", k_smooth_scale, ("float32",), device, (2,))
        if ss != (g, d):
            raise _ve("k_smooth_scale", "must have shape [kv_heads, head_dim] = %s, got %s" % ([g, d], list(ss)))
        _contiguous("k_smooth_scale", ss, sst)
        smooth_ptr = _ptr(k_smooth_scale, pointers)

    # scalars
    if not isinstance(causal, bool):
        raise _te("causal", "must be a bool, got %s" % type(causal).__name__)
    window = _int("window", window, 0, _INT32_MAX)
    softcap = _float("softcap", softcap)
    alibi_max_bias = _float("alibi_max_bias", alibi_max_bias)
    alibi_mode = _choice("alibi_mode", alibi_mode, ALIBI_MODES)
    scale = 0.0 if scale is None else _float("scale", scale, allow_zero=False)
    dot = _choice("dot", dot, DOTS)
    num_splits = _int("num_splits", num_splits, 0, _INT32_MAX)
    if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
        raise _ve("pdl", "must be -1 (auto), 0 or 1, got %r" % (pdl,))

    return dict(
        batch=batch, nq=nq, n_q_heads=hq, n_kv_heads=g, head_dim=d, max_kv_len=max_kv_len,
        q_type=DTYPE_CODE[dtype_name(q)], q=_ptr(q, pointers), q_strides=(qst[0], qst[1], qst[2]),
        k_format=0 if packed else 1, k=k.ptr, k_strides=kst,
        k_scales=ks.ptr if packed else None, k_scale_strides=kss, k_block=block or 32,
        k_smooth_scale=smooth_ptr,
        v_format=V_FORMATS.index(v_format), v=v.ptr, v_strides=vst,
        o_type=DTYPE_CODE[dtype_name(out)], o=_ptr(out, pointers), o_strides=(ost[0], ost[1], ost[2]),
        kv_len=_ptr(kv_len, pointers), q_pos=qpos_ptr, scale=scale, causal=int(causal), window=window,
        mask=mask_ptr, mask_strides=(mseq, mrow), softcap=softcap, sinks=sinks_ptr,
        alibi_max_bias=alibi_max_bias, lse=lse_ptr, dot=DOTS.index(dot), num_splits=num_splits, pdl=pdl,
        v_scales=vs.ptr if vs is not None else None, v_scale_strides=vss,
        block_table=_ptr(block_table, pointers) if paged else None, block_table_stride=table_stride,
        page_size=page_size, num_pages=num_pages, mask_head_stride=mhead,
        alibi_mode=ALIBI_MODES.index(alibi_mode), errors=err_ptr, kv_len_host=kv_len_host,
    )


# ---- pack-on-write -----------------------------------------------------------------------------

def _write_geometry(plane_list, page_size, name):
    """(seq_dim0, n_slots, page_size) of a cache written at flat or paged slots.

    3-D [slots, heads, X]: flat slots. 4-D with page_size > 0: [pages, page_size, heads, X]
    (slot = page · page_size + offset, vLLM's slot_mapping). 4-D with page_size 0: a batched
    cache [batch, len, heads, X] addressed by flat slots b · len + j, which needs dim 0 to
    continue dim 1 (stride(0) == len · stride(1)) in every plane.
    """
    first = plane_list[0]
    if len(first.shape) == 3:
        if page_size:
            raise _ve("page_size", "is %d but %s is 3-D [slots, kv_heads, X] (a paged cache is "
                      "[pages, page_size, kv_heads, X])" % (page_size, name))
        return False, first.shape[0], 0
    if page_size:
        if first.shape[1] != page_size:
            raise _ve("page_size", "is %d but %s holds pages of %d slots (dim 1 in NHD)"
                      % (page_size, name, first.shape[1]))
        if page_size not in PAGE_SIZES:
            raise _ve("page_size", "must be one of %s, got %d" % (", ".join(map(str, PAGE_SIZES)), page_size))
        return True, first.shape[0] * page_size, page_size
    for p in plane_list:
        if p.shape[0] > 1 and p.strides[0] != p.shape[1] * p.strides[1]:
            raise _ve(p.name, "a batched cache [batch, len, kv_heads, X] is written at flat slots b*len + j, "
                      "which needs stride(0) == len * stride(slot); this one has strides %s (e.g. head-major): "
                      "write one sequence's view (%s[b]) or pass page_size" % (list(p.strides), p.name))
    return False, first.shape[0] * first.shape[1], 0


def _source(name, t, g, d, device):
    ss, sst = _tensor(name, t, ("float16", "bfloat16", "float32"), device, (3,))
    if ss[1] != g or ss[2] != d:
        raise _ve(name, "must have shape [n_tokens, kv_heads, head_dim] = [n, %d, %d], got %s" % (g, d, list(ss)))
    _last_contiguous(name, ss, sst)
    return ss[0], sst


def _slots(slot_mapping, n_tokens, base_slot, device, pointers):
    base_slot = _int("base_slot", base_slot, 0)
    if slot_mapping is None:
        return None, base_slot
    ss, sst = _tensor("slot_mapping", slot_mapping, ("int32",), device, (1,))
    if ss[0] != n_tokens:
        raise _ve("slot_mapping", "must have shape [n_tokens] = [%d], got %s" % (n_tokens, list(ss)))
    _contiguous("slot_mapping", ss, sst)
    return _ptr(slot_mapping, pointers), base_slot


@_fake_aware
def pack_k_plan(k_new, k_cache, k_scales, slot_mapping, *, page_size=0, layout="NHD", base_slot=0,
                smooth_shift=None, smooth_scale=None, counters=None, pdl=-1, pointers=True):
    """Checks of packfa.torch.pack_k_; returns packfa.PackKParams kwargs."""
    layout = _choice("layout", layout, LAYOUTS)
    if not is_tensor(k_cache):
        raise _te("k_cache", "must be a torch.Tensor, got %s" % type(k_cache).__name__)
    if dtype_name(k_cache) != "int8":
        raise _te("k_cache", "must have dtype torch.int8 (the packed16 payload), got torch.%s" % dtype_name(k_cache))
    _tensor("k_cache", k_cache, ("int8",), None, (3, 4))
    device = k_cache.device
    d = k_cache.shape[-1]
    if d not in HEAD_DIMS:
        raise _ve("k_cache", "head_dim (last dim) must be one of %s, got %d" % (", ".join(map(str, HEAD_DIMS)), d))
    k, ks, _, block = _k_planes(k_cache, k_scales, d, device, layout, (3, 4), pointers, allow_f16=False)
    g = k.shape[-2]
    n, sst = _source("k_new", k_new, g, d, device)
    page_size = _int("page_size", page_size, 0)
    paged, n_slots, page_size = _write_geometry([k, ks], page_size, "k_cache")
    kst, kss = k.byte_strides(paged), ks.byte_strides(paged)
    k.check_align(kst, 16, "packed16 payload rows")
    ks.check_align(kss, 2, "fp16 scales")
    slots, base_slot = _slots(slot_mapping, n, base_slot, device, pointers)
    sm_shift = sm_scale = cnt = None
    for nm, t in (("smooth_shift", smooth_shift), ("smooth_scale", smooth_scale)):
        if t is not None:
            s, st = _tensor(nm, t, ("float32",), device, (2,))
            if s != (g, d):
                raise _ve(nm, "must have shape [kv_heads, head_dim] = %s, got %s" % ([g, d], list(s)))
            _contiguous(nm, s, st)
    if smooth_shift is not None:
        sm_shift = _ptr(smooth_shift, pointers)
    if smooth_scale is not None:
        sm_scale = _ptr(smooth_scale, pointers)
    if counters is not None and counters.numel() != 0:
        s, st = _tensor("counters", counters, ("int32",), device, (1,))
        if s[0] != 2:
            raise _ve("counters", "must have shape [2] (non-finite, overflow), got %s" % (list(s),))
        _contiguous("counters", s, st)
        cnt = _ptr(counters, pointers)
    if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
        raise _ve("pdl", "must be -1 (auto), 0 or 1, got %r" % (pdl,))
    return dict(
        n_tokens=n, n_kv_heads=g, head_dim=d, src_type=DTYPE_CODE[dtype_name(k_new)], src=_ptr(k_new, pointers),
        src_token_stride=sst[0], src_head_stride=sst[1],
        dst_payload=k.ptr, dst_payload_strides=kst, dst_scales=ks.ptr, dst_scale_strides=kss, block=block,
        slots=slots, base_slot=base_slot, smooth_shift=sm_shift, smooth_scale=sm_scale, counters=cnt, pdl=pdl,
        page_size=page_size, n_slots=n_slots,
    )


@_fake_aware
def quantize_v_plan(v_new, v_cache, slot_mapping, *, v_format=None, v_scales=None, page_size=0, layout="NHD",
                    base_slot=0, pdl=-1, pointers=True):
    """Checks of packfa.torch.quantize_v_; returns packfa.QuantizeVParams kwargs."""
    layout = _choice("layout", layout, LAYOUTS)
    if not is_tensor(v_new):
        raise _te("v_new", "must be a torch.Tensor, got %s" % type(v_new).__name__)
    _tensor("v_new", v_new, ("float16", "bfloat16", "float32"), None, (3,))
    device = v_new.device
    d = v_new.shape[-1]
    if d not in HEAD_DIMS:
        raise _ve("v_new", "head_dim (last dim) must be one of %s, got %d" % (", ".join(map(str, HEAD_DIMS)), d))
    v_format, v, vs, align = _v_planes(v_cache, v_scales, v_format, d, device, layout, (3, 4), pointers)
    if vs is not None:
        _same_lead(vs, v, "v_cache")
    g = v.shape[-2]
    n, sst = _source("v_new", v_new, g, d, device)
    page_size = _int("page_size", page_size, 0)
    planes = [v] + ([vs] if vs is not None else [])
    paged, n_slots, page_size = _write_geometry(planes, page_size, "v_cache")
    vst = v.byte_strides(paged)
    v.check_align(vst, align, v_format + " V rows")
    vss = (0, 0, 0)
    if vs is not None:
        vss = vs.byte_strides(paged)
        vs.check_align(vss, 2, "fp16 scales")
    slots, base_slot = _slots(slot_mapping, n, base_slot, device, pointers)
    if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
        raise _ve("pdl", "must be -1 (auto), 0 or 1, got %r" % (pdl,))
    return dict(
        n_tokens=n, n_kv_heads=g, head_dim=d, src_type=DTYPE_CODE[dtype_name(v_new)], src=_ptr(v_new, pointers),
        src_token_stride=sst[0], src_head_stride=sst[1], v_format=V_FORMATS.index(v_format),
        dst=v.ptr, dst_strides=vst, slots=slots, base_slot=base_slot, pdl=pdl,
        dst_scales=vs.ptr if vs is not None else None, dst_scale_strides=vss,
        page_size=page_size, n_slots=n_slots,
    )
