"""packfa through ctypes: the C ABI (include/packfa/c_api.h) of libpackfa_c.

    import packfa
    lib = packfa.load("build/libpackfa_c.so")
    p = packfa.AttnParams(batch=1, nq=1, n_q_heads=32, n_kv_heads=8, head_dim=128, ...)
    packfa.forward(lib, p, stream=0)   # raises packfa.Error("invalid_argument: head_dim: ...")

Pointers are integers (device addresses, e.g. torch.Tensor.data_ptr()); strides follow
api.hpp (Q/O in elements {seq, row, head}; K/V in bytes {seq, slot, head}).
Enums: DTYPE f32/f16/bf16; K_FORMAT packed16/f16; V_FORMAT f16/bf16/q8_0/q4_0; DOT int8/f16.
"""
import ctypes

DTYPE = {"f32": 0, "f16": 1, "bf16": 2}
K_FORMAT = {"packed16": 0, "f16": 1}
V_FORMAT = {"f16": 0, "bf16": 1, "q8_0": 2, "q4_0": 3}
DOT = {"int8": 0, "f16": 1}

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
    ]

    def __init__(self, **kw):
        super().__init__()
        self.k_block, self.causal, self.pdl = 32, 1, -1
        for name, value in kw.items():
            if name.endswith("_strides"):
                value = (ctypes.c_int64 * len(value))(*value)
            setattr(self, name, value)


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
    return lib


def version(lib):
    return lib.packfa_version().decode()


def forward(lib, params, stream=0):
    msg = ctypes.create_string_buffer(512)
    code = lib.packfa_fa_forward(ctypes.byref(params), ctypes.c_void_p(stream), msg, len(msg))
    if code != 0:
        raise Error(code, msg.value.decode())
