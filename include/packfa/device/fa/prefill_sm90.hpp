// packfa/device/fa/prefill_sm90.hpp — the prefill kernel: many query rows over the packed16
// cache on Hopper warpgroup MMA (sm_90a).
//
// One block: 128 query rows (GQA rows packed as in decode: row r = token r / gqa, head
// r % gqa of one KV head) against the visible keys of one sequence, in tiles of kN keys, by
// warp-specialised warpgroups (decision "prefill-warp-specialised"):
//   producers (compact raw rows — int8 K, ggml or planar V — at head dims up to 128:
//            warpgroups 0 and 1 on alternate tiles, decision "prefill-two-producers";
//            otherwise warpgroup 0; 72 registers, 56 at D 256) —
//     stage: cp.async streams the raw cache bytes of tile t + 2 (any K/V format, contiguous or
//            paged) into a ring of two raw slots (contiguous planes: stage_rows, decision
//            "prefill-lean-producer"; pitches "prefill-raw-pitch");
//     widen: turns raw tile t into fp16 K and V tiles in the MMA layout (ring of kStages):
//            packed16 K as fp16(k · block scale) ("prefill-k-rounded"; switched off: its
//            exact int8 values, block scales beside in fp32), V by its format's rule; then
//            marks the slot full (mbarrier);
//   consumers (the last two warpgroups, 184 registers with two producers, else 216, 224 at
//            D 256; 64 rows each) — per tile:
//     scores: S = Q·K^T on wgmma (fp16 in, fp32 out), one MMA chain times each row's factor,
//            Q from shared memory (from registers: "prefill-q-regs", a switch)
//            (switched off: a chain per K scale block, each exact integer block sum scaled as
//            decode scales it, "prefill-exact-qk");
//     edits + online softmax in fp32 registers, O += P·V on wgmma (P from registers). With
//     one chain and two producers a warpgroup issues tile t + 1's scores before tile t's P·V and
//     runs t + 1's softmax under that P·V ("prefill-qk-ahead"); otherwise the P·V is waited
//     for after the next tile's barrier waits ("prefill-pv-overlap"). The two consumer
//     warpgroups take turns only at issuing their MMAs ("prefill-pingpong"), so one's softmax
//     runs under the other's MMAs.
// Key splits (decision "wgmma-split"): with p.num_splits > 1 each block takes a split of the
// keys and writes decode's partials for the decode combine; with <= 64 rows a KV head both
// consumer warpgroups take the same rows and alternate tiles (MTP rows, docs/prefill.md).
// fp16 MMA for Q·K, not int8 (decision "prefill-f16-qk", docs/prefill.md): K's scale varies
// per 32 values, so int8 partials would need a convert and an FMA a score and 32-block.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "packfa/device/fa/hopper_sync.hpp"
#include "packfa/device/fa/prefill_q.hpp"
#include "packfa/device/fa/prefill_qk.hpp"
#include "packfa/device/fa/prefill_rows.hpp"
#include "packfa/device/fa/prefill_producer.hpp"
#include "packfa/device/fa/prefill_tiles.hpp"
#include "packfa/pdl.hpp"

#ifndef PACKFA_PREFILL_PINGPONG
#define PACKFA_PREFILL_PINGPONG 1
#endif
// decision "prefill-exp-fma" (docs/prefill.md); 0 keeps the multiply pass, for A/B
#ifndef PACKFA_PREFILL_EXP_FMA
#define PACKFA_PREFILL_EXP_FMA 1
#endif
#ifndef PACKFA_PREFILL_PV_OVERLAP
#define PACKFA_PREFILL_PV_OVERLAP 1
#endif
// decision "prefill-qk-ahead" (docs/prefill.md): one MMA chain for the scores only
#ifndef PACKFA_PREFILL_QK_AHEAD
#define PACKFA_PREFILL_QK_AHEAD 1
#endif

