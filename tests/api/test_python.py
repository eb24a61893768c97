"""python/packfa/ over libpackfa_c: the ctypes mirror matches the C struct (a bad field is
reported by name), and errors arrive as packfa.Error. Runs without a GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import packfa  # noqa: E402

lib = packfa.load(sys.argv[1])
assert packfa.version(lib)


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
print("python ctypes: all checks passed")
