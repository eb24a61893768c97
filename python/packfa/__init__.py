"""packfa through ctypes: the C ABI (include/packfa/c_api.h) of libpackfa_c.

    import packfa
    lib = packfa.load()                 # or packfa.load("build/libpackfa_c.so"); see load()
    p = packfa.AttnParams(batch=1, nq=1, n_q_heads=32, n_kv_heads=8, head_dim=128,
                          q_type="f16", k_format="packed16", v_format="q8_0", ...)
    packfa.forward(lib, p, stream=0)   # raises packfa.Error("invalid_argument: head_dim: ...")
    packfa.workspace_bytes(lib, p)      # bytes of split scratch the call needs
    packfa.select_kernel(lib, p)        # (instance name, key splits) the call would run
    packfa.pack_k(lib, packfa.PackKParams(...))        # pack-on-write of new K rows
    packfa.quantize_v(lib, packfa.QuantizeVParams(...))  # quantize-on-write of new V rows

Pointers are integers (device addresses) or objects with .data_ptr() (torch tensors); strides
follow api.hpp (Q/O in elements {seq, row, head}; K/V in bytes {seq, slot, head}).
Enums take their names or their ints: DTYPE f32/f16/bf16; K_FORMAT packed16/f16; V_FORMAT
f16/bf16/q8_0/q4_0/q8_0_planar; DOT int8/f16; ALIBI_MODE position/ggml. q8_0_planar V also
needs its scale plane: v_scales / v_scale_strides (AttnParams), dst_scales /
dst_scale_strides (QuantizeVParams). AttnParams.kv_len_host is a HOST int32 array (None, a
ctypes array or a list of ints, kept alive by the struct): the split planner's copy of kv_len.
Unknown keywords raise TypeError, unknown attributes AttributeError (a typo never leaves a
field at 0 silently).
"""
import ctypes
import ctypes.util
import difflib
import operator
import os
import re


def _read_version():
    # One source: CMake's project(VERSION). Installed: _version.py written by CMake or by the
    # wheel build; in a checkout: parsed from ../../CMakeLists.txt.
    try:
        from ._version import __version__ as v  # noqa: F401
        return v
    except ImportError:
        pass
    cm = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "CMakeLists.txt")
    try:
        with open(cm, encoding="utf-8") as f:
            m = re.search(r"project\(\s*packfa\s+VERSION\s+([0-9.]+)", f.read())
        if m:
            return m.group(1)
    except OSError:
        pass
    return "0+unknown"


__version__ = _read_version()

DTYPE = {"f32": 0, "f16": 1, "bf16": 2}
K_FORMAT = {"packed16": 0, "f16": 1}
V_FORMAT = {"f16": 0, "bf16": 1, "q8_0": 2, "q4_0": 3, "q8_0_planar": 4}
DOT = {"int8": 0, "f16": 1}
ALIBI_MODE = {"position": 0, "ggml": 1}
# Which name table each enum field takes its strings from.
_ENUM_FIELDS = {"q_type": DTYPE, "o_type": DTYPE, "src_type": DTYPE, "k_format": K_FORMAT,
                "v_format": V_FORMAT, "dot": DOT, "alibi_mode": ALIBI_MODE}

_i64x3 = ctypes.c_int64 * 3
_i64x2 = ctypes.c_int64 * 2


_INT_RANGE = {
    ctypes.c_int32: (-2**31, 2**31 - 1), ctypes.c_int64: (-2**63, 2**63 - 1),
    ctypes.c_uint32: (0, 2**32 - 1), ctypes.c_uint64: (0, 2**64 - 1),
}
_INT_RANGE[ctypes.c_int] = _INT_RANGE[ctypes.c_int32] if ctypes.sizeof(ctypes.c_int) == 4 else _INT_RANGE[ctypes.c_int64]
_INT_RANGE[ctypes.c_size_t] = _INT_RANGE[ctypes.c_uint64] if ctypes.sizeof(ctypes.c_size_t) == 8 else _INT_RANGE[ctypes.c_uint32]


