// packfa/device/fa/wave_mma_layout.hpp — which matrix instruction set a compile of the
// warp-MMA prefill kernel targets (Isa, kIsa, kHasWaveMma), and where the accumulator of one
// 32-lane wave lies: which (query row, key or head-dim column) element i of a lane holds, the
// lanes that share a row (row_max / row_sum, row_leader), and per-key arrays read in that
// order (key_slot, load_key_vals). The fragments and the MMAs are in fa/wave_mma.hpp, which
// includes this file; the kernel includes wave_mma.hpp.
//
// Scores and O are kept as 16 x 16 accumulator tiles of 8 fp32 values a lane (a wave owns 16
// query rows); acc_row(i) / acc_col(i) say which element i of the lane holds:
//   NVIDIA  two m16n8 tiles (S = Q·K^T): i = 4h + c: row g + 8·(c/2), col 8h + 2t + c%2
//           (g = lane/4, t = lane%4); a lane holds 2 rows (slots 0, 1), each spread over the 4
//           lanes of one g;
//   gfx11   one 16x16 tile of S^T = K·Q^T (keys on the M side): row lane%16, col 2i + lane/16;
//   gfx12   the same, col i + 8·(lane/16).
//   On RDNA a lane holds one row (slot 0), spread over lanes l and l ^ 16.
// The orientation (S or S^T) makes P·V take P straight from the score registers on every
// target: NVIDIA as the A operand of O = P·V (FlashAttention-2's register reuse), RDNA as the
// B operand of O^T = V^T·P^T.
#pragma once

#include "packfa/device/arch.hpp"

namespace packfa::device::wave {

enum class Isa { nv, gfx11, gfx12 };

#if defined(PACKFA_DEVICE_HIP) && defined(__GFX12__)
constexpr Isa kIsa = Isa::gfx12;
#elif defined(PACKFA_DEVICE_HIP)
constexpr Isa kIsa = Isa::gfx11;  // arch.hpp admits gfx11 and gfx12 only
#elif defined(PACKFA_BACKEND_HIP)
constexpr Isa kIsa = Isa::gfx12;  // host pass of a HIP compile: bodies are not emitted
#else
constexpr Isa kIsa = Isa::nv;
#endif
// The tensor-core instructions exist in this compile (device pass of sm_80+ or gfx11/12).
#if (defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800) || defined(PACKFA_DEVICE_HIP)
constexpr bool kHasWaveMma = true;
#else
constexpr bool kHasWaveMma = false;
#endif

constexpr bool kRdna = kIsa != Isa::nv;
constexpr int kLaneRows = kRdna ? 1 : 2;  // query rows a lane holds

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// ---- accumulator element -> (row, column) ---------------------------------------------------
PACKFA_DEV int acc_row(int i, int lane) {
  if constexpr (kRdna) return (void)i, lane & 15;
  else return (lane >> 2) + 8 * ((i >> 1) & 1);
}
PACKFA_DEV int acc_col(int i, int lane) {
  if constexpr (kIsa == Isa::gfx11) return 2 * i + (lane >> 4);
  else if constexpr (kIsa == Isa::gfx12) return i + 8 * (lane >> 4);
  else return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
}
// Which of the lane's rows element i belongs to (0 .. kLaneRows - 1), and that row's index.
constexpr int acc_slot(int i) { return kRdna ? 0 : (i >> 1) & 1; }
PACKFA_DEV int slot_row(int slot, int lane) { return kRdna ? (lane & 15) : (lane >> 2) + 8 * slot; }
// The lane that writes a row's single values (LSE): one per row.
PACKFA_DEV bool row_leader(int lane) { return kRdna ? lane < 16 : (lane & 3) == 0; }

// Max / sum over the lanes that share a row (each has already reduced its own elements).
PACKFA_DEV float row_max(float v) {
  if constexpr (kRdna) return fmaxf(v, arch::shfl_xor(v, 16));
  else {
    v = fmaxf(v, arch::shfl_xor(v, 1));
    return fmaxf(v, arch::shfl_xor(v, 2));
  }
}
PACKFA_DEV float row_sum(float v) {
  if constexpr (kRdna) return v + arch::shfl_xor(v, 16);
  else {
    v += arch::shfl_xor(v, 1);
    return v + arch::shfl_xor(v, 2);
  }
}

// Position of key k (0 .. 15 within a 16-key tile) in a per-key array that a lane reads as 8
// consecutive values for its elements 0..7 (RDNA) or as pairs (NVIDIA: identity).
constexpr int key_slot(int k) {
  return kIsa == Isa::gfx11 ? ((k & 1) << 3) | (k >> 1) : k;
}
// The lane's 8 per-key values of one 16-key tile of such an array (fp32 K block scales).
PACKFA_DEV void load_key_vals(const float* tile, int lane, float (&v)[8]) {
  if constexpr (kRdna) {
    const float4 a = *reinterpret_cast<const float4*>(tile + 8 * (lane >> 4));
    const float4 b = *reinterpret_cast<const float4*>(tile + 8 * (lane >> 4) + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const float2 a = *reinterpret_cast<const float2*>(tile + 2 * (lane & 3));
    const float2 b = *reinterpret_cast<const float2*>(tile + 8 + 2 * (lane & 3));
    v[0] = v[2] = a.x, v[1] = v[3] = a.y, v[4] = v[6] = b.x, v[5] = v[7] = b.y;
  }
}

#endif  // backend

}  // namespace packfa::device::wave
