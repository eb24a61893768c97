// packfa/device/fa/mainloop_lane.hpp — the lane = key main loop (RDNA, the fp16-Q mode, and
// the NVIDIA instances without tensor-core scores): lane l scores key key0 + l against every
// row (qk_lane.hpp), the softmax runs per row with wave reductions, P goes through shared
// memory to the P·V (tensor cores where kMmaPv, else lane = output dims; pv.hpp).
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/loop_ctx.hpp"
#include "packfa/device/fa/pv.hpp"
#include "packfa/device/fa/q_setup.hpp"
#include "packfa/device/fa/qk_lane.hpp"
#include "packfa/device/fa/softmax.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

template <class T>
struct LaneLoop {
  static constexpr int RMAX = T::kRows, D = T::kD;
  static constexpr int kQsRows = T::kQsInRegs ? RMAX : 1;
  SoftmaxState st[RMAX];        // per row, sums lane-partial
  float acc[RMAX][T::kDpl];     // scalar P·V: row r, dims lane·kDpl ..
  PvAcc<D, T::kNt> pacc;        // tensor-core P·V
  float qs_rows[kQsRows][T::kQBlocks];

  PACKFA_DEV void init() {
#pragma unroll
    for (int r = 0; r < RMAX; ++r)
#pragma unroll
      for (int i = 0; i < T::kDpl; ++i) acc[r][i] = 0.0f;
    pacc.zero();
  }
  PACKFA_DEV void load_q(const FaSmem<T>& sm) {
    if constexpr (T::kInt8Q && T::kQsInRegs) q_scale_rows<T>(qs_rows, sm);
  }

  // between(): after the scores (the stage's K is read), before the P·V reads its V.
  template <class Between>
  PACKFA_DEV void chunk(const LoopCtx<T>& c, const StageSmem& stage, int key0, int nvalid, Between&& between) {
    const int lane = arch::lane_id();
    const int key = key0 + lane;
    float s[RMAX];
    qk_lane<T>(s, stage, c.sm, qs_rows, c.nrows, c.b16, c.p.scale);
    const RowInfo* rows = c.rows;
    float* pbuf = c.pbuf;
    float* corr_s = c.corr;
    // All RMAX rows (rows >= nrows have an empty key range and are never written out): no
    // early exit, so the rows' independent shuffle chains overlap.
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      const KeyWindow w = key_window(row_keys(rows, r), c.keys.hi);
      const bool visible = w.has(key);
      float x = s[r];
      if (c.edit.extras) {
        const RowInfo ri = rows[r];
        x = c.edit.apply(x, visible, key, ri);
      }
      x = visible ? x * kLog2e : kNegInf;
      const float corr = st[r].raise(arch::group_max(x));
      const float pr = st[r].prob(x);
      st[r].add(corr, pr);
      if constexpr (T::kMmaPv) {
        if (lane == 0) corr_s[r] = corr;
        pbuf[r * T::kPPitch + lane] = pr;  // [row][key]: B fragments read key pairs
      } else {
#pragma unroll
        for (int i = 0; i < T::kDpl; ++i) acc[r][i] *= corr;
        pbuf[lane * RMAX + r] = pr;  // [key][row]: float4 over rows
      }
    }
    between();
    arch::sync_wave();
    if constexpr (T::kMmaPv) {
      PvOperands<T::kNt> op;
      pv_operands_from_smem<T>(op, pbuf, corr_s);
      pv_mma<T>(pacc, op, stage, nvalid);
    } else {
      pv_lane<T>(acc, stage, pbuf, nvalid, c.nrows);
    }
  }

  PACKFA_DEV void store(const FaSmem<T>& sm, int wave) const {
    const int lane = arch::lane_id();
    float* mg_o = sm.merge_o();
    float* mg_ml = sm.merge_ml();
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      const float l = arch::group_sum(st[r].l);
      if (lane == 0) {
        mg_ml[(wave * RMAX + r) * 2] = st[r].m;
        mg_ml[(wave * RMAX + r) * 2 + 1] = l;
      }
      if constexpr (!T::kMmaPv) {
        if (lane < T::kPvLanes) {
#pragma unroll
          for (int i = 0; i < T::kDpl; ++i) mg_o[(wave * RMAX + r) * D + lane * T::kDpl + i] = acc[r][i];
        }
      }
    }
    if constexpr (T::kMmaPv) pv_mma_store<T>(pacc, mg_o, wave);
  }
};

#endif

}  // namespace packfa::device
