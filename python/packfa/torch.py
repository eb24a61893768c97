"""packfa over torch tensors: attention over a packed16 K cache, pack-on-write, quantize-on-write.

    import packfa.torch as pft
    pft.load_library("build/libpackfa_c.so")      # or $PACKFA_LIB, or found next to the repo
    c = pft.alloc_cache(slots=4096, n_kv_heads=8, head_dim=128, v_format="q8_0", batch=1, device="cuda")
    pft.pack_k_(k_new, c["k_cache"], c["k_scales"], slot_mapping)        # k_new [n_tokens, 8, 128] fp16
    pft.quantize_v_(v_new, c["v_cache"], slot_mapping, v_format="q8_0")
    o = pft.attention(q, c["k_cache"], c["k_scales"], c["v_cache"], kv_len)   # q [batch, nq, 32, 128]

Pure Python over libpackfa_c.so through the ctypes layer of ``packfa`` (python/packfa/__init__.py).

Shapes (NHD = token-major, llama.cpp's / vLLM's order; every tensor on one CUDA device):

* ``q``, ``out``: ``[batch, nq, n_q_heads, D]`` f16 / bf16 / f32, last dim contiguous, any other
  strides. ``D`` in 64, 80, 96, 112, 128, 256. ``nq`` 1 = decode, 2..16 = MTP / speculative rows.
* K cache, packed16: ``k_cache`` int8 payload ``[batch, slots, n_kv_heads, D]`` (or
  ``[slots, n_kv_heads, D]`` when batch == 1; paged: ``[pages, page_size, n_kv_heads, D]``),
  ``k_scales`` fp16 ``[..., n_kv_heads, D/32]`` (``D/16``: block 16, required for D = 80, 112).
  An fp16 ``k_cache`` (and ``k_scales=None``) is plain f16 K.
* V cache: ``v_format`` "q8_0" / "q4_0": uint8 rows of 34·D/32 / 18·D/32 bytes (ggml's
  block_q8_0 / block_q4_0, byte for byte); "f16" / "bf16": ``[..., n_kv_heads, D]``;
  "q8_0_planar": int8 ``[..., n_kv_heads, D]`` plus ``v_scales`` fp16 ``[..., n_kv_heads, D/32]``.
  ``v_format=None`` infers it from dtype and row length.
* ``kv_len``: int32 ``[batch]`` on the device (keys per sequence; a device tensor so CUDA graphs
  replay with new lengths). ``q_pos``: optional int32 ``[batch, nq]`` (default kv_len - nq + i).
* ``block_table``: int32 ``[batch, max_pages]`` page ids (vLLM's block_tables); with it the
  caches are paged. ``slot_mapping``: int32 ``[n_tokens]``, slot = page · page_size + offset
  (paged) or the flat slot (b · slots + j for a batched cache, j for a 3-D one).
* ``layout="HND"``: the cache tensors' dims are ``[..., n_kv_heads, slots, X]`` (head-major)
  instead; or pass an NHD view of a head-major tensor (``cache.transpose(-3, -2)``): byte
  strides always come from the tensors' own strides.

Argument errors raise ``TypeError`` (type, dtype) or ``ValueError`` (device, shape, strides,
alignment, ranges) naming the argument, before any device work; what packfa's C side rejects
raises ``packfa.Error``. Launches go to ``torch.cuda.current_stream()``; the split-KV workspace
is a fresh torch allocation per call (stream-ordered, so safe in CUDA graph capture: it comes
from the graph's pool). The three calls are torch.library custom ops
(``torch.ops.packfa.attention`` / ``pack_k`` / ``quantize_v``, mutating their outputs) with fake
implementations, so ``torch.compile(fullgraph=True)`` traces them; eager calls skip the
dispatcher and launch directly.
"""
import ctypes.util
import os
from typing import List, Optional

import torch

import packfa as _pf
from . import _torch_args as _args

__all__ = ["attention", "pack_k_", "quantize_v_", "load_library", "alloc_cache", "dequantize_k", "dequantize_v",
           "reference_attention", "REGISTRATION"]

_LIB = None