namespace packfa::device::prefill {

template <int D, VFormat VF, QKMode QK, bool PAGED>
__global__ void __launch_bounds__(PrefillLayout<D, VF, QK>::kThreads, 1) fa_prefill_kernel(const FaKernelParams p) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kN = L::kN, kM = L::kM, kS = L::kStages;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(1024) char smem[];
  int* s_pos = reinterpret_cast<int*>(smem + L::kPos);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kBars);  // fp16 slot s widened (kProducers arrivals)
  uint64_t* empty = full + kS;                                     // fp16 slot s read (kConsumers arrivals)

  // the warpgroup index through a shuffle: warp-uniform to the compiler, so descriptors and
  // offsets derived from it live in uniform registers
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0), warp = (tid % 128) / 32, lane = tid % 32;
  constexpr int kPw = L::kProducerWgs;
  const int cw = wg - kPw;  // consumer warpgroup 0 / 1 (rows 64·cw ..); < 0: a producer
  const int b = blockIdx.z, kvh = blockIdx.y;
  // Key splits (decision "wgmma-split"): p.num_splits > 1 partials a row, merged by the decode
  // combine. With at most 64 rows a KV head ("dual"), both consumer warpgroups take rows 0-63
  // and alternate tiles (warpgroup cw the tiles t = cw, cw + 2, ..), each writing its own
  // partial: 2 partials a block split, so MTP rows keep both warpgroups busy.
  const int parts = p.num_splits;
  const bool split_out = parts > 1, dual = split_out && p.rows <= kM / 2;
  const int bsplits = dual ? parts / 2 : parts;
  const int bx = gridDim.x - 1 - blockIdx.x;  // blockIdx.x = row tile x split; later rows first:
  const int rg = bx / bsplits, split = bx - rg * bsplits;  // causal tiles see most keys
  const int r0 = rg * kM;

  pdl::wait();  // everything below reads memory a predecessor kernel may write
  const int kv_raw = p.kv_len[b];
  const int kv_len = kv_raw < 0 ? 0 : (kv_raw > p.max_kv_len ? p.max_kv_len : kv_raw);
  const bool counts = p.errors && r0 == 0 && split == 0 && kvh == 0;
  if (counts && tid == 0 && kv_len != kv_raw) atomicAdd(p.errors + 0, 1);

  // a consumer thread's two accumulator rows: 64·cw + 16·warp + lane / 4 (+ 8); their
  // descriptions go to shared memory (s_rows), their visible ranges stay in registers
  PrefillRow* s_rows = reinterpret_cast<PrefillRow*>(smem + L::kRowInfo);
  static_assert(sizeof(PrefillRow) <= L::kRowInfoBytes, "row table entry");
  const int my_row = (dual ? 0 : 64 * cw) + 16 * warp + lane / 4;  // and my_row + 8
  int first[2] = {0, 0}, end[2] = {0, 0};
  if (tid == 0) {
    s_pos[0] = 0x7fffffff, s_pos[1] = -0x7fffffff;
    for (int s = 0; s < kS; ++s)  // dual: one warpgroup reads each slot
      hopper::mbar_init(full + s, L::kProducerThreads), hopper::mbar_init(empty + s, dual ? L::kConsumers / 2 : L::kConsumers);
  }
  __syncthreads();
  if (cw >= 0) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const bool counter = kvh == 0 && split == 0 && (!dual || cw == 0) && lane % 4 == 0;
      const PrefillRow ri = prefill_row(p, r0 + my_row + 8 * k, b, kvh, kv_len, counter, first[k], end[k]);
      if (ri.qi < p.nq && lane % 4 == 0) atomicMin(&s_pos[0], ri.pos), atomicMax(&s_pos[1], ri.pos);
      if (lane % 4 == 0 && (!dual || cw == 0)) s_rows[my_row + 8 * k] = ri;
    }
  }
  __syncthreads();
  const int min_pos = s_pos[0], max_pos = s_pos[1];

  // the block's key range [lo, hi), lo on a tile boundary
  int hi = p.causal ? (max_pos + 1 < kv_len ? max_pos + 1 : kv_len) : kv_len;
  int lo = p.window > 0 ? min_pos - p.window + 1 : 0;
  lo = lo < 0 ? 0 : lo / kN * kN;
  if (split_out) {  // this split's keys: split_len is a multiple of 64 (the planner), so of kN
    lo = lo > split * p.split_len ? lo : split * p.split_len;
    hi = hi < (split + 1) * p.split_len ? hi : (split + 1) * p.split_len;
  }
  if (min_pos > max_pos) hi = lo;  // no valid row
  const int n_tiles = hi > lo ? (hi - lo + kN - 1) / kN : 0;

  if (wg < kPw) {  // ---- producers: raw tiles two ahead -> fp16 ring of kS (fa/prefill_producer.hpp)
    produce<D, VF, QK, PAGED>(p, smem, b, kvh, lo, hi, n_tiles, wg, tid, full, empty);
    return;
  }

  // ---- consumers: 64 rows a warpgroup ---------------------------------------------------------
  hopper::regs_grow<L::kConsumerRegs>();
  const int ctid = tid - L::kProducers;
  char* sq = smem + L::kQ;
  load_q<D, VF, QK>(p, sq, b, kvh, r0, ctid, [] { hopper::named_sync(2, L::kConsumers); });
  hopper::named_sync(2, L::kConsumers);
  constexpr bool kInt8 = QK == QKMode::packed16_int8;
  QdRows<L> qd_rows{};  // Q's block scales of this thread's two rows (int8 mode)
  if constexpr (kInt8 && !L::kKRounded)
    qd_rows.init(reinterpret_cast<const float*>(smem + L::kQd) + my_row * ((D + 31) / 32));
  const uint64_t q_desc = kmajor_desc<L, kM>(wgmma::smem_addr(sq) + (dual ? 0 : 64 * cw) * (L::kSwizzle ? 128 : 16));
  QRegs<L> q_regs;  // decision "prefill-q-regs" (a switch): Q from registers
  q_regs.load(sq, my_row, lane);
  const uint64_t k_desc = kmajor_desc<L, kN>(wgmma::smem_addr(smem + L::kK));
  // V, MN-major (transposed B): interleaved, or 128-byte swizzle with 64-value blocks kN·128 apart
  const uint32_t v_addr = wgmma::smem_addr(smem + L::kV);
  const uint64_t v_desc = L::kSwizzle ? wgmma::smem_desc_sw128(v_addr, kN * 128, 1024) : wgmma::smem_desc(v_addr, 128, kN * 16);
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float softcap = p.softcap;
  const bool extras = softcap > 0.0f || p.mask || p.alibi_n2 > 0;
  const float inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  // int8 dot: Q's block scales already hold scale·log2(e) (load_q), so scores arrive in the
  // exp2 domain; the other modes multiply here by sc2 (prefill-k-rounded, int8: each row's
  // factor from load_q). raw_mul turns a score back into scale·q·k.
  constexpr bool kScoresScaled = kInt8 && !L::kKRounded;
  float sc2[2], raw_mul[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const float f = kInt8 && L::kKRounded ? reinterpret_cast<const float*>(smem + L::kQRowF)[my_row + 8 * k]
                                          : p.scale * kLog2e;
    sc2[k] = kScoresScaled ? 1.0f : f;
    raw_mul[k] = kScoresScaled ? 0.6931471805599453f : (kInt8 ? f * 0.6931471805599453f : p.scale);
  }

  // Pipeline (decision "prefill-pipeline"): the producer widens up to kS tiles ahead; a
  // consumer warpgroup waits for slot t % kS to be full, and frees it once its P·V is done.
  // Ping-pong (decision "prefill-pingpong"): the two consumer warpgroups take turns at issuing
  // the scores' MMA chains through named barriers 3 and 4, so one's softmax and P·V run while
  // the other's Q·K keeps the tensor cores busy. Each sync on a warpgroup's barrier is matched
  // by one arrival of the other (warpgroup 1 arrives once up front and not after its last tile;
  // dual: each arrives after its tile t when tile t + 1, the other's, exists).
  constexpr bool kPingPong = PACKFA_PREFILL_PINGPONG != 0;
  // f16 V: measured 1.00-1.02x the time with it (its consumers are not issue-bound), so not there
  constexpr bool kExpFma = PACKFA_PREFILL_EXP_FMA != 0 && VF != VFormat::f16;
  if (kPingPong && cw == 1 && n_tiles > 0) hopper::named_arrive(3, L::kConsumers);
  // P·V of a tile is waited for only after the next tile's full-slot and ping-pong waits
  // (decision "prefill-pv-overlap"), so it runs under them; P stays live until then, and the
  // slot is freed there. (Waiting later, at the first Q·K wait, makes ptxas serialise the
  // wgmma: C7514.)
  constexpr bool kPvOverlap = PACKFA_PREFILL_PV_OVERLAP != 0;
  // (with two producer warpgroups only: with one it measured 1.01–1.06x the time)
  constexpr bool kQkAhead = PACKFA_PREFILL_QK_AHEAD != 0 && (L::kF16K || L::kKRounded) && L::kProducerWgs == 2 &&
                            PACKFA_PREFILL_ABLATE != 2;
  int pv_slot = -1;  // the slot whose P·V may still run
  uint32_t pf[kN / 16][4];
  float s[kN / 2];
  auto pv_wait = [&] {  // P·V done: P and O stay where the asynchronous MMA left them
    wgmma::wait<0>();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk)
      hold(pf[kk][0]), hold(pf[kk][1]), hold(pf[kk][2]), hold(pf[kk][3]);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) hold(o[i]);
  };
  // edits, visibility (three variants, so the common one is short) and the online softmax of
  // tile t's scores in s: s becomes the tile's probabilities, m and l move, corr is the factor
  // O still needs
  auto softmax_tile = [&](int t, float (&corr)[2]) {
    const int t0 = lo + t * kN;
    const bool full = t0 + kN <= kv_len && (!p.causal || t0 + kN - 1 <= min_pos) &&
                      (p.window <= 0 || t0 > max_pos - p.window);
    const int kb = t0 + 2 * (lane % 4);  // key of s[4j + 2k + e] is kb + 8j + e
    // mul: the factor the softmax still applies (decision "prefill-exp-fma": a full tile's raw
    // scores go straight into exp2(s · sc2 − m), one FFMA, and the row max is taken raw — the
    // factor is positive, so max(s) · sc2 = max(s · sc2) — instead of a multiply pass first)
    float mul[2] = {1.0f, 1.0f};
    if (!extras && full) {
      if constexpr (!kScoresScaled && kExpFma) {
        mul[0] = sc2[0], mul[1] = sc2[1];
      } else if constexpr (!kScoresScaled) {
#pragma unroll
        for (int i = 0; i < kN / 2; ++i) s[i] *= sc2[(i >> 1) & 1];
      }
    } else if (!extras) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int key = kb + 8 * j + (v & 1);
          const bool vis = key >= first[v >> 1] && key < end[v >> 1];
          s[4 * j + v] = vis ? s[4 * j + v] * sc2[v >> 1] : -INFINITY;
        }
    } else {
      const PrefillRow rows[2] = {s_rows[my_row], s_rows[my_row + 8]};
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const PrefillRow& ri = rows[v >> 1];
          const int key = kb + 8 * j + (v & 1);
          const bool vis = key >= first[v >> 1] && key < end[v >> 1];
          float x = s[4 * j + v] * raw_mul[v >> 1];
          if (softcap > 0.0f) x = softcap * tanh_fast(x * inv_cap);
          if (ri.mask && vis) x += ri.mask_mul * arch::half_to_float(ri.mask[key]);
          x += ri.slope_pos * static_cast<float>(key - ri.pos);
          s[4 * j + v] = vis ? x * kLog2e : -INFINITY;
        }
    }
