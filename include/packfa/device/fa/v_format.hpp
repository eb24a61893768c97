// packfa/device/fa/v_format.hpp — the V formats: how a V row in a stage buffer becomes
// numbers. Scalar P·V: load_v() dequantizes DPL dims of one row to fp32. Tensor-core P·V:
// VBlocks builds the mma A fragments of one 32-dim block of four key rows as exact fp16
// (f16 rows go through ldmatrix.trans in pv.hpp), and pv_dim() says which output dim each
// A-fragment row stands for. A new format adds a case to each of the three.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/format.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// V for kDpl consecutive dims of one row in shared memory; `d` is the block scale (1 for
// f16/bf16) so callers can fold it into p once per row instead of once per value.
template <VFormat VF, int DPL>
PACKFA_DEV void load_v(const char* row, const char* scale_row, int dim0, float (&v)[DPL], float& d) {
  if constexpr (VF == VFormat::q8_0_planar) {  // DPL dims inside one block of 32
    d = arch::half_to_float(reinterpret_cast<const uint16_t*>(scale_row)[dim0 / 32]);
    const int8_t* q = reinterpret_cast<const int8_t*>(row + dim0);
#pragma unroll
    for (int i = 0; i < DPL; ++i) v[i] = static_cast<float>(q[i]);
  } else if constexpr (VF == VFormat::f16 || VF == VFormat::bf16) {
    d = 1.0f;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(row + 2 * dim0);
    uint32_t words[DPL / 2];
    if constexpr (DPL == 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(w);
      words[0] = x.x; words[1] = x.y; words[2] = x.z; words[3] = x.w;
    } else if constexpr (DPL == 4) {
      const uint2 x = *reinterpret_cast<const uint2*>(w);
      words[0] = x.x; words[1] = x.y;
    } else {
      words[0] = w[0];
    }
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      if constexpr (VF == VFormat::f16) {
        arch::half2_to_float2(words[i], v[2 * i], v[2 * i + 1]);
      } else {
        v[2 * i] = __uint_as_float(words[i] << 16);
        v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  } else if constexpr (VF == VFormat::q8_0) {
    const char* blk = row + (dim0 / 32) * 34;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (dim0 & 31));  // 2-byte aligned
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = qs[i];
      v[2 * i] = static_cast<float>(static_cast<int8_t>(pair & 0xff));
      v[2 * i + 1] = static_cast<float>(static_cast<int8_t>(pair >> 8));
    }
  } else {  // q4_0: byte j holds element j (low nibble) and j + 16 (high nibble)
    const char* blk = row + (dim0 / 32) * 18;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const int j = dim0 & 31;
    const int shift = j < 16 ? 0 : 4;
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (j & 15));
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = static_cast<uint32_t>(qs[i]) >> shift;
      v[2 * i] = static_cast<float>(static_cast<int>(pair & 0xf) - 8);
      v[2 * i + 1] = static_cast<float>(static_cast<int>((pair >> 8) & 0xf) - 8);
    }
  }
}

// ---- tensor-core operands (NVIDIA) -----------------------------------------------------------
// q8_0/q4_0 bytes become exact fp16 integers with the 0x6400 trick (byte in the mantissa of
// 1024, then one f16x2 subtraction), so there is no dequant pass; the ggml block scale of
// each key goes into P instead (pv.hpp). An m-tile row is free to stand for any dim; the map
// below gives each lane contiguous bytes of its key rows.
template <VFormat VF>
PACKFA_DEV int pv_dim(int tile, int m) {
  if constexpr (VF == VFormat::q8_0 || VF == VFormat::q8_0_planar) {  // tile pair 2j, 2j+1 = block j; lane group g owns bytes 4g..4g+3
    return 32 * (tile >> 1) + 4 * (m & 7) + 2 * (tile & 1) + (m >> 3);
  } else if constexpr (VF == VFormat::q4_0) {  // lane group g owns bytes 2g, 2g+1: low nibbles, then high
    return 32 * (tile >> 1) + 16 * (tile & 1) + 2 * (m & 7) + (m >> 3);
  } else {
    return 16 * tile + m;
  }
}

// int8 byte `i` of x and of y -> fp16 pair (x's in the low half), exact.
PACKFA_DEV uint32_t i8_pair_to_half2(uint32_t x, uint32_t y, uint32_t i) {
  const uint32_t r = arch::byte_perm(x, y, i | ((i + 4) << 8));
  return arch::hsub2(arch::and_xor(r, 0x00ff00ffu, 0x64806480u), 0x64806480u);  // (1024 + (q + 128)) - 1152
}
// A fragment of one 16-dim tile from the quant words of keys a, b, c, d: bytes i, i + 1 of
// each, paired (a, b) and (c, d) along the keys.
PACKFA_DEV void i8_tile_to_half2(uint32_t (&a)[4], uint32_t xa, uint32_t xb, uint32_t xc, uint32_t xd, uint32_t i) {
  a[0] = i8_pair_to_half2(xa, xb, i);
  a[1] = i8_pair_to_half2(xa, xb, i + 1);
  a[2] = i8_pair_to_half2(xc, xd, i);
  a[3] = i8_pair_to_half2(xc, xd, i + 1);
}
// Low / high nibble of byte 0 and byte 2 of r -> fp16 pair of (nibble - 8), exact.
PACKFA_DEV uint32_t q4_lo_to_half2(uint32_t r) {
  return arch::hsub2(arch::and_xor(r, 0x000f000fu, 0x64006400u), 0x64086408u);  // (1024 + n) - 1032
}
PACKFA_DEV uint32_t q4_hi_to_half2(uint32_t r) {
  return arch::hfma2(arch::and_xor(r, 0x00f000f0u, 0x64006400u), 0x2c002c00u, 0xd480d480u);  // (1024 + 16n)/16 - 72
}

