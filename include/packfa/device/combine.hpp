// packfa/device/combine.hpp — merges split-KV partial states into the final output.
//
// Split s of a query row left (O_s unnormalised, M_s running max in log2 units, L_s sum).
// Final: M = max(M_s, sink), L = Σ L_s·2^(M_s−M) + 2^(sink−M), O = Σ O_s·2^(M_s−M) / L,
// LSE = (M + log2 L)·ln 2.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_packed16.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

constexpr int kCombineThreads = 128;

// One block per (sequence, query row, q head).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kCombineThreads, 1) fa_combine_kernel(const CombineParams p) {
  const int64_t row = blockIdx.x;  // (b * nq + i) * n_q_heads + h
  const int h = static_cast<int>(row % p.n_q_heads);
  const int64_t bi = row / p.n_q_heads;
  const int i = static_cast<int>(bi % p.nq);
  const int b = static_cast<int>(bi / p.nq);
  const int S = p.num_splits;

  pdl::wait();  // partials come from the split kernel
  pdl::launch_dependents();

  const float* ml = p.part_ml + row * S * 2;
  float M = p.sinks ? p.sinks[h] * kLog2e : kNegInf;
  for (int s = 0; s < S; ++s) M = fmaxf(M, ml[2 * s]);
  float L = (p.sinks && M != kNegInf) ? arch::exp2_fast(p.sinks[h] * kLog2e - M) : 0.0f;
  for (int s = 0; s < S; ++s) {
    const float ms = ml[2 * s];
    if (ms != kNegInf) L += ml[2 * s + 1] * arch::exp2_fast(ms - M);
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  const float* po = p.part_o + row * S * p.head_dim;
  const int64_t obase = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(i) * p.o_row +
                        static_cast<int64_t>(h) * p.o_head;
  for (int d = threadIdx.x; d < p.head_dim; d += kCombineThreads) {
    float o = 0.0f;
    for (int s = 0; s < S; ++s) {
      const float ms = ml[2 * s];
      if (ms != kNegInf) o = fmaf(po[static_cast<int64_t>(s) * p.head_dim + d], arch::exp2_fast(ms - M), o);
    }
    store_from_float(p.o, p.o_type, obase + d, o * inv);
  }
  if (threadIdx.x == 0 && p.lse) p.lse[row] = L > 0.0f ? (M + log2f(L)) / kLog2e : kNegInf;
}

}  // namespace packfa::device
