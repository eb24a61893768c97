// packfa/device/combine.hpp — merges split-KV partial states into the final output.
//
// Split s of a query row left (O_s unnormalised, M_s running max in log2 units, L_s sum): the
// merge of fa/softmax.hpp's states with the sink as one more key. Final: M = max(M_s, sink),
// L = Σ L_s·2^(M_s−M) + 2^(sink−M), O = Σ O_s·2^(M_s−M) / L, LSE = (M + log2 L)·ln 2.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/combine_limits.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/softmax.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/trace.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

// Row `row` = (b · nq + i) · n_q_heads + h of the partials: its sequence, query row, q head.
struct CombineRow {
  int h, i, b;
};
PACKFA_DEV CombineRow combine_row(const CombineParams& p, int64_t row) {
  const int64_t bi = row / p.n_q_heads;
  return CombineRow{static_cast<int>(row % p.n_q_heads), static_cast<int>(bi % p.nq), static_cast<int>(bi / p.nq)};
}

// Output columns 4·col .. 4·col + 3 of query row i, head h of sequence b: o · inv.
PACKFA_DEV void store_o4(const CombineParams& p, int b, int i, int h, int col, float4 o, float inv) {
  const int64_t base = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(i) * p.o_row +
                       static_cast<int64_t>(h) * p.o_head + 4 * col;
  store_from_float(p.o, p.o_type, base, o.x * inv);
  store_from_float(p.o, p.o_type, base + 1, o.y * inv);
  store_from_float(p.o, p.o_type, base + 2, o.z * inv);
  store_from_float(p.o, p.o_type, base + 3, o.w * inv);
}

// The merge weights of one row from its splits' (max, sum) pairs, two per lane (lane s holds
// splits s and s + 32; absent splits (-inf, 0)), with the sink of q head h: M = max(M_s, sink),
// w_s = 2^(M_s − M) and L = Σ w_s·L_s (+ 2^(sink − M)). The one-wave and the row-block
// combine kernels use it (every wave of a row block computes it for itself).
struct SplitWeights {
  SoftmaxState st;  // the row's merged max and sum
  float w[kWarpCombineMaxSplits / arch::kWaveSize];
};
PACKFA_DEV SplitWeights split_weights(const CombineParams& p, int h,
                                      const float2 (&mine)[kWarpCombineMaxSplits / arch::kWaveSize]) {
  constexpr int kPer = kWarpCombineMaxSplits / arch::kWaveSize;
  SplitWeights r;
  r.st.m = sink_log2(p.sinks, h);
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) r.st.m = fmaxf(r.st.m, mine[k].x);
  r.st.m = arch::group_max(r.st.m);
  float l = 0.0f;
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) {
    r.w[k] = r.st.weight(mine[k].x);
    l += r.w[k] * mine[k].y;
  }
  r.st.l = arch::group_sum(l);
  if (p.sinks && r.st.m != kNegInf) r.st.l += arch::exp2_fast(p.sinks[h] * kLog2e - r.st.m);
  return r;
}

// The same for the block combine kernels (a block per row, kThreads threads, any split count):
// the weights go to w[S] (unnormalised until L is known), `red` holds one float a wave; the
// caller's first barrier after this may reuse neither before it is passed.
template <int kThreads>
PACKFA_DEV SoftmaxState block_split_weights(const float* ml, int S, const float* sinks, int h, float* w, float* red) {
  constexpr int kWaves = kThreads / arch::kWaveSize;
  const int tid = threadIdx.x, lane = arch::lane_id(), wave = tid / arch::kWaveSize;
  // M = max over splits (and the sink)
  float m = kNegInf;
  for (int s = tid; s < S; s += kThreads) m = fmaxf(m, ml[2 * s]);
  m = arch::group_max(m);
  if (lane == 0) red[wave] = m;
  __syncthreads();
  SoftmaxState st;
  st.m = sink_log2(sinks, h);
  PACKFA_UNROLL
  for (int k = 0; k < kWaves; ++k) st.m = fmaxf(st.m, red[k]);
  __syncthreads();
  // L = Σ l_s 2^(m_s − M) (+ sink)
  float l = 0.0f;
  for (int s = tid; s < S; s += kThreads) {
    const float f = st.weight(ml[2 * s]);
    w[s] = f;
    l += f * ml[2 * s + 1];
  }
  l = arch::group_sum(l);
  if (lane == 0) red[wave] = l;
  __syncthreads();
  st.l = (sinks && st.m != kNegInf) ? arch::exp2_fast(sinks[h] * kLog2e - st.m) : 0.0f;
  PACKFA_UNROLL
  for (int k = 0; k < kWaves; ++k) st.l += red[k];
  return st;
}

