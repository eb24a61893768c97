// How a (sequence, KV head) group's chunks fall to its splits (include/packfa/device/fa_layout.hpp
// fa_split_chunks, called by the split kernel's chunk_group): the plan's split_len / 32, or with
// decision "splits-share-short-lengths" an even share while the group holds at most a quarter of
// the plan's chunks. Splits are built as the dispatcher builds them (src/split_plan.hpp).
#include <algorithm>
#include <cstdint>

#include "packfa/device/fa_layout.hpp"
#include "packfa_catch.hpp"
#include "split_plan.hpp"

using packfa::fa_split_chunks;
using packfa::detail::split_len_of;

namespace {
// The expression the kernel ran on the H200 (session 21, a35c50d) before it moved into
// fa_split_chunks; kept here so the move is checked to be the same function.
int kernel_a35c50d(int n_all, int split_len, int splits, int share) {
  int per = split_len / 32;
  if (share && 4 * static_cast<int64_t>(n_all) <= static_cast<int64_t>(per) * splits)
    per = std::max(1, (n_all + splits - 1) / splits);
  return per;
}
int chunks_of(int64_t keys) { return static_cast<int>((keys + 31) / 32); }
}  // namespace

TEST_CASE("split share: the same function as the kernel's tested expression", "[split_share]") {
  for (int splits : {1, 2, 5, 7, 32, 33, 128, 1024})
    for (int split_len : {32, 64, 832, 3968, 4096, 1 << 20})
      for (int n : {0, 1, 2, 3, 31, 32, 33, 100, 128, 1000, 4095, 32768, 1 << 22})
        for (int share : {0, 1}) {
          INFO("splits " << splits << " split_len " << split_len << " chunks " << n << " share " << share);
          CHECK(fa_split_chunks(n, split_len, splits, share != 0) == kernel_a35c50d(n, split_len, splits, share));
        }
}

TEST_CASE("split share: a sequence max_kv_len long keeps the plan's split length", "[split_share]") {
  for (int64_t max_kv : {32, 100, 4096, 4099, 32768, 131072, 524288})
    for (int64_t splits = 1; splits <= 1024; splits = splits < 8 ? splits + 1 : splits * 2 + 1) {
      const int len = static_cast<int>(split_len_of(max_kv, splits));
      const int s = static_cast<int>((max_kv + len - 1) / len);  // the launch's count (dispatch.cu)
      INFO("max_kv " << max_kv << " splits " << s);
      CHECK(fa_split_chunks(chunks_of(max_kv), len, s, true) == len / 32);
      CHECK(fa_split_chunks(chunks_of(max_kv), len, s, false) == len / 32);
    }
}

TEST_CASE("split share: short groups cover their chunks with every split", "[split_share]") {
  for (int64_t max_kv : {4096, 32768, 131072})
    for (int64_t want : {5, 32, 33, 128})
      for (int n = 1; n <= chunks_of(max_kv); n += 7) {
        const int len = static_cast<int>(split_len_of(max_kv, want));
        const int s = static_cast<int>((max_kv + len - 1) / len);
        const int plan = len / 32, per = fa_split_chunks(n, len, s, true);
        INFO("max_kv " << max_kv << " splits " << s << " chunks " << n << " per split " << per);
        CHECK(static_cast<int64_t>(per) * s >= n);  // every chunk has a split
        CHECK(per <= plan);                         // no split longer than the plan's
        CHECK(per >= 1);
        if (4LL * n <= static_cast<int64_t>(plan) * s) {
          CHECK(per == std::max(1, (n + s - 1) / s));  // the even share
          const int working = (n + per - 1) / per;
          if (n <= s) {
            CHECK(working == n);  // a chunk a split
          } else {
            CHECK(2 * working >= s);  // per < n / s + 1, so more than s / 2 splits work
          }
          CHECK(working >= (n + plan - 1) / plan);  // never fewer than the plan's own mapping
        } else {
          CHECK(per == plan);
        }
        CHECK(fa_split_chunks(n, len, s, false) == plan);
      }
}

TEST_CASE("split share: the H200 bench's cases, counted by hand", "[split_share]") {
  // one sequence of 4096 keys, max_kv_len 131072, 33 splits: split_len ceil(131072 / 33) = 3972
  // rounded up to 4000 (125 chunks); 128 chunks <= 125 x 33 / 4, so 4 a split: 32 splits work
  // (the plan's own mapping: 2)
  CHECK(split_len_of(131072, 33) == 4000);
  CHECK(fa_split_chunks(128, 4000, 33, true) == 4);
  CHECK(fa_split_chunks(128, 4000, 33, false) == 125);
  // batch 16 x 4096 planned blind: 5 splits of 832 keys (26 chunks); its shortest sequence
  // (1024 keys, 32 chunks: 4 x 32 = 128 <= 130) shares, 7 chunks a split; the next (1228 keys,
  // 39 chunks: 156 > 130) keeps 26
  CHECK(split_len_of(4096, 5) == 832);
  CHECK(fa_split_chunks(32, 832, 5, true) == 7);
  CHECK(fa_split_chunks(39, 832, 5, true) == 26);
  // a window of 512 keys (16 chunks, 17 when unaligned) in a 16384-key plan of 128 splits of 128 keys
  CHECK(fa_split_chunks(17, 128, 128, true) == 1);
}