def load_library(path=None):
    """Loads libpackfa_c.so: `path`, else $PACKFA_LIB, else next to this package, else the
    repository's build/ or build-gpu/, else the loader's search path. Returns the ctypes CDLL."""
    global _LIB
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", ".."))
    cands = [path] if path else [os.environ.get("PACKFA_LIB"), os.path.join(here, "libpackfa_c.so"),
                                 os.path.join(root, "build", "libpackfa_c.so"),
                                 os.path.join(root, "build-gpu", "libpackfa_c.so"), ctypes.util.find_library("packfa_c")]
    tried = []
    for c in cands:
        if not c:
            continue
        if os.path.sep in c and not os.path.exists(c):
            tried.append(c)
            continue
        _LIB = _pf.load(c)
        return _LIB
    raise OSError("libpackfa_c.so not found (tried %s); build it (cmake --build build) or set PACKFA_LIB"
                  % (", ".join(tried) or "nothing"))


def _lib():
    return _LIB if _LIB is not None else load_library()


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


# ---- implementations (plain Python over ctypes; also the custom ops' real kernels) ------------

def _attention_impl(q: torch.Tensor, k_cache: torch.Tensor, k_scales: Optional[torch.Tensor], v_cache: torch.Tensor,
                    v_scales: Optional[torch.Tensor], kv_len: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
                    errors: torch.Tensor, block_table: Optional[torch.Tensor], q_pos: Optional[torch.Tensor],
                    mask: Optional[torch.Tensor], sinks: Optional[torch.Tensor],
                    k_smooth_scale: Optional[torch.Tensor], v_format: str, layout: str, page_size: int,
                    max_kv_len: int, kv_len_host: Optional[List[int]], causal: bool, window: int, softcap: float,
                    alibi_max_bias: float, alibi_mode: str, scale: float, dot: str, num_splits: int,
                    pdl: int) -> None:
    kw = _args.attention_plan(
        q, k_cache, k_scales, v_cache, kv_len, v_scales=v_scales, v_format=v_format or None,
        block_table=block_table, page_size=page_size, layout=layout, q_pos=q_pos, causal=causal, window=window,
        mask=mask, softcap=softcap, sinks=sinks, alibi_max_bias=alibi_max_bias, alibi_mode=alibi_mode,
        scale=scale or None, dot=dot, out=o, lse=lse, errors=errors, k_smooth_scale=k_smooth_scale,
        max_kv_len=max_kv_len or None, kv_len_host=kv_len_host, num_splits=num_splits, pdl=pdl, pointers=True)
    lib = _lib()
    params = _pf.AttnParams(**kw)
    dev = q.device
    with torch.cuda.device(dev):
        ws = _pf.workspace_bytes(lib, params, dev.index)
        buf = None
        if ws:
            # freed when this returns: the caching allocator reuses it only in stream order
            buf = torch.empty(ws, dtype=torch.uint8, device=dev)
            params.workspace, params.workspace_bytes = buf.data_ptr(), ws
        _pf.forward(lib, params, _stream(dev))
        del buf


def _attention_fake(q, k_cache, k_scales, v_cache, v_scales, kv_len, o, lse, errors, block_table, q_pos, mask, sinks,
                    k_smooth_scale, v_format, layout, page_size, max_kv_len, kv_len_host, causal, window, softcap,
                    alibi_max_bias, alibi_mode, scale, dot, num_splits, pdl):
    _args.attention_plan(
        q, k_cache, k_scales, v_cache, kv_len, v_scales=v_scales, v_format=v_format or None,
        block_table=block_table, page_size=page_size, layout=layout, q_pos=q_pos, causal=causal, window=window,
        mask=mask, softcap=softcap, sinks=sinks, alibi_max_bias=alibi_max_bias, alibi_mode=alibi_mode,
        scale=scale or None, dot=dot, out=o, lse=lse, errors=errors, k_smooth_scale=k_smooth_scale,
        max_kv_len=max_kv_len or None, kv_len_host=kv_len_host, num_splits=num_splits, pdl=pdl, pointers=False)


