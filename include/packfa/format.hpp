// packfa/format.hpp — cache formats and the exact quantization rules (host and device).
//
// docs/format.md is the prose version of this file. The functions here define the bits:
// the host packer (src/cpu/pack.cpp) and the GPU pack kernel (device/pack.hpp) both call
// them, so "bit-identical" holds by construction and is checked by tests anyway.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "packfa/device/arch.hpp"

namespace packfa {

enum class DType : uint8_t { f32 = 0, f16 = 1, bf16 = 2 };
enum class KFormat : uint8_t { packed16 = 0, f16 = 1 };
// q8_0_planar: q8_0's numbers (the same quantization, bit for bit) in two planes like packed16
// K: int8 rows of head_dim bytes (16-byte aligned) and a plane of fp16 block scales.
enum class VFormat : uint8_t { f16 = 0, bf16 = 1, q8_0 = 2, q4_0 = 3, q8_0_planar = 4 };
constexpr int kNumVFormats = 5;
// How the kernel forms q·k: int8 Q × int8 K on the 4-way dot (default), or fp16 Q × K
// (K dequantized), for users who do not want Q quantized.
enum class DotMode : uint8_t { int8 = 0, f16 = 1 };

constexpr int kQBlock = 32;           // Q is quantized per block of 32 values
constexpr int kPacked16Align = 16;    // payload row start alignment (one 128-bit load)
constexpr int kGgmlBlock = 32;        // q8_0 / q4_0 block length
constexpr int kQ8_0BlockBytes = 34;   // fp16 d + 32 int8
constexpr int kQ4_0BlockBytes = 18;   // fp16 d + 16 bytes of nibbles

// ---- fp16 / bf16 bits, identical on host and device (integer arithmetic only) -------------
PACKFA_HD float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// v >> shift (shift 1..24) rounded to nearest, ties to even.
PACKFA_HD uint32_t shift_round_even(uint32_t v, int shift) {
  const uint32_t r = v >> shift, rem = v & ((1u << shift) - 1u), half = 1u << (shift - 1);
  return r + ((rem > half || (rem == half && (r & 1u))) ? 1u : 0u);
}
// Round to nearest even; overflow gives ±inf, as IEEE conversion does.
PACKFA_HD uint16_t fp16_from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x33000001u) return sign;                                     // < half the smallest subnormal
  const int e = static_cast<int>(ax >> 23);
  if (e < 113)  // fp16 subnormal: the mantissa with its implicit bit, shifted 14..24
    return static_cast<uint16_t>(sign | shift_round_even((ax & 0x7fffffu) | 0x800000u, 126 - e));
  // normal: exponent and mantissa in one field, so a rounding carry moves into the exponent
  return static_cast<uint16_t>(sign | shift_round_even(((static_cast<uint32_t>(e - 112)) << 23) | (ax & 0x7fffffu), 13));
}

PACKFA_HD float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
PACKFA_HD uint16_t bf16_from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

PACKFA_HD bool is_finite_f32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x7f800000u) != 0x7f800000u;
}

// ---- packed16 K ------------------------------------------------------------------------------
// One (slot, kv_head) row of D values: D int8 in the payload plane, D/B fp16 scales in the
// scale plane. Value = q·d, q ∈ [−127, 127], d = fp16(amax / 127), q = round(x / float(d)).
// Non-finite x count as 0 (and are reported); amax/127 above 65504 clamps d to 65504.
struct Packed16BlockStats {
  int nonfinite = 0;  // non-finite inputs replaced by 0
  int overflow = 0;   // blocks whose scale was clamped to the fp16 maximum
};

constexpr uint16_t kFp16MaxBits = 0x7bffu;  // 65504

// Quantize one block of n (16 or 32) floats already shifted/scaled by smoothing.
PACKFA_HD uint16_t packed16_quantize_block(const float* x, int n, int8_t* q, Packed16BlockStats* st) {
  float amax = 0.0f;
  PACKFA_UNROLL
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    if (!is_finite_f32(v)) {
      if (st) ++st->nonfinite;
      continue;
    }
    amax = fmaxf(amax, fabsf(v));
  }
  uint16_t dbits = fp16_from_float(amax / 127.0f);
  if (dbits == 0x7c00u) {
    dbits = kFp16MaxBits;
    if (st) ++st->overflow;
  }
  const float d = fp16_to_float(dbits);
  PACKFA_UNROLL
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    if (d == 0.0f || !is_finite_f32(v)) {
      q[i] = 0;
      continue;
    }
    float r = roundf(v / d);
    r = fminf(127.0f, fmaxf(-127.0f, r));
    q[i] = static_cast<int8_t>(r);
  }
  return dbits;
}

