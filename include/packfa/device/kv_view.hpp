// packfa/device/kv_view.hpp — the one place that turns (sequence, key) into cache addresses.
//
// A plane (K payload, K scales, V rows, V scales) is a base pointer and byte strides
// {seq, slot, head}. Contiguous / strided caches: key j of sequence b sits at
// base + seq·b + slot·j + head·h. Paged caches (api.hpp PagedKV): key j of sequence b is slot
// j % page_size of page block_table[b][j / page_size], at base + seq·page + slot·(j % page_size)
// + head·h (seq is then the page stride). The attention kernel stages 32-key chunks that start
// at multiples of 32 keys, so with pages of >= 32 keys a chunk lies in one page and with pages
// of 16 it lies in two: a chunk is at most two runs of rows `slot` bytes apart (KvRuns).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"

namespace packfa::device {

// Where one chunk's keys [key0, key0 + n) live: run 0 holds keys key0 .. key0 + split - 1,
// run 1 the rest (split == n: one run). page[r]: the run's page id (contiguous: 0); slot0[r]:
// the slot of its first key within the page (contiguous: the key index itself). Offsets are
// relative to the plane's (sequence, KV head) base.
struct KvRuns {
  int split;
  int64_t page[2];
  int slot0[2];
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
  // Keys [key0, key0 + n), key0 a multiple of 32 (n <= 32).
  PACKFA_DEV KvRuns runs(int key0, int n) const {
    KvRuns r;
    if (!table) {
      r.split = n;
      r.page[0] = r.page[1] = 0;
      r.slot0[0] = r.slot0[1] = key0;
      return r;
    }
    const int mask = (1 << page_shift) - 1;
    const int in0 = key0 & mask;
    const int first = (mask + 1) - in0;  // keys left in key0's page
    r.split = n < first ? n : first;
    r.page[0] = page_of(key0);
    r.slot0[0] = in0;
    r.page[1] = r.split < n ? page_of(key0 + r.split) : r.page[0];
    r.slot0[1] = 0;
    return r;
  }
};

}  // namespace packfa::device
