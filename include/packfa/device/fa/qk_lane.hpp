// packfa/device/fa/qk_lane.hpp — Q·K with lane = key (RDNA, the fp16-Q mode, NVIDIA instances
// without tensor-core scores): 16-byte pieces of the lane's K row against every query row (Q
// in shared memory, read as broadcasts). Scores in natural-log units, softmax scale applied.
// Rows >= nrows hold zero Q: computed or skipped (FaTraits::kRowGuard), never written.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// int8 Q·K: 4-way dots into int32 per K block of KB dims, then one fp32 FMA per block with
// q_scale·k_scale (softmax scale folded into q_scale). q_scale(r, block): Q's block scale.
template <class T, int KB, class QScale>
PACKFA_DEV void qk_lane_int8(float (&s)[T::kRows], const char* krow, const uint16_t* kd, const int8_t* qs,
                             int nrows, const QScale& q_scale) {
  constexpr int D = T::kD, RMAX = T::kRows;
  int isum[RMAX];
  PACKFA_UNROLL
  for (int piece = 0; piece < D / 16; ++piece) {
    const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
    constexpr bool kB16 = KB == 16;
    const bool first = kB16 || (piece & 1) == 0;
    const bool last = kB16 || (piece & 1) == 1 || piece == D / 16 - 1;
    const float kscale = last ? arch::half_to_float(kd[kB16 ? piece : piece / 2]) : 0.0f;
    PACKFA_UNROLL
    for (int r = 0; r < RMAX; ++r) {
      if (T::kRowGuard && r >= nrows) break;
      const int4 qv = *reinterpret_cast<const int4*>(qs + r * D + piece * 16);
      int a = first ? 0 : isum[r];
      a = arch::dot4_i8(qv.x, kv.x, a);
      a = arch::dot4_i8(qv.y, kv.y, a);
      a = arch::dot4_i8(qv.z, kv.z, a);
      a = arch::dot4_i8(qv.w, kv.w, a);
      isum[r] = a;
      if (last) s[r] = fmaf(static_cast<float>(a), q_scale(r, piece / 2) * kscale, s[r]);
    }
  }
}

// fp16-rounded fp32 Q x int8 K: fp32 dots per K block (b16: blocks of 16), times
// k_scale·scale.
template <class T>
PACKFA_DEV void qk_lane_f16q(float (&s)[T::kRows], const char* krow, const uint16_t* kd, const float* qf, int nrows,
                             bool b16, float scale) {
  constexpr int D = T::kD, RMAX = T::kRows;
  float part[RMAX];
#pragma unroll
  for (int piece = 0; piece < D / 16; ++piece) {
    const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
    const bool first = b16 || (piece & 1) == 0;
    const bool last = b16 || (piece & 1) == 1 || piece == D / 16 - 1;
    float kf[16];
    const int words[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) kf[i] = static_cast<float>(static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xff));
    const float kscale = last ? arch::half_to_float(kd[b16 ? piece : piece / 2]) : 0.0f;
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      if (T::kRowGuard && r >= nrows) break;
      const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 16);
      float a = first ? 0.0f : part[r];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 qv = q4[j];
        a = fmaf(qv.x, kf[4 * j], a);
        a = fmaf(qv.y, kf[4 * j + 1], a);
        a = fmaf(qv.z, kf[4 * j + 2], a);
        a = fmaf(qv.w, kf[4 * j + 3], a);
      }
      part[r] = a;
      if (last) s[r] = fmaf(a, kscale * scale, s[r]);
    }
  }
}

// fp16-rounded fp32 Q x fp16 K rows, fp32 sums, times scale.
template <class T>
PACKFA_DEV void qk_lane_f16k(float (&s)[T::kRows], const char* krow, const float* qf, int nrows, float scale) {
  constexpr int D = T::kD, RMAX = T::kRows;
#pragma unroll
  for (int piece = 0; piece < D / 8; ++piece) {
    const uint4 kv = *reinterpret_cast<const uint4*>(krow + piece * 16);
    float kf[8];
    arch::half2_to_float2(kv.x, kf[0], kf[1]);
    arch::half2_to_float2(kv.y, kf[2], kf[3]);
    arch::half2_to_float2(kv.z, kf[4], kf[5]);
    arch::half2_to_float2(kv.w, kf[6], kf[7]);
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      if (T::kRowGuard && r >= nrows) break;
      const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 8);
      const float4 a0 = q4[0], a1 = q4[1];
      float a = s[r];
      a = fmaf(a0.x, kf[0], a);
      a = fmaf(a0.y, kf[1], a);
      a = fmaf(a0.z, kf[2], a);
      a = fmaf(a0.w, kf[3], a);
      a = fmaf(a1.x, kf[4], a);
      a = fmaf(a1.y, kf[5], a);
      a = fmaf(a1.z, kf[6], a);
      a = fmaf(a1.w, kf[7], a);
      s[r] = a;
    }
  }
#pragma unroll
  for (int r = 0; r < RMAX; ++r) s[r] *= scale;
}

// This lane's key of the stage against every row: s[r] (natural-log units). qs_rows: Q's
// block scales in registers (kQsInRegs) or unused.
template <class T, int NR>
PACKFA_DEV void qk_lane(float (&s)[T::kRows], const StageSmem& st, const FaSmem<T>& sm,
                        const float (&qs_rows)[NR][T::kQBlocks], int nrows, bool b16, float scale) {
  constexpr int RMAX = T::kRows;
  const int lane = arch::lane_id();
#pragma unroll
  for (int r = 0; r < RMAX; ++r) s[r] = 0.0f;
  const char* krow = st.k + lane * T::kKPitch;
  if constexpr (T::kQK == QKMode::packed16_int8) {
    const uint16_t* kd = reinterpret_cast<const uint16_t*>(st.ks + lane * T::kScalePitch);
    const float* qscale = sm.q_scale();
    auto q_scale = [&](int r, int qb) {
      if constexpr (T::kQsInRegs) {
        return qs_rows[r][qb];
      } else {
        return qscale[r * T::kQBlocks + qb];
      }
    };
    if (b16) {
      qk_lane_int8<T, 16>(s, krow, kd, sm.q_i8(), nrows, q_scale);
    } else {
      qk_lane_int8<T, 32>(s, krow, kd, sm.q_i8(), nrows, q_scale);
    }
  } else if constexpr (T::kQK == QKMode::packed16_f16) {
    const uint16_t* kd = reinterpret_cast<const uint16_t*>(st.ks + lane * T::kScalePitch);
    qk_lane_f16q<T>(s, krow, kd, sm.q_f32(), nrows, b16, scale);
  } else {
    qk_lane_f16k<T>(s, krow, sm.q_f32(), nrows, scale);
  }
}

#endif

}  // namespace packfa::device
