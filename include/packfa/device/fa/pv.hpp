// packfa/device/fa/pv.hpp — P·V of one chunk into the wave's output accumulators.
//
// Tensor cores (NVIDIA, every V format but bf16): O^T (dims x rows) += V^T (dims x keys) ·
// P^T (keys x rows), mma.m16n8k16, fp32 accumulation. A = V straight from the stage
// (v_format.hpp); B = P (rows >= RMAX are zero) times the ggml block scale of its key, in fp16:
// the scale varies by key and 32-dim block, so each block gets its own B (2 registers per 16
// keys). Elsewhere lane = kDpl output dims, V dequantized in registers, fp32 FMAs.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"
#include "packfa/device/fa/v_format.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// Tensor-core accumulators: C register c of tile (i, nt) is dim pv_dim(i, g + 8·(c/2)), row
// 8·nt + 2·(lane%4) + c%2.
template <int D, int NT>
struct PvAcc {
  float c[D / 16][NT][4];  // [m-tile][n-tile][mma C register]
  PACKFA_DEV void zero() {
    PACKFA_UNROLL
    for (int i = 0; i < D / 16; ++i)
      PACKFA_UNROLL
      for (int nt = 0; nt < NT; ++nt)
        PACKFA_UNROLL
        for (int j = 0; j < 4; ++j) c[i][nt][j] = 0.0f;
  }
};

// P operands of one chunk: pb[16-key step][n-tile][register], and the running-max
// correction of the accumulator columns this lane holds (rows 8·nt + t2, + 1).
template <int NT>
struct PvOperands {
  uint32_t pb[kFaChunk / 16][NT][2];
  float corr[NT][2];
};

// From the lane = key softmax: P in pbuf ([row][key]), corrections in corr_s (rows >= RMAX: 0 / 1).
template <class T>
PACKFA_DEV void pv_operands_from_smem(PvOperands<T::kNt>& op, const float* pbuf, const float* corr_s) {
  constexpr int NT = T::kNt, RMAX = T::kRows;
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  PACKFA_UNROLL
  for (int nt = 0; nt < NT; ++nt) {
    const int r0 = 8 * nt + t2;
    op.corr[nt][0] = r0 < RMAX ? corr_s[r0] : 1.0f;
    op.corr[nt][1] = r0 + 1 < RMAX ? corr_s[r0 + 1] : 1.0f;
    const int row = 8 * nt + g;
    PACKFA_UNROLL
    for (int ks = 0; ks < kFaChunk / 16; ++ks) {
      float2 lo{0.0f, 0.0f}, hi{0.0f, 0.0f};
      if (row < RMAX) {
        lo = *reinterpret_cast<const float2*>(pbuf + row * T::kPPitch + 16 * ks + t2);
        hi = *reinterpret_cast<const float2*>(pbuf + row * T::kPPitch + 16 * ks + t2 + 8);
      }
      op.pb[ks][nt][0] = arch::pack_half2(lo.x, lo.y);
      op.pb[ks][nt][1] = arch::pack_half2(hi.x, hi.y);
    }
  }
}

// Last, partial chunk (tensor-core P·V): V rows past nvalid hold stale bytes; their p is 0, but
// 0 · NaN is NaN in the mma, so they become zeros (and q8_0_planar's scales: P·scale would be
// 0·NaN). Before the wave sync that precedes the chunk's reads.
template <class T>
PACKFA_DEV void pv_clear_tail(const StageSmem& st, int nvalid) {
  if constexpr (T::kMmaPv) {
    const int lane = arch::lane_id();
    if (nvalid < T::kChunk) {
      uint4* vz = reinterpret_cast<uint4*>(st.v + nvalid * T::kVPitch);
      for (int i = lane; i < (T::kChunk - nvalid) * T::kVPitch / 16; i += arch::kWaveSize) vz[i] = uint4{0, 0, 0, 0};
      if constexpr (T::kVF == VFormat::q8_0_planar) {
        uint2* sz = reinterpret_cast<uint2*>(st.vs + nvalid * T::kVScalePitch);
        for (int i = lane; i < (T::kChunk - nvalid) * T::kVScalePitch / 8; i += arch::kWaveSize) sz[i] = uint2{0, 0};
      }
    }
  }
}