// The A fragments of 32-dim block j (tiles 2j, 2j + 1) of keys a, b (= a + 1), c (= a + 8),
// d (= c + 1) for q8_0, q8_0_planar and q4_0, with the block scales of the keys as fp16 pairs
// dab (keys a, b) and dcd (c, d). g = lane / 4. q8_0_planar: sa / sc are the scale rows of
// keys a and c (kVScalePitch apart from b's and d's); the scales of two blocks come per load.
template <VFormat VF, int VS_PITCH>
struct VBlocks {
  const char *ka, *kb, *kc, *kd;
  const char *sa, *sc;
  uint32_t wa = 0, wb = 0, wc = 0, wd = 0;  // q8_0_planar: fp16 scales of blocks j & ~1, j | 1

  PACKFA_DEV static uint32_t u16(const char* row, int off) {
    return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(row + off));
  }
  PACKFA_DEV static uint32_t w32(const char* row, int off) { return *reinterpret_cast<const uint32_t*>(row + off); }

  PACKFA_DEV void block(int j, int g, uint32_t (&a0)[4], uint32_t (&a1)[4], uint32_t& dab, uint32_t& dcd) {
    constexpr int kBlockBytes = VF == VFormat::q8_0 ? 34 : 18;  // ggml blocks: fp16 scale, then quants
    if constexpr (VF == VFormat::q8_0_planar) {  // quants 16-byte aligned: one word per key, no straddle
      if ((j & 1) == 0) {
        wa = w32(sa, 2 * j);
        wb = w32(sa + VS_PITCH, 2 * j);
        wc = w32(sc, 2 * j);
        wd = w32(sc + VS_PITCH, 2 * j);
      }
      const uint32_t sel = (j & 1) ? 0x7632 : 0x5410;
      dab = arch::byte_perm(wa, wb, sel);
      dcd = arch::byte_perm(wc, wd, sel);
      const int o = 32 * j + 4 * g;
      const uint32_t xa = w32(ka, o), xb = w32(kb, o), xc = w32(kc, o), xd = w32(kd, o);
      i8_tile_to_half2(a0, xa, xb, xc, xd, 0);
      i8_tile_to_half2(a1, xa, xb, xc, xd, 2);
    } else {
      const int sb = j * kBlockBytes;
      dab = arch::byte_perm(u16(ka, sb), u16(kb, sb), 0x5410);
      dcd = arch::byte_perm(u16(kc, sb), u16(kd, sb), 0x5410);
      if constexpr (VF == VFormat::q8_0) {
        // bytes 4g..4g+3 of the block's quants: 4-byte aligned for odd j; for even j they
        // straddle two aligned words (w0 bytes 2,3 and w1 bytes 0,1)
        const bool odd = (j & 1) != 0;
        const int o0 = odd ? sb + 2 + 4 * g : sb + 4 * g;
        const int o1 = odd ? o0 : o0 + 4;
        const uint32_t i0 = odd ? 0 : 2, i1 = odd ? 2 : 0;
        const uint32_t xa0 = w32(ka, o0), xb0 = w32(kb, o0), xc0 = w32(kc, o0), xd0 = w32(kd, o0);
        const uint32_t xa1 = odd ? xa0 : w32(ka, o1), xb1 = odd ? xb0 : w32(kb, o1);
        const uint32_t xc1 = odd ? xc0 : w32(kc, o1), xd1 = odd ? xd0 : w32(kd, o1);
        i8_tile_to_half2(a0, xa0, xb0, xc0, xd0, i0);
        i8_tile_to_half2(a1, xa1, xb1, xc1, xd1, i1);
      } else {  // q4_0: bytes 2g, 2g+1 of the block's quants
        const int o = sb + 2 + 2 * g;
        const uint32_t ab0 = arch::byte_perm(u16(ka, o), u16(kb, o), 0x0400);  // byte 2g of keys a, b
        const uint32_t ab1 = arch::byte_perm(u16(ka, o), u16(kb, o), 0x0501);  // byte 2g+1
        const uint32_t cd0 = arch::byte_perm(u16(kc, o), u16(kd, o), 0x0400);
        const uint32_t cd1 = arch::byte_perm(u16(kc, o), u16(kd, o), 0x0501);
        a0[0] = q4_lo_to_half2(ab0);
        a0[1] = q4_lo_to_half2(ab1);
        a0[2] = q4_lo_to_half2(cd0);
        a0[3] = q4_lo_to_half2(cd1);
        a1[0] = q4_hi_to_half2(ab0);
        a1[1] = q4_hi_to_half2(ab1);
        a1[2] = q4_hi_to_half2(cd0);
        a1[3] = q4_hi_to_half2(cd1);
      }
    }
  }
};

#endif

}  // namespace packfa::device
