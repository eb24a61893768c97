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
// about one instruction. Row 0 is row `s` of g (contiguous: s = 0, g the chunk's first row).
// HALVES (paged chunks, kv_view.hpp KvChunk): rows 16-31 are rows s16.. of g16 (their own
// page, or the same page 16 rows on); a pass holds rows of one half (kRows divides 16), so
// which pointer a pass reads is known at compile time, and a half's lane pointer costs one
// multiply more than the contiguous one ((s + r)·stride). ssm: smem's shared-space address
// (arch::shared_addr_kept), what the copies take.
template <int ROW_BYTES, int PITCH, int W, bool HALVES = false>
PACKFA_DEV void stage_rows_w(char* smem, uint32_t ssm, const char* g, int s, const char* g16, int s16, int64_t stride,
                             int nrows) {
  static_assert(ROW_BYTES % W == 0, "row bytes must be a multiple of the copy width");
  constexpr int kPer = ROW_BYTES / W;           // pieces per row
  constexpr int kLanes = stage_lanes(kPer);     // lanes per row
  constexpr int kRows = arch::kWaveSize / kLanes;  // rows per pass
  constexpr int kM = (kPer + kLanes - 1) / kLanes;  // pieces per lane and row
  constexpr int kHalf = kFaChunk / 2;
  static_assert(!HALVES || kHalf % kRows == 0, "a pass must hold rows of one half of the chunk");
  const int lane = arch::lane_id();
  const int j = lane % kLanes, r = lane / kLanes;
  const char* src;
  const char* src16 = nullptr;
  if constexpr (HALVES) {
    src = g + KvChunk::mul(s + r, stride) + j * W;
    src16 = g16 + KvChunk::mul(s16 + r, stride) + j * W;
  } else {
    src = g + r * stride + j * W;
  }
  char* dst = smem + r * PITCH + j * W;
  const uint32_t sdst = ssm + r * PITCH + j * W;
  const int64_t pass_stride = kRows * stride;
  PACKFA_UNROLL
  for (int pass = 0; pass < kFaChunk / kRows; ++pass) {
    const bool hi = HALVES && pass * kRows >= kHalf;  // compile-time after unrolling
    if (r + pass * kRows < nrows) {
      PACKFA_UNROLL
      for (int m = 0; m < kM; ++m) {
        if (kPer % kLanes == 0 || j + m * kLanes < kPer) {
          char* d = dst + pass * kRows * PITCH + m * kLanes * W;
          const char* sp = (hi ? src16 : src) + m * kLanes * W;
          if constexpr (W == 2) {
            *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(sp);
          } else {
            arch::copy_async<W>(d, sdst + pass * kRows * PITCH + m * kLanes * W, sp);
          }
        }
      }
    }
    if (hi) {
      src16 += pass_stride;
    } else {
      src += pass_stride;
    }
  }
}
// The widest copies the plane's alignment (`width` bytes, from the dispatcher) allows.
template <int ROW_BYTES, int PITCH, bool HALVES = false>
PACKFA_DEV void stage_rows(char* smem, uint32_t ssm, const char* g, int s, const char* g16, int s16, int64_t stride,
                           int nrows, int width) {
  if constexpr (ROW_BYTES % 16 == 0) {
    if (width >= 16) return stage_rows_w<ROW_BYTES, PITCH, 16, HALVES>(smem, ssm, g, s, g16, s16, stride, nrows);
  }
  if constexpr (ROW_BYTES % 8 == 0) {
    if (width >= 8) return stage_rows_w<ROW_BYTES, PITCH, 8, HALVES>(smem, ssm, g, s, g16, s16, stride, nrows);
  }
  if constexpr (ROW_BYTES % 4 == 0) {
    if (width >= 4) return stage_rows_w<ROW_BYTES, PITCH, 4, HALVES>(smem, ssm, g, s, g16, s16, stride, nrows);
  }
  stage_rows_w<ROW_BYTES, PITCH, 2, HALVES>(smem, ssm, g, s, g16, s16, stride, nrows);
}

// BYTES of one row in W-byte copies.
template <int BYTES, int W>
PACKFA_DEV void copy_row_w(char* dst, uint32_t sdst, const char* src) {
  PACKFA_UNROLL
  for (int o = 0; o < BYTES; o += W) arch::copy_async<W>(dst + o, sdst + o, src + o);
}
// One scale row of BYTES per lane (the lane's own key), widest copies the alignment allows;
// sdst: dst's shared-space address.
template <int BYTES>
PACKFA_DEV void stage_scale_row(char* dst, uint32_t sdst, const char* src, int width) {
  if constexpr (BYTES % 16 == 0) {
    if (width >= 16) return copy_row_w<BYTES, 16>(dst, sdst, src);
  }
  if constexpr (BYTES % 8 == 0) {
    if (width >= 8) return copy_row_w<BYTES, 8>(dst, sdst, src);
  }
  if constexpr (BYTES % 4 == 0) {
    if (width >= 4) return copy_row_w<BYTES, 4>(dst, sdst, src);
  }
  PACKFA_UNROLL
  for (int o = 0; o + 1 < BYTES; o += 2)
    *reinterpret_cast<uint16_t*>(dst + o) = *reinterpret_cast<const uint16_t*>(src + o);
}

// What one stage() call copies: the whole chunk, or its K (rows and scales) or V (rows and
// scales) alone (decision "split-stage": the next chunk's K goes out once this chunk's scores
// are done, its V once the P·V is).
enum class StagePart { kv, k, v };

