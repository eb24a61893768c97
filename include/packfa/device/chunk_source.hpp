// packfa/device/chunk_source.hpp — which 32-key chunks a wave of the split kernel processes.
//
// Chunks are numbered over the key range of one (sequence, KV head, row group): split s owns
// chunks [s·per_split, s·per_split + count(s)). Without claim counters every wave takes the
// chunks wave, wave + W, ... of its own split (static splits). With counters, the first
// `pool0` chunks of a split stay static and the rest form the split's pool, handed out one
// chunk per atomicAdd on the split's counter; a wave whose split has nothing left takes
// chunks from the pool of the split with the most left. Why: on the H200 the blocks of one
// multiprocessor end together but whole multiprocessors end up to 25% apart at kv = 128k
// (bench/NOTES.md, "work moves between splits"), so work has to move between blocks. One counter per split
// rather than per KV head: 130 waves asking one counter queued behind the streaming traffic.
//
// The key loop stays as cheap as with static splits: the static chunks follow as next + W
// (one add and one compare per chunk); only past the static part does a claim go out, one
// chunk ahead (issue() now, resolve() after the next chunk's work), so its latency hides
// behind a chunk.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_layout.hpp"

namespace packfa::device {

constexpr int kClaimStride = 8;  // counters 32 bytes apart: one sector each

// The group's facts and the wave's claim state, in shared memory: read only past the static
// part, so the compiler cannot hoist them into registers the key loop needs (kept in
// registers, they cost the 4-row instances 12 registers and the q4_0 one 56 bytes of spills).
struct ChunkGroup {
  unsigned* claims;  // the group's counters (split s at s·kClaimStride), or null: static
  int n_all;         // chunks of the group's key range
  int per_split;     // chunks per split
  int splits, split;
  int pool0;         // static chunks per split (ignored without counters)
  int src;           // wave-uniform: the split the pending claim went to; -1 none yet, -2 done
  PACKFA_DEV int count(int s) const { return min(per_split, max(0, n_all - s * per_split)); }
};
static_assert(sizeof(ChunkGroup) <= kFaChunkStateBytes, "fa_layout.hpp reserves the chunk state");

// kDynamic = false compiles the static loop alone (claims ignored).
template <bool kDynamic>
struct ChunkSource {
  int static_end;     // own static chunks are < static_end; far below any chunk once done
  ChunkGroup* g;      // shared, this wave's copy
  unsigned pend = 0;  // lane 0's counter value of the pending claim

  // The wave's first chunk (-1: none); static, no memory round trip.
  PACKFA_DEV int first(const ChunkGroup& facts, int wave, ChunkGroup* smem) {
    g = smem;
    if (arch::lane_id() == 0) {  // one writer, then a wave barrier: no lane reads a half-written copy
      *g = facts;
      g->src = -1;
    }
    const int own = facts.split * facts.per_split;
    const bool dyn = kDynamic && facts.claims;
    const int n = dyn ? min(facts.pool0, facts.count(facts.split)) : facts.count(facts.split);
    static_end = own + n;
    arch::sync_wave();
    if (wave < n) return own + wave;
    static_end = -0x7fffffff;
    if constexpr (kDynamic) {
      if (dyn) {  // no static chunk for this wave: a claim right away (own pool, then the others)
        slow_issue();
        return slow_resolve();
      }
    }
    return -1;
  }

  // After `chunk` (returned by first / resolve) the wave wants the one after it: starts the
  // claim if that is not static. Every successful claim must be processed, so call it only
  // for a chunk that exists.
  template <int W>
  PACKFA_DEV void issue(int chunk) {
    if (chunk + W < static_end) return;
    if constexpr (kDynamic) slow_issue();
  }
  template <int W>
  PACKFA_DEV int resolve(int chunk) {
    if (chunk + W < static_end) return chunk + W;
    if constexpr (kDynamic) {
      return slow_resolve();
    } else {
      return -1;
    }
  }

 private:
  PACKFA_DEV void slow_issue() {
    static_end = -0x7fffffff;
    int s = g->src;
    if (s == -1 && g->claims) s = g->split;  // static part done: the own pool first
    arch::sync_wave();  // every lane has read src
    if (arch::lane_id() == 0) {
      g->src = s;
      if (s >= 0) pend = atomicAdd(g->claims + s * kClaimStride, 1u);
    }
    arch::sync_wave();  // src written before any lane reads it (slow_resolve)
  }
  PACKFA_DEV int slow_resolve() {
    const int s = g->src;
    if (s < 0) return -1;
    const int j = g->pool0 + arch::shfl(static_cast<int>(pend), 0);
    if (j < g->count(s)) return s * g->per_split + j;
    return steal();
  }
  // Lane i reads the counter of split (split + i) mod splits, so a wave looks at the 32 splits
  // from its own onward (with more splits the rest are left to their own waves: no chunk is
  // lost, the balance is partial); the one with the most chunks left (ties: nearest) gives one
  // by atomicAdd; a lost race looks again.
  PACKFA_DEV int steal() {
    const int lane = arch::lane_id();
    const int splits = g->splits, split = g->split, pool0 = g->pool0;
    for (;;) {
      int key = -1;
      if (lane < splits) {
        int v = split + lane;
        if (v >= splits) v -= splits;
        const int taken = static_cast<int>(*reinterpret_cast<volatile unsigned*>(g->claims + v * kClaimStride));
        const int left = g->count(v) - pool0 - taken;
        if (left > 0) key = (left << 5) | (31 - lane);
      }
      PACKFA_UNROLL
      for (int m = arch::kWaveSize / 2; m > 0; m >>= 1) key = max(key, arch::shfl_xor(key, m));
      arch::sync_wave();
      if (key < 0) {  // wave-uniform branches (key and j are shuffled from one lane)
        if (lane == 0) g->src = -2;
        arch::sync_wave();
        return -1;
      }
      int v = split + 31 - (key & 31);
      if (v >= splits) v -= splits;
      unsigned c = 0;
      if (lane == 0) c = atomicAdd(g->claims + v * kClaimStride, 1u);
      const int j = pool0 + arch::shfl(static_cast<int>(c), 0);
      if (j < g->count(v)) {
        if (lane == 0) g->src = v;
        arch::sync_wave();
        return v * g->per_split + j;
      }
    }
  }
};

}  // namespace packfa::device
