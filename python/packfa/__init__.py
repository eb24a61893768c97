"""packfa through ctypes: the C ABI (include/packfa/c_api.h) of libpackfa_c.

    import packfa
    lib = packfa.load("build/libpackfa_c.so")
    p = packfa.AttnParams(batch=1, nq=1, n_q_heads=32, n_kv_heads=8, head_dim=128, ...)
    packfa.forward(lib, p, stream=0)   # raises packfa.Error("invalid_argument: head_dim: ...")
    packfa.workspace_bytes(lib, p)      # bytes of split scratch the call needs
    packfa.pack_k(lib, packfa.PackKParams(...))        # pack-on-write of new K rows
    packfa.quantize_v(lib, packfa.QuantizeVParams(...))  # quantize-on-write of new V rows

Pointers are integers (device addresses, e.g. torch.Tensor.data_ptr()); strides follow
api.hpp (Q/O in elements {seq, row, head}; K/V in bytes {seq, slot, head}).
Enums: DTYPE f32/f16/bf16; K_FORMAT packed16/f16; V_FORMAT f16/bf16/q8_0/q4_0/q8_0_planar;
DOT int8/f16. q8_0_planar V also needs its scale plane: v_scales / v_scale_strides
(AttnParams), dst_scales / dst_scale_strides (QuantizeVParams).
"""
import ctypes

DTYPE = {"f32": 0, "f16": 1, "bf16": 2}
K_FORMAT = {"packed16": 0, "f16": 1}
V_FORMAT = {"f16": 0, "bf16": 1, "q8_0": 2, "q4_0": 3, "q8_0_planar": 4}
DOT = {"int8": 0, "f16": 1}
ALIBI_MODE = {"position": 0, "ggml": 1}

_i64x3 = ctypes.c_int64 * 3
_i64x2 = ctypes.c_int64 * 2


class AttnParams(ctypes.Structure):
    """Mirror of packfa_attn_params (field order and types must match c_api.h)."""

    _fields_ = [
        ("batch", ctypes.c_int), ("nq", ctypes.c_int), ("n_q_heads", ctypes.c_int),
        ("n_kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int), ("max_kv_len", ctypes.c_int),
        ("q_type", ctypes.c_int), ("q", ctypes.c_void_p), ("q_strides", _i64x3),
        ("k_format", ctypes.c_int), ("k", ctypes.c_void_p), ("k_strides", _i64x3),
        ("k_scales", ctypes.c_void_p), ("k_scale_strides", _i64x3), ("k_block", ctypes.c_int),
        ("k_smooth_scale", ctypes.c_void_p),
        ("v_format", ctypes.c_int), ("v", ctypes.c_void_p), ("v_strides", _i64x3),
        ("o_type", ctypes.c_int), ("o", ctypes.c_void_p), ("o_strides", _i64x3),
        ("kv_len", ctypes.c_void_p), ("q_pos", ctypes.c_void_p),
        ("scale", ctypes.c_float), ("causal", ctypes.c_int), ("window", ctypes.c_int),
        ("mask", ctypes.c_void_p), ("mask_strides", _i64x2),
        ("softcap", ctypes.c_float), ("sinks", ctypes.c_void_p), ("alibi_max_bias", ctypes.c_float),
        ("lse", ctypes.c_void_p), ("dot", ctypes.c_int), ("num_splits", ctypes.c_int),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t), ("pdl", ctypes.c_int),
        ("v_scales", ctypes.c_void_p), ("v_scale_strides", _i64x3),  # appended (q8_0_planar)
        ("block_table", ctypes.c_void_p), ("block_table_stride", ctypes.c_int64),  # appended (paged KV)
        ("page_size", ctypes.c_int), ("num_pages", ctypes.c_int),
        ("mask_head_stride", ctypes.c_int64), ("alibi_mode", ctypes.c_int), ("errors", ctypes.c_void_p),
    ]

    def __init__(self, **kw):
        super().__init__()
        self.k_block, self.causal, self.pdl = 32, 1, -1
        _assign(self, kw)


