// split_plan.hpp — the split count of a batch: with the sequence lengths on the host
// (AttnParams::kv_len_host; decision "batch-one-round" in bench/NOTES.md), the blind rule's
// last-round trim (decision "batch-tail-trim"), and the wgmma kernel's key slices (decision
// "wgmma-split-two-rounds", at the end).
//
// Splits are ceil(max_kv_len / split_len) slices of every sequence; a block whose slice lies
// past its sequence's length exits at once. With the lengths known, the planner counts the
// blocks that do work and takes the most splits whose working blocks fit ONE round of the
// resident slots, if that round is balanced: its longest block (split_len keys) is at most
// kOneRoundSlack times the keys a slot would take with the work spread evenly. Measured on
// the H200 (D 128, 32/8 heads, q8_0 V): uniform batches 14-23% faster than the blind rule
// (part-filled last rounds), short varied batches 13-19% faster; long varied batches decline
// the rule (their longest blocks would be the critical path: 16 x 32k, one round 17% slower).
// Host-only and pure, so the CPU tests check it without a GPU.
#pragma once

#include <algorithm>
#include <cstdint>

namespace packfa::detail {

constexpr double kOneRoundSlack = 1.25;

// Keys of one split when max_kv keys are cut into `splits` slices (a multiple of 32, >= 32):
// the same rounding as the launch plan.
inline int64_t split_len_of(int64_t max_kv, int64_t splits) {
  const int64_t len = (max_kv + splits - 1) / splits;
  return std::max<int64_t>(32, (len + 31) / 32 * 32);
}

// Blocks that do work: per sequence ceil(len / split_len), times blocks_per_split (KV heads x
// row groups).
inline int64_t working_blocks(const int32_t* lens, int batch, int64_t split_len, int64_t blocks_per_split) {
  int64_t n = 0;
  for (int b = 0; b < batch; ++b) n += (std::max<int32_t>(lens[b], 0) + split_len - 1) / split_len;
  return n * blocks_per_split;
}

// The one-round split count in [1, cap], or 0 when the rule declines (no count fits one round,
// or its round is unbalanced). lens: host copies of kv_len, each in [0, max_kv].
inline int one_round_splits(const int32_t* lens, int batch, int64_t max_kv, int64_t blocks_per_split,
                            int64_t slots, int cap) {
  if (batch < 1 || max_kv < 1 || blocks_per_split < 1 || slots < 1 || cap < 1) return 0;
  int64_t keys = 0;
  for (int b = 0; b < batch; ++b) keys += std::max<int32_t>(lens[b], 0);
  if (keys == 0) return 0;
  auto fits = [&](int64_t s) { return working_blocks(lens, batch, split_len_of(max_kv, s), blocks_per_split) <= slots; };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = cap;  // working blocks grow with the split count: the largest s that fits
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  const double even_share = static_cast<double>(keys) * blocks_per_split / slots;  // keys a slot takes, spread evenly
  if (static_cast<double>(split_len_of(max_kv, lo)) > kOneRoundSlack * even_share) return 0;
  return static_cast<int>(lo);
}

// Decision "batch-tail-trim": the blind batch rule (ceil(4 x SMs / blocks per split) splits,
// the lengths on the device only) can overshoot whole rounds of the resident slots by a few
// blocks, which then run as a round of their own (H200, D 256, 32/8 heads, 4 blocks an SM:
// batch 4 x 32k took 17 splits = 544 blocks on 528 slots, 264 us; 16 splits 184 us). When the
// last round is at most an eighth full, take the most splits whose blocks fill the whole
// rounds before it. A fuller last round stays: there trimming lost on varied lengths (H200,
// last round 18-21% full: batch 8 x 4k D 128 +3%, q4_0 8 x 32k +8%, D 256 16 x 4k +10%),
// whose short sequences' blocks leave early, while uniform batches won 10-33%.
inline int64_t trim_tail_round(int64_t splits, int64_t blocks_per_split, int64_t slots) {
  if (splits <= 1 || blocks_per_split < 1 || slots < 1) return splits;
  const int64_t blocks = splits * blocks_per_split;
  const int64_t full = blocks / slots, tail = blocks - full * slots;
  if (full < 1 || tail == 0 || 8 * tail > slots) return splits;
  return std::max<int64_t>(1, full * slots / blocks_per_split);
}

// Decision "wgmma-split-two-rounds": the key slices of the wgmma kernel's split (one block a
// multiprocessor resides). `blocks_per_split` = sequences x KV heads x row tiles; `per_block`
// partials a block (2 where both consumer warpgroups take the same rows, "dual"). Unless the
// caller fixed `num_splits` (partials, rounded up to whole blocks), one sequence takes one round
// of blocks and batches at most two: floor(rounds x SMs / blocks_per_split) block splits, each at
// least `min_keys` keys, a multiple of 64 (no tile crosses a split). Rounding up instead gave a
// third round of a few blocks (2 x 8 KV heads on 132 multiprocessors: 17 splits, 272 blocks).
struct KeySlices {
  int64_t split_len;  // keys a block split takes
  int64_t partials;   // splits as the combine counts them (per_block x block splits)
};
inline KeySlices wgmma_key_slices(int64_t max_kv, int64_t blocks_per_split, int per_block, int64_t batch, int64_t sms,
                                  int64_t num_splits, int64_t max_partials, int64_t min_keys) {
  const int64_t per = std::max(per_block, 1);
  int64_t bs = (std::min(num_splits, max_partials) + per - 1) / per;
  if (num_splits <= 0) {
    const int64_t want = std::max<int64_t>(1, (batch == 1 ? sms : 2 * sms) / std::max<int64_t>(blocks_per_split, 1));
    const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(max_partials / per, max_kv / std::max<int64_t>(min_keys, 1)));
    bs = std::max<int64_t>(1, std::min(want, cap));
  }
  const int64_t len = (max_kv + bs - 1) / bs;
  const int64_t split_len = std::max<int64_t>(64, (len + 63) / 64 * 64);
  bs = std::max<int64_t>(1, (max_kv + split_len - 1) / split_len);
  return {split_len, per * bs};
}

}  // namespace packfa::detail
