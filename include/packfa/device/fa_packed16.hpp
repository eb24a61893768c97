// packfa/device/fa_packed16.hpp — split-KV flash-decoding attention over a packed16 (or f16) K
// cache, for decode and small query batches. One source for CUDA and HIP. The umbrella header:
// the kernel body below reads as its stages, each in include/packfa/device/fa/ (see
// docs/architecture.md).
//
// Work split. A block serves one (sequence, KV head, row group, split): all gqa × nq query
// rows that read this KV head, so every K/V byte is read once per KV head. Inside the block
// each 32-lane wave is an independent flash-decoding worker: it streams its own chunks of 32
// keys (chunk c of the split goes to wave c % waves; in long decode splits the later chunks
// are handed out by claim counters and may come from other splits, chunk_source.hpp) through
// a private shared-memory buffer (one or two stages, fa/smem.hpp) and keeps its own running
// max / sum / accumulators, so the key loop needs no block barrier.
// The waves merge once at the end; the combine kernel (device/combine.hpp) merges splits.
//
// Per chunk, one of two main loops (FaTraits::kMmaQk):
//   MmaLoop (NVIDIA): Q·K on tensor cores (int8 m16n8k32 for packed16 K: the same int32 block
//     sums as the 4-way dot; fp16 for f16 K), softmax in registers, P·V as O^T = V^T·P^T on
//     mma.m16n8k16 (V as exact fp16 integers, the ggml block scale folded into P);
//   LaneLoop (elsewhere): lane = key, 16-byte pieces of its K row against every query row,
//     int8 4-way dots into int32 per block, one fp32 FMA per block with q_scale·k_scale; P·V
//     on tensor cores where there are any, else lane = DPL output dims with V dequantized in
//     registers.
#pragma once

#include <cstdint>
#include <type_traits>

#include "packfa/device/arch.hpp"
#include "packfa/device/chunk_source.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/epilogue.hpp"
#include "packfa/device/fa/kv_stage.hpp"
#include "packfa/device/fa/loop_ctx.hpp"
#include "packfa/device/fa/mainloop_lane.hpp"
#include "packfa/device/fa/mainloop_mma.hpp"
#include "packfa/device/fa/pv.hpp"
#include "packfa/device/fa/q_setup.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/trace.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// PAGED: K/V through block tables (kv_view.hpp, fa/kv_stage.hpp).
template <int D, VFormat VF, QKMode QK, int RMAX, bool PAGED = false>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS((FaTraits<D, VF, QK, RMAX>::kThreads), 1)
    fa_split_kernel(const FaKernelParams p) {
#include "packfa/device/fa_split_body.inc"
}

// The instances with a register cap (fa_reg_cap, decision "d256-reg-cap"): their sm_90 code
// holds at most that many registers.
template <int D, VFormat VF, QKMode QK, int RMAX, bool PAGED = false>
PACKFA_GLOBAL void PACKFA_REG_CAP((FaTraits<D, VF, QK, RMAX>::kThreads), (fa_reg_cap(D, VF, QK, RMAX, PAGED)))
    fa_split_kernel_capped(const FaKernelParams p) {
#include "packfa/device/fa_split_body.inc"
}

#endif

}  // namespace packfa::device
