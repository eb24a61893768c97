// The one-round split rule for batches with host lengths (src/split_plan.hpp), on hand-counted
// cases: H200 slots (132 multiprocessors x 2 resident blocks = 264), 8 KV heads, one row group;
// and the blind rule's last-round trim.
#include <cstdint>
#include <vector>

#include "packfa_catch.hpp"
#include "split_plan.hpp"

using packfa::detail::one_round_splits;
using packfa::detail::split_len_of;
using packfa::detail::trim_tail_round;
using packfa::detail::working_blocks;

namespace {
constexpr int64_t kSlots = 264, kHeads = 8;

std::vector<int32_t> uniform(int batch, int32_t len) { return std::vector<int32_t>(batch, len); }
// The bench's varied batch: evenly from kv / 4 to kv.
std::vector<int32_t> varied(int batch, int32_t kv) {
  std::vector<int32_t> l(batch);
  for (int b = 0; b < batch; ++b) l[b] = kv / 4 + static_cast<int32_t>(int64_t(kv) * 3 / 4 * b / (batch - 1));
  return l;
}
int rule(const std::vector<int32_t>& l, int32_t max_kv, int cap) {
  return one_round_splits(l.data(), static_cast<int>(l.size()), max_kv, kHeads, kSlots, cap);
}
}  // namespace

TEST_CASE("split_plan: split lengths round up to 32 keys as the launch plan does", "[split_plan]") {
  CHECK(split_len_of(4096, 4) == 1024);
  CHECK(split_len_of(4096, 5) == 832);  // 819.2 -> 820 -> 832
  CHECK(split_len_of(4096, 6) == 704);  // 682.7 -> 683 -> 704
  CHECK(split_len_of(100, 8) == 32);    // never below 32
  // working blocks: ceil(len / split_len) per sequence, an empty sequence none
  const std::vector<int32_t> l{4096, 1, 0, 1025};
  CHECK(working_blocks(l.data(), 4, 1024, 8) == (4 + 1 + 0 + 2) * 8);
}

TEST_CASE("split_plan: uniform batches fill exactly one round", "[split_plan]") {
  // 8 x 4k: 4 splits = 256 blocks <= 264, 5 splits = 320 > 264; 1024-key blocks against an
  // even share of 8 * 4096 * 8 / 264 = 993 keys: balanced
  CHECK(rule(uniform(8, 4096), 4096, 9) == 4);
  CHECK(rule(uniform(16, 4096), 4096, 5) == 2);
  CHECK(rule(uniform(4, 4096), 4096, 17) == 8);
  CHECK(rule(uniform(8, 16384), 16384, 9) == 4);
  // 33 sequences x 8 heads = 264 blocks with one split; 34 do not fit one round at all
  CHECK(rule(uniform(33, 4096), 4096, 2) == 1);
  CHECK(rule(uniform(34, 4096), 4096, 2) == 0);
}

TEST_CASE("split_plan: varied batches take one round only when it is balanced", "[split_plan]") {
  // 8 x (1024 .. 4096): 6 splits (704 keys) -> 2+3+3+4+4+5+6+6 = 33 blocks x 8 = 264; 7 -> 304.
  // Even share 8 * 2560 * 8 / 264 = 620.6 keys; 704 <= 1.25 * 620.6: taken
  CHECK(rule(varied(8, 4096), 4096, 9) == 6);
  // 4 x (1024, 2048, 3072, 4096): 12 splits (352 keys) -> 3+6+9+12 = 30 x 8 = 240; 13 -> 272
  CHECK(rule(varied(4, 4096), 4096, 17) == 12);
  // 16 x (8k .. 32k): one round holds 2 splits of 16384 keys, against an even share of
  // 16 * 20480 * 8 / 264 = 9930: unbalanced, declined (measured 17% slower than the blind rule)
  CHECK(rule(varied(16, 32768), 32768, 5) == 0);
  // 16 x (1k .. 4k): 2 splits of 2048 keys against 1241: declined
  CHECK(rule(varied(16, 4096), 4096, 5) == 0);
}

TEST_CASE("split_plan: never more splits than the cap, degenerate inputs decline", "[split_plan]") {
  // one long sequence among empty ones: one round would hold 32 splits, the cap (the blind
  // rule's count) keeps 9, and 9 splits of 480 keys are not balanced against 4096 * 8 / 264
  std::vector<int32_t> skew(8, 0);
  skew[0] = 4096;
  CHECK(rule(skew, 4096, 9) == 0);
  CHECK(rule(skew, 4096, 32) == 32);
  CHECK(rule(uniform(8, 0), 4096, 9) == 0);  // no keys at all
  CHECK(one_round_splits(nullptr, 0, 4096, kHeads, kSlots, 9) == 0);
  CHECK(rule(uniform(8, 4096), 4096, 0) == 0);
}

