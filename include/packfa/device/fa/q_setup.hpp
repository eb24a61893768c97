// packfa/device/fa/q_setup.hpp — Q of the block's rows into shared memory (int8 with a block
// scale, or fp16-rounded fp32), then into the registers each main loop reads it from.
//
// Items: one wave per (row, 32-dim block), lane = dim, in batches of kQBatch per wave. The first
// batch is loaded before the key range is known: Q addresses do not depend on the lengths, so
// its latency overlaps the length load (at kv = 4k the prologue is most of the kernel).
// Branch-free per item (one type switch per batch, the row's query index by a float
// reciprocal: exact for row numbers < 2^16), so the loads issue back to back.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

template <class T>
struct QLoader {
  static constexpr int D = T::kD, B = T::kQBatch;
  const FaKernelParams& p;
  BlockRows br;
  int wave, lane;
  float inv_gqa;
  // Q and the smoothing factors, read from the parameters here, in the kernel: HIP then knows
  // them for global pointers (read inside load() they became flat loads on gfx11).
  const void* q;
  const float* smooth;

  PACKFA_DEV static QLoader make(const FaKernelParams& p, const BlockRows& br, int wave, int lane) {
    return QLoader{p, br, wave, lane, 1.0f / static_cast<float>(p.gqa), p.q, p.smooth};
  }
  // Items k0 .. k0 + B - 1 of this wave (past the end: 0), smoothing applied.
  PACKFA_DEV_STAGE void load(int k0, float (&x)[B]) const {
    int64_t idx[B];
    int dim[B];
    bool ok[B];
    PACKFA_UNROLL
    for (int k = 0; k < B; ++k) {
      const int item = wave + (k0 + k) * T::kWaves;
      const int r = item / T::kQBlocks, d = (item - r * T::kQBlocks) * 32 + lane;
      dim[k] = d;
      const int g = br.row0 + r, qi = static_cast<int>((static_cast<float>(g) + 0.5f) * inv_gqa);
      const int head = br.kvh * p.gqa + (g - qi * p.gqa);
      ok[k] = k0 + k < T::kQPerWave && item < T::kQItems && r < br.nrows && d < D;
      idx[k] = static_cast<int64_t>(br.b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
               static_cast<int64_t>(head) * p.q_head + d;
    }
    auto load_all = [&](auto one) {
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) x[k] = ok[k] ? one(idx[k]) : 0.0f;
    };
    if (p.q_type == static_cast<int>(DType::f16)) {
      load_all([&](int64_t i) { return arch::half_to_float(static_cast<const uint16_t*>(q)[i]); });
    } else if (p.q_type == static_cast<int>(DType::f32)) {
      load_all([&](int64_t i) { return static_cast<const float*>(q)[i]; });
    } else {
      load_all([&](int64_t i) { return arch::bf16_to_float(static_cast<const uint16_t*>(q)[i]); });
    }
    if (smooth) {
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k)
        if (ok[k]) x[k] *= smooth[static_cast<int64_t>(br.kvh) * D + dim[k]];
    }
  }

  // Decision "q-prefetch" (build option PACKFA_Q_PREFETCH; A/B pending, bench/NOTES.md): the
  // batches after the first are loaded only once the first chunk's copies have gone out (trace,
  // H100: the D = 256 16-row class, 8 batches a wave, spends 16-18 us there). If they wait on
  // the memory queues behind the grid's first chunks, one L2 prefetch a lane for each later
  // item's 32 dims, before those copies, makes them L2 hits.
  PACKFA_DEV void prefetch_rest() const {
#if defined(PACKFA_Q_PREFETCH)
    if constexpr (T::kQPerWave > B) {
      const int esz = p.q_type == static_cast<int>(DType::f32) ? 4 : 2;
      PACKFA_UNROLL
      for (int k = lane; k < T::kQPerWave - B; k += arch::kWaveSize) {
        const int item = wave + (B + k) * T::kWaves;
        const int r = item / T::kQBlocks, d0 = (item - r * T::kQBlocks) * 32, d1 = min(d0 + 31, D - 1);
        if (item < T::kQItems && r < br.nrows) {
          const int g = br.row0 + r, qi = static_cast<int>((static_cast<float>(g) + 0.5f) * inv_gqa);
          const int64_t row = static_cast<int64_t>(br.b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
                              static_cast<int64_t>(br.kvh * p.gqa + (g - qi * p.gqa)) * p.q_head;
          const char* base = static_cast<const char*>(q);
          arch::prefetch_l2(base + (row + d0) * esz);
          arch::prefetch_l2(base + (row + d1) * esz);  // f32 rows need not start on a line
        }
      }
    }
#endif
  }

  // Every item into shared memory, batch 0 already in xq: int8 with a wave max for the block
  // scale (softmax scale folded in, and log2(e) where the scores come out in log2 units), or
  // fp16-rounded fp32. The caller's barrier ends it.
  PACKFA_DEV void to_smem(const FaSmem<T>& sm, float (&xq)[B]) const {
    const float q_scale_mul = T::kScoresLog2 ? p.scale * kLog2e : p.scale;
#pragma unroll 1
    for (int k0 = 0; k0 < T::kQPerWave; k0 += B) {
      if (k0 > 0) load(k0, xq);
      // the batch's wave maxima first, with no branch between them, so their shuffle chains
      // overlap (items past the end hold zeros; at kv = 4k this set-up is on the critical path)
      float amax[B];
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) amax[k] = T::kInt8Q ? arch::group_max(fabsf(xq[k])) : 0.0f;
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) {
        const int item = wave + (k0 + k) * T::kWaves;
        if (k0 + k >= T::kQPerWave || item >= T::kQItems) break;
        const int r = item / T::kQBlocks, qb = item - r * T::kQBlocks, d = qb * 32 + lane;
        if constexpr (T::kInt8Q) {
          const float qd = amax[k] / 127.0f, inv = amax[k] > 0.0f ? 127.0f / amax[k] : 0.0f;
          const int qv = arch::round_to_int(xq[k] * inv);
          if (d < D) sm.q_i8()[r * D + d] = static_cast<int8_t>(max(-127, min(127, qv)));
          if (lane == 0) sm.q_scale()[r * T::kQBlocks + qb] = qd * q_scale_mul;
        } else {
          if (d < D) sm.q_f32()[r * D + d] = arch::half_to_float(arch::float_to_half(xq[k]));
        }
      }
    }
  }
};