// Fewer than kRowCombineMinSplits splits (batches of short splits): one wave per (sequence,
// query row, q head), no block barriers. Lane s holds split s's (max, sum) (and s + 32), so
// the max, the weights and L are two wave reductions; each lane owns float4 columns of O and
// sums the splits' rows with the weights taken from their lanes. All loads go out before any math:
// one memory round trip where the block kernel below needs three dependent steps.
// kCols: float4 columns of O per lane (1: head_dim <= 128, 2: <= 256).
template <int kCols>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kCombineThreads, 1) fa_combine_warp_kernel(const CombineParams p) {
  constexpr int kRowsPerBlock = kCombineThreads / arch::kWaveSize;
  constexpr int kPer = kWarpCombineMaxSplits / arch::kWaveSize;  // (max, sum) pairs per lane
  constexpr int kBatch = 16 / kCols;                              // split rows in flight per lane
  // (40 per lane did not move the 4k combine on the H200, 2.05 us either way, and needs 256
  // VGPRs plus scratch on RDNA)
  const int lane = arch::lane_id();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / arch::kWaveSize;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.nq * p.n_q_heads;

  PACKFA_TRACE_AT(p, 0);
  pdl::wait();  // partials come from the split kernel
  PACKFA_TRACE_AT(p, 1);
  pdl::launch_dependents();
  if (row >= rows) return;
  const CombineRow cr = combine_row(p, row);
  const int h = cr.h, i = cr.i, b = cr.b;
  const int S = p.num_splits, cols = p.head_dim / 4;

  const float2* ml = reinterpret_cast<const float2*>(p.part_ml + row * S * 2);
  const float4* po = reinterpret_cast<const float4*>(p.part_o + row * S * p.head_dim);
  float2 mine[kPer];
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) {
    const int s = lane + k * arch::kWaveSize;
    mine[k] = s < S ? ml[s] : make_float2(kNegInf, 0.0f);
  }
  float4 acc[kCols], early[kBatch][kCols];
  PACKFA_UNROLL
  for (int c = 0; c < kCols; ++c) {
    acc[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int col = lane + c * arch::kWaveSize;
    PACKFA_UNROLL
    for (int k = 0; k < kBatch; ++k)
      early[k][c] = (k < S && col < cols) ? po[static_cast<int64_t>(k) * cols + col] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  const SplitWeights sw = split_weights(p, h, mine);
  float w[kPer];
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) w[k] = sw.w[k];
  const float inv = sw.st.inv_sum();

  auto add = [&](const float4 (&v)[kCols], float ws) {
    PACKFA_UNROLL
    for (int c = 0; c < kCols; ++c) fma4(acc[c], ws, v[c]);
  };
  auto weight = [&](int s) { return arch::shfl(w[s / arch::kWaveSize], s % arch::kWaveSize); };
  PACKFA_UNROLL
  for (int k = 0; k < kBatch; ++k)
    if (k < S) add(early[k], weight(k));
  for (int s0 = kBatch; s0 < S; s0 += kBatch) {
    float4 v[kBatch][kCols];
    PACKFA_UNROLL
    for (int k = 0; k < kBatch; ++k)
      PACKFA_UNROLL
      for (int c = 0; c < kCols; ++c) {
        const int col = lane + c * arch::kWaveSize;
        v[k][c] = (s0 + k < S && col < cols) ? po[static_cast<int64_t>(s0 + k) * cols + col]
                                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    PACKFA_UNROLL
    for (int k = 0; k < kBatch; ++k) {
      const float ws = weight(min(s0 + k, S - 1));  // every lane joins the shuffle
      if (s0 + k < S) add(v[k], ws);
    }
  }

  PACKFA_UNROLL
  for (int c = 0; c < kCols; ++c) {
    const int col = lane + c * arch::kWaveSize;
    if (col < cols) store_o4(p, b, i, h, col, acc[c], inv);
  }
  if (lane == 0 && p.lse) p.lse[row] = sw.st.lse();
  PACKFA_TRACE_AT(p, 2);
}

// kRowCombineMinSplits to kWarpCombineMaxSplits splits (long decode splits): one block of
// kCombineThreads per (sequence, query row, q head). Every wave reads all splits' (max, sum)
// pairs (lane s holds split s and s + 32) and forms M, L and the weights with wave
// reductions, no barrier; wave w sums the O rows of splits w, w + W, ... (all its loads
// issued before the weights are known), and one barrier adds the W wave sums. Why not one
// wave per row: for 33 splits its ~1000 dependent instructions (33 x 32 float4 columns) took
// 2.5 us after the split kernel on the H200, against 1.0 us for this kernel (bench/NOTES.md, "the
// combine gets a block per row").
// kCols: float4 columns of O per lane (1: head_dim <= 128, 2: <= 256).
template <int kCols>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kCombineThreads, 1) fa_combine_row_kernel(const CombineParams p) {
  constexpr int kWaves = kCombineThreads / arch::kWaveSize;
  constexpr int kPer = kWarpCombineMaxSplits / arch::kWaveSize;     // (max, sum) pairs per lane
  constexpr int kMine = kWarpCombineMaxSplits / kWaves;             // O rows per wave, at most
  constexpr int kBatch = kMine / kCols;                             // O rows in flight per lane
  __shared__ float4 part[kWaves][kCols * arch::kWaveSize];
  const int lane = arch::lane_id(), wave = threadIdx.x / arch::kWaveSize;
  const int64_t row = blockIdx.x;  // (b * nq + i) * n_q_heads + h
  const CombineRow cr = combine_row(p, row);
  const int h = cr.h, i = cr.i, b = cr.b;
  const int S = p.num_splits, cols = p.head_dim / 4;
  const float2* ml = reinterpret_cast<const float2*>(p.part_ml + row * S * 2);
  const float4* po = reinterpret_cast<const float4*>(p.part_o + row * S * p.head_dim);

  PACKFA_TRACE_AT(p, 0);
  pdl::wait();  // partials come from the split kernel
  PACKFA_TRACE_AT(p, 1);
  pdl::launch_dependents();

  auto load_rows = [&](int k0, float4 (&v)[kBatch][kCols]) {
    PACKFA_UNROLL
    for (int k = 0; k < kBatch; ++k) {
      const int s = wave + (k0 + k) * kWaves;
      PACKFA_UNROLL
      for (int c = 0; c < kCols; ++c) {
        const int col = lane + c * arch::kWaveSize;
        v[k][c] = (s < S && col < cols) ? po[static_cast<int64_t>(s) * cols + col]
                                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
  };
  float4 v[kBatch][kCols];
  load_rows(0, v);
  float2 mine[kPer];
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) {
    const int s = lane + k * arch::kWaveSize;
    mine[k] = s < S ? ml[s] : make_float2(kNegInf, 0.0f);
  }

  const SplitWeights sw = split_weights(p, h, mine);
  float w[kPer];
  PACKFA_UNROLL
  for (int k = 0; k < kPer; ++k) w[k] = sw.w[k];

  float4 acc[kCols];
  PACKFA_UNROLL
  for (int c = 0; c < kCols; ++c) acc[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  PACKFA_UNROLL
  for (int k0 = 0; k0 < kMine; k0 += kBatch) {
    if (k0 > 0) load_rows(k0, v);  // D = 256: the second half of the wave's rows
    PACKFA_UNROLL
    for (int k = 0; k < kBatch; ++k) {
      const int s = wave + (k0 + k) * kWaves;
      float wsrc = w[0];  // the weights of splits s and s + 32 sit in w[0], w[1] of lane s % 32
      PACKFA_UNROLL
      for (int q = 1; q < kPer; ++q)
        if (s >= q * arch::kWaveSize) wsrc = w[q];
      const float ws = arch::shfl(wsrc, s % arch::kWaveSize);
      PACKFA_UNROLL
      for (int c = 0; c < kCols; ++c) fma4(acc[c], ws, v[k][c]);
    }
  }
  PACKFA_UNROLL
  for (int c = 0; c < kCols; ++c) part[wave][lane + c * arch::kWaveSize] = acc[c];
  __syncthreads();
  // thread t finishes float4 column t (head_dim / 4 <= kCombineThreads)
  const int t = threadIdx.x;
  if (t < cols) {
    float4 o = part[0][t];
    PACKFA_UNROLL
    for (int x = 1; x < kWaves; ++x) {
      add4(o, part[x][t]);
    }
    store_o4(p, b, i, h, t, o, sw.st.inv_sum());
  }
  if (t == 0 && p.lse) p.lse[row] = sw.st.lse();
  PACKFA_TRACE_AT(p, 2);
}

// More splits: one block per (sequence, query row, q head). The split states are read in parallel: the
// weights 2^(M_s − M) / L go to shared memory, then thread groups each sum a strided subset
// of splits for 4 dims at a time (float4 loads, the first batch issued before the weights are
// known) and are reduced at the end.
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kCombineThreads, 1) fa_combine_kernel(const CombineParams p) {
  __shared__ float w[kMaxSplits];
  __shared__ float red[kCombineThreads / arch::kWaveSize];
  __shared__ float4 part[kCombineThreads];
  const int64_t row = blockIdx.x;  // (b * nq + i) * n_q_heads + h
  const CombineRow cr = combine_row(p, row);
  const int h = cr.h, i = cr.i, b = cr.b;
  const int S = p.num_splits;
  const int tid = threadIdx.x;

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

  const SoftmaxState st = block_split_weights<kCombineThreads>(p.part_ml + row * S * 2, S, p.sinks, h, w, red);
  const float inv = st.inv_sum();

  // O: D/4 float4 columns x `groups` split subsets (first kBatch splits of each subset already loaded)
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (grp < groups) {
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int s = grp + k * groups;
      const float ws = s < S ? w[s] : 0.0f;
      fma4(acc, ws, early[k]);
    }
#pragma unroll 4
    for (int s = grp + kBatch * groups; s < S; s += groups) {
      const float ws = w[s];
      const float4 v = po[static_cast<int64_t>(s) * cols];
      fma4(acc, ws, v);
    }
  }
  part[tid] = acc;
  __syncthreads();
  if (tid < cols) {
    float4 o = part[tid];
    for (int g = 1; g < groups; ++g) {
      add4(o, part[g * cols + tid]);
    }
    store_o4(p, b, i, h, tid, o, inv);
  }
  if (tid == 0 && p.lse) p.lse[row] = st.lse();
}

