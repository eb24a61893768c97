// packfa/device/combine.hpp — merges split-KV partial states into the final output.
//
// Split s of a query row left (O_s unnormalised, M_s running max in log2 units, L_s sum).
// Final: M = max(M_s, sink), L = Σ L_s·2^(M_s−M) + 2^(sink−M), O = Σ O_s·2^(M_s−M) / L,
// LSE = (M + log2 L)·ln 2.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/combine_limits.hpp"
#include "packfa/device/fa_packed16.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {


// One block per (sequence, query row, q head). The split states are read in parallel: the
// weights 2^(M_s − M) / L go to shared memory, then thread groups each sum a strided subset
// of splits for 4 dims at a time (float4 loads, the first batch issued before the weights are
// known) and are reduced at the end.
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kCombineThreads, 1) fa_combine_kernel(const CombineParams p) {
  __shared__ float w[kMaxSplits];
  __shared__ float red[kCombineThreads / arch::kWaveSize];
  __shared__ float4 part[kCombineThreads];
  const int64_t row = blockIdx.x;  // (b * nq + i) * n_q_heads + h
  const int h = static_cast<int>(row % p.n_q_heads);
  const int64_t bi = row / p.n_q_heads;
  const int i = static_cast<int>(bi % p.nq);
  const int b = static_cast<int>(bi / p.nq);
  const int S = p.num_splits;
  const int tid = threadIdx.x, lane = arch::lane_id(), wave = tid / arch::kWaveSize;
  constexpr int kWaves = kCombineThreads / arch::kWaveSize;

  pdl::wait();  // partials come from the split kernel
  pdl::launch_dependents();

  // The partial O rows do not depend on the weights: the first batch is loaded now, so its
  // latency overlaps the max / sum reductions below.
  const int cols = p.head_dim / 4;
  const int groups = kCombineThreads / cols;
  const int col = tid % cols, grp = tid / cols;
  const float4* po = reinterpret_cast<const float4*>(p.part_o + row * S * p.head_dim) + col;
  constexpr int kBatch = 8;
  float4 early[kBatch];
#pragma unroll
  for (int k = 0; k < kBatch; ++k) {
    const int s = grp + k * groups;
    early[k] = (grp < groups && s < S) ? po[static_cast<int64_t>(s) * cols] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  const float* ml = p.part_ml + row * S * 2;
  // M = max over splits (and the sink)
  float m = kNegInf;
  for (int s = tid; s < S; s += kCombineThreads) m = fmaxf(m, ml[2 * s]);
  m = arch::group_max(m);
  if (lane == 0) red[wave] = m;
  __syncthreads();
  float M = p.sinks ? p.sinks[h] * kLog2e : kNegInf;
#pragma unroll
  for (int k = 0; k < kWaves; ++k) M = fmaxf(M, red[k]);
  __syncthreads();
  // L = Σ l_s 2^(m_s − M) (+ sink); weights kept unnormalised until L is known
  float l = 0.0f;
  for (int s = tid; s < S; s += kCombineThreads) {
    const float ms = ml[2 * s];
    const float f = ms == kNegInf ? 0.0f : arch::exp2_fast(ms - M);
    w[s] = f;
    l += f * ml[2 * s + 1];
  }
  l = arch::group_sum(l);
  if (lane == 0) red[wave] = l;
  __syncthreads();
  float L = (p.sinks && M != kNegInf) ? arch::exp2_fast(p.sinks[h] * kLog2e - M) : 0.0f;
#pragma unroll
  for (int k = 0; k < kWaves; ++k) L += red[k];
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;

  // O: D/4 float4 columns x `groups` split subsets (first kBatch splits of each subset already loaded)
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (grp < groups) {
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int s = grp + k * groups;
      const float ws = s < S ? w[s] : 0.0f;
      acc.x = fmaf(ws, early[k].x, acc.x);
      acc.y = fmaf(ws, early[k].y, acc.y);
      acc.z = fmaf(ws, early[k].z, acc.z);
      acc.w = fmaf(ws, early[k].w, acc.w);
    }
#pragma unroll 4
    for (int s = grp + kBatch * groups; s < S; s += groups) {
      const float ws = w[s];
      const float4 v = po[static_cast<int64_t>(s) * cols];
      acc.x = fmaf(ws, v.x, acc.x);
      acc.y = fmaf(ws, v.y, acc.y);
      acc.z = fmaf(ws, v.z, acc.z);
      acc.w = fmaf(ws, v.w, acc.w);
    }
  }
  part[tid] = acc;
  __syncthreads();
  if (tid < cols) {
    float4 o = part[tid];
    for (int g = 1; g < groups; ++g) {
      const float4 v = part[g * cols + tid];
      o.x += v.x;
      o.y += v.y;
      o.z += v.z;
      o.w += v.w;
    }
    const int64_t obase = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(i) * p.o_row +
                          static_cast<int64_t>(h) * p.o_head + 4 * tid;
    store_from_float(p.o, p.o_type, obase, o.x * inv);
    store_from_float(p.o, p.o_type, obase + 1, o.y * inv);
    store_from_float(p.o, p.o_type, obase + 2, o.z * inv);
    store_from_float(p.o, p.o_type, obase + 3, o.w * inv);
  }
  if (tid == 0 && p.lse) p.lse[row] = L > 0.0f ? (M + log2f(L)) / kLog2e : kNegInf;
}

}  // namespace packfa::device