#pragma unroll
    for (int k = 0; k < 2 && PACKFA_PREFILL_ABLATE != 3 && PACKFA_PREFILL_ABLATE != 5; ++k) {
      // pairwise trees (short dependency chains): the row's max, then its exp2 sum
      float mx4[4];
#pragma unroll
      for (int q = 0; q < 4; ++q)
        mx4[q] = fmaxf(fmaxf(s[4 * q + 2 * k], s[4 * q + 2 * k + 1]),
                       kN > 32 ? fmaxf(s[4 * (q + 4) + 2 * k], s[4 * (q + 4) + 2 * k + 1]) : -INFINITY);
      static_assert(kN == 32 || kN == 64, "the max tree covers 4 or 8 column groups");
      float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[k], mx * mul[k]);  // mx is finite where mul != 1 (a full tile)
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      corr[k] = arch::exp2_fast(m[k] - m_use);
      m[k] = m_new;
      float sum4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pr = arch::exp2_fast(fmaf(s[4 * j + 2 * k + e], mul[k], -m_use));
          s[4 * j + 2 * k + e] = pr;
          sum4[(2 * j + e) % 4] += pr;
        }
      l[k] = l[k] * corr[k] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
    }
  };
  auto rescale_o = [&](const float (&corr)[2]) {
    if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {  // the running max moved
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[4 * j + 0] *= corr[0], o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
      }
    }
  };
  auto to_p = [&] {  // the probabilities in s as the P·V A fragments
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      pf[kk][0] = cvt_half2(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = cvt_half2(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = cvt_half2(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = cvt_half2(s[8 * kk + 6], s[8 * kk + 7]);
    }
  };
  auto pv_issue = [&](int t) {  // O += P·V of tile t, asynchronous
    const uint64_t vd0 = v_desc + (((t % kS) * L::kTileBytes) >> 4);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk)  // k step kk: 16 keys, 256 bytes on (2048 swizzled)
      wgmma::mma_rs_tb<D>(o, pf[kk], vd0 + ((L::kSwizzle ? 2048 : 256) * kk >> 4));
    wgmma::commit();
  };
  const int step = dual ? 2 : 1;
  // a consumer warpgroup's turn ends after it issued its MMAs of tile t; the other one waits
  // for that only if it has a later turn (see the ping-pong count above)
  auto turn_over = [&](int t) {
    if (kPingPong && (t + 1 < n_tiles || (cw == 0 && !dual))) hopper::named_arrive(4 - cw, L::kConsumers);
  };
  auto hold_s = [&] {
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) hold(s[i]);
  };

  if constexpr (kQkAhead) {
    // Decision "prefill-qk-ahead": the scores of tile t + 1 are issued before the P·V of tile
    // t, and their softmax runs while that P·V does, so a warpgroup keeps the tensor cores
    // busy on its own between its turns. The warpgroup holds two ring slots (t, t + 1).
    int t = dual ? cw : 0;
    float corr[2] = {1.0f, 1.0f};
    auto kd = [&](int u) { return k_desc + (((u % kS) * L::kTileBytes) >> 4); };
    if (t < n_tiles) {  // the first tile's scores, outside the turns
      hopper::mbar_wait(full + t % kS, (t / kS) & 1);
      qk_one_chain<L>(q_regs, q_desc, kd(t), s);
      wgmma::wait<0>();
      hold_s();
      softmax_tile(t, corr);
    }
    for (; t + step < n_tiles; t += step) {  // a turn: Q·K of tile t + step, P·V of tile t
      const int tn = t + step;
      to_p();
      hopper::mbar_wait(full + tn % kS, (tn / kS) & 1);
      if (kPingPong) hopper::named_sync(3 + cw, L::kConsumers);
      qk_one_chain<L>(q_regs, q_desc, kd(tn), s);
      rescale_o(corr);
      pv_issue(t);
      turn_over(t);
      wgmma::wait<1>();  // Q·K of tn done, P·V of t may run
      hold_s();
      softmax_tile(tn, corr);
      pv_wait();
      hopper::mbar_arrive(empty + t % kS);
    }
    if (t < n_tiles) {  // the last tile's P·V
      to_p();
      if (kPingPong) hopper::named_sync(3 + cw, L::kConsumers);
      rescale_o(corr);
      pv_issue(t);
      turn_over(t);
      pv_wait();
      hopper::mbar_arrive(empty + t % kS);
    }
  } else {
    for (int t = dual ? cw : 0; t < n_tiles; t += step) {
      hopper::mbar_wait(full + t % kS, (t / kS) & 1);
      if (PACKFA_PREFILL_ABLATE == 2) {
        hopper::mbar_arrive(empty + t % kS);
        continue;
      }
      if (kPingPong) hopper::named_sync(3 + cw, L::kConsumers);
      if (kPvOverlap) {  // the previous tile's P·V ran under the two waits above
        pv_wait();  // unconditional: a branch around it would put register copies of O before it
        if (pv_slot >= 0) hopper::mbar_arrive(empty + pv_slot);
      }
      auto issued = [&] { turn_over(t); };
      const uint64_t kd0 = k_desc + (((t % kS) * L::kTileBytes) >> 4);
      if constexpr (L::kF16K || L::kKRounded) {
        qk_one_chain<L>(q_regs, q_desc, kd0, s);
        issued();
        wgmma::wait<0>();
        hold_s();
      } else {
        const float* ksf = reinterpret_cast<const float*>(smem + L::kKsf + (t % kS) * L::kKsfBytes);
        bool done = false;
        if constexpr (D % 32 == 0) {
          if (p.k_block == 32) {
            qk_blocked<L, QK, 32>(q_desc, kd0, ksf, qd_rows, lane, s, issued);
            done = true;
          }
        }
        if (!done) qk_blocked<L, QK, 16>(q_desc, kd0, ksf, qd_rows, lane, s, issued);
      }
      float corr[2] = {1.0f, 1.0f};
      softmax_tile(t, corr);
      rescale_o(corr);
      to_p();
      pv_issue(t);
      if (kPvOverlap) {
        pv_slot = t % kS;
        continue;
      }
      pv_wait();  // P·V of t
      // every consumer thread arrives after its own reads of the slot (its K scales): a release
      // per reading thread, so the producer's next writes to the slot are ordered after each
      // read without relying on a warp barrier (compute-sanitizer racecheck flagged the
      // lane-0-only arrival of each warp, session 11)
      hopper::mbar_arrive(empty + t % kS);
    }
    if (kPvOverlap) {  // the last tile's P·V
      pv_wait();
      if (pv_slot >= 0) hopper::mbar_arrive(empty + pv_slot);
    }
  }

  pdl::launch_dependents();
  write_prefill_rows<D>(p, s_rows, my_row, lane, b, dual ? 2 * split + cw : split, split_out, o, m, l);
}

}  // namespace packfa::device::prefill