// The chunks of one (sequence, KV head) into one wave's stages. PAGED: K/V through block tables
// (kv_view.hpp). A compile-time choice: sharing the kernel with a runtime branch cost the
// contiguous cache 2-20% (the staging code is the key loop's largest part; A/B on the H200,
// bench/NOTES.md, "paged KV").
template <class T, bool PAGED>
struct ChunkStager {
  const FaKernelParams& p;
  WaveSmem<T> ws;
  uint32_t sws;  // ws.base's shared-space address (arch::shared_addr_kept)
  int b, lo, hi;
  bool b16;  // K scale blocks of 16
  const char *kbase, *ksbase, *vbase, *vsbase;  // the planes of this (sequence, KV head)
  KvTableWindow table;                           // PAGED: the wave's window of page ids

  PACKFA_DEV static ChunkStager make(const FaKernelParams& p, WaveSmem<T> ws, int b, int kvh, int lo, int hi) {
    const int64_t bseq = PAGED ? 0 : b;  // paged: the seq strides are page strides
    const char* kbase = p.k + bseq * p.k_seq + static_cast<int64_t>(kvh) * p.k_head;
    const char* ksbase = p.ks + bseq * p.ks_seq + static_cast<int64_t>(kvh) * p.ks_head;
    const char* vbase = p.v + bseq * p.v_seq + static_cast<int64_t>(kvh) * p.v_head;
    const char* vsbase = p.vs + bseq * p.vs_seq + static_cast<int64_t>(kvh) * p.vs_head;
    return ChunkStager{p,      ws,     arch::shared_addr_kept(ws.base), b, lo, hi, p.k_block == 16, kbase, ksbase, vbase,
                       vsbase, KvTableWindow{}};
  }

  // The chunk's rows [0, n): K and V rows from rows s.. of krow / vrow (rows one slot stride
  // apart; HALVES: rows 16-31 from rows s16.. of krow16 / vrow16), the scale rows of lanes
  // 0 .. n - 1 (each its own key) from ksrow / vsrow.
  template <bool HALVES, StagePart PART = StagePart::kv>
  PACKFA_DEV_STAGE void rows(const StageSmem& st, int n, const char* krow, const char* vrow, int s, const char* krow16,
                             const char* vrow16, int s16, const char* ksrow, const char* vsrow) const {
    const int lane = arch::lane_id();
    const bool mine = lane < n;
    const auto sa = [&](const char* x) { return sws + static_cast<uint32_t>(x - ws.base); };  // shared address
    if constexpr (PART != StagePart::v)
      stage_rows<T::kKRowBytes, T::kKPitch, HALVES>(st.k, sa(st.k), krow, s, krow16, s16, p.k_slot, n, 16);
    if constexpr (T::kQK != QKMode::f16 && PART != StagePart::v) {
      // each lane copies its own key's scale row (2·D/B bytes)
      if (mine) {
        char* dst = st.ks + lane * T::kScalePitch;
        if (b16) {
          stage_scale_row<2 * T::kD / 16>(dst, sa(dst), ksrow, p.ks_width);
        } else {
          stage_scale_row<2 * T::kD / 32>(dst, sa(dst), ksrow, p.ks_width);
        }
      }
    }
    if constexpr (PART != StagePart::k)
      stage_rows<T::kVRowBytes, T::kVPitch, HALVES>(st.v, sa(st.v), vrow, s, vrow16, s16, p.v_slot, n, p.v_width);
    if constexpr (T::kVF == VFormat::q8_0_planar && PART != StagePart::k) {  // each lane its own key's scale row
      char* dst = st.vs + lane * T::kVScalePitch;
      if (mine) stage_scale_row<2 * T::kD / 32>(dst, sa(dst), vsrow, p.vs_width);
    }
  }
  // Chunk `chunk` of the group into stage `stage`: rows from slot key0 on, or (paged) from the
  // two halves' pages, each lane's scale rows from its own key's page (kv_view.hpp KvChunk;
  // the page ids from the wave's table window, KvTableWindow). One sweep of copies either way:
  // the paged chunk runs the contiguous copy code with one more pointer per plane, not a loop
  // over runs of rows (session 11, bench/NOTES.md).
  template <StagePart PART = StagePart::kv>
  PACKFA_DEV_STAGE void stage(int chunk, int stage) {
    const int lane = arch::lane_id();
    const int key0 = lo + chunk * T::kChunk;
    const int n = min(T::kChunk, hi - key0);
    const StageSmem st = ws.stage(stage);
    if constexpr (!PAGED) {
      rows<false, PART>(st, n, kbase + static_cast<int64_t>(key0) * p.k_slot,
                        vbase + static_cast<int64_t>(key0) * p.v_slot, 0, nullptr, nullptr, 0,
                        ksbase + static_cast<int64_t>(key0 + lane) * p.ks_slot,
                        vsbase + static_cast<int64_t>(key0 + lane) * p.vs_slot);
    } else {  // the view is built here, so nothing of it stays live in the loop
      const KvView view{p.block_table + static_cast<int64_t>(b) * p.table_stride, 31 - __clz(p.page_size),
                        p.num_pages, p.errors};
      int id0, id1;
      table.ids(view, key0, (hi - 1) >> view.page_shift, id0, id1);
      const KvChunk c = view.chunk_of(key0, n, id0, id1);
      rows<true, PART>(st, n, kbase + c.page_off(0, p.k_seq), vbase + c.page_off(0, p.v_seq), c.slot[0],
                       kbase + c.page_off(1, p.k_seq), vbase + c.page_off(1, p.v_seq), c.slot[1],
                       ksbase + c.lane(p.ks_seq, p.ks_slot), vsbase + c.lane(p.vs_seq, p.vs_slot));
    }
    arch::copy_async_commit();
  }
};

#endif

}  // namespace packfa::device