// ---- ggml q8_0 / q4_0 (byte-compatible with ggml-common.h block_q8_0 / block_q4_0) --------
// The float nearest to x·y and to x + y, each rounded on its own: never fused into an FMA,
// never kept wider (host: -mfma / -march=native with gcc's default -ffp-contract=fast, x87
// excess precision; device compilers fuse a product into the add that follows). ggml's
// reference rounds the product and the sum of q4_0's nibble separately; fused, the nibble
// lands on the other side of a rounding boundary in some blocks (tests/cpu/quant_fma/).
// CUDA: the _rn intrinsics are never contracted. HIP: its __fmul_rn is a plain multiply that
// clang fuses (v_fmaak_f32 with 8.5 on gfx1100): the pragma keeps these operations unfused.
// Host: a volatile float holds a rounded float on every compiler, whatever the flags.
// One of x·y, x + y, x / y, rounded on its own as above.
enum class RoundedOp { mul, add, div };
template <RoundedOp O>
PACKFA_HD float op_rounded(float x, float y) {
#if defined(PACKFA_DEVICE_CUDA)
  if constexpr (O == RoundedOp::mul) {
    return __fmul_rn(x, y);
  } else if constexpr (O == RoundedOp::add) {
    return __fadd_rn(x, y);
  } else {
    return __fdiv_rn(x, y);
  }
#else
#if defined(PACKFA_DEVICE_HIP)
#pragma clang fp contract(off)
  const float r =
#else
  volatile float r =
#endif
      O == RoundedOp::mul ? x * y : O == RoundedOp::add ? x + y : x / y;
  return r;
#endif
}
PACKFA_HD float mul_rounded(float x, float y) { return op_rounded<RoundedOp::mul>(x, y); }
PACKFA_HD float add_rounded(float x, float y) { return op_rounded<RoundedOp::add>(x, y); }
PACKFA_HD float div_rounded(float x, float y) { return op_rounded<RoundedOp::div>(x, y); }

// Non-finite inputs of the V quantizers count as 0 (docs/format.md, "V formats").
PACKFA_HD float finite_or_zero(float v) { return is_finite_f32(v) ? v : 0.0f; }
// ggml's id = d ? 1/d : 0, with 0 also where 1/d overflows (|d| < 2^-128; its fp16 d is 0).
PACKFA_HD float inverse_or_zero(float d) {
  if (d == 0.0f) return 0.0f;
  const float id = div_rounded(1.0f, d);
  return is_finite_f32(id) ? id : 0.0f;
}
// C's float -> int8 conversion (truncation) where it is defined, saturated outside (ggml's
// reference is undefined there; only reachable with an fp32-subnormal d, stored as fp16 0).
PACKFA_HD int trunc_to_int8(float r) { return static_cast<int>(fminf(127.0f, fmaxf(-128.0f, r))); }

// q8_0 (ggml's quantize_row_q8_0_ref): d = amax/127, id = 1/d (0 if d = 0), q = roundf(x·id),
// d stored as fp16; both with fp32 d and id.
PACKFA_HD void q8_0_quantize_block(const float* x, uint8_t* block /*34 bytes*/) {
  float amax = 0.0f;
  PACKFA_UNROLL
  for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(finite_or_zero(x[i])));
  const float d = div_rounded(amax, 127.0f);
  const float id = inverse_or_zero(d);
  const uint16_t dbits = fp16_from_float(d);
  block[0] = static_cast<uint8_t>(dbits & 0xff);
  block[1] = static_cast<uint8_t>(dbits >> 8);
  PACKFA_UNROLL
  for (int i = 0; i < 32; ++i)
    block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(trunc_to_int8(roundf(mul_rounded(finite_or_zero(x[i]), id)))));
}