// More than kWarpCombineMaxSplits splits (few KV heads, D = 256: 132-256 splits a row): a block
// of kColCombineThreads per (row, kColCombineCols float4 columns), so a row's partials are read
// by head_dim / 64 blocks instead of one (16 rows x 256 splits x 1 KB = 4 MB went through 16
// SMs in fa_combine_kernel, each thread with 4 loads in flight: ~30 dependent L2 round trips).
// Every block forms M, L and the weights of its row (S (max, sum) pairs: 8 bytes a split, cheap
// next to its S x 256 bytes of O); thread group grp sums splits grp, grp + G, ... of its
// column with kColCombineBatch loads in flight, one barrier reduces the G groups. The first
// batch is issued before the weights. The default for > 64 splits (PACKFA_COMBINE_COLS=0
// restores fa_combine_kernel; read once, src/dispatch.cu): D 256, 16/2 heads, kv 32k, 256
// splits 697 -> 830 GB/s on the H200 (bench/NOTES.md session 12).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kColCombineThreads, 1) fa_combine_col_kernel(const CombineParams p) {
  constexpr int kC = kColCombineCols, kG = kColCombineThreads / kC, kB = kColCombineBatch;
  constexpr int kWaves = kColCombineThreads / arch::kWaveSize;
  __shared__ float w[kMaxSplits];
  __shared__ float red[kWaves];
  __shared__ float4 part[kColCombineThreads];
  const int cols = p.head_dim / 4, col_blocks = (cols + kC - 1) / kC;
  const int64_t row = blockIdx.x / col_blocks;  // (b * nq + i) * n_q_heads + h
  const int cb = static_cast<int>(blockIdx.x - row * col_blocks);
  const CombineRow cr = combine_row(p, row);
  const int S = p.num_splits;
  const int tid = threadIdx.x;
  const int col = cb * kC + tid % kC, grp = tid / kC;
  const bool live = col < cols;

  pdl::wait();  // partials come from the split kernel
  pdl::launch_dependents();

  const float4* po = reinterpret_cast<const float4*>(p.part_o + row * S * p.head_dim) + col;
  float4 v[kB];
  auto load = [&](int s0) {
    PACKFA_UNROLL
    for (int k = 0; k < kB; ++k) {
      const int s = s0 + k * kG;
      v[k] = live && s < S ? po[static_cast<int64_t>(s) * cols] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  };
  load(grp);

  const SoftmaxState st = block_split_weights<kColCombineThreads>(p.part_ml + row * S * 2, S, p.sinks, cr.h, w, red);

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int s0 = grp;; s0 += kB * kG) {
    PACKFA_UNROLL
    for (int k = 0; k < kB; ++k) {
      const int s = s0 + k * kG;
      fma4(acc, s < S ? w[s] : 0.0f, v[k]);
    }
    if (s0 + kB * kG >= S) break;
    load(s0 + kB * kG);
  }
  part[tid] = acc;
  __syncthreads();
  if (tid < kC && live) {
    float4 o = part[tid];
    PACKFA_UNROLL
    for (int g = 1; g < kG; ++g) {
      add4(o, part[g * kC + tid]);
    }
    store_o4(p, cr.b, cr.i, cr.h, col, o, st.inv_sum());
  }
  if (cb == 0 && tid == 0 && p.lse) p.lse[row] = st.lse();
}

}  // namespace packfa::device