def _pack_k_impl(k_new: torch.Tensor, k_cache: torch.Tensor, k_scales: torch.Tensor, counters: torch.Tensor,
                 slot_mapping: Optional[torch.Tensor], smooth_shift: Optional[torch.Tensor],
                 smooth_scale: Optional[torch.Tensor], page_size: int, layout: str, base_slot: int, pdl: int) -> None:
    kw = _args.pack_k_plan(k_new, k_cache, k_scales, slot_mapping, page_size=page_size, layout=layout,
                           base_slot=base_slot, smooth_shift=smooth_shift, smooth_scale=smooth_scale,
                           counters=counters, pdl=pdl, pointers=True)
    if kw["n_tokens"] == 0:
        return
    dev = k_cache.device
    with torch.cuda.device(dev):
        _pf.pack_k(_lib(), _pf.PackKParams(**kw), _stream(dev))


def _pack_k_fake(k_new, k_cache, k_scales, counters, slot_mapping, smooth_shift, smooth_scale, page_size, layout,
                 base_slot, pdl):
    _args.pack_k_plan(k_new, k_cache, k_scales, slot_mapping, page_size=page_size, layout=layout,
                      base_slot=base_slot, smooth_shift=smooth_shift, smooth_scale=smooth_scale, counters=counters,
                      pdl=pdl, pointers=False)


def _nonempty(t):
    # the ops pass an empty tensor for "no scale plane" (a mutated argument cannot be None)
    return t if (t is not None and hasattr(t, "numel") and t.numel() != 0) else None


def _quantize_v_impl(v_new: torch.Tensor, v_cache: torch.Tensor, v_scales: torch.Tensor,
                     slot_mapping: Optional[torch.Tensor], v_format: str, page_size: int, layout: str, base_slot: int,
                     pdl: int) -> None:
    kw = _args.quantize_v_plan(v_new, v_cache, slot_mapping, v_format=v_format or None,
                               v_scales=_nonempty(v_scales), page_size=page_size, layout=layout,
                               base_slot=base_slot, pdl=pdl, pointers=True)
    if kw["n_tokens"] == 0:
        return
    dev = v_cache.device
    with torch.cuda.device(dev):
        _pf.quantize_v(_lib(), _pf.QuantizeVParams(**kw), _stream(dev))


def _quantize_v_fake(v_new, v_cache, v_scales, slot_mapping, v_format, page_size, layout, base_slot, pdl):
    _args.quantize_v_plan(v_new, v_cache, slot_mapping, v_format=v_format or None,
                          v_scales=_nonempty(v_scales), page_size=page_size, layout=layout,
                          base_slot=base_slot, pdl=pdl, pointers=False)


# ---- torch.library registration ----------------------------------------------------------------

_SCHEMAS = {
    "attention": ("(Tensor q, Tensor k_cache, Tensor? k_scales, Tensor v_cache, Tensor? v_scales, Tensor kv_len, "
                  "Tensor(a!) o, Tensor(b!) lse, Tensor(c!) errors, Tensor? block_table, Tensor? q_pos, Tensor? mask, "
                  "Tensor? sinks, Tensor? k_smooth_scale, str v_format, str layout, int page_size, int max_kv_len, "
                  "int[]? kv_len_host, bool causal, int window, float softcap, float alibi_max_bias, "
                  "str alibi_mode, float scale, str dot, int num_splits, int pdl) -> ()", ("o", "lse", "errors"),
                  _attention_impl, _attention_fake),
    "pack_k": ("(Tensor k_new, Tensor(a!) k_cache, Tensor(b!) k_scales, Tensor(c!) counters, Tensor? slot_mapping, "
               "Tensor? smooth_shift, Tensor? smooth_scale, int page_size, str layout, int base_slot, int pdl) -> ()",
               ("k_cache", "k_scales", "counters"), _pack_k_impl, _pack_k_fake),
    "quantize_v": ("(Tensor v_new, Tensor(a!) v_cache, Tensor(b!) v_scales, Tensor? slot_mapping, str v_format, "
                   "int page_size, str layout, int base_slot, int pdl) -> ()", ("v_cache", "v_scales"),
                   _quantize_v_impl, _quantize_v_fake),
}
_KEEP = []  # Library objects must outlive their registrations


