// packfa/device/kv_view.hpp — the one place that turns (sequence, key) into cache addresses.
//
// A plane (K payload, K scales, V rows, V scales) is a base pointer and byte strides
// {seq, slot, head}. Contiguous / strided caches: key j of sequence b sits at
// base + seq·b + slot·j + head·h. Paged caches (api.hpp PagedKV): key j of sequence b is slot
// j % page_size of page block_table[b][j / page_size], at base + seq·page + slot·(j % page_size)
// + head·h (seq is then the page stride). The attention kernel stages 32-key chunks that start
// at multiples of 32 keys and pages hold 16, 32, .. 256 keys, so each half of a chunk (rows
// 0-15, rows 16-31) lies in one page: pages >= 32 hold the whole chunk, pages of 16 one half
// each (KvChunk).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

// Where one chunk's keys [key0, key0 + n) live (key0 a multiple of 32, 0 < n <= 32): the
// page and first slot of each half (rows 0-15, rows 16-31: one page each), and the page and
// slot of the lane's own key (its scale rows; lanes >= n take key0 + n - 1). Offsets are
// relative to the plane's (sequence, KV head) base.
struct KvChunk {
  int page[2], slot[2];        // half h: rows 16h .. 16h + 15 are slots slot[h] .. of page[h]
  int page_lane, slot_lane;    // this lane's key
  // Byte offsets in a plane of strides {seq, slot}: half h's page (its rows are slots slot[h]..
  // of it), the lane's key. Page ids and slots are >= 0: unsigned widening multiplies (two
  // instructions each on sm_90); the low 64 bits are those of the signed product for any
  // stride sign.
  PACKFA_DEV static int64_t mul(int v, int64_t stride) {
    return static_cast<int64_t>(static_cast<uint64_t>(static_cast<uint32_t>(v)) * static_cast<uint64_t>(stride));
  }
  PACKFA_DEV int64_t page_off(int h, int64_t seq) const { return mul(h ? page[1] : page[0], seq); }
  PACKFA_DEV int64_t lane(int64_t seq, int64_t slot_stride) const {
    return mul(page_lane, seq) + mul(slot_lane, slot_stride);
  }
};

// The view of one (sequence, KV head): its row of the block table, or none (contiguous).
struct KvView {
  const int32_t* table;  // null: contiguous
  int page_shift;        // log2(page_size)
  int num_pages;
  int* errors;           // bad page ids are counted here (ErrorCounter kErrPageId = 2) when set

  // A page id from the table, kept inside the pool: an out-of-range id reads page 0 (the data
  // is then wrong, the reads stay inside the cache the caller described) and is counted.
  PACKFA_DEV int64_t page_of(int key) const {
    const int id = table[key >> page_shift];
    if (static_cast<unsigned>(id) < static_cast<unsigned>(num_pages)) return id;
    if (errors && arch::lane_id() == 0) atomicAdd(errors + 2, 1);
    return 0;
  }
  // The pages of chunk [key0, key0 + n) (paged views only): one table read per lane (lane l
  // reads the entry of key key0 + min(l, n - 1), so only the chunk's own entries: one or two
  // words, a broadcast), the halves' pages from lanes 0 and 16 by shuffles. A bad id reads
  // page 0 and is counted once per chunk and page it names, by the chunk's first lane in that
  // page (lane 0; lane 16 too with pages of 16) -- the counts of page_of per page.
  PACKFA_DEV KvChunk chunk(int key0, int n) const {
    const int lane = arch::lane_id();
    const int mask = (1 << page_shift) - 1;
    const int key = key0 + min(lane, n - 1);
    const int id = table[key >> page_shift];
    KvChunk c;
    c.page_lane = id;
    if (static_cast<unsigned>(id) >= static_cast<unsigned>(num_pages)) {  // out of contract: rare
      c.page_lane = 0;
      if (errors && lane < n && (lane == 0 || (key & mask) == 0)) atomicAdd(errors + 2, 1);
    }
    c.slot_lane = key & mask;
    c.page[0] = arch::shfl(c.page_lane, 0);
    c.page[1] = arch::shfl(c.page_lane, 16);
    c.slot[0] = key0 & mask;
    c.slot[1] = (key0 + 16) & mask;
    return c;
  }
};

// One plane of the cache for one (sequence, KV head), addressed a key at a time (the prefill
// kernels' staging): rows `slot` bytes apart, or through the view's block table (then `page`
// bytes between pages).
struct KvPlane {
  const char* base;
  int64_t slot, page;
  PACKFA_DEV const char* row(const KvView& v, int key) const {
    if (!v.table) return base + key * slot;
    return base + v.page_of(key) * page + (key & ((1 << v.page_shift) - 1)) * slot;
  }
};
// The view and the four planes (K payload, K scales, V, V scales) of sequence b, KV head kvh.
struct KvPlanes {
  KvView view;
  KvPlane k, ks, v, vs;
};
template <bool PAGED>
PACKFA_DEV KvPlanes kv_planes(const FaKernelParams& p, int b, int kvh) {
  KvView view{nullptr, 0, p.num_pages, p.errors};
  if constexpr (PAGED) {
    view.table = p.block_table + static_cast<int64_t>(b) * p.table_stride;
    view.page_shift = 31 - __clz(p.page_size);
  }
  const int64_t bs = PAGED ? 0 : b;  // paged: the seq strides are page strides
  return KvPlanes{view,
                  {p.k + bs * p.k_seq + kvh * p.k_head, p.k_slot, p.k_seq},
                  {p.ks + bs * p.ks_seq + kvh * p.ks_head, p.ks_slot, p.ks_seq},
                  {p.v + bs * p.v_seq + kvh * p.v_head, p.v_slot, p.v_seq},
                  {p.vs + bs * p.vs_seq + kvh * p.vs_head, p.vs_slot, p.vs_seq}};
}

}  // namespace packfa::device