class PackKParams(ctypes.Structure):
    """Mirror of packfa_pack_k_params (c_api.h)."""

    _fields_ = [
        ("n_tokens", ctypes.c_int), ("n_kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int),
        ("src_type", ctypes.c_int), ("src", ctypes.c_void_p),
        ("src_token_stride", ctypes.c_int64), ("src_head_stride", ctypes.c_int64),
        ("dst_payload", ctypes.c_void_p), ("dst_payload_strides", _i64x3),
        ("dst_scales", ctypes.c_void_p), ("dst_scale_strides", _i64x3), ("block", ctypes.c_int),
        ("slots", ctypes.c_void_p), ("base_slot", ctypes.c_int64),
        ("smooth_shift", ctypes.c_void_p), ("smooth_scale", ctypes.c_void_p),
        ("counters", ctypes.c_void_p), ("pdl", ctypes.c_int),
        ("page_size", ctypes.c_int), ("n_slots", ctypes.c_int64),  # appended (paged KV)
    ]

    def __init__(self, **kw):
        super().__init__()
        self.block, self.pdl = 32, -1
        _assign(self, kw)


class QuantizeVParams(ctypes.Structure):
    """Mirror of packfa_quantize_v_params (c_api.h)."""

    _fields_ = [
        ("n_tokens", ctypes.c_int), ("n_kv_heads", ctypes.c_int), ("head_dim", ctypes.c_int),
        ("src_type", ctypes.c_int), ("src", ctypes.c_void_p),
        ("src_token_stride", ctypes.c_int64), ("src_head_stride", ctypes.c_int64),
        ("v_format", ctypes.c_int), ("dst", ctypes.c_void_p), ("dst_strides", _i64x3),
        ("slots", ctypes.c_void_p), ("base_slot", ctypes.c_int64), ("pdl", ctypes.c_int),
        ("dst_scales", ctypes.c_void_p), ("dst_scale_strides", _i64x3),  # appended (q8_0_planar)
        ("page_size", ctypes.c_int), ("n_slots", ctypes.c_int64),  # appended (paged KV)
    ]

    def __init__(self, **kw):
        super().__init__()
        self.pdl = -1
        _assign(self, kw)


def _assign(struct, kw):
    for name, value in kw.items():
        if name.endswith("_strides"):
            value = (ctypes.c_int64 * len(value))(*value)
        setattr(struct, name, value)


class Error(RuntimeError):
    """A packfa Status that is not ok: .code (int) and the message naming the field."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def load(path):
    lib = ctypes.CDLL(path)
    lib.packfa_version.restype = ctypes.c_char_p
    lib.packfa_fa_forward.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.packfa_fa_forward.restype = ctypes.c_int
    lib.packfa_fa_workspace_bytes.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
    lib.packfa_fa_workspace_bytes.restype = ctypes.c_int
    lib.packfa_pack_k.argtypes = [ctypes.POINTER(PackKParams), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.packfa_pack_k.restype = ctypes.c_int
    lib.packfa_quantize_v.argtypes = [ctypes.POINTER(QuantizeVParams), ctypes.c_void_p, ctypes.c_char_p,
                                      ctypes.c_size_t]
    lib.packfa_quantize_v.restype = ctypes.c_int
    return lib


def version(lib):
    return lib.packfa_version().decode()


def _call(fn, *args):
    msg = ctypes.create_string_buffer(512)
    code = fn(*args, msg, len(msg))
    if code != 0:
        raise Error(code, msg.value.decode())


def forward(lib, params, stream=0):
    _call(lib.packfa_fa_forward, ctypes.byref(params), ctypes.c_void_p(stream))


def workspace_bytes(lib, params, device=0):
    out = ctypes.c_size_t(0)
    _call(lib.packfa_fa_workspace_bytes, ctypes.byref(params), device, ctypes.byref(out))
    return out.value


def pack_k(lib, params, stream=0):
    _call(lib.packfa_pack_k, ctypes.byref(params), ctypes.c_void_p(stream))


def quantize_v(lib, params, stream=0):
    _call(lib.packfa_quantize_v, ctypes.byref(params), ctypes.c_void_p(stream))
