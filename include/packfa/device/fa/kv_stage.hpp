// packfa/device/fa/kv_stage.hpp — global -> shared copies of one 32-key chunk (K rows, K
// scales, V rows, V scales) into a wave's stage buffer, through the cache view (kv_view.hpp).
// NVIDIA: cp.async, committed as one group per chunk; RDNA: synchronous copies.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// Copy `nrows` (<= kFaChunk) rows of ROW_BYTES from global (row stride in bytes) into shared
// (PITCH), W bytes per copy. stage_lanes() lanes share a row (each takes every kLanes-th
// piece): every copy has a compile-time offset from one per-lane pointer, so a copy costs
// about one instruction.
template <int ROW_BYTES, int PITCH, int W>
PACKFA_DEV void stage_rows_w(char* smem, const char* g, int64_t stride, int nrows) {
  static_assert(ROW_BYTES % W == 0, "row bytes must be a multiple of the copy width");
  constexpr int kPer = ROW_BYTES / W;           // pieces per row
  constexpr int kLanes = stage_lanes(kPer);     // lanes per row
  constexpr int kRows = arch::kWaveSize / kLanes;  // rows per pass
  constexpr int kM = (kPer + kLanes - 1) / kLanes;  // pieces per lane and row
  const int lane = arch::lane_id();
  const int j = lane % kLanes, r = lane / kLanes;
  const char* src = g + r * stride + j * W;
  char* dst = smem + r * PITCH + j * W;
  const int64_t pass_stride = kRows * stride;
  PACKFA_UNROLL
  for (int pass = 0; pass < kFaChunk / kRows; ++pass) {
    if (r + pass * kRows < nrows) {
      PACKFA_UNROLL
      for (int m = 0; m < kM; ++m) {
        if (kPer % kLanes == 0 || j + m * kLanes < kPer) {
          char* d = dst + pass * kRows * PITCH + m * kLanes * W;
          const char* s = src + m * kLanes * W;
          if constexpr (W == 2) {
            *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(s);
          } else {
            arch::copy_async<W>(d, s);
          }
        }
      }
    }
    src += pass_stride;
  }
}
// The widest copies the plane's alignment (`width` bytes, from the dispatcher) allows.
template <int ROW_BYTES, int PITCH>
PACKFA_DEV void stage_rows(char* smem, const char* g, int64_t stride, int nrows, int width) {
  if constexpr (ROW_BYTES % 16 == 0) {
    if (width >= 16) return stage_rows_w<ROW_BYTES, PITCH, 16>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 8 == 0) {
    if (width >= 8) return stage_rows_w<ROW_BYTES, PITCH, 8>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 4 == 0) {
    if (width >= 4) return stage_rows_w<ROW_BYTES, PITCH, 4>(smem, g, stride, nrows);
  }
  stage_rows_w<ROW_BYTES, PITCH, 2>(smem, g, stride, nrows);
}

// BYTES of one row in W-byte copies.
template <int BYTES, int W>
PACKFA_DEV void copy_row_w(char* dst, const char* src) {
  PACKFA_UNROLL
  for (int o = 0; o < BYTES; o += W) arch::copy_async<W>(dst + o, src + o);
}
// One scale row of BYTES per lane (the lane's own key), widest copies the alignment allows.
template <int BYTES>
PACKFA_DEV void stage_scale_row(char* dst, const char* src, int width) {
  if constexpr (BYTES % 16 == 0) {
    if (width >= 16) return copy_row_w<BYTES, 16>(dst, src);
  }
  if constexpr (BYTES % 8 == 0) {
    if (width >= 8) return copy_row_w<BYTES, 8>(dst, src);
  }
  if constexpr (BYTES % 4 == 0) {
    if (width >= 4) return copy_row_w<BYTES, 4>(dst, src);
  }
  PACKFA_UNROLL
  for (int o = 0; o + 1 < BYTES; o += 2)
    *reinterpret_cast<uint16_t*>(dst + o) = *reinterpret_cast<const uint16_t*>(src + o);
}

// Before the PDL wait (contiguous caches, no window): an L2 prefetch of the rows of this wave's
// first static chunk, keys split·split_len + 32·wave + lane, as far as max_kv_len (the cache
// the caller described; kv_len is not known yet). The cache rows of earlier tokens are not
// what a predecessor writes, and a prefetch only warms L2 (the point of coherence; it fills no
// L1), so the copies after the wait read current bytes either way. With PDL the blocks start
// while the previous kernel runs: at kv = 4k the whole cache is the first chunks, and its DRAM
// fetch then overlaps that kernel and the length load instead of following them.
template <class T>
PACKFA_DEV void prefetch_first_chunk(const FaKernelParams& p, int b, int kvh, int split, int wave, int lane) {
  if (p.window > 0) return;  // the block's keys start at the window: positions needed
  const int key = split * p.split_len + wave * T::kChunk + lane;
  if (key >= min(p.max_kv_len, (split + 1) * p.split_len)) return;
  const int64_t bs = b, h = kvh, k = key;
  arch::prefetch_l2(p.k + bs * p.k_seq + h * p.k_head + k * p.k_slot, T::kKRowBytes);
  if constexpr (T::kQK != QKMode::f16) arch::prefetch_l2(p.ks + bs * p.ks_seq + h * p.ks_head + k * p.ks_slot, 2 * T::kD / 16);
  arch::prefetch_l2(p.v + bs * p.v_seq + h * p.v_head + k * p.v_slot, T::kVRowBytes);
  if constexpr (T::kVF == VFormat::q8_0_planar)
    arch::prefetch_l2(p.vs + bs * p.vs_seq + h * p.vs_head + k * p.vs_slot, 2 * T::kD / 32);
}

