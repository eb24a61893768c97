// row_plan.hpp — when the decode kernel serves a call's rows in groups of the 4-row class
// instead of one block of the wide class (decision "d256-row-groups" in bench/NOTES.md).
//
// At D = 256 with the int8 dot the wide class holds 16 rows a block (255 registers x 64
// threads: 8 warps an SM on the H200). For 5-8 rows two groups of the 4-row class ran faster
// while the cache the call reads fits L2 (the second group reads the chunks from L2; the grid
// runs all blocks of one group before the next), and slower past it. H200, 16 / 2 heads, q8_0 V,
// wide class -> 4-row groups (us): kv 4k 29.4 -> 16.1, kv 32k (36 MB) 42.5 -> 34.9, batch 8 x 4k
// 41.5 -> 34.9; kv 128k (143 MB against 60 MB of L2) 75.5 -> 92.9; 16 rows 43.4 -> 52.2.
// Host-only and pure, so the CPU tests check it without a GPU.
#pragma once

#include <cstdint>

#include "packfa/format.hpp"

namespace packfa::detail {

// Bytes the kernel reads for one key of one KV head: the K row (packed16: int8 payload and an
// fp16 scale a block of k_block values; f16: fp16 values) and the V row (+ its planar scales).
inline int64_t kv_bytes_per_key(int head_dim, KFormat kf, int k_block, VFormat vf) {
  const int64_t d = head_dim;
  const int64_t k = kf == KFormat::packed16 ? d + 2 * d / k_block : 2 * d;
  return k + v_row_bytes(vf, head_dim) + v_scale_row_bytes(vf, head_dim);
}

// Whether the cache a call reads (sequences x KV heads x max_kv keys x bytes a key) fits L2;
// false where L2's size is unknown (0).
inline bool cache_fits_l2(int64_t batch, int64_t kv_heads, int64_t max_kv, int64_t bytes_per_key, int64_t l2_bytes) {
  if (l2_bytes <= 0) return false;
  const double cache = static_cast<double>(batch) * static_cast<double>(kv_heads) * static_cast<double>(max_kv) *
                       static_cast<double>(bytes_per_key);  // up to ~2^65: no int64 product
  return cache <= static_cast<double>(l2_bytes);
}

// Whether rows that the D = 256 wide class would serve run as 4-row groups: 5-8 rows and a
// cache that fits L2.
inline bool d256_row_groups(int head_dim, int rows, int64_t batch, int64_t kv_heads, int64_t max_kv,
                            int64_t bytes_per_key, int64_t l2_bytes) {
  return head_dim == 256 && rows >= 5 && rows <= 8 && cache_fits_l2(batch, kv_heads, max_kv, bytes_per_key, l2_bytes);
}

}  // namespace packfa::detail