def _register():
    """torch.library.custom_op (torch >= 2.4) with register_fake; else torch.library.Library with
    a hand-written schema and impl_abstract / a Meta kernel; else no registration (eager only)."""
    ns = getattr(torch.ops, "packfa", None)
    if ns is not None and all(hasattr(ns, n) for n in _SCHEMAS):
        return "existing"  # module re-imported: the ops are already there
    errors = []
    if hasattr(torch.library, "custom_op"):
        try:
            for name, (_, mutates, impl, fake) in _SCHEMAS.items():
                op = torch.library.custom_op("packfa::" + name, mutates_args=mutates, device_types="cuda")(impl)
                op.register_fake(fake)
                _KEEP.append(op)
            return "custom_op"
        except Exception as e:  # noqa: BLE001 - fall back to the older API below
            errors.append("custom_op: %s" % e)
    try:
        try:
            lib = torch.library.Library("packfa", "FRAGMENT")
        except Exception:  # noqa: BLE001 - torch < 2.0 knows only DEF
            lib = torch.library.Library("packfa", "DEF")
        _KEEP.append(lib)
        for name, (schema, _, impl, fake) in _SCHEMAS.items():
            lib.define(name + schema)
            lib.impl(name, impl, "CUDA")
            abstract = getattr(torch.library, "register_fake", None) or getattr(torch.library, "impl_abstract", None)
            if abstract is not None:
                abstract("packfa::" + name, lib=lib)(fake)
            else:  # torch < 2.1: a Meta kernel (torch 1.x has no autograd fallthrough for Meta: register it there too)
                lib.impl(name, fake, "Meta")
                try:
                    lib.impl(name, fake, "AutogradMeta")
                except Exception:  # noqa: BLE001
                    pass
        return "library"
    except Exception as e:  # noqa: BLE001
        errors.append("Library: %s" % e)
    return "none (%s)" % "; ".join(errors)


REGISTRATION = _register()
_HAVE_OPS = REGISTRATION in ("custom_op", "library", "existing")
_OPS = torch.ops.packfa if _HAVE_OPS else None

if hasattr(torch, "compiler") and hasattr(torch.compiler, "is_compiling"):
    _is_compiling = torch.compiler.is_compiling
else:  # torch < 2.3
    try:
        from torch._dynamo import is_compiling as _is_compiling
    except ImportError:  # pragma: no cover
        def _is_compiling():
            return False


def _via_op():
    return _HAVE_OPS and _is_compiling()


def _empty(dtype, device):
    return torch.empty(0, dtype=dtype, device=device)


# ---- public API ------------------------------------------------------------------------------------

