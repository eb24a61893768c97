// packfa/device/fa/prefill_tiles.hpp — the prefill kernel's shared-memory layout and the code
// that fills it: cp.async staging of raw cache rows and widening to fp16 tiles in the wgmma
// layout (Q set-up: prefill_q.hpp; device/fa/prefill_sm90.hpp runs the main loop over them).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/wgmma.hpp"
#include "packfa/device/fa/widen.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/format.hpp"

#ifndef PACKFA_PREFILL_WIDEN_BATCHED
#define PACKFA_PREFILL_WIDEN_BATCHED 1
#endif
#ifndef PACKFA_PREFILL_KS128
#define PACKFA_PREFILL_KS128 0
#endif
// fp16 ring depth at head dims up to 128 (prefill-qk-ahead holds two slots a warpgroup)
#ifndef PACKFA_PREFILL_STAGES
#define PACKFA_PREFILL_STAGES 3
#endif
// decision "prefill-raw-pitch": ggml V rows and block-32 K scale rows packed in the raw ring
#ifndef PACKFA_PREFILL_RAW_PITCH
#define PACKFA_PREFILL_RAW_PITCH 1
#endif
// decision "prefill-two-producers": 2 producer warpgroups on alternate tiles (head dims up to 128)
#ifndef PACKFA_PREFILL_PRODUCER_WGS
#define PACKFA_PREFILL_PRODUCER_WGS 2
#endif
// measurement only (wrong results): 1 no widening, 2 consumers idle, 3 no softmax, 4 no widening or
// staging (the consumers alone), 5 = 4 and 3 (the consumers' MMA loop alone)
#ifndef PACKFA_PREFILL_ABLATE
#define PACKFA_PREFILL_ABLATE 0
#endif
#ifndef PACKFA_PREFILL_K_ROUNDED
#define PACKFA_PREFILL_K_ROUNDED 1
#endif

