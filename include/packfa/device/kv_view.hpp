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
  // The pages of chunk [key0, key0 + n) from the halves' table entries id0 (rows 0-15) and
  // id1 (rows 16-31), wave-uniform. A bad id reads page 0 and is counted once per chunk and
  // page it names (lane 0; lane 16 too when rows 16.. start a page): the counts of page_of
  // per page.
  PACKFA_DEV KvChunk chunk_of(int key0, int n, int id0, int id1) const {
    const int lane = arch::lane_id();
    const int mask = (1 << page_shift) - 1;
    const bool bad0 = static_cast<unsigned>(id0) >= static_cast<unsigned>(num_pages);
    const bool bad1 = static_cast<unsigned>(id1) >= static_cast<unsigned>(num_pages);
    if (errors && ((lane == 0 && bad0) || (lane == 16 && n > 16 && ((key0 + 16) & mask) == 0 && bad1)))
      atomicAdd(errors + 2, 1);  // out of contract: rare
    KvChunk c;
    c.page[0] = bad0 ? 0 : id0;
    c.page[1] = bad1 ? 0 : id1;
    c.slot[0] = key0 & mask;
    c.slot[1] = (key0 + 16) & mask;
    const int key = key0 + min(lane, n - 1);
    c.page_lane = key - key0 >= 16 ? c.page[1] : c.page[0];
    c.slot_lane = key & mask;
    return c;
  }
};

// The block-table entries of up to 32 consecutive pages of one view, one per lane (decision
// "paged-table-window"): the chunk loop takes each chunk's page ids from registers by shuffles
// and reads the table once per 32 pages (a coalesced 128-byte line) instead of once per chunk.
// Why: the id is the first link of every copy's address, so a table read per chunk put a
// global-memory round trip in front of each chunk's copies, and ggml V's 8-byte copies allocate
// in L1 and evict the table's line (H200, kv 128k, pages of 32 / 16 over contiguous: q8_0 V
// +7.8 / +10.9% -> +2.7 / +4.2% with the window; q4_0's +9 / +12% is something else, bench/NOTES.md
// session 16).
struct KvTableWindow {
  int base = -0x40000000;  // page index of lane 0's entry; far below any page at the start
  int id = 0;              // lane l: table entry of page base + l (pages past `last`: 0)

  // The table entries of the halves of chunk [key0, key0 + 32): reloads the window (from the
  // chunk's first page, pages <= last) when the chunk is not inside it. Wave-uniform.
  PACKFA_DEV void ids(const KvView& v, int key0, int last, int& id0, int& id1) {
    const int p0 = key0 >> v.page_shift, p1 = (key0 + 16) >> v.page_shift;  // p1 - p0 is 0 or 1
    if (p0 < base || p1 >= base + arch::kWaveSize) {
      base = p0;
      const int pg = p0 + arch::lane_id();
      id = pg <= last ? v.table[pg] : 0;
    }
    id0 = arch::shfl(id, p0 - base);
    id1 = arch::shfl(id, p1 - base);
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