def attention(q, k_cache, k_scales, v_cache, kv_len, *, v_scales=None, v_format=None, block_table=None, page_size=0,
              layout="NHD", q_pos=None, causal=True, window=0, mask=None, softcap=0.0, sinks=None,
              alibi_max_bias=0.0, alibi_mode="position", scale=None, dot="int8", out=None, out_dtype=None,
              return_lse=False, lse=None, errors=None, k_smooth_scale=None, max_kv_len=None, kv_len_host=None,
              num_splits=0, pdl=-1):
    """Attention of q over the cache; returns out (and lse [batch, nq, n_q_heads] fp32, natural log,
    when return_lse).

    mask: additive fp16 [nq, L], [batch, nq, L] or [batch, n_q_heads | 1, nq, L] (L >= max_kv_len;
    -inf hides a key; dims of size 1 broadcast). alibi_mode "position": s += mask + slope·(j - pos);
    "ggml": s += slope·mask (llama.cpp's ALiBi mask as is). sinks: fp32 [n_q_heads]. errors:
    optional int32 [3] device counters (kv_len clamped, q_pos out of range, bad page id), added to.
    max_kv_len: host bound of kv_len (plans the split; default the cache capacity — pass the
    real bound for short sequences in a long cache). kv_len_host: optional host list of the batch's
    kv lengths (e.g. vLLM's seq_lens on the CPU; a list of ints or a CPU integer tensor, each in
    [0, max_kv_len]): the split planner then fills one balanced round of the GPU; the kernels still
    read kv_len (a stale copy costs speed, never correctness). Shapes and the rest: the module
    docstring.
    """
    if not isinstance(q, torch.Tensor):
        raise TypeError("q: must be a torch.Tensor, got %s" % type(q).__name__)
    if q.dim() != 4:
        raise ValueError("q: must have 4 dims [batch, nq, n_q_heads, head_dim], got shape %s" % (list(q.shape),))
    dev = q.device
    compiling = _via_op()
    if not compiling:  # scalars first, with named errors (under torch.compile the fake impl checks them)
        if not isinstance(causal, bool):
            raise TypeError("causal: must be a bool, got %s" % type(causal).__name__)
        if v_format is not None:
            _args._choice("v_format", v_format, _args.V_FORMATS)
        _args._choice("layout", layout, _args.LAYOUTS)
        _args._choice("alibi_mode", alibi_mode, _args.ALIBI_MODES)
        _args._choice("dot", dot, _args.DOTS)
        _args._int("page_size", page_size, 0)
        _args._int("window", window, 0, _args._INT32_MAX)
        _args._int("num_splits", num_splits, 0, _args._INT32_MAX)
        if max_kv_len is not None:
            _args._int("max_kv_len", max_kv_len, 1)
        _args._float("softcap", softcap)
        _args._float("alibi_max_bias", alibi_max_bias)
        if scale is not None:
            _args._float("scale", scale, allow_zero=False)
        if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
            raise ValueError("pdl: must be -1 (auto), 0 or 1, got %r" % (pdl,))
    if out is None:
        out = torch.empty(q.shape, dtype=out_dtype if out_dtype is not None else q.dtype, device=dev)
    elif out_dtype is not None and out.dtype != out_dtype:
        raise ValueError("out_dtype: %s disagrees with out's dtype %s" % (out_dtype, out.dtype))
    if lse is None:
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=dev) if return_lse else _empty(torch.float32, dev)
    if errors is None:
        errors = _empty(torch.int32, dev)
    # the op takes int[]?: a CPU tensor (or tuple, ...) becomes a list here; a CUDA tensor is
    # refused by name (its .tolist() would synchronize the device)
    kv_len_host = _args.host_values(kv_len_host)
    args = (q, k_cache, k_scales, v_cache, v_scales, kv_len, out, lse, errors, block_table, q_pos, mask, sinks,
            k_smooth_scale, v_format or "", layout, int(page_size), int(max_kv_len or 0), kv_len_host, causal,
            int(window), float(softcap), float(alibi_max_bias), alibi_mode, 0.0 if scale is None else float(scale),
            dot, int(num_splits), int(pdl))
    if compiling:
        _OPS.attention(*args)
    else:
        _attention_impl(*args)
    return (out, lse) if return_lse else out


def pack_k_(k_new, k_cache, k_scales, slot_mapping=None, *, page_size=0, layout="NHD", base_slot=0, smooth_shift=None,
            smooth_scale=None, counters=None, pdl=-1):
    """Packs k_new [n_tokens, n_kv_heads, D] (f16 / bf16 / f32) into the packed16 planes at
    slot_mapping (int32 [n_tokens]; None: base_slot + t), in place. Cache: [slots, n_kv_heads, D]
    (flat), [batch, len, n_kv_heads, D] (flat slots b · len + j; needs dim 0 to continue dim 1) or
    paged [pages, page_size, n_kv_heads, D] with page_size set; k_scales alike with D/32 (or D/16).
    smooth_shift / smooth_scale: optional fp32 [n_kv_heads, D] (docs/format.md, K smoothing);
    counters: optional int32 [2] (non-finite inputs, clamped scales), added to."""
    compiling = _via_op()
    if not compiling:
        _args._int("page_size", page_size, 0)
        _args._int("base_slot", base_slot, 0)
        _args._choice("layout", layout, _args.LAYOUTS)
        if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
            raise ValueError("pdl: must be -1 (auto), 0 or 1, got %r" % (pdl,))
    if counters is None and isinstance(k_cache, torch.Tensor):
        counters = _empty(torch.int32, k_cache.device)
    args = (k_new, k_cache, k_scales, counters, slot_mapping, smooth_shift, smooth_scale, int(page_size), layout,
            int(base_slot), int(pdl))
    if compiling:
        _OPS.pack_k(*args)
    else:
        _pack_k_impl(*args)


