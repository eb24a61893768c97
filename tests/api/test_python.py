"""python/packfa/ over libpackfa_c: the ctypes mirror matches the C struct (a bad field is
reported by name), and errors arrive as packfa.Error. Runs without a GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import packfa  # noqa: E402

lib = packfa.load(sys.argv[1])
# one version: CMake's project(VERSION) reaches the C ABI and the Python package alike
assert packfa.version(lib) == packfa.__version__, (packfa.version(lib), packfa.__version__)
assert packfa.__version__[0].isdigit(), packfa.__version__


def good():
    return packfa.AttnParams(
        batch=1, nq=1, n_q_heads=8, n_kv_heads=2, head_dim=128, max_kv_len=64,
        q_type=packfa.DTYPE["f16"], q=0x10000, q_strides=(1024, 1024, 128),
        o_type=packfa.DTYPE["f16"], o=0x20000, o_strides=(1024, 1024, 128),
        k_format=packfa.K_FORMAT["packed16"], k=0x30000, k_strides=(0, 256, 128),
        k_scales=0x40000, k_scale_strides=(0, 16, 8),
        v_format=packfa.V_FORMAT["q8_0"], v=0x50000, v_strides=(0, 272, 136), kv_len=0x60000)


def expect_error(field, **change):
    p = good()
    for k, v in change.items():
        setattr(p, k, v)
    try:
        packfa.forward(lib, p)
    except packfa.Error as e:
        assert e.code == 1, (e.code, str(e))
        assert field in str(e), (field, str(e))
        return
    raise AssertionError("no error for " + field)


# fields late in the struct prove the layouts agree (a shifted field would be misreported)
expect_error("head_dim", head_dim=100)
expect_error("n_q_heads", n_q_heads=7)
expect_error("v.data", v=0x50001)
expect_error("window", window=-1)
expect_error("softcap", softcap=-1.0)
expect_error("num_splits", num_splits=-1)
expect_error("pdl", pdl=5)
# q8_0_planar: the appended v_scales / v_scale_strides are the struct's last fields
PLANAR = dict(v_format=packfa.V_FORMAT["q8_0_planar"], v_strides=(0, 256, 128))
expect_error("v.scales", **PLANAR)
expect_error("v.scales", **PLANAR, v_scales=0x58001)
expect_error("v.scale_strides.head", **PLANAR, v_scales=0x58000, v_scale_strides=(0, 16, 9))
expect_error("v_format", v_format=5)
# kv_len_host (host int32[batch], the split planner's copy of kv_len) is appended after errors:
# the C side must read the entries the Python side wrote
expect_error("kv_len_host", kv_len_host=[65])     # > max_kv_len = 64
expect_error("kv_len_host", kv_len_host=[-1])
hp = good()
hp.kv_len_host = [64]                             # a list becomes an int32 array the struct keeps
assert hp.kv_len_host[0] == 64
try:
    packfa.workspace_bytes(lib, hp)               # valid (a build without a GPU answers not_compiled)
except packfa.Error as e:
    assert e.code != 1, str(e)
hp.kv_len_host = None
assert not hp.kv_len_host                         # NULL again
# the library reads `batch` entries: a shorter list is refused before the call (no over-read)
hp = good()
hp.batch = 4
hp.kv_len_host = [10]
try:
    packfa.forward(lib, hp)
    raise AssertionError("a 1-entry kv_len_host for batch 4 was passed on")
except ValueError as e:
    assert "kv_len_host" in str(e) and "batch = 4" in str(e), str(e)
# upper bounds the library names (api.hpp: kMaxGridYZ, kMaxKeys)
expect_error("batch", batch=70000)
expect_error("max_kv_len", max_kv_len=2**31 - 1)
# ctypes would keep an out-of-range int's low bits (2**32 + 4096 -> 4096): refused by name
for field, value in (("window", 2**32 + 4096), ("num_splits", 2**32), ("batch", -2**31 - 1)):
    try:
        setattr(good(), field, value)
        raise AssertionError("%s = %d was accepted" % (field, value))
    except ValueError as e:
        assert field in str(e), str(e)
try:
    good().kv_len_host = [2**33]
    raise AssertionError("kv_len_host entry 2**33 was accepted")
except ValueError as e:
    assert "kv_len_host" in str(e), str(e)


def expect(field, fn, params):
    try:
        fn(lib, params)
    except packfa.Error as e:
        assert e.code == 1, (e.code, str(e))
        assert field in str(e), (field, str(e))
        return
    raise AssertionError("no error for " + field)


K_OK = dict(n_tokens=4, n_kv_heads=2, head_dim=128, src_type=packfa.DTYPE["f16"], src=0x10000,
            src_token_stride=256, src_head_stride=128, dst_payload=0x20000, dst_payload_strides=(0, 256, 128),
            dst_scales=0x30000, dst_scale_strides=(0, 16, 8))
V_OK = dict(n_tokens=4, n_kv_heads=2, head_dim=128, src_type=packfa.DTYPE["f16"], src=0x10000,
            src_token_stride=256, src_head_stride=128, v_format=packfa.V_FORMAT["q8_0"], dst=0x20000,
            dst_strides=(0, 272, 136))


def good_k(**change):
    return packfa.PackKParams(**{**K_OK, **change})


def good_v(**change):
    return packfa.QuantizeVParams(**{**V_OK, **change})


p = good()
p.head_dim = 100
expect("head_dim", packfa.workspace_bytes, p)
expect("head_dim", packfa.select_kernel, p)
try:  # valid params: an instance name and its splits on a GPU; a build without one answers not_compiled
    name, splits = packfa.select_kernel(lib, good())
    assert name.startswith("fa_") and splits >= 1, (name, splits)
except packfa.Error as e:
    assert e.code != 1, str(e)
# late fields of the pack / quantize structs prove those layouts agree too
expect("dst.block", packfa.pack_k, good_k(block=24))
expect("base_slot", packfa.pack_k, good_k(base_slot=-1))
expect("dst.scales", packfa.pack_k, good_k(dst_scales=None))
expect("v_format", packfa.quantize_v, good_v(v_format=9))
expect("base_slot", packfa.quantize_v, good_v(base_slot=-2))
expect("dst.scales", packfa.quantize_v, good_v(v_format=packfa.V_FORMAT["q8_0_planar"], dst_strides=(0, 256, 128)))
expect("dst.scale_strides", packfa.quantize_v,
       good_v(v_format=packfa.V_FORMAT["q8_0_planar"], dst_strides=(0, 256, 128), dst_scales=0x30000,
              dst_scale_strides=(0, 16, 7)))
packfa.pack_k(lib, good_k(n_tokens=0))      # nothing to do: ok without a device
packfa.quantize_v(lib, good_v(n_tokens=0))
packfa.pack_k(lib, good_k(n_tokens=0, src=None))   # an empty tensor's data pointer is null
packfa.quantize_v(lib, good_v(n_tokens=0, src=None))


# ---- keyword / enum handling: a typo raises, names are accepted --------------------------
def raises(exc, words, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError("no %s for %r" % (exc.__name__, (a, kw)))


for cls, typo, real in ((packfa.AttnParams, "headdim", "head_dim"), (packfa.PackKParams, "ntokens", "n_tokens"),
                        (packfa.QuantizeVParams, "vformat", "v_format")):
    raises(TypeError, [typo, cls.__name__, real], cls, **{typo: 1})   # names it and suggests the field
    obj = cls()
    raises(AttributeError, [typo], setattr, obj, typo, 1)             # attribute typos too
raises(TypeError, ["bogus"], packfa.AttnParams, head_dim=128, bogus=True)

named = packfa.AttnParams(q_type="f16", o_type="f32", k_format="f16", v_format="q8_0_planar", dot="f16",
                          alibi_mode="ggml")
assert (named.q_type, named.o_type, named.k_format, named.v_format, named.dot, named.alibi_mode) == (
    packfa.DTYPE["f16"], packfa.DTYPE["f32"], packfa.K_FORMAT["f16"], packfa.V_FORMAT["q8_0_planar"],
    packfa.DOT["f16"], packfa.ALIBI_MODE["ggml"])
assert packfa.PackKParams(src_type="bf16").src_type == packfa.DTYPE["bf16"]
assert packfa.QuantizeVParams(v_format="q4_0", src_type="f32").v_format == packfa.V_FORMAT["q4_0"]
raises(ValueError, ["v_format", "q9_0", "q8_0_planar"], packfa.AttnParams, v_format="q9_0")
raises(ValueError, ["alibi_mode", "linear"], packfa.AttnParams, alibi_mode="linear")
raises(ValueError, ["q_strides", "3"], packfa.AttnParams, q_strides=(1, 2))
raises(TypeError, ["head_dim"], packfa.AttnParams, head_dim="128")
# defaults the C struct's zero would get wrong
d = packfa.AttnParams()
assert (d.k_block, d.causal, d.pdl) == (32, 1, -1)
assert packfa.PackKParams().block == 32 and packfa.QuantizeVParams().pdl == -1


class FakeTensor:  # torch.Tensor-like: pointer fields take .data_ptr()
    def data_ptr(self):
        return 0x10000


assert packfa.AttnParams(q=FakeTensor()).q == 0x10000

# a string enum reaches the C side exactly as its int (same validation outcome)
p = good()
p.v_format = "q4_0"
p.v_strides = (0, 144, 72)
p.k_block = 16
p.head_dim = 80  # q4_0 needs head_dim % 32 == 0: the named enum arrived as q4_0
try:
    packfa.forward(lib, p)
    raise AssertionError("no error for v.format")
except packfa.Error as e:
    assert "v.format" in str(e) and "q8_0/q4_0" in str(e), str(e)

# ---- library search --------------------------------------------------------------------------
raises(OSError, ["/nonexistent/libpackfa_c.so", "not found"], packfa.load, "/nonexistent/libpackfa_c.so")
os.environ["PACKFA_LIB"] = os.path.dirname(os.path.abspath(sys.argv[1]))   # a directory works
assert packfa.version(packfa.load()) == packfa.__version__
os.environ["PACKFA_LIB"] = "/nonexistent/dir"
try:
    packfa.load()  # may still find the library elsewhere; if not, the message lists what was tried
except OSError as e:
    assert "$PACKFA_LIB" in str(e), str(e)
del os.environ["PACKFA_LIB"]
print("python ctypes: all checks passed")