// Q's block scales of every row, in registers (kQsInRegs) for the lane-path int8 Q·K.
template <class T, int NR>
PACKFA_DEV void q_scale_rows(float (&qs)[NR][T::kQBlocks], const FaSmem<T>& sm) {
  const float* qscale = sm.q_scale();
  PACKFA_UNROLL
  for (int qb = 0; qb < T::kQBlocks; ++qb)
    PACKFA_UNROLL
    for (int r = 0; r < NR; ++r) qs[r][qb] = qscale[r * T::kQBlocks + qb];
}

// Q as mma A fragments, rows lane/4 + 8h (zero past RMAX). int8: bytes 4·(lane%4).. of each
// 16-dim piece in [piece][h]; fp16: dims 2·(lane%4) (+1) in [piece][h], the same + 8 in
// [piece][2 + h]. int8 also gets the block scales of rows g, g + 8 (qsc[block][h]).
template <class T>
PACKFA_DEV void q_mma_frags(uint32_t (&qa)[T::kD / 16][4], float (&qsc)[T::kQBlocks][2], const FaSmem<T>& sm) {
  constexpr int D = T::kD, RMAX = T::kRows;
  const int lane = arch::lane_id();
  if constexpr (T::kInt8Q) {
    const float* qscale = sm.q_scale();
    PACKFA_UNROLL
    for (int qb = 0; qb < T::kQBlocks; ++qb)
      PACKFA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = (lane >> 2) + 8 * h;
        qsc[qb][h] = r < RMAX ? qscale[r * T::kQBlocks + qb] : 0.0f;
      }
  }
  const char* q = reinterpret_cast<const char*>(sm.q_f32());
  const int g = lane >> 2, t = lane & 3;
  PACKFA_UNROLL
  for (int piece = 0; piece < D / 16; ++piece)
    PACKFA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h;
      if constexpr (T::kQK == QKMode::packed16_int8) {
        qa[piece][h] = r < RMAX ? *reinterpret_cast<const uint32_t*>(q + r * D + 16 * piece + 4 * t) : 0u;
      } else if constexpr (T::kQK == QKMode::packed16_f16) {  // k pairs = dims 4t, 4t+1 / 4t+2, 4t+3 (qk_mma_f16q)
        const float* qf = reinterpret_cast<const float*>(q) + r * D + 16 * piece + 4 * t;
        qa[piece][h] = r < RMAX ? arch::pack_half2(qf[0], qf[1]) : 0u;
        qa[piece][2 + h] = r < RMAX ? arch::pack_half2(qf[2], qf[3]) : 0u;
      } else {
        const float* qf = reinterpret_cast<const float*>(q) + r * D + 16 * piece + 2 * t;
        qa[piece][h] = r < RMAX ? arch::pack_half2(qf[0], qf[1]) : 0u;
        qa[piece][2 + h] = r < RMAX ? arch::pack_half2(qf[8], qf[9]) : 0u;
      }
    }
}

#endif

}  // namespace packfa::device