def quantize_v_(v_new, v_cache, slot_mapping=None, *, v_format=None, v_scales=None, page_size=0, layout="NHD",
                base_slot=0, pdl=-1):
    """Writes v_new [n_tokens, n_kv_heads, D] into the V cache at slot_mapping, in place: q8_0 /
    q4_0 blocks (uint8 rows), q8_0_planar (int8 rows + v_scales), or an f16 / bf16 copy. Cache
    shapes as pack_k_."""
    compiling = _via_op()
    if not compiling:
        if v_format is not None:
            _args._choice("v_format", v_format, _args.V_FORMATS)
        _args._int("page_size", page_size, 0)
        _args._int("base_slot", base_slot, 0)
        _args._choice("layout", layout, _args.LAYOUTS)
        if isinstance(pdl, bool) or pdl not in (-1, 0, 1):
            raise ValueError("pdl: must be -1 (auto), 0 or 1, got %r" % (pdl,))
    if v_scales is None and isinstance(v_cache, torch.Tensor):
        v_scales = _empty(torch.float16, v_cache.device)
    args = (v_new, v_cache, v_scales, slot_mapping, v_format or "", int(page_size), layout, int(base_slot), int(pdl))
    if compiling:
        _OPS.quantize_v(*args)
    else:
        _quantize_v_impl(*args)


# ---- helpers: allocation, dequantization, a slow reference -----------------------------------------

