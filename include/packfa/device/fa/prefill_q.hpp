// packfa/device/fa/prefill_q.hpp — the prefill kernel's Q tile: 128 query rows read once a
// block, quantized per 32-block in the int8 mode, as fp16 in the MMA layout of prefill_tiles.hpp.
#pragma once

#include <cstdint>

#include "packfa/device/fa/prefill_tiles.hpp"
#include "packfa/device/fa/rows.hpp"

namespace packfa::device::prefill {

// ---- Q: 128 rows to fp16 in the MMA layout (int8 mode: quantized per 32-block first) ----------
// Values e < n of a row's 32-block at `src` as float, Q's type T (float, or the bits of f16 /
// bf16: kBf16), as 16-byte loads where `vec` says the block is 16-byte aligned, else one load a
// value; 0 past n and for invalid rows.
template <class T, bool kBf16>
PACKFA_DEV void q_block(const T* src, bool valid, bool vec, int n, float (&x)[32]) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));  // values a 16-byte load
  if (valid && vec) {
#pragma unroll
    for (int c = 0; c < 32 / kPer; ++c) {
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (c * kPer < n) w = *reinterpret_cast<const uint4*>(src + c * kPer);
      const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (sizeof(T) == 4) {
          x[c * kPer + i] = __uint_as_float(u[i]);
        } else if constexpr (kBf16) {
          x[c * kPer + 2 * i] = __uint_as_float(u[i] << 16), x[c * kPer + 2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        } else {
          arch::half2_to_float2(u[i], x[c * kPer + 2 * i], x[c * kPer + 2 * i + 1]);
        }
      }
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 32; ++e) {
    float v = 0.0f;
    if (valid && e < n) {
      if constexpr (sizeof(T) == 4) v = src[e];
      else if constexpr (kBf16) v = arch::bf16_to_float(src[e]);
      else v = arch::half_to_float(src[e]);
    }
    x[e] = v;
  }
}

// By the consumer threads tid = 0 .. kConsumers - 1, Q of type T (q_block): each thread a (row,
// 32-block) item at a time. The type is fixed here, outside the unrolled loops (decision
// "prefill-epilogue-one-path": a type test per value interleaves the types' code).
template <int D, VFormat VF, QKMode QK, class T, bool kBf16>
PACKFA_DEV void load_q_blocks(const FaKernelParams& p, char* sq, int b, int kvh, int r0, int tid) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kBlocks = (D + 31) / 32;
  const T* q = static_cast<const T*>(p.q);
  // 16-byte loads where the base and every stride keep each 32-block 16-byte aligned (d0 is a
  // multiple of 32 values)
  constexpr int64_t kAlign = 16 / sizeof(T);
  const bool vec = reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && p.q_seq % kAlign == 0 && p.q_row % kAlign == 0 &&
                   p.q_head % kAlign == 0;
  for (int i = tid; i < L::kM * kBlocks; i += L::kConsumers) {
    const int r = i % L::kM, blk = i / L::kM, d0 = 32 * blk, n = D - d0 < 32 ? D - d0 : 32;
    const QRowAt at = q_row_at(p, b, kvh, r0 + r, d0);
    float x[32];
    q_block<T, kBf16>(q + (at.valid ? at.off : 0), at.valid, vec, n, x);
    if (p.smooth && at.valid) {
#pragma unroll
      for (int e = 0; e < 32; ++e)
        if (e < n) x[e] *= p.smooth[kvh * D + d0 + e];
    }
    if constexpr (QK == QKMode::packed16_int8) {  // RefMode::kernel_int8 / quantize_q_int8
      float amax = 0.0f;
#pragma unroll
      for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(x[e]));
      const float qd = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        int qv = arch::round_to_int(x[e] * inv);
        qv = qv < -127 ? -127 : (qv > 127 ? 127 : qv);
        x[e] = static_cast<float>(qv);  // exact in fp16; the scale is applied to the block's sum
      }
      // times the softmax scale in the exp2 domain: the block sums come out ready for exp2
      // (prefill-k-rounded: the plain scale, so that the ratios below are qd_blk / qd_max
      // exactly, as RefMode::kernel_int8_k16 computes them; the softmax factor goes into the
      // row's factor once)
      reinterpret_cast<float*>(sq + (L::kQd - L::kQ))[r * kBlocks + blk] =
          amax > 0.0f ? (L::kKRounded ? qd : qd * (p.scale * 1.4426950408889634f)) : 0.0f;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (8 * c < n) {
        uint4 w;
        w.x = cvt_half2(x[8 * c + 0], x[8 * c + 1]);
        w.y = cvt_half2(x[8 * c + 2], x[8 * c + 3]);
        w.z = cvt_half2(x[8 * c + 4], x[8 * c + 5]);
        w.w = cvt_half2(x[8 * c + 6], x[8 * c + 7]);
        *reinterpret_cast<uint4*>(sq + tile_off<L::kSwizzle>(L::kM, r, d0 / 8 + c)) = w;
      }
    }
  }
}

// By the consumer threads tid = 0 .. kConsumers - 1; sync() is their barrier (prefill-k-rounded
// rescales the int8 rows once every block's scale is known).
template <int D, VFormat VF, QKMode QK, class Sync>
PACKFA_DEV void load_q(const FaKernelParams& p, char* sq, int b, int kvh, int r0, int tid, Sync&& sync) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kBlocks = (D + 31) / 32;
  if (p.q_type == static_cast<int>(DType::f16)) load_q_blocks<D, VF, QK, uint16_t, false>(p, sq, b, kvh, r0, tid);
  else if (p.q_type == static_cast<int>(DType::bf16)) load_q_blocks<D, VF, QK, uint16_t, true>(p, sq, b, kvh, r0, tid);
  else load_q_blocks<D, VF, QK, float, false>(p, sq, b, kvh, r0, tid);
  if constexpr (L::kKRounded && QK == QKMode::packed16_int8) {
    // prefill-k-rounded: block blk's integers times qd_blk / qd_max (one fp16 rounding, values
    // within ±127: no fp16 underflow for small Q), and qd_max · scale · log2(e) as the row's
    // score factor
    sync();
    const float* qdt = reinterpret_cast<const float*>(sq + (L::kQd - L::kQ));
    float* rowf = reinterpret_cast<float*>(sq + (L::kQRowF - L::kQ));
    for (int i = tid; i < L::kM * kBlocks; i += L::kConsumers) {
      const int r = i % L::kM, blk = i / L::kM, d0 = 32 * blk, n = D - d0 < 32 ? D - d0 : 32;
      float qmax = 0.0f;
#pragma unroll
      for (int k = 0; k < kBlocks; ++k) qmax = fmaxf(qmax, qdt[r * kBlocks + k]);
      const float ratio = qmax > 0.0f ? qdt[r * kBlocks + blk] / qmax : 0.0f;
      if (blk == 0) rowf[r] = qmax * (p.scale * 1.4426950408889634f);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (8 * c < n) {
          uint4* at = reinterpret_cast<uint4*>(sq + tile_off<L::kSwizzle>(L::kM, r, d0 / 8 + c));
          uint4 w = *at;
          uint32_t* e = &w.x;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            float lo, hi;
            arch::half2_to_float2(e[k], lo, hi);
            e[k] = cvt_half2(lo * ratio, hi * ratio);
          }
          *at = w;
        }
      }
    }
  }
}

}  // namespace packfa::device::prefill
