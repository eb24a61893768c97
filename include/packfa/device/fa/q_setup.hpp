// packfa/device/fa/q_setup.hpp — Q of the block's rows into shared memory (int8 with a block
// scale, or fp16-rounded fp32), then into the registers each main loop reads it from.
//
// Items (decision "q-vec"): 8 dims of one row a lane, one 16-byte load where the caller's Q rows
// are 16-byte aligned (FaKernelParams::q_vec; else 8 scalar loads, still one round trip); 4 lanes
// a 32-dim block, rows padded to whole blocks. A lane takes its items in batches of up to 4:
// the D = 256 16-row class needs 2, where items of one dim a lane needed 8 batches of 8, each
// after the first waiting 3-5 us behind the first chunk's copies (H100; 16 / 2 heads at kv
// 128k went from 86.5 to 73.4 us, bench/NOTES.md session 38).
// The first batch is loaded before the key range is known: Q addresses do not depend on the
// lengths, so its latency overlaps the length load (at kv = 4k the prologue is most of the
// kernel). Branch-free per item (one type and alignment switch per batch, the row's query
// index by a float reciprocal: exact for row numbers < 2^16), so the loads issue back to back.
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
  static constexpr int D = T::kD;
  static constexpr int kGroupsRow = (D + 31) / 32 * 4;  // 8-dim groups a row, whole blocks
  static constexpr int kItems = T::kRows * kGroupsRow;
  static constexpr int kPerLane = (kItems + T::kThreads - 1) / T::kThreads;
  static constexpr int B = kPerLane < 4 ? kPerLane : 4;
  using Batch = float[B][8];
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
  // Item k of this lane: a wave's 32 lanes take 32 consecutive items, so a block's 4 lanes are
  // one aligned lane quad.
  PACKFA_DEV int item_of(int k) const { return (k * T::kWaves + wave) * arch::kWaveSize + lane; }

  // Items k0 .. k0 + B - 1 of this lane (past the end or past the rows: 0), smoothing applied.
  PACKFA_DEV_STAGE void load(int k0, Batch& x) const {
    int64_t idx[B];
    int dim[B];
    bool ok[B];
    PACKFA_UNROLL
    for (int k = 0; k < B; ++k) {
      const int item = item_of(k0 + k);
      const int r = item / kGroupsRow, d = (item - r * kGroupsRow) * 8;
      dim[k] = d;
      const int g = br.row0 + r, qi = static_cast<int>((static_cast<float>(g) + 0.5f) * inv_gqa);
      const int head = br.kvh * p.gqa + (g - qi * p.gqa);
      ok[k] = k0 + k < kPerLane && item < kItems && r < br.nrows && d < D;
      idx[k] = static_cast<int64_t>(br.b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
               static_cast<int64_t>(head) * p.q_head + d;
    }
    auto zero = [&](int k) {
      PACKFA_UNROLL
      for (int i = 0; i < 8; ++i) x[k][i] = 0.0f;
    };
    const bool vec = p.q_vec != 0;
    if (p.q_type == static_cast<int>(DType::f32)) {
      const float* qf = static_cast<const float*>(q);
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) {
        zero(k);
        if (!ok[k]) continue;
        if (vec) {
          const float4 a = *reinterpret_cast<const float4*>(qf + idx[k]);
          const float4 b = *reinterpret_cast<const float4*>(qf + idx[k] + 4);
          x[k][0] = a.x, x[k][1] = a.y, x[k][2] = a.z, x[k][3] = a.w;
          x[k][4] = b.x, x[k][5] = b.y, x[k][6] = b.z, x[k][7] = b.w;
        } else {
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) x[k][i] = qf[idx[k] + i];
        }
      }
    } else {
      const uint16_t* qh = static_cast<const uint16_t*>(q);
      const bool f16 = p.q_type == static_cast<int>(DType::f16);
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) {
        uint32_t w[4] = {0u, 0u, 0u, 0u};
        if (ok[k]) {
          if (vec) {
            const uint4 u = *reinterpret_cast<const uint4*>(qh + idx[k]);
            w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
          } else {
            PACKFA_UNROLL
            for (int i = 0; i < 4; ++i)
              w[i] = static_cast<uint32_t>(qh[idx[k] + 2 * i]) | (static_cast<uint32_t>(qh[idx[k] + 2 * i + 1]) << 16);
          }
        }
        PACKFA_UNROLL
        for (int i = 0; i < 4; ++i) {
          if (f16) {
            arch::half2_to_float2(w[i], x[k][2 * i], x[k][2 * i + 1]);
          } else {
            x[k][2 * i] = arch::bf16_to_float(static_cast<uint16_t>(w[i] & 0xffffu));
            x[k][2 * i + 1] = arch::bf16_to_float(static_cast<uint16_t>(w[i] >> 16));
          }
        }
      }
    }
    if (smooth) {
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k)
        if (ok[k]) {
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) x[k][i] *= smooth[static_cast<int64_t>(br.kvh) * D + dim[k] + i];
        }
    }
  }
  // Every item into shared memory, batch 0 already in xq: int8 with the block's max over its
  // 4 lanes for the scale (softmax scale folded in, and log2(e) where the scores come out in
  // log2 units), or fp16-rounded fp32. Rows past nrows get zeros. The caller's barrier ends it.
  PACKFA_DEV void to_smem(const FaSmem<T>& sm, Batch& xq) const {
    const float q_scale_mul = T::kScoresLog2 ? p.scale * kLog2e : p.scale;
#pragma unroll 1
    for (int k0 = 0; k0 < kPerLane; k0 += B) {
      if (k0 > 0) load(k0, xq);
      // the batch's block maxima first, with no branch between them, so their shuffle chains
      // overlap (items past the end hold zeros; at kv = 4k this set-up is on the critical path)
      float amax[B];
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) {
        float m = 0.0f;
        PACKFA_UNROLL
        for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(xq[k][i]));
        amax[k] = T::kInt8Q ? arch::group_max<4>(m) : 0.0f;
      }
      PACKFA_UNROLL
      for (int k = 0; k < B; ++k) {
        const int item = item_of(k0 + k);
        if (k0 + k >= kPerLane || item >= kItems) break;
        const int r = item / kGroupsRow, grp = item - r * kGroupsRow, d = grp * 8;
        if constexpr (T::kInt8Q) {
          const float qd = amax[k] / 127.0f, inv = amax[k] > 0.0f ? 127.0f / amax[k] : 0.0f;
          uint32_t packed[2] = {0u, 0u};
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) {
            const int qv = max(-127, min(127, arch::round_to_int(xq[k][i] * inv)));
            packed[i / 4] |= (static_cast<uint32_t>(qv) & 0xffu) << (8 * (i % 4));
          }
          if (d < D) *reinterpret_cast<uint2*>(sm.q_i8() + r * D + d) = make_uint2(packed[0], packed[1]);
          if ((lane & 3) == 0) sm.q_scale()[r * T::kQBlocks + grp / 4] = qd * q_scale_mul;
        } else {
          float h[8];
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) h[i] = arch::half_to_float(arch::float_to_half(xq[k][i]));
          if (d < D) {
            float4* dst = reinterpret_cast<float4*>(sm.q_f32() + r * D + d);
            dst[0] = make_float4(h[0], h[1], h[2], h[3]);
            dst[1] = make_float4(h[4], h[5], h[6], h[7]);
          }
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