def alloc_cache(slots, n_kv_heads, head_dim, v_format="q8_0", *, batch=None, page_size=0, layout="NHD", block=32,
                k_format="packed16", device="cuda"):
    """Empty cache planes. batch=None: [slots, heads, X]; batch=B: [B, slots, heads, X]; page_size > 0:
    [slots // page_size pages, page_size, heads, X]. layout="HND" swaps the slot and head dims of the
    storage (the returned tensors have HND dims: pass layout="HND" to the calls). Returns a dict
    with k_cache, k_scales (None for f16 K), v_cache, v_scales (None unless q8_0_planar), v_format, layout."""
    if page_size:
        if slots % page_size:
            raise ValueError("slots: must be a multiple of page_size %d, got %d" % (page_size, slots))
        lead = (slots // page_size, page_size)
    else:
        lead = (slots,) if batch is None else (batch, slots)

    def plane(last, dtype):
        if layout == "HND":
            return torch.empty(lead[:-1] + (n_kv_heads, lead[-1], last), dtype=dtype, device=device)
        return torch.empty(lead + (n_kv_heads, last), dtype=dtype, device=device)

    vdt = {"f16": torch.float16, "bf16": torch.bfloat16, "q8_0": torch.uint8, "q4_0": torch.uint8,
           "q8_0_planar": torch.int8}[v_format]
    vlast = _args._V_PLANE[v_format][1](head_dim)
    packed = k_format == "packed16"
    return dict(k_cache=plane(head_dim, torch.int8 if packed else torch.float16),
                k_scales=plane(head_dim // block, torch.float16) if packed else None,
                v_cache=plane(vlast, vdt),
                v_scales=plane(head_dim // 32, torch.float16) if v_format == "q8_0_planar" else None,
                v_format=v_format, layout=layout)


def dequantize_k(k_cache, k_scales=None):
    """fp32 values of a K cache plane pair (any leading dims, last dim D): q · d per block."""
    if k_scales is None:
        return k_cache.float()
    block = k_cache.shape[-1] // k_scales.shape[-1]
    return k_cache.float() * k_scales.float().repeat_interleave(block, dim=-1)


def _fp16_of_bytes(b2):
    """[..., 2] uint8 (little endian) -> [...] fp32."""
    return b2.contiguous().view(torch.float16).float().squeeze(-1)


def dequantize_v(v_cache, v_format=None, v_scales=None, head_dim=None):
    """fp32 values of a V cache plane (any leading dims): [..., D]."""
    if v_format is None:
        d = head_dim if head_dim is not None else (v_cache.shape[-1] if v_cache.dtype != torch.uint8 else None)
        if d is None:
            raise ValueError("head_dim: needed to tell q8_0 from q4_0 rows")
        v_format = _args.infer_v_format(v_cache, v_scales, d)
    if v_format in ("f16", "bf16"):
        return v_cache.float()
    if v_format == "q8_0_planar":
        return v_cache.float() * v_scales.float().repeat_interleave(32, dim=-1)
    per = 34 if v_format == "q8_0" else 18
    nb = v_cache.shape[-1] // per
    blk = v_cache.reshape(*v_cache.shape[:-1], nb, per)
    d = _fp16_of_bytes(blk[..., 0:2]).unsqueeze(-1)
    if v_format == "q8_0":
        q = blk[..., 2:34].contiguous().view(torch.int8).float()
    else:
        b = blk[..., 2:18].to(torch.int16)
        q = torch.cat([b & 0xF, b >> 4], dim=-1).float() - 8.0  # byte j: element j (low), j + 16 (high)
    return (q * d).reshape(*v_cache.shape[:-1], nb * 32)


def alibi_slopes(n_heads, max_bias):
    """ggml's ALiBi slopes (docs/format.md)."""
    import math
    n2 = 2 ** int(math.floor(math.log2(n_heads)))
    m0, m1 = 2.0 ** (-max_bias / n2), 2.0 ** (-max_bias / 2.0 / n2)
    return [m0 ** (h + 1) if h < n2 else m1 ** (2 * (h - n2) + 1) for h in range(n_heads)]


def reference_attention(q, k, v, kv_len, *, q_pos=None, causal=True, window=0, mask=None, softcap=0.0, sinks=None,
                        alibi_max_bias=0.0, alibi_mode="position", scale=None):
    """Slow fp32 reference of packfa's semantics (docs/format.md). q [B, nq, Hq, D]; k, v fp32
    [B, L, G, D] (e.g. dequantize_k / dequantize_v of the cache, NHD); kv_len: ints or a tensor;
    mask as attention(); q_pos [B, nq]. Returns (out [B, nq, Hq, D] fp32, lse [B, nq, Hq])."""
    bsz, nq, hq, d = q.shape
    g = k.shape[2]
    lens = [int(x) for x in (kv_len.tolist() if torch.is_tensor(kv_len) else kv_len)]
    scale = scale or d ** -0.5
    slopes = torch.tensor(alibi_slopes(hq, alibi_max_bias) if alibi_max_bias > 0 else [1.0] * hq,
                          dtype=torch.float32, device=q.device)
    outs, lses = [], []
    for b in range(bsz):
        n = lens[b]
        kb = k[b, :n].float().repeat_interleave(hq // g, dim=1)  # [n, Hq, D]
        vb = v[b, :n].float().repeat_interleave(hq // g, dim=1)
        s = torch.einsum("ihd,jhd->hij", q[b].float(), kb) * scale  # [Hq, nq, n]
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        pos = (q_pos[b].to(torch.float32) if q_pos is not None else
               torch.arange(nq, device=q.device, dtype=torch.float32) + (n - nq))
        j = torch.arange(n, device=q.device, dtype=torch.float32)
        m = torch.zeros(1, nq, n, device=q.device)
        if mask is not None:
            mm = mask.unsqueeze(0) if mask.dim() == 2 else mask  # [nq, L] -> [1, nq, L]
            mm = mm.unsqueeze(1) if mm.dim() == 3 else mm        # [B, nq, L] -> [B, 1, nq, L]
            m = mm[b if mm.shape[0] > 1 else 0, :, :, :n].float()  # [Hq | 1, nq, n]
        if alibi_max_bias > 0 and alibi_mode == "ggml":
            s = s + slopes[:, None, None] * m
        else:
            s = s + m
            if alibi_max_bias > 0:
                s = s + slopes[:, None, None] * (j[None, None, :] - pos[None, :, None])
        vis = torch.ones(nq, n, dtype=torch.bool, device=q.device)
        if causal:
            vis &= j[None, :] <= pos[:, None]
        if window > 0:
            vis &= j[None, :] > pos[:, None] - window
        s = torch.where(vis[None], s, torch.full_like(s, float("-inf")))
        ext = s
        if sinks is not None:
            ext = torch.cat([s, sinks.float()[:, None, None].expand(hq, nq, 1)], dim=-1)
        lse = torch.logsumexp(ext, dim=-1)  # [Hq, nq]
        fin = torch.isfinite(lse)
        p = torch.where(fin[..., None], torch.exp(s - torch.where(fin, lse, torch.zeros_like(lse))[..., None]),
                        torch.zeros_like(s))
        outs.append(torch.einsum("hij,jhd->ihd", p, vb))
        lses.append(lse.transpose(0, 1))
    return torch.stack(outs), torch.stack(lses)
