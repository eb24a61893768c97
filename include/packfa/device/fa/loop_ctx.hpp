// packfa/device/fa/loop_ctx.hpp — what the key loop hands a main loop, and the interface both
// main loops (mainloop_lane.hpp, mainloop_mma.hpp) implement:
//
//   init()                     zero the accumulators (the softmax states start empty)
//   load_q(sm)                 after the Q set-up's barrier: Q (or its scales) into registers
//   chunk(ctx, stage, key0, n) one staged chunk of keys key0 .. key0 + n - 1: Q·K, score
//                              edits, online softmax, P·V
//   store(sm, wave)            the wave's softmax states and accumulators into the merge area
//
// Everything per block that a chunk needs is in LoopCtx; the kernel body owns the pipeline
// (which chunk, which stage, the copy waits and the wave syncs around a chunk).
#pragma once

#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

template <class T>
struct LoopCtx {
  const FaKernelParams& p;
  FaSmem<T> sm;
  const RowInfo* rows;  // sm.rows()
  float* pbuf;          // this wave's P (WaveSmem::p)
  float* corr;          // this wave's row corrections (WaveSmem::corr)
  const ScoreEdit& edit;
  const BlockKeys& keys;
  int nrows;  // rows of the block that exist (rows past them: zero Q, empty key range)
  bool b16;   // K scale blocks of 16
};

#endif

}  // namespace packfa::device
