// packfa/device/fa/mainloop_mma.hpp — the tensor-core main loop (NVIDIA sm_80+, FaTraits::
// kMmaQk): scores of 16 rows x 32 keys in mma C fragments (qk_mma.hpp), the softmax in
// registers on the fragment layout (row g + 8h on lanes 4g .. 4g + 3), P handed to the P·V
// mma (pv.hpp) without shared memory.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/loop_ctx.hpp"
#include "packfa/device/fa/pv.hpp"
#include "packfa/device/fa/q_setup.hpp"
#include "packfa/device/fa/qk_mma.hpp"
#include "packfa/device/fa/softmax.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

template <class T>
struct MmaLoop {
  static constexpr int RMAX = T::kRows, D = T::kD, NT = T::kNt;
  SoftmaxState st[NT];  // row lane/4 + 8h, sums spread over the row's 4 lanes
  PvAcc<D, NT> pacc;
  uint32_t qa[D / 16][4];    // Q's A fragments
  float qsc[T::kQBlocks][2];  // Q's block scales of rows g, g + 8 (int8)

  PACKFA_DEV void init() { pacc.zero(); }
  PACKFA_DEV void load_q(const FaSmem<T>& sm) { q_mma_frags<T>(qa, qsc, sm); }

  // between(): after the scores (the stage's K is read), before the P·V reads its V.
  template <class Between>
  PACKFA_DEV void chunk(const LoopCtx<T>& c, const StageSmem& stage, int key0, int nvalid, Between&& between) {
    const int lane = arch::lane_id();
    // every key of the chunk visible to every row, no score edits: the per-key checks go
    // (rows past nrows get scores too: computed, never written)
    const bool whole = !c.edit.extras && key0 >= c.keys.all_lo && key0 + T::kChunk <= c.keys.all_hi;
    const int g = lane >> 2, t2 = 2 * (lane & 3);
    const RowInfo* rows = c.rows;
    float sc[T::kChunk / 8][4];
    qk_mma<T>(sc, qa, qsc, stage, c.b16, c.p.scale);
    PvOperands<NT> op;
    float corr_row[NT];
    PACKFA_UNROLL
    for (int h = 0; h < NT; ++h) {
      const int r = min(g + 8 * h, RMAX - 1);  // rows past RMAX: an empty key range
      const KeyWindow w = key_window(g + 8 * h < RMAX ? row_keys(rows, r) : int2{0, 0}, c.keys.hi);
      float mx = kNegInf;
      if (whole) {
        PACKFA_UNROLL
        for (int n = 0; n < T::kChunk / 8; ++n) mx = fmaxf(mx, fmaxf(sc[n][2 * h], sc[n][2 * h + 1]));
      } else {
        PACKFA_UNROLL
        for (int n = 0; n < T::kChunk / 8; ++n)
          PACKFA_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int kk = key0 + 8 * n + t2 + e;
            const bool visible = w.has(kk);
            float x = sc[n][2 * h + e];  // log2 units
            if (c.edit.extras) {  // the edits are defined on natural-log scores
              const RowInfo ri = rows[r];
              x = c.edit.apply(x * kLn2, visible, kk, ri) * kLog2e;
            }
            x = visible ? x : kNegInf;
            sc[n][2 * h + e] = x;
            mx = fmaxf(mx, x);
          }
      }
      mx = fmaxf(mx, arch::shfl_xor(mx, 1));  // the row's 4 lanes
      mx = fmaxf(mx, arch::shfl_xor(mx, 2));
      const float corr = st[h].raise(mx);
      const float m_sub = st[h].offset();
      float sum = 0.0f;
      PACKFA_UNROLL
      for (int n = 0; n < T::kChunk / 8; ++n)
        PACKFA_UNROLL
        for (int e = 0; e < 2; ++e) {
          const float pr = arch::exp2_fast(sc[n][2 * h + e] - m_sub);
          sc[n][2 * h + e] = pr;
          sum += pr;
        }
      st[h].add(corr, sum);
      corr_row[h] = corr;
      PACKFA_UNROLL
      for (int ks = 0; ks < T::kChunk / 16; ++ks) {
        op.pb[ks][h][0] = arch::pack_half2(sc[2 * ks][2 * h], sc[2 * ks][2 * h + 1]);
        op.pb[ks][h][1] = arch::pack_half2(sc[2 * ks + 1][2 * h], sc[2 * ks + 1][2 * h + 1]);
      }
    }
    // accumulator columns are rows 8·h + t2 (+1): their corrections live on lanes 4·(t2 (+1))
    PACKFA_UNROLL
    for (int h = 0; h < NT; ++h) {
      op.corr[h][0] = arch::shfl(corr_row[h], 4 * t2);
      op.corr[h][1] = arch::shfl(corr_row[h], 4 * t2 + 4);
    }
    between();
    pv_mma<T>(pacc, op, stage, nvalid);
  }

  PACKFA_DEV void store(const FaSmem<T>& sm, int wave) const {
    const int lane = arch::lane_id();
    float* mg_ml = sm.merge_ml();
    PACKFA_UNROLL
    for (int h = 0; h < NT; ++h) {
      const float l = arch::group_sum<4>(st[h].l);
      if ((lane & 3) == 0 && (lane >> 2) + 8 * h < RMAX) {
        mg_ml[(wave * RMAX + (lane >> 2) + 8 * h) * 2] = st[h].m;
        mg_ml[(wave * RMAX + (lane >> 2) + 8 * h) * 2 + 1] = l;
      }
    }
    pv_mma_store<T>(pacc, sm.merge_o(), wave);
  }
};

#endif

}  // namespace packfa::device
