// packfa/device/fa/rows.hpp — which query rows and keys one block of the split kernel serves.
//
// grid (KV head, split, sequence x row group): consecutive blocks take different heads, so the
// blocks that share a multiprocessor stream from different parts of the cache (A/B on the
// H200: a split-major grid was 0-6% slower at 128k). Row g of a KV head is query row g / gqa,
// q head kvh·gqa + g % gqa.
#pragma once

#include <cstdint>

#include "packfa/device/chunk_source.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

struct BlockRows {
  int kvh, split, b, rg;
  int row0, nrows;  // rows row0 .. row0 + nrows - 1 of the KV head
};
template <int RMAX>
PACKFA_DEV BlockRows block_rows(const FaKernelParams& p) {
  BlockRows r;
  r.kvh = blockIdx.x;
  r.split = blockIdx.y;
  r.b = blockIdx.z / p.row_groups;
  r.rg = blockIdx.z - r.b * p.row_groups;
  r.row0 = r.rg * RMAX;
  r.nrows = min(RMAX, p.rows - r.row0);
  return r;
}

// Row R of a KV head's rows (token R / gqa, q head kvh·gqa + R % gqa; the prefill kernels'
// Q loads) at dim d0: the element offset of its Q values and whether the token is one of the
// call's nq.
struct QRowAt {
  int64_t off;
  bool valid;
};
PACKFA_DEV QRowAt q_row_at(const FaKernelParams& p, int b, int kvh, int R, int d0) {
  const int qi = R / p.gqa, h = kvh * p.gqa + R % p.gqa;
  return QRowAt{static_cast<int64_t>(b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
                    static_cast<int64_t>(h) * p.q_head + d0,
                qi < p.nq};
}

// Query positions: q_pos, else the last nq positions of the sequence.
// q_pos is read from the parameters by the kernel (QueryPos{p, p.q_pos, ...}): read here it
// became a flat load on gfx11.
struct QueryPos {
  const FaKernelParams& p;
  const int32_t* q_pos;
  int b, kv_len;
  PACKFA_DEV_STAGE int raw(int qi) const {
    return q_pos ? q_pos[static_cast<int64_t>(b) * p.nq + qi] : kv_len - p.nq + qi;
  }
  // clamped into [-1, kv_len]: every in-contract position is unchanged, and the key-range
  // arithmetic cannot overflow
  PACKFA_DEV_STAGE int operator()(int qi) const { return min(max(raw(qi), -1), kv_len); }
};

// The block's keys, straight from the lengths (no shared memory, no barrier: the first chunk's
// copies go out as soon as kv_len arrives; at kv = 4k the prologue is most of the kernel).
struct BlockKeys {
  int lo, hi;          // the group's keys [lo, hi), chunks of 32 from lo
  int pmin, pmax;      // the rows' lowest and highest positions
  int all_lo, all_hi;  // keys visible to every row of the block (set by keys_seen_by_all)
};
template <int CHUNK>
PACKFA_DEV BlockKeys block_keys(const FaKernelParams& p, const BlockRows& br, const QueryPos& pos, int kv_len) {
  const int qi_lo = br.row0 / p.gqa, qi_hi = (br.row0 + br.nrows - 1) / p.gqa;
  int pmin = pos(qi_lo), pmax = pmin;
  for (int qi = qi_lo + 1; qi <= qi_hi; ++qi) {  // decode rows: qi_lo == qi_hi
    const int q = pos(qi);
    pmin = min(pmin, q);
    pmax = max(pmax, q);
  }
  BlockKeys k;
  // chunks start at multiples of 32 keys (a paged chunk then spans at most two pages,
  // kv_view.hpp); the rows' own ranges hide the keys before a window
  k.lo = p.window > 0 ? max(0, pmin - p.window + 1) & ~(CHUNK - 1) : 0;
  k.hi = p.causal ? min(kv_len, pmax + 1) : kv_len;
  k.pmin = pmin;
  k.pmax = pmax;
  return k;
}
// Row r sees [pos - window + 1, pos + 1) or [0, kv_len): the keys all rows see.
PACKFA_DEV void keys_seen_by_all(BlockKeys& k, const FaKernelParams& p) {
  k.all_lo = p.window > 0 ? max(0, k.pmax - p.window + 1) : 0;
  k.all_hi = p.causal ? min(k.hi, k.pmin + 1) : k.hi;
}

// The group's keys [lo, hi) in chunks of 32 from lo; split s owns per_split of them, and with
// claim counters waves may also take chunks of other splits (chunk_source.hpp).
// Decision "splits-share-short-lengths": a plan made without the lengths cuts max_kv_len into
// split_len slices, so a group with far fewer keys (an engine's one-graph-for-all-lengths call,
// a sliding window, the short sequences of a batch) would leave its keys to the first few
// splits. With p.share_len, a group of at most a quarter of the plan's keys takes ceil(chunks /
// splits) chunks a split instead (fa_layout.hpp fa_split_chunks): every split works. Longer
// groups keep split_len (H200: the even share for every group cost batches of kv/4..kv at 4k
// 3-9%, the extra blocks' fixed latency; the quarter bound leaves those as they were). Plans
// from host lengths (kv_len_host) already fit their working blocks to one round: share_len = 0.
template <bool CLAIMS, int CHUNK>
PACKFA_DEV ChunkGroup chunk_group(const FaKernelParams& p, const BlockRows& br, int lo, int hi) {
  ChunkGroup g;
  g.claims = CLAIMS && p.claims
                 ? p.claims + (static_cast<int64_t>(blockIdx.z) * p.n_kv_heads + br.kvh) * p.num_splits * kClaimStride
                 : nullptr;
  g.n_all = hi > lo ? (hi - lo + CHUNK - 1) / CHUNK : 0;
  static_assert(CHUNK == kFaChunk, "fa_split_chunks counts 32-key chunks");
  g.per_split = fa_split_chunks(g.n_all, p.split_len, p.num_splits, p.share_len != 0);
  g.splits = p.num_splits;
  g.split = br.split;
  g.pool0 = p.pool0;
  return g;
}

// Thread tid < RMAX writes row tid's facts (rows past nrows: an empty key range); the first
// row of each query row counts an out-of-range position.
template <int RMAX>
PACKFA_DEV void set_row_facts(RowInfo* rows, const FaKernelParams& p, const BlockRows& br, const QueryPos& pos, int tid) {
  // as the length's count; only given positions are counted (the default ones of a sequence
  // shorter than nq are in contract: docs/format.md)
  const bool counts = p.errors && pos.q_pos && br.kvh == 0 && br.split == 0;
  if (tid < RMAX) {
    RowInfo ri{0, 0, 0.0f, 0, 0, 0, 1.0f, 0};
    if (tid < br.nrows) {
      const int g = br.row0 + tid;
      ri.qi = g / p.gqa;
      ri.head = br.kvh * p.gqa + (g - ri.qi * p.gqa);
      ri.pos = pos(ri.qi);
      if (counts && g == ri.qi * p.gqa) {  // one count per query row
        const int raw = pos.raw(ri.qi);
        if (raw < 0 || raw >= pos.kv_len) atomicAdd(p.errors + 1, 1);
      }
      if (p.alibi_n2 > 0) {
        const int h = ri.head;
        ri.slope = h < p.alibi_n2 ? powf(p.alibi_m0, static_cast<float>(h + 1))
                                  : powf(p.alibi_m1, static_cast<float>(2 * (h - p.alibi_n2) + 1));
        if (!p.alibi_pos) ri.mask_mul = ri.slope;
      }
      ri.key_lo = p.window > 0 ? ri.pos - p.window + 1 : 0;
      ri.key_hi = p.causal ? ri.pos + 1 : pos.kv_len;
    }
    rows[tid] = ri;
  }
}

#endif

}  // namespace packfa::device
