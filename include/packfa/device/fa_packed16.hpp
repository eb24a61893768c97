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
  using T = FaTraits<D, VF, QK, RMAX>;
  using MainLoop = std::conditional_t<T::kMmaQk, MmaLoop<T>, LaneLoop<T>>;
  extern __shared__ __align__(16) char smem[];
  const FaSmem<T> sm{smem};
  const BlockRows br = block_rows<RMAX>(p);
  const int tid = threadIdx.x;
  const int wave = tid / arch::kWaveSize;
  const int lane = arch::lane_id();

  PACKFA_TRACE_AT(p, 0);
  // Everything below reads memory a predecessor kernel may write (Q, the cache, lengths).
  pdl::wait();
  PACKFA_TRACE_AT(p, 1);

  // The length load goes out first: the key range and the first chunk's copies wait on it;
  // the first batch of Q overlaps it.
  // Clamped into [0, max_kv_len]: reads never pass the cache the caller described
  // (docs/format.md, "Device-side values"); one block per sequence (and row group) counts.
  const int kv_len_raw = p.kv_len[br.b];
  const int kv_len = min(max(kv_len_raw, 0), p.max_kv_len);
#if defined(PACKFA_LEN_COUNT_EARLY)  // A/B builds: the count's place before 2026-12-02
  if (p.errors && br.kvh == 0 && br.split == 0 && br.rg == 0 && tid == 0 && kv_len != kv_len_raw)
    atomicAdd(p.errors + 0, 1);
#endif
  const QLoader<T> q = QLoader<T>::make(p, br, wave, lane);
  typename QLoader<T>::Batch xq;
  q.load(0, xq);

  // ---- keys of this block, then the wave's first chunk in flight during the Q set-up ---------
  const QueryPos pos{p, p.q_pos, br.b, kv_len};
  BlockKeys keys = block_keys<T::kChunk>(p, br, pos, kv_len);
  const ChunkGroup group = chunk_group<T::kClaims, T::kChunk>(p, br, keys.lo, keys.hi);
  keys_seen_by_all(keys, p);
  PACKFA_TRACE_AT(p, 2);
  const WaveSmem<T> ws = sm.wave(wave);
  ChunkStager<T, PAGED> stager = ChunkStager<T, PAGED>::make(p, ws, br.b, br.kvh, keys.lo, keys.hi);
  const ScoreEdit edit = ScoreEdit::of(p, br.b);
  MainLoop loop;
  loop.init();
  ChunkSource<T::kClaims> work;
  int chunk = work.first(group, wave, ws.chunk_state());
  if (chunk >= 0) {
    if constexpr (T::kSplitStage) {
      stager.template stage<StagePart::k>(chunk, 0);
      stager.template stage<StagePart::v>(chunk, 0);
    } else {
      stager.stage(chunk, 0);
    }
    work.template issue<T::kWaves>(chunk);
  }
  // The clamp's count, after the first copies: a branch on the length between its load and
  // the Q loads kept those waiting for it (43650bd issued them back to back; one-row decode
  // at kv 4k-32k was 2-6% slower with the count there, bench/NOTES.md session 8).
#if !defined(PACKFA_LEN_COUNT_EARLY)
  if (p.errors && br.kvh == 0 && br.split == 0 && br.rg == 0 && tid == 0 && kv_len != kv_len_raw)
    atomicAdd(p.errors + 0, 1);
#endif
  PACKFA_TRACE_AT(p, 3);

  // ---- row facts and Q into shared memory, while the first chunk streams in --------------------
  set_row_facts<RMAX>(sm.rows(), p, br, pos, tid);
  q.to_smem(sm, xq);
  __syncthreads();
  PACKFA_TRACE_AT(p, 4);
  loop.load_q(sm);

  // ---- per-wave streaming loop: stage the chunk after this one, then run this one --------------
  const LoopCtx<T> ctx{p, sm, sm.rows(), ws.p(), ws.corr(), edit, keys, br.nrows, stager.b16};
  int next = chunk >= 0 ? work.template resolve<T::kWaves>(chunk) : -1;
  for (int it = 0; chunk >= 0; ++it) {
    const int stage = T::kStages == 2 ? (it & 1) : 0;
    if constexpr (T::kStages == 2) {
      if (next >= 0) {
        stager.stage(next, stage ^ 1);
        arch::copy_async_wait<1>();
      } else {
        arch::copy_async_wait<0>();
      }
    } else if constexpr (T::kSplitStage) {
      arch::copy_async_wait<1>();  // this chunk's K (its V may still be in flight)
    } else {
      if (it > 0) stager.stage(chunk, 0);  // one buffer: the previous chunk's readers are done
      arch::copy_async_wait<0>();
    }
    if (next >= 0) work.template issue<T::kWaves>(next);  // the chunk after next: resolved after this chunk's work
    const StageSmem st = ws.stage(stage);
    const int key0 = keys.lo + chunk * T::kChunk;
    const int nvalid = min(T::kChunk, keys.hi - key0);
    pv_clear_tail<T>(st, nvalid);
    arch::sync_wave();
    if (it == 0) PACKFA_TRACE_AT(p, 5);
    loop.chunk(ctx, st, key0, nvalid, [&] {
      if constexpr (T::kSplitStage) {  // K read: the next chunk's K goes out; this chunk's V in
        arch::sync_wave();
        if (next >= 0) {
          stager.template stage<StagePart::k>(next, 0);
          arch::copy_async_wait<1>();
        } else {
          arch::copy_async_wait<0>();
        }
        arch::sync_wave();
      }
    });
    arch::sync_wave();  // this stage and the P buffer are rewritten next iteration
    if (it == 0) PACKFA_TRACE_AT(p, 6);
    if constexpr (T::kSplitStage) {
      if (next >= 0) stager.template stage<StagePart::v>(next, 0);  // V read: the next chunk's V goes out
    }
    chunk = next;
    if (chunk >= 0) next = work.template resolve<T::kWaves>(chunk);
  }
  PACKFA_TRACE_AT(p, 7);

  // ---- merge the waves, write the rows ---------------------------------------------------------
  __syncthreads();  // the loop buffers become the merge area
  loop.store(sm, wave);
  __syncthreads();
  PACKFA_TRACE_AT(p, 8);
  // Split output is written by every block; the work it reads is done, so dependents may start.
  pdl::launch_dependents();
  write_rows<T>(p, sm, br, edit, tid);
  PACKFA_TRACE_AT(p, 9);
}

#endif

}  // namespace packfa::device
