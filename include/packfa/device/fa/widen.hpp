// packfa/device/fa/widen.hpp — raw cache bytes to fp16 pairs in packed fp16 arithmetic
// (NVIDIA sm_80+: both prefill kernels' widening of V, and of packed16 K in the wgmma kernel;
// elsewhere never called). int8 and nibbles become exact fp16 integers through the 0x6400
// trick (the byte in the mantissa of 1024), then one fp16 multiply by the block scale: the
// exact product rounded once, as float(q) · d rounded to fp16 (an 8-bit integer times an
// 11-bit significand is exact in fp32), with no conversion instructions (I2F / F2F issue at a
// quarter of the FP32 rate on sm_90).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/format.hpp"

namespace packfa::device {

// int8 x4 -> fp16 pairs, exact (0x64xx is 1024 + byte); widen_i8x4 also times the scale pair s2.
PACKFA_DEV void exact_i8x4(uint32_t x, uint32_t& lo, uint32_t& hi) {
  const uint32_t y = x ^ 0x80808080u;
  lo = arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4140), 0x64806480u);
  hi = arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4342), 0x64806480u);
}
PACKFA_DEV void widen_i8x4(uint32_t x, uint32_t s2, uint32_t& lo, uint32_t& hi) {
  exact_i8x4(x, lo, hi);
  lo = arch::hmul2(lo, s2);
  hi = arch::hmul2(hi, s2);
}
// four nibbles (one per byte, 0..15) -> (n - 8) · s
PACKFA_DEV void widen_n4(uint32_t x, uint32_t s2, uint32_t& lo, uint32_t& hi) {
  lo = arch::hmul2(arch::hsub2(arch::byte_perm(x, 0x64646464u, 0x4140), 0x64086408u), s2);
  hi = arch::hmul2(arch::hsub2(arch::byte_perm(x, 0x64646464u, 0x4342), 0x64086408u), s2);
}
PACKFA_DEV uint32_t splat(uint16_t h) { return static_cast<uint32_t>(h) * 0x10001u; }
// The 16 bits at a 2-byte aligned shared address.
PACKFA_DEV uint16_t ld_h16(const char* p) { return *reinterpret_cast<const uint16_t*>(p); }
// 16 bytes at a 2-byte aligned shared address.
PACKFA_DEV uint4 ld16_a2(const char* p) {
  const uint32_t a = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 3);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(p - a);
  if (a == 0) return make_uint4(w[0], w[1], w[2], w[3]);
  const uint32_t w4 = w[4];
  return make_uint4(arch::byte_perm(w[0], w[1], 0x5432), arch::byte_perm(w[1], w[2], 0x5432),
                    arch::byte_perm(w[2], w[3], 0x5432), arch::byte_perm(w[3], w4, 0x5432));
}
// 16 int8 -> 8 fp16 pairs, times the scale pair s2 (kScaled = false: the exact integers).
template <bool kScaled = true>
PACKFA_DEV void widen16_i8(const uint4 q, uint32_t s2, uint32_t (&h)[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kScaled)
      widen_i8x4(w[i], s2, h[2 * i], h[2 * i + 1]);
    else
      exact_i8x4(w[i], h[2 * i], h[2 * i + 1]);
  }
}

// V values 16c .. 16c + 15 of one raw row of a ggml-style format as 8 fp16 pairs, by the
// format's rule (docs/format.md). vr: the row; vsr: its scale row (q8_0_planar).
template <VFormat VF>
PACKFA_DEV void v_pairs16(const char* vr, const char* vsr, int c, uint32_t (&h)[8]) {
  static_assert(VF == VFormat::q8_0 || VF == VFormat::q4_0 || VF == VFormat::q8_0_planar, "blocked V formats");
  if constexpr (VF == VFormat::q8_0_planar) {
    widen16_i8(*reinterpret_cast<const uint4*>(vr + 16 * c), splat(ld_h16(vsr + 2 * (c / 2))), h);
  } else if constexpr (VF == VFormat::q8_0) {  // block c / 2: fp16 d, then 32 int8
    const char* blk = vr + (c / 2) * kQ8_0BlockBytes;
    widen16_i8(ld16_a2(blk + 2 + 16 * (c & 1)), splat(ld_h16(blk)), h);
  } else {  // q4_0: block c / 2: fp16 d, 16 bytes; element j low nibble of byte j, j + 16 high
    const char* blk = vr + (c / 2) * kQ4_0BlockBytes;
    uint4 q = ld16_a2(blk + 2);
    const uint32_t s = splat(ld_h16(blk));
    const int sh = 4 * (c & 1);
    q.x = (q.x >> sh) & 0x0f0f0f0fu, q.y = (q.y >> sh) & 0x0f0f0f0fu;
    q.z = (q.z >> sh) & 0x0f0f0f0fu, q.w = (q.w >> sh) & 0x0f0f0f0fu;
    widen_n4(q.x, s, h[0], h[1]);
    widen_n4(q.y, s, h[2], h[3]);
    widen_n4(q.z, s, h[4], h[5]);
    widen_n4(q.w, s, h[6], h[7]);
  }
}

}  // namespace packfa::device