class _Params(ctypes.Structure):
    """Common part of the three parameter structs: keyword construction with defaults,
    unknown names rejected, enum names and tensor-like pointers converted."""

    _defaults = {}

    def __init__(self, **kw):
        super().__init__()
        names = self._names()
        for k in kw:
            if k not in names:
                raise TypeError("%s() got an unexpected keyword argument %r%s"
                                % (type(self).__name__, k, _suggest(k, names)))
        for k, v in {**self._defaults, **kw}.items():
            setattr(self, k, v)

    @classmethod
    def _names(cls):
        return [f[0] for f in cls._fields_]

    def __setattr__(self, name, value):
        cls = type(self).__name__
        ftypes = dict((f[0], f[1]) for f in self._fields_)
        if name not in ftypes:
            raise AttributeError("%s has no field %r%s" % (cls, name, _suggest(name, list(ftypes))))
        ftype = ftypes[name]
        if name in _ENUM_FIELDS and isinstance(value, str):
            table = _ENUM_FIELDS[name]
            if value not in table:
                raise ValueError("%s.%s: unknown name %r (one of %s)" % (cls, name, value, ", ".join(table)))
            value = table[value]
        elif ftype is ctypes.c_void_p and hasattr(value, "data_ptr"):
            value = value.data_ptr()
        elif isinstance(ftype, type) and issubclass(ftype, ctypes._Pointer) and (
                value is None or isinstance(value, (ctypes._Pointer, ctypes.Array))):
            # None, a ctypes array (its length is known) or a raw pointer (it is not)
            object.__setattr__(self, "_host_len_" + name, len(value) if isinstance(value, ctypes.Array) else None)
        elif (isinstance(ftype, type) and issubclass(ftype, ctypes._Pointer) and value is not None
              and not isinstance(value, (ctypes._Pointer, ctypes.Array))):
            # a host array field (kv_len_host): a sequence of ints becomes a ctypes array the
            # struct keeps alive; None stays NULL
            try:
                seq = [operator.index(x) for x in value]  # a float is refused, not truncated
            except TypeError:
                raise TypeError("%s.%s: expected None or a sequence of integers, got %r"
                                % (cls, name, value)) from None
            lo, hi = _INT_RANGE.get(ftype._type_, (None, None))
            for i, x in enumerate(seq):
                if lo is not None and not lo <= x <= hi:
                    raise ValueError("%s.%s: entry %d (%d) does not fit %s" % (cls, name, i, x, ftype._type_.__name__))
            value = (ftype._type_ * len(seq))(*seq)
            object.__setattr__(self, "_host_len_" + name, len(seq))
        elif ftype in _INT_RANGE and name not in _ENUM_FIELDS and not isinstance(value, bool):
            # ctypes keeps the low bits of an out-of-range int (2**32 + 5 would become 5): refuse it
            try:
                iv = operator.index(value)
            except TypeError:
                raise TypeError("%s.%s: expected an int, got %r" % (cls, name, value)) from None
            lo, hi = _INT_RANGE[ftype]
            if not lo <= iv <= hi:
                raise ValueError("%s.%s: %d does not fit %s [%d, %d]" % (cls, name, iv, ftype.__name__, lo, hi))
            value = iv
        elif isinstance(ftype, type) and issubclass(ftype, ctypes.Array) and not isinstance(value, ctypes.Array):
            try:
                seq = list(value)
            except TypeError:
                raise TypeError("%s.%s: expected a sequence of %d integers, got %r"
                                % (cls, name, ftype._length_, value)) from None
            if len(seq) != ftype._length_:
                raise ValueError("%s.%s: expected %d values, got %d" % (cls, name, ftype._length_, len(seq)))
            value = ftype(*seq)
        try:
            super().__setattr__(name, value)
        except TypeError as e:
            raise TypeError("%s.%s: %s" % (cls, name, e)) from None


def _suggest(name, names):
    close = difflib.get_close_matches(name, names, n=1)
    return " (did you mean %r?)" % close[0] if close else ""


class AttnParams(_Params):
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
        # appended (split planner): optional HOST int32[batch] copy of kv_len. A typed pointer, so
        # an int32 array (or a list, converted) assigned to it stays alive with the struct.
        ("kv_len_host", ctypes.POINTER(ctypes.c_int32)),
    ]

    _defaults = {"k_block": 32, "causal": 1, "pdl": -1}


class PackKParams(_Params):
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

    _defaults = {"block": 32, "pdl": -1}


class QuantizeVParams(_Params):
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

    _defaults = {"pdl": -1}


class Error(RuntimeError):
    """A packfa Status that is not ok: .code (int) and the message naming the field."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


_LIBNAME = "libpackfa_c.so"


def _candidates(path):
    """Where load() looks, in order, as (origin, file) pairs."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []

    def add(origin, p):
        if p:
            out.append((origin, os.path.join(p, _LIBNAME) if os.path.isdir(p) else p))
    add("argument", path)
    add("$PACKFA_LIB", os.environ.get("PACKFA_LIB"))  # explicit override first
    add("next to the package", os.path.join(here, _LIBNAME))
    try:
        from ._install import LIBDIR  # written by cmake --install
        add("cmake --install libdir", os.path.join(LIBDIR, _LIBNAME))
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(here))
    if os.path.exists(os.path.join(root, "CMakeLists.txt")):  # a checkout: ./packfa build puts it in build/
        add("checkout build/", os.path.join(root, "build", _LIBNAME))
    return out


