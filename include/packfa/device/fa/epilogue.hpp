// packfa/device/fa/epilogue.hpp — the end of a split-kernel block: the waves' softmax states
// and accumulators (in the merge area, main loop store()) merged per row, the sink folded in,
// then the final output and LSE (one split) or the split's partial (O unnormalised, (m, l))
// for the combine kernel.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/softmax.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// Each thread merges 4 dims of one row (float4 reads of the wave states, one 16-byte store of
// the partial): at kv = 4k the block's end is on the critical path.
template <class T>
PACKFA_DEV void write_rows(const FaKernelParams& p, const FaSmem<T>& sm, const BlockRows& br, const ScoreEdit& edit,
                           int tid) {
  constexpr int D = T::kD, RMAX = T::kRows;
  const float* mg_o = sm.merge_o();
  const float* mg_ml = sm.merge_ml();
  const RowInfo* rows = sm.rows();
  const bool final_out = p.num_splits == 1;
  for (int item = tid; item < br.nrows * (D / 4); item += T::kThreads) {
    const int r = item / (D / 4), d = 4 * (item - r * (D / 4));
    SoftmaxState s;
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) s.m = fmaxf(s.m, mg_ml[(w * RMAX + r) * 2]);
    float4 O = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) {
      const float f = s.weight(mg_ml[(w * RMAX + r) * 2]);
      const float4 a = *reinterpret_cast<const float4*>(&mg_o[(w * RMAX + r) * D + d]);
      s.l += f * mg_ml[(w * RMAX + r) * 2 + 1];
      O.x += f * a.x;
      O.y += f * a.y;
      O.z += f * a.z;
      O.w += f * a.w;
    }
    const RowInfo ri = rows[r];
    if (final_out) {
      if (p.sinks) {
        const float f = s.fold_sink(edit.sink(ri.head));
        O.x *= f;
        O.y *= f;
        O.z *= f;
        O.w *= f;
      }
      const float inv = s.inv_sum();
      const int64_t oidx = static_cast<int64_t>(br.b) * p.o_seq + static_cast<int64_t>(ri.qi) * p.o_row +
                           static_cast<int64_t>(ri.head) * p.o_head + d;
      store_from_float(p.o, p.o_type, oidx, O.x * inv);
      store_from_float(p.o, p.o_type, oidx + 1, O.y * inv);
      store_from_float(p.o, p.o_type, oidx + 2, O.z * inv);
      store_from_float(p.o, p.o_type, oidx + 3, O.w * inv);
      if (d == 0 && p.lse) p.lse[(static_cast<int64_t>(br.b) * p.nq + ri.qi) * p.n_q_heads + ri.head] = s.lse();
    } else {
      const int64_t prow =
          ((static_cast<int64_t>(br.b) * p.nq + ri.qi) * p.n_q_heads + ri.head) * p.num_splits + br.split;
      *reinterpret_cast<float4*>(p.part_o + prow * D + d) = O;
      if (d == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(s.m, s.l);
    }
  }
}

#endif

}  // namespace packfa::device