namespace packfa::device::prefill {

constexpr int round16(int x) { return (x + 15) / 16 * 16; }
// A row pitch that is an odd number of 16-byte units: 8 threads reading 16 bytes of 8
// consecutive rows hit 8 different bank groups.
constexpr int odd16(int x) { return (round16(x) / 16) % 2 ? round16(x) : round16(x) + 16; }

// Decision "prefill-ks128": key 8j + 2t + e of a tile's block at t·p + 2j + e, so consumer lane
// group t (lane % 4) reads its keys' scales as consecutive 16-byte words. Checked below: each of
// n keys has its own slot under 4p; one 16-byte read of the four groups, and the stores of 32
// consecutive keys (a producer warp), touch distinct banks (32 four-byte banks).
constexpr int ks_slot_grouped(int key, int p) { return ((key >> 1) & 3) * p + ((key >> 3) << 1) + (key & 1); }
constexpr bool ks_grouped_ok(int n, int p) {
  for (int a = 0; a < n; ++a) {
    if (ks_slot_grouped(a, p) >= 4 * p || (a & 7) / 2 * p + a / 8 * 2 + a % 2 != ks_slot_grouped(a, p)) return false;
    for (int b = a + 1; b < n; ++b)
      if (ks_slot_grouped(b, p) == ks_slot_grouped(a, p) || (b / 32 == a / 32 && (ks_slot_grouped(b, p) - ks_slot_grouped(a, p)) % 32 == 0))
        return false;
  }
  for (int q = 0; q < n / 16; ++q)
    for (int t = 0; t < 4; ++t)
      for (int u = t + 1; u < 4; ++u)
        if ((t * p + 4 * q) % 4 != 0 || (t * p + 4 * q) / 4 % 8 == (u * p + 4 * q) / 4 % 8) return false;
  return 2 * (n / 8) <= p;
}
static_assert(ks_grouped_ok(64, 24) && ks_grouped_ok(32, 8), "prefill-ks128 slots: distinct, bank-conflict free");

template <int D, VFormat VF, QKMode QK>
struct PrefillLayout {
  static constexpr int kD = D;
  // Warp specialisation (decision "prefill-warp-specialised"): the first warpgroup (or two)
  // stages and widens the cache tiles, the last two compute 64 query rows each; they meet only
  // at the ring's mbarriers.
  // Decision "prefill-two-producers": at head dims up to 128 two producer warpgroups take
  // alternate tiles (warpgroup w the tiles t = w, w + 2, .., raw slot t & 1 = w), so each
  // scheduler interleaves two producer warps: one alone was latency-bound (LDS -> widen -> STS).
  // (two only where the raw rows are compact — int8 K with ggml or planar V: with f16 / bf16 V
  // or f16 K the consumers are the bound and two producers, packed pitches or qk-ahead measured
  // 1.00–1.07x the time; those instances keep the one-producer kernel)
  static constexpr bool kCompactRaw = QK != QKMode::f16 && VF != VFormat::f16 && VF != VFormat::bf16;
  static constexpr int kProducerWgs = D <= 128 && kCompactRaw ? PACKFA_PREFILL_PRODUCER_WGS : 1;
  static constexpr int kProducerThreads = 128;  // a producer warpgroup
  static constexpr int kProducers = 128 * kProducerWgs, kConsumers = 256, kThreads = kProducers + kConsumers;
  // setmaxnreg budgets, kProducers·P + 256·C <= 65536 (the registers the block was launched
  // with: setmaxnreg.inc waits for registers the other warpgroups released, so the sum may not
  // exceed it): the producer spills below 64 at q8_0 V (staging loops, unrolled widening), so
  // with two producer warpgroups the consumers get 184 (ptxas: no spill, no serialised wgmma
  // in any D 128 instance; 216 with one producer warpgroup)
  static constexpr int kProducerRegs = kProducerWgs == 2 ? 72 : (D <= 128 ? 72 : 56), kConsumerRegs = kProducerWgs == 2 ? 184 : (D <= 128 ? 216 : 224);
  static_assert(kProducers * kProducerRegs + kConsumers * kConsumerRegs <= 65536, "setmaxnreg budgets");
  static constexpr int kM = 128;                 // query rows per block, 64 per consumer warpgroup
  static constexpr int kN = D <= 128 ? 64 : 32;  // keys per tile (128 does not fit the rings' shared memory)
  static constexpr bool kF16K = QK == QKMode::f16;
  // fp16 K / V ring; a fourth slot does not fit beside f16 K's raw ring or D 256's tiles
  static constexpr int kStages = D <= 128 && !kF16K ? PACKFA_PREFILL_STAGES : 3;
  // Decision "prefill-k-rounded" (PACKFA_PREFILL_K_ROUNDED): the producer writes packed16 K as
  // fp16(k · block scale) and the int8 mode's Q tile holds q · (its block scale / the row's
  // largest), so the scores are one MMA chain over the whole head dim, as for f16 K.
  static constexpr bool kKRounded = !kF16K && PACKFA_PREFILL_K_ROUNDED != 0;
  static constexpr bool kQdTable = QK == QKMode::packed16_int8;  // Q's block scales [kM][(D + 31) / 32]
#if defined(PACKFA_PREFILL_SWIZZLE)
  static constexpr bool kSwizzle = D % 64 == 0 && PACKFA_PREFILL_SWIZZLE;
#else
  static constexpr bool kSwizzle = false;
#endif
  static constexpr int kKRow = kF16K ? 2 * D : D;
  static constexpr int kKPitch = odd16(kKRow);
  static constexpr int kVRow = static_cast<int>(v_row_bytes(VF, D));
  static constexpr int kVWidth = kVRow % 16 == 0 ? 16 : (kVRow % 8 == 0 ? 8 : (kVRow % 4 == 0 ? 4 : 2));  // the dispatcher checks the cache allows it
  static constexpr int kKs32Row = D % 32 == 0 ? D / 16 : 2;  // scale row bytes, block 32 (head dims of 32s only)
  static constexpr int kKsPitch = kF16K ? 0 : round16(D / 16 * 2);  // scale rows (block 16 at most)
  // Decision "prefill-raw-pitch": the widening reads ggml V rows (q8_0, q4_0) and K's scale rows
  // in 2- and 4-byte words, 32 consecutive keys a warp: padded to odd 16-byte units those
  // pitches put 4 keys in one bank (36 and 4 words); packed to their 8-byte multiple (34 words,
  // 2 words) 2, and the cp.async pieces that fill them become contiguous. Rows read as 16-byte
  // words (int8 K, f16 / bf16 V, planar V) keep odd16.
  static constexpr bool kRawPacked = PACKFA_PREFILL_RAW_PITCH != 0 && D <= 128 && kProducerWgs == 2;
  static constexpr int kKs32Pitch = kRawPacked && !kF16K && kKs32Row % 4 == 0 ? kKs32Row : kKsPitch;  // block-32 scale rows
  static constexpr int kVPitch = kRawPacked && (VF == VFormat::q8_0 || VF == VFormat::q4_0) && kVWidth >= 4
                                     ? (kVRow + kVWidth - 1) / kVWidth * kVWidth
                                     : odd16(kVRow);
  static constexpr int kVsPitch = VF == VFormat::q8_0_planar ? round16(D / 32 * 2) : 0;
  // fp16 tiles in the MMA layout [D / 8][rows][8]: 16 bytes of 8 consecutive head-dim values of
  // a row, rows consecutive (a core matrix = 8 rows = 128 contiguous bytes).
  static constexpr int kQBytes = kM * D * 2;
  static constexpr int kTileBytes = kN * D * 2;
  static constexpr int kRawK = 0, kRawKs = kRawK + kN * kKPitch, kRawV = kRawKs + kN * kKsPitch,
                       kRawVs = kRawV + kN * kVPitch, kRawBytes = kRawVs + kN * kVsPitch;
  static constexpr int kQ = 0, kK = kQ + kQBytes, kV = kK + kStages * kTileBytes, kRaw = kV + kStages * kTileBytes;
  static constexpr int kPos = kRaw + 2 * kRawBytes;  // the block's min / max position (2 ints)
  static constexpr int kBars = kPos + 16;            // mbarriers: full[kStages], then empty[kStages]
  // packed16 K: the fp16 tile holds the exact int8 values; their block scales as fp32,
  // [D / 16 blocks at most][kKsBlk] per fp16 slot; Q's per-32-block scales [kM][D / 32].
  // Within a block, key k's scale sits at ks_slot(k): in key order, or (decision "prefill-ks128",
  // PACKFA_PREFILL_KS128) grouped by the consumer lane that reads it — key 8j + 2t + e at
  // t·kKsP + 2j + e — so a lane (t = lane % 4) reads its kN / 4 scales of a block as kN / 16
  // 16-byte words instead of kN / 8 8-byte ones. kKsP spaces the four groups so that neither
  // those reads (4 groups at t·kKsP) nor the producer's stores of 32 consecutive keys meet in a bank.
  static constexpr bool kKs128 = PACKFA_PREFILL_KS128 != 0;
  static constexpr int kKsP = kN == 64 ? 24 : 8;
  static constexpr int kKsBlk = kKs128 ? 4 * kKsP : kN;
  static constexpr int ks_slot(int key) { return kKs128 ? ks_slot_grouped(key, kKsP) : key; }
  static_assert(ks_grouped_ok(kN, kKsP), "the slots of a kN-key block");
  static constexpr int kKsfBytes = kF16K || kKRounded ? 0 : (D / 16) * kKsBlk * 4;
  static constexpr int kKsf = kBars + round16(2 * kStages * 8), kQd = kKsf + kStages * kKsfBytes;
  // prefill-k-rounded, int8 mode: each row's score factor (its largest Q block scale) after the table
  static constexpr int kQRowF = kQd + (kQdTable ? kM * ((D + 31) / 32) * 4 : 0);
  // each row's token, head, position and edits (PrefillRow, 32 bytes): registers hold only
  // the visible range, the rest is read where an edit or the epilogue needs it
  static constexpr int kRowInfo = round16(kQRowF + (kQdTable && kKRounded ? kM * 4 : 0));
  static constexpr int kRowInfoBytes = 32;
  static constexpr int kBytes = kRowInfo + kM * kRowInfoBytes;
  static_assert(D % 16 == 0, "head_dim a multiple of 16");
  static_assert(kBytes <= 227 * 1024, "shared memory of one sm_90 block");
  static_assert(kKsf % 16 == 0, "aligned scale rows");
};

PACKFA_DEV uint32_t cvt_half2(float lo, float hi) {
  uint32_t r;
#if PACKFA_WGMMA
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  r = arch::pack_half2(lo, hi);
#endif
  return r;
}

// tanh from one exp2 and one reciprocal: absolute error ~1e-7, which is what a logit needs.
PACKFA_DEV float tanh_fast(float y) {
  const float e = arch::exp2_fast(2.8853900817779268f * fminf(fmaxf(y, -15.0f), 15.0f));  // e^(2y)
  return 1.0f - __fdividef(2.0f, e + 1.0f);
}

// Keeps a register value live and unmoved across an asynchronous MMA that reads it.
PACKFA_DEV void hold(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
PACKFA_DEV void hold(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// cp.async of `w` bytes (4, 8 or 16; 2: a plain copy), zero-filled when !valid.
PACKFA_DEV void copy_piece(char* dst, const char* src, int w, bool valid) {
#if PACKFA_WGMMA
  const uint32_t s = wgmma::smem_addr(dst);
  const int n = valid ? w : 0;
  if (w == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else if (w == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else if (w == 4)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else
    *reinterpret_cast<uint16_t*>(dst) = valid ? *reinterpret_cast<const uint16_t*>(src) : uint16_t(0);
#else
  (void)dst, (void)src, (void)w, (void)valid;
#endif
}

// Rows [t0, t0 + kN) of a plane into `dst` (kPitch bytes apart) in W-byte pieces, keys >= valid
// zero-filled. Row length and piece width are compile-time: no divisions in the loop. kByTwo
// (paged planes, head dim 256) and 2-byte pieces unroll by two only: each piece's page lookup,
// address or loaded value would hold registers the producer warpgroup does not have.
template <int kN, int kRow, int W, int kPitch, int kThreads, bool kByTwo = false>
PACKFA_DEV void stage_plane(char* dst, const KvPlane& pl, const KvView& v, int t0, int valid, int tid) {
  static_assert(kRow % W == 0, "pieces tile the row");
  constexpr int kPieces = kRow / W, kTotal = kN * kPieces;
  auto piece = [&](int i) {
    if (kTotal % kThreads == 0 || i < kTotal) {
      const int key = i / kPieces, off = (i - key * kPieces) * W;
      const bool ok = t0 + key < valid;
      const char* src = ok ? pl.row(v, t0 + key) + off : pl.base;
      copy_piece(dst + key * kPitch + off, src, W, ok);
    }
  };
  if constexpr (kByTwo || W < 4) {  // 2-byte pieces (ggml rows at D 96) are plain loads: each holds a register
#pragma unroll 2
    for (int i0 = 0; i0 < kTotal; i0 += kThreads) piece(i0 + tid);
  } else {
#pragma unroll
    for (int i0 = 0; i0 < kTotal; i0 += kThreads) piece(i0 + tid);
  }
}
// The same for a contiguous plane, rows `slot` bytes apart from `tile` (key t0): each thread
// keeps one piece column and steps over rows (kThreads / pieces rows a round), so a piece
// costs one address add, one compare and the copy (decision "prefill-lean-producer").
template <int kN, int kRow, int W, int kPitch, int kThreads>
PACKFA_DEV void stage_rows(char* dst, const char* tile, int64_t slot, int n_valid, int tid) {
  static_assert(kRow % W == 0 && W >= 4, "pieces of 4, 8 or 16 bytes tile the row");
  constexpr int kPieces = kRow / W, kRows = kThreads / kPieces, kRounds = (kN + kRows - 1) / kRows;
  static_assert(kRows >= 1, "a row has at most kThreads pieces");
  const int rk = tid / kPieces, col = (tid - rk * kPieces) * W;
  if (rk >= kRows) return;
  const char* src = tile + rk * slot + col;
  const int64_t step = kRows * slot;
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    const int key = rk + r * kRows;
    if (kN % kRows == 0 || key < kN) {
      const bool ok = key < n_valid;
      copy_piece(dst + key * kPitch + col, ok ? src : tile, W, ok);
    }
    src += step;
  }
}
// Widest copy (<= 16 bytes) that tiles a row of n bytes.
constexpr int piece_width(int n) { return n % 16 == 0 ? 16 : (n % 8 == 0 ? 8 : (n % 4 == 0 ? 4 : 2)); }

// ---- widening: 16 values of a raw row -> 8 fp16 pairs (fa/widen.hpp) ---------------------------
PACKFA_DEV uint32_t ld_u16(const char* p) { return *reinterpret_cast<const uint16_t*>(p); }
// 32 bytes of a shared raw row (16-byte aligned) as 8 words.
PACKFA_DEV void ld32(const char* p, uint32_t (&h)[8]) {
  const uint4 a = *reinterpret_cast<const uint4*>(p), b = *reinterpret_cast<const uint4*>(p + 16);
  h[0] = a.x, h[1] = a.y, h[2] = a.z, h[3] = a.w, h[4] = b.x, h[5] = b.y, h[6] = b.z, h[7] = b.w;
}
PACKFA_DEV uint32_t bf16x2_to_half2(uint32_t w) {
  return cvt_half2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Byte offset of 8 head-dim values (chunk c8 = d / 8) of `row` in an fp16 tile of `rows` rows.
// Interleaved: [D / 8][rows][8] (core matrices of 8 rows, 128 contiguous bytes). Swizzled
// (128-byte mode, head_dim a multiple of 64): [D / 64][rows][64] with the 16-byte chunk index
// XORed by row % 8 (decision "prefill-swizzle": the tensor cores then read 128-byte rows
// without bank conflicts).
template <bool kSwizzle>
PACKFA_DEV int tile_off(int rows, int row, int c8) {
  if constexpr (kSwizzle) return (c8 >> 3) * rows * 128 + row * 128 + (((c8 & 7) ^ (row & 7)) << 4);
  else return c8 * rows * 16 + row * 16;
}

// Writes 16 widened values (head-dim chunk c16 of row `row`) into an MMA-layout tile of `rows`.
template <bool kSwizzle>
PACKFA_DEV void put16(char* tile, int rows, int row, int c16, const uint32_t (&h)[8]) {
  *reinterpret_cast<uint4*>(tile + tile_off<kSwizzle>(rows, row, 2 * c16)) = make_uint4(h[0], h[1], h[2], h[3]);
  *reinterpret_cast<uint4*>(tile + tile_off<kSwizzle>(rows, row, 2 * c16 + 1)) = make_uint4(h[4], h[5], h[6], h[7]);
}

// By the kT threads tid = 0 .. kT - 1.
template <int D, VFormat VF, QKMode QK, int kT>
PACKFA_DEV void widen_tile(const char* raw, char* kt, char* vt, float* ksf, int k_block, int tid) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kN = L::kN, kItems = kN * D / 16;
  const int k_shift = k_block == 32 ? 5 : 4;  // k_block 16 or 32: a shift, not a division
  // packed16 K, item (key, c): its exact int8 values (decision "prefill-exact-qk") into the K tile;
  // where the item starts a scale block, that block's scale (fp16 bits from scale_bits(blk)) into
  // ksf as fp32
  auto starts_block = [&](int c) { return ((16 * c) & (k_block - 1)) == 0; };
  // (prefill-k-rounded: every item's values times its block scale, one fp16 rounding each)
  auto put_k8 = [&](uint4 q, auto&& scale_bits, int key, int c) {
    uint32_t h[8];
    const int blk = (16 * c) >> k_shift;
    if constexpr (L::kKRounded) {
      const uint32_t s = scale_bits(blk) & 0xffffu;
      widen16_i8<true>(q, s | (s << 16), h);
    } else {
      widen16_i8<false>(q, 0u, h);
      if (starts_block(c)) ksf[blk * L::kKsBlk + L::ks_slot(key)] = arch::half_to_float(static_cast<uint16_t>(scale_bits(blk)));
    }
    put16<L::kSwizzle>(kt, kN, key, c, h);
  };
  auto item = [&](int i) {
    const int key = i % kN, c = i / kN;
    uint32_t h[8];
    const char* kr = raw + L::kRawK + key * L::kKPitch;
    if constexpr (L::kF16K) {
      ld32(kr + 32 * c, h);
      put16<L::kSwizzle>(kt, kN, key, c, h);
    } else {
      const char* ksr = raw + L::kRawKs + key * (k_block == 32 ? L::kKs32Pitch : L::kKsPitch);
      put_k8(*reinterpret_cast<const uint4*>(kr + 16 * c), [&](int blk) { return ld_u16(ksr + 2 * blk); }, key, c);
    }

    const char* vr = raw + L::kRawV + key * L::kVPitch;
    if constexpr (VF == VFormat::f16) {
      ld32(vr + 32 * c, h);
    } else if constexpr (VF == VFormat::bf16) {
      ld32(vr + 32 * c, h);
#pragma unroll
      for (int e = 0; e < 8; ++e) h[e] = bf16x2_to_half2(h[e]);
    } else {
      v_pairs16<VF>(vr, raw + L::kRawVs + key * L::kVsPitch, c, h);
    }
    put16<L::kSwizzle>(vt, kN, key, c, h);
  };
  if constexpr (kItems % kT == 0 && !L::kF16K && VF == VFormat::q8_0 && D <= 128 && D % 32 == 0 && kT == 2 * kN &&
                PACKFA_PREFILL_WIDEN_BATCHED != 0) {
    // Decision "prefill-widen-batched" (q8_0 V, head dims of 32s up to 128): two items' loads,
    // then their widening and stores. The stores may alias the raw slot for all the compiler
    // knows, so item by item every load waited for the previous item's stores. With kT = 2·kN
    // an item's V block is its round (c = 2·round + tid / kN), so the block's alignment is
    // known at compile time (no run-time test). Measured with the consumer changes only: f16 V
    // got slower with this path (1-3%), so the other formats keep the item loop (docs/prefill.md).
    // two items a batch; one with two producer warpgroups (the other warpgroup's warp on the
    // scheduler covers the latency; two items spilled at the 48-56 registers tried first)
    constexpr int kRounds = kItems / kT, kB = kRounds % 2 == 0 && L::kProducerWgs == 1 ? 2 : 1;
    const int key = tid % kN, half = tid / kN;
    const char* kr = raw + L::kRawK + key * L::kKPitch;
    const char* vr = raw + L::kRawV + key * L::kVPitch;
    const char* ksr = raw + L::kRawKs + key * (k_block == 32 ? L::kKs32Pitch : L::kKsPitch);
#pragma unroll
    for (int r0 = 0; r0 < kRounds; r0 += kB) {
      uint4 kq[kB];
      VRaw16 v[kB];
      uint32_t ks[kB];
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int c = 2 * (r0 + j) + half;
        kq[j] = *reinterpret_cast<const uint4*>(kr + 16 * c);
        ks[j] = L::kKRounded || starts_block(c) ? ld_u16(ksr + 2 * ((16 * c) >> k_shift)) : 0u;
        // block r0 + j of a 16-aligned row: its data at 34·(r0 + j) + 2 (+ 16), 2 or 0 mod 4
        if (((r0 + j) & 1) == 0) v[j] = v_load16<VF, 2>(vr, nullptr, c);
        else v[j] = v_load16<VF, 0>(vr, nullptr, c);
      }
#pragma unroll
      for (int j = 0; j < kB; ++j) {
        const int c = 2 * (r0 + j) + half;
        put_k8(kq[j], [&](int) { return ks[j]; }, key, c);
        uint32_t h[8];
        v_widen16<VF>(v[j], c, h);
        put16<L::kSwizzle>(vt, kN, key, c, h);
      }
    }
  } else if constexpr (kItems % kT == 0 && !L::kF16K && L::kProducerWgs == 1) {
#pragma unroll
    for (int i0 = 0; i0 < kItems; i0 += kT) item(i0 + tid);
  } else if constexpr (kItems % kT == 0 && !L::kF16K) {  // two producer warpgroups: fewer registers
#pragma unroll 1
    for (int i0 = 0; i0 < kItems; i0 += kT) item(i0 + tid);
  } else if constexpr (kItems % kT == 0) {  // f16 K: 32-byte K loads, fully unrolled they spill
#pragma unroll 2
    for (int i0 = 0; i0 < kItems; i0 += kT) item(i0 + tid);
  } else {  // head dims 80, 112: a part-filled last round; unrolled it spills (72 registers)
#pragma unroll 1
    for (int i = tid; i < kItems; i += kT) item(i);
  }
}

}  // namespace packfa::device::prefill