// The chunks of one (sequence, KV head) into one wave's stages. PAGED: K/V through block tables
// (kv_view.hpp). A compile-time choice: sharing the kernel with a runtime branch cost the
// contiguous cache 2-20% (the staging code is the key loop's largest part; A/B on the H200,
// bench/NOTES.md, "paged KV").
template <class T, bool PAGED>
struct ChunkStager {
  const FaKernelParams& p;
  WaveSmem<T> ws;
  int b, lo, hi;
  bool b16;  // K scale blocks of 16
  const char *kbase, *ksbase, *vbase, *vsbase;  // the planes of this (sequence, KV head)

  PACKFA_DEV static ChunkStager make(const FaKernelParams& p, WaveSmem<T> ws, int b, int kvh, int lo, int hi) {
    const int64_t bseq = PAGED ? 0 : b;  // paged: the seq strides are page strides
    const char* kbase = p.k + bseq * p.k_seq + static_cast<int64_t>(kvh) * p.k_head;
    const char* ksbase = p.ks + bseq * p.ks_seq + static_cast<int64_t>(kvh) * p.ks_head;
    const char* vbase = p.v + bseq * p.v_seq + static_cast<int64_t>(kvh) * p.v_head;
    const char* vsbase = p.vs + bseq * p.vs_seq + static_cast<int64_t>(kvh) * p.vs_head;
    return ChunkStager{p, ws, b, lo, hi, p.k_block == 16, kbase, ksbase, vbase, vsbase};
  }

  // Rows [r0, r0 + nr) of a chunk: K and V rows from krow / vrow (row r0's address, rows one
  // slot stride apart), the scale rows of lanes r0 .. r0 + nr - 1 (each its own key) from
  // ksrow / vsrow. A contiguous chunk is one such run (r0 = 0, folded); a paged one one or two.
  PACKFA_DEV_STAGE void run(const StageSmem& st, int r0, int nr, const char* krow, const char* vrow, const char* ksrow,
                      const char* vsrow) const {
    const int lane = arch::lane_id();
    const bool mine = lane >= r0 && lane < r0 + nr;
    stage_rows<T::kKRowBytes, T::kKPitch>(st.k + r0 * T::kKPitch, krow, p.k_slot, nr, 16);
    if constexpr (T::kQK != QKMode::f16) {
      // each lane copies its own key's scale row (2·D/B bytes)
      if (mine) {
        char* dst = st.ks + lane * T::kScalePitch;
        if (b16) {
          stage_scale_row<2 * T::kD / 16>(dst, ksrow, p.ks_width);
        } else {
          stage_scale_row<2 * T::kD / 32>(dst, ksrow, p.ks_width);
        }
      }
    }
    stage_rows<T::kVRowBytes, T::kVPitch>(st.v + r0 * T::kVPitch, vrow, p.v_slot, nr, p.v_width);
    if constexpr (T::kVF == VFormat::q8_0_planar) {  // each lane its own key's scale row
      if (mine) stage_scale_row<2 * T::kD / 32>(st.vs + lane * T::kVScalePitch, vsrow, p.vs_width);
    }
  }
  // Chunk `chunk` of the group into stage `stage`: its runs of rows (kv_view.hpp), one from
  // slot key0, or one per page it touches.
  PACKFA_DEV_STAGE void stage(int chunk, int stage) const {
    const int lane = arch::lane_id();
    const int key0 = lo + chunk * T::kChunk;
    const int n = min(T::kChunk, hi - key0);
    const StageSmem st = ws.stage(stage);
    if constexpr (!PAGED) {
      run(st, 0, n, kbase + static_cast<int64_t>(key0) * p.k_slot, vbase + static_cast<int64_t>(key0) * p.v_slot,
          ksbase + static_cast<int64_t>(key0 + lane) * p.ks_slot, vsbase + static_cast<int64_t>(key0 + lane) * p.vs_slot);
    } else {  // two runs at most; the view is built here, so nothing of it stays live in the loop
      const KvView view{p.block_table + static_cast<int64_t>(b) * p.table_stride, 31 - __clz(p.page_size),
                        p.num_pages, p.errors};
      const KvRuns ru = view.runs(key0, n);
#pragma unroll 1
      for (int r = 0; r < (ru.split < n ? 2 : 1); ++r) {
        const int r0 = r ? ru.split : 0, nr = r ? n - ru.split : ru.split;
        const int64_t pg = r ? ru.page[1] : ru.page[0];  // selects: an indexed array would go to the stack
        const int s0 = r ? 0 : ru.slot0[0];
        run(st, r0, nr, kbase + pg * p.k_seq + static_cast<int64_t>(s0) * p.k_slot,
            vbase + pg * p.v_seq + static_cast<int64_t>(s0) * p.v_slot,
            ksbase + pg * p.ks_seq + static_cast<int64_t>(s0 - r0 + lane) * p.ks_slot,
            vsbase + pg * p.vs_seq + static_cast<int64_t>(s0 - r0 + lane) * p.vs_slot);
      }
    }
    arch::copy_async_commit();
  }
};

#endif

}  // namespace packfa::device