TEST_CASE("split_plan: the blind rule's last round is trimmed when at most an eighth full", "[split_plan]") {
  // D 256, 32/8 heads, 4 resident blocks x 132 SMs = 528 slots. Batch 4: ceil(528 / 32) = 17
  // splits = 544 blocks, a last round of 16 (16 * 8 <= 528): 16 splits = 512 blocks.
  CHECK(trim_tail_round(17, 32, 528) == 16);
  // batch 8 x 4k: ceil(528 / 64) = 9 = 576 blocks, last round 48 (384 <= 528): 8 splits
  CHECK(trim_tail_round(9, 64, 528) == 8);
  // batch 16: 5 splits = 640 blocks, last round 112 (896 > 528): kept
  CHECK(trim_tail_round(5, 128, 528) == 5);
  // D 128, 2 resident blocks (264 slots). Batch 8: 9 splits = 576, last round 48 (384 > 264):
  // kept; batch 4: 17 splits = 544, last round 16 (128 <= 264): 16 splits, two whole rounds
  CHECK(trim_tail_round(9, 64, 264) == 9);
  CHECK(trim_tail_round(17, 32, 264) == 16);
  // the edge: a last round of exactly slots / 8 is trimmed, one block more is not
  CHECK(trim_tail_round(9, 33, 264) == 8);     // 297 blocks: 33 over one round
  CHECK(trim_tail_round(148, 2, 264) == 132);  // 296: 32 over
  CHECK(trim_tail_round(149, 2, 264) == 149);  // 298: 34 over
  // several whole rounds before the tail: 410 blocks on 100 slots -> 4 rounds + 10 -> 40 splits
  CHECK(trim_tail_round(41, 10, 100) == 40);
  // whole rounds only, less than one round, one split, degenerate inputs: unchanged
  CHECK(trim_tail_round(16, 33, 528) == 16);
  CHECK(trim_tail_round(3, 32, 528) == 3);
  CHECK(trim_tail_round(1, 600, 528) == 1);
  CHECK(trim_tail_round(17, 32, 0) == 17);
  CHECK(trim_tail_round(17, 0, 528) == 17);
  // down to one split: 2 x 280 = 560 blocks, 32 over one round of 528 -> 1 split (280 blocks);
  // 2 x 300 = 600 is 72 over (576 > 528): kept
  CHECK(trim_tail_round(2, 280, 528) == 1);
  CHECK(trim_tail_round(2, 300, 528) == 2);
}

// Decision "wgmma-split-two-rounds" (src/split_plan.hpp, hand-counted on 132 multiprocessors,
// kv 32768, 256-key minimum, 1024 partials at most).
TEST_CASE("split_plan: the wgmma key slices fill one round, batches two", "[split_plan]") {
  using packfa::detail::wgmma_key_slices;
  constexpr int64_t kSms = 132, kMax = 1024, kMin = 256;
  struct Case {
    int64_t kv, blocks_per_split;
    int per_block;
    int64_t batch, num_splits, split_len, partials;
    const char* why;
  };
  const Case cases[] = {
      {32768, 8, 2, 1, 0, 2048, 32, "one sequence, 8 KV heads, 64 rows dual: floor(132 / 8) = 16 block splits"},
      {32768, 16, 2, 2, 0, 2048, 32, "2 x 8 KV heads: floor(264 / 16) = 16 (256 blocks; rounding up gave 17, 272)"},
      {32768, 2, 2, 1, 0, 512, 128, "D 256 16 / 2 heads, 8 rows: 66 wanted, 497 -> 512 keys, 64 block splits"},
      {8192, 1, 1, 1, 0, 256, 32, "short cache: at least 256 keys a split (32, not 132)"},
      {1000, 1, 1, 1, 0, 384, 3, "1000 keys: 3 wanted, 334 -> 384 keys, 3 slices cover 1152"},
      {32768, 8, 2, 1, 7, 8192, 8, "a caller's count is partials: dual rounds 7 up to 4 blocks"},
      {32768, 200, 1, 4, 0, 32768, 1, "more blocks a split than multiprocessors: one split"},
  };
  for (const Case& c : cases) {
    const auto k = wgmma_key_slices(c.kv, c.blocks_per_split, c.per_block, c.batch, kSms, c.num_splits, kMax, kMin);
    INFO(c.why << ": " << k.partials << " x " << k.split_len);
    CHECK(k.split_len == c.split_len);
    CHECK(k.partials == c.partials);
  }
  // properties over shapes: slices cover the keys, multiples of 64, at most one round (one
  // sequence) or two (batches) whenever a split's blocks fit one round
  for (int64_t batch : {1, 2, 3, 4, 8, 16})
    for (int64_t heads : {1, 2, 4, 8, 32})
      for (int per : {1, 2})
        for (int64_t kv : {64, 4096, 8191, 32768, 131072, 524288}) {
          const int64_t base = batch * heads;
          const auto s = wgmma_key_slices(kv, base, per, batch, kSms, 0, kMax, kMin);
          const int64_t block_splits = s.partials / per;
          INFO("batch " << batch << " heads " << heads << " per " << per << " kv " << kv << " -> "
                        << s.partials << " x " << s.split_len);
          CHECK(s.partials % per == 0);
          CHECK(s.split_len % 64 == 0);
          CHECK(block_splits * s.split_len >= kv);
          CHECK((block_splits - 1) * s.split_len < kv);  // no empty slice
          CHECK(s.partials <= kMax);
          if (base <= kSms) CHECK(base * block_splits <= (batch == 1 ? 1 : 2) * kSms);
          if (block_splits > 1) CHECK(s.split_len >= kMin);
        }
}
