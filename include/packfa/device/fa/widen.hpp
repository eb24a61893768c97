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

// 16 bytes at a shared address that is 2 mod 4 (known at compile time: no alignment test).
PACKFA_DEV uint4 ld16_mis2(const char* p) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(p - 2);
  const uint32_t w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
  return make_uint4(arch::byte_perm(w0, w1, 0x5432), arch::byte_perm(w1, w2, 0x5432),
                    arch::byte_perm(w2, w3, 0x5432), arch::byte_perm(w3, w4, 0x5432));
}
// The raw bytes of V values 16c .. 16c + 15 of one row of a ggml-style format and their block
// scale, read apart from the widening (v_widen16) so that a batch of rows has its shared-memory
// loads in flight together (decision "prefill-widen-batched"). kAlign: the data's address mod
// 4 when the caller knows it (q8_0: 0 or 2), else -1 (tested at run time).
struct VRaw16 {
  uint4 q;
  uint32_t s;
};
template <VFormat VF, int kAlign = -1>
PACKFA_DEV VRaw16 v_load16(const char* vr, const char* vsr, int c) {
  static_assert(VF == VFormat::q8_0 || VF == VFormat::q4_0 || VF == VFormat::q8_0_planar, "blocked V formats");
  VRaw16 r;
  if constexpr (VF == VFormat::q8_0_planar) {
    r.q = *reinterpret_cast<const uint4*>(vr + 16 * c);
    r.s = ld_h16(vsr + 2 * (c / 2));
  } else if constexpr (VF == VFormat::q8_0) {  // block c / 2: fp16 d, then 32 int8
    const char* blk = vr + (c / 2) * kQ8_0BlockBytes;
    const char* d = blk + 2 + 16 * (c & 1);
    if constexpr (kAlign == 0) r.q = make_uint4(reinterpret_cast<const uint32_t*>(d)[0], reinterpret_cast<const uint32_t*>(d)[1],
                                                reinterpret_cast<const uint32_t*>(d)[2], reinterpret_cast<const uint32_t*>(d)[3]);
    else if constexpr (kAlign == 2) r.q = ld16_mis2(d);
    else r.q = ld16_a2(d);
    r.s = ld_h16(blk);
  } else {  // q4_0: block c / 2: fp16 d, 16 bytes
    const char* blk = vr + (c / 2) * kQ4_0BlockBytes;
    r.q = ld16_a2(blk + 2);
    r.s = ld_h16(blk);
  }
  return r;
}
// ... as 8 fp16 pairs, by the format's rule (docs/format.md).
template <VFormat VF>
PACKFA_DEV void v_widen16(VRaw16 r, int c, uint32_t (&h)[8]) {
  const uint32_t s = splat(static_cast<uint16_t>(r.s));
  if constexpr (VF == VFormat::q4_0) {  // element j low nibble of byte j, j + 16 high
    const int sh = 4 * (c & 1);
    uint4 q = r.q;
    q.x = (q.x >> sh) & 0x0f0f0f0fu, q.y = (q.y >> sh) & 0x0f0f0f0fu;
    q.z = (q.z >> sh) & 0x0f0f0f0fu, q.w = (q.w >> sh) & 0x0f0f0f0fu;
    widen_n4(q.x, s, h[0], h[1]);
    widen_n4(q.y, s, h[2], h[3]);
    widen_n4(q.z, s, h[4], h[5]);
    widen_n4(q.w, s, h[6], h[7]);
  } else {
    widen16_i8(r.q, s, h);
  }
}
// V values 16c .. 16c + 15 of one raw row of a ggml-style format as 8 fp16 pairs. vr: the
// row; vsr: its scale row (q8_0_planar).
template <VFormat VF>
PACKFA_DEV void v_pairs16(const char* vr, const char* vsr, int c, uint32_t (&h)[8]) {
  v_widen16<VF>(v_load16<VF>(vr, vsr, c), c, h);
}

}  // namespace packfa::device