template <class T>
PACKFA_DEV void pv_mma(PvAcc<T::kD, T::kNt>& acc, const PvOperands<T::kNt>& op, const StageSmem& st, int nvalid) {
  constexpr int D = T::kD, NT = T::kNt;
  constexpr VFormat VF = T::kVF;
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  bool rescale = false;
  PACKFA_UNROLL
  for (int nt = 0; nt < NT; ++nt) rescale = rescale || op.corr[nt][0] != 1.0f || op.corr[nt][1] != 1.0f;
  if (arch::wave_any(rescale)) {  // once the running maxima settle, most chunks skip this
    PACKFA_UNROLL
    for (int nt = 0; nt < NT; ++nt)
      PACKFA_UNROLL
      for (int i = 0; i < D / 16; ++i) {
        acc.c[i][nt][0] *= op.corr[nt][0];
        acc.c[i][nt][1] *= op.corr[nt][1];
        acc.c[i][nt][2] *= op.corr[nt][0];
        acc.c[i][nt][3] *= op.corr[nt][1];
      }
  }
  PACKFA_UNROLL
  for (int ks = 0; ks < T::kChunk / 16; ++ks) {
    const int k0 = 16 * ks;
    if (k0 >= nvalid) break;
    const auto& pb = op.pb[ks];
    if constexpr (VF == VFormat::f16) {
      const int lkey = k0 + (lane & 7) + ((lane >> 4) & 1) * 8;
      const char* lrow = st.v + lkey * T::kVPitch + ((lane >> 3) & 1) * 16;
      PACKFA_UNROLL
      for (int i = 0; i < D / 16; ++i) {
        uint32_t a[4];
        arch::ldmatrix_x4_trans(a, lrow + 32 * i);
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) arch::mma_16x8x16_f16(acc.c[i][nt], a, pb[nt][0], pb[nt][1]);
      }
    } else {  // q8_0, q8_0_planar, q4_0: per 32-dim block j, its scales (dab, dcd) and tiles 2j, 2j+1
      const char* ka = st.v + (k0 + t2) * T::kVPitch;  // keys k0+t2, +1, +8, +9
      const char* kc = ka + 8 * T::kVPitch;
      const char* sa = st.vs + (k0 + t2) * T::kVScalePitch;
      VBlocks<VF, T::kVScalePitch> vb{ka, ka + T::kVPitch, kc, kc + T::kVPitch, sa, sa + 8 * T::kVScalePitch};
      PACKFA_UNROLL
      for (int j = 0; j < D / 32; ++j) {
        uint32_t dab, dcd, a0[4], a1[4];
        vb.block(j, g, a0, a1, dab, dcd);
        uint32_t bj[NT][2];  // P times the block scale of its key
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          bj[nt][0] = arch::hmul2(pb[nt][0], dab);
          bj[nt][1] = arch::hmul2(pb[nt][1], dcd);
        }
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          arch::mma_16x8x16_f16(acc.c[2 * j][nt], a0, bj[nt][0], bj[nt][1]);
          arch::mma_16x8x16_f16(acc.c[2 * j + 1][nt], a1, bj[nt][0], bj[nt][1]);
        }
      }
    }
  }
}

// The tensor-core accumulators into the wave merge area ([wave][row][D]).
template <class T>
PACKFA_DEV void pv_mma_store(const PvAcc<T::kD, T::kNt>& acc, float* mg_o, int wave) {
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  PACKFA_UNROLL
  for (int i = 0; i < T::kD / 16; ++i)
    PACKFA_UNROLL
    for (int nt = 0; nt < T::kNt; ++nt)
      PACKFA_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int row = 8 * nt + t2 + (c & 1);
        if (row < T::kRows) mg_o[(wave * T::kRows + row) * T::kD + pv_dim<T::kVF>(i, g + 8 * (c >> 1))] = acc.c[i][nt][c];
      }
}

// Scalar P·V: lane = kDpl dims (lanes past kPvLanes idle), P [key][row] in pbuf.
template <class T>
PACKFA_DEV void pv_lane(float (&acc)[T::kRows][T::kDpl], const StageSmem& st, const float* pbuf, int nvalid,
                        int nrows) {
  constexpr int RMAX = T::kRows, DPL = T::kDpl;
  const int lane = arch::lane_id();
  if (lane < T::kPvLanes) {
    const int dim0 = lane * DPL;
#pragma unroll 4
    for (int t = 0; t < nvalid; ++t) {
      float v[DPL], vd;
      load_v<T::kVF, DPL>(st.v + t * T::kVPitch, st.vs + t * T::kVScalePitch, dim0, v, vd);
      const float4* pt = reinterpret_cast<const float4*>(pbuf + t * RMAX);
#pragma unroll
      for (int r4 = 0; r4 < RMAX / 4; ++r4) {
        if (r4 * 4 >= nrows) break;
        const float4 p4 = pt[r4];
        const float pv[4] = {p4.x * vd, p4.y * vd, p4.z * vd, p4.w * vd};
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int i = 0; i < DPL; ++i) acc[r4 * 4 + j][i] = fmaf(pv[j], v[i], acc[r4 * 4 + j][i]);
      }
    }
  }
}

#endif

}  // namespace packfa::device