def load(path=None):
    """Loads libpackfa_c.so: `path` (a file or directory) when given, else $PACKFA_LIB, the
    package's own directory, the libdir of the cmake --install that installed this package,
    a checkout's build/, then the system library path. Raises OSError naming what was tried
    and, when the library exists but does not load, why (e.g. the CUDA runtime it needs)."""
    tried = []
    for origin, cand in _candidates(path):
        if not os.path.exists(cand):
            tried.append("%s (%s): not found" % (cand, origin))
            if origin == "argument":
                break  # an explicit path that is wrong is an error, not a hint to look elsewhere
            continue
        try:
            return _bind(ctypes.CDLL(os.path.abspath(cand)))
        except OSError as e:
            raise OSError("packfa: %s (%s) exists but does not load: %s%s"
                          % (cand, origin, e, _load_hint(str(e)))) from None
    if path is None:
        found = ctypes.util.find_library("packfa_c")
        if found:
            try:
                return _bind(ctypes.CDLL(found))
            except OSError as e:
                raise OSError("packfa: %s (system library path) does not load: %s%s"
                              % (found, e, _load_hint(str(e)))) from None
        tried.append("system library path: no libpackfa_c")
    raise OSError("packfa: libpackfa_c.so not found; tried:\n  " + "\n  ".join(tried) +
                  "\nBuild it (./packfa build, or the packfa_c target) and set PACKFA_LIB to the file "
                  "or its directory, or `cmake --install` packfa and pip install <prefix>/share/packfa/python.")


def _load_hint(msg):
    if "libcudart" in msg:
        return (" -- the CUDA runtime this build links is not on the library path "
                "(add the CUDA toolkit's lib64 to LD_LIBRARY_PATH)")
    if "libamdhip" in msg:
        return " -- the HIP runtime is not on the library path"
    return ""


def _bind(lib):
    lib.packfa_version.restype = ctypes.c_char_p
    lib.packfa_fa_forward.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.packfa_fa_forward.restype = ctypes.c_int
    lib.packfa_fa_workspace_bytes.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
    lib.packfa_fa_workspace_bytes.restype = ctypes.c_int
    if hasattr(lib, "packfa_fa_select_kernel"):  # a library older than the query lacks it
        lib.packfa_fa_select_kernel.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_int, ctypes.c_char_p,
                                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                                ctypes.c_size_t]
        lib.packfa_fa_select_kernel.restype = ctypes.c_int
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


def _check_host_lens(params):
    # the library reads `batch` entries of kv_len_host: a shorter array would be read past its end
    n = getattr(params, "_host_len_kv_len_host", None)
    if n is not None and n < params.batch:
        raise ValueError("%s.kv_len_host: %d entries for batch = %d" % (type(params).__name__, n, params.batch))


def forward(lib, params, stream=0):
    _check_host_lens(params)
    _call(lib.packfa_fa_forward, ctypes.byref(params), ctypes.c_void_p(stream))


def workspace_bytes(lib, params, device=0):
    _check_host_lens(params)
    out = ctypes.c_size_t(0)
    _call(lib.packfa_fa_workspace_bytes, ctypes.byref(params), device, ctypes.byref(out))
    return out.value


def select_kernel(lib, params, device=0):
    """(instance name, key splits) of the kernel a forward call with these params would run on
    `device`, without launching it; raises Error as forward would when none can run."""
    _check_host_lens(params)
    if not hasattr(lib, "packfa_fa_select_kernel"):
        raise AttributeError("this libpackfa_c.so has no packfa_fa_select_kernel (built before the query)")
    name = ctypes.create_string_buffer(256)
    splits = ctypes.c_int(0)
    _call(lib.packfa_fa_select_kernel, ctypes.byref(params), device, name, len(name), ctypes.byref(splits))
    return name.value.decode(), splits.value


def pack_k(lib, params, stream=0):
    _call(lib.packfa_pack_k, ctypes.byref(params), ctypes.c_void_p(stream))


def quantize_v(lib, params, stream=0):
    _call(lib.packfa_quantize_v, ctypes.byref(params), ctypes.c_void_p(stream))