// q4_0 (ggml's quantize_row_q4_0_ref): d = (signed value of largest magnitude, the first on
// ties) / −8; nibble = min(15, (int8)(x·id + 8.5)), product and sum rounded apart; byte j
// holds element j in its low nibble and element j+16 in its high nibble.
PACKFA_HD void q4_0_quantize_block(const float* x, uint8_t* block /*18 bytes*/) {
  float amax = 0.0f, vmax = 0.0f;
  PACKFA_UNROLL
  for (int i = 0; i < 32; ++i) {
    const float v = finite_or_zero(x[i]);
    if (amax < fabsf(v)) {
      amax = fabsf(v);
      vmax = v;
    }
  }
  const float d = div_rounded(vmax, -8.0f);
  const float id = inverse_or_zero(d);
  const uint16_t dbits = fp16_from_float(d);
  block[0] = static_cast<uint8_t>(dbits & 0xff);
  block[1] = static_cast<uint8_t>(dbits >> 8);
  PACKFA_UNROLL
  for (int j = 0; j < 16; ++j) {
    const float x0 = mul_rounded(finite_or_zero(x[j]), id), x1 = mul_rounded(finite_or_zero(x[j + 16]), id);
    int n0 = trunc_to_int8(add_rounded(x0, 8.5f)), n1 = trunc_to_int8(add_rounded(x1, 8.5f));
    n0 = n0 < 15 ? n0 : 15;
    n1 = n1 < 15 ? n1 : 15;
    // as ggml: each nibble value as uint8 (a negative one, only with a subnormal d, wraps)
    block[2 + j] = static_cast<uint8_t>(static_cast<uint8_t>(n0) | (static_cast<uint8_t>(n1) << 4));
  }
}

// q8_0_planar: block b of a row = scale d[b] + quants q[32b .. 32b + 31], exactly the bytes
// q8_0_quantize_block writes (the scale first, then the quants), split over the two planes.
PACKFA_HD void q8_0_planar_quantize_block(const float* x, int8_t* q /*32*/, uint16_t* d) {
  uint8_t block[kQ8_0BlockBytes];
  q8_0_quantize_block(x, block);
  *d = static_cast<uint16_t>(block[0] | (block[1] << 8));
  PACKFA_UNROLL
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(block[2 + i]);
}

PACKFA_HD float q8_0_value(const uint8_t* block, int i) {
  const uint16_t d = static_cast<uint16_t>(block[0] | (block[1] << 8));
  return fp16_to_float(d) * static_cast<float>(static_cast<int8_t>(block[2 + i]));
}
PACKFA_HD float q4_0_value(const uint8_t* block, int i) {
  const uint16_t d = static_cast<uint16_t>(block[0] | (block[1] << 8));
  const uint8_t b = block[2 + (i & 15)];
  const int n = i < 16 ? (b & 0xf) : (b >> 4);
  return fp16_to_float(d) * static_cast<float>(n - 8);
}

// ---- sizes -------------------------------------------------------------------------------------
PACKFA_HD constexpr int64_t v_row_bytes(VFormat f, int head_dim) {
  switch (f) {
    case VFormat::f16:
    case VFormat::bf16: return 2 * static_cast<int64_t>(head_dim);
    case VFormat::q8_0: return static_cast<int64_t>(head_dim / kGgmlBlock) * kQ8_0BlockBytes;
    case VFormat::q4_0: return static_cast<int64_t>(head_dim / kGgmlBlock) * kQ4_0BlockBytes;
    case VFormat::q8_0_planar: return head_dim;  // the int8 plane; scales: v_scale_row_bytes
  }
  return 0;
}
// Bytes of one row of the V scale plane (0: the format has none).
PACKFA_HD constexpr int64_t v_scale_row_bytes(VFormat f, int head_dim) {
  return f == VFormat::q8_0_planar ? 2 * static_cast<int64_t>(head_dim / kGgmlBlock) : 0;
}
// Formats quantized in ggml blocks of 32 (head_dim % 32 == 0).
PACKFA_HD constexpr bool v_is_blocked(VFormat f) {
  return f == VFormat::q8_0 || f == VFormat::q4_0 || f == VFormat::q8_0_planar;
}
// Bits per stored value (scales included).
PACKFA_HD double k_bits_per_value(KFormat f, int block) {
  return f == KFormat::f16 ? 16.0 : 8.0 + 16.0 / block;
}
PACKFA_HD double v_bits_per_value(VFormat f) {
  switch (f) {
    case VFormat::f16:
    case VFormat::bf16: return 16.0;
    case VFormat::q8_0:
    case VFormat::q8_0_planar: return 8.5;
    case VFormat::q4_0: return 4.5;
  }
  return 0;
}

}  // namespace packfa
