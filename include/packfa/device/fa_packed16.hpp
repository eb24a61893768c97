// packfa/device/fa_packed16.hpp — split-KV flash-decoding attention over a packed16 (or f16) K
// cache, for decode and small query batches. One source for CUDA and HIP.
//
// Work split. A block serves one (sequence, KV head, row group, split): all gqa × nq query
// rows that read this KV head, so every K/V byte is read once per KV head. Inside the block
// each 32-lane wave is an independent flash-decoding worker: it streams its own chunks of 32
// keys (chunk c of the split goes to wave c % waves; in long decode splits the later chunks
// are handed out by claim counters and may come from other splits, chunk_source.hpp) through
// a private shared-memory buffer (one or two stages, fa_layout.hpp) and keeps its own running
// max / sum / accumulators, so the key loop needs no block barrier.
// The waves merge once at the end; the combine kernel (device/combine.hpp) merges splits.
//
// Per chunk:  Q·K   NVIDIA: mma (int8 m16n8k32 for packed16 K: the same int32 block sums as
//                   the 4-way dot; fp16 for f16 K), scores in mma C fragments (qk_mma);
//                   elsewhere lane = key: 16-byte pieces of its K row against every query row
//                   (Q in shared memory, read as broadcasts), int8 4-way dots into int32 per
//                   block; then one fp32 FMA per block with q_scale·k_scale (softmax scale
//                   folded in);
//             softmax  max per row, exp2, lane-partial sums (in registers on the mma path);
//             P·V   NVIDIA: mma.m16n8k16 computing O^T = V^T·P^T (V as exact fp16 integers,
//                   the ggml block scale folded into P, fp32 accumulation; pv_mma below);
//                   elsewhere lane = DPL output dims, V dequantized in registers, fp32 FMAs.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/chunk_source.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa_layout.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/device/trace.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

template <int D, VFormat VF, QKMode QK, int RMAX>
struct FaTraits {
#if defined(PACKFA_BACKEND_HIP)
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaHipBudget);
#else
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaCudaBudget);
#endif
  static constexpr int kStages = L.stages;
  static constexpr int kChunk = kFaChunk;
  static constexpr int kDpl = L.dpl;
  static constexpr int kPvLanes = D / kDpl;
  static constexpr bool kInt8Q = QK == QKMode::packed16_int8;
  static constexpr int kKRowBytes = L.k_row_bytes;
  static constexpr int kKPitch = L.k_pitch;
  static constexpr int kScalePitch = L.scale_pitch;
  static constexpr int kVRowBytes = L.v_row_bytes;
  static constexpr int kVPitch = L.v_pitch;
  static constexpr int kVScalePitch = L.v_scale_pitch;  // q8_0_planar's scale rows (else 0)
  // Tensor-core P·V (NVIDIA): bf16 V stays scalar (fp16 operands cannot hold its range).
  static constexpr bool kMmaPv = arch::kHasMmaF16 && VF != VFormat::bf16;
  // Scores on tensor cores (NVIDIA), softmax and P in registers:
  //  - int8 Q·K: the mma forms the same int32 block sums as the 4-way dot in fewer
  //    instructions (decode rows fill 4 of the 16 mma rows; bench/NOTES.md), and P reaches
  //    the P·V mma without a shared-memory round trip; D = 256 decode rows stay on the 4-way
  //    dot (on the mma they spill: 64 accumulator registers for the output alone);
  //  - f16 K (the in-house baseline, plain fp16 caches) for every row class, D <= 128: fp16
  //    products, fp32 sums, like the scalar path.
  // RDNA and the fp16-Q mode run the 4-way dot / fp32 dots with lane = key.
  static constexpr bool mma_qk_if(bool has_mma) {  // also asked by the host (KernelChoice::mma_qk)
    return has_mma && VF != VFormat::bf16 &&
           ((QK == QKMode::packed16_int8 && (D <= 128 || RMAX == 16)) || (QK == QKMode::f16 && D <= 128));
  }
  static constexpr bool kMmaQk = mma_qk_if(arch::kHasMmaF16);
  static constexpr int kNt = (RMAX + 7) / 8;  // n-tiles of 8 query rows
  // Work moves between splits (claim counters, chunk_source.hpp) in the instances where that
  // measured faster on the H200: 4-row classes, D <= 128, V other than q4_0 (q4_0: 68 -> 72 us
  // at kv = 128k; the 16-row class and D = 256 lost 2-9%, bench/NOTES.md). The others compile
  // the static loop alone. RDNA: static (no AMD measurement; every VGPR counts there).
#if defined(PACKFA_BACKEND_HIP)
  static constexpr bool kClaims = false;
#else
  static constexpr bool kClaims = RMAX <= 4 && D <= 128 && VF != VFormat::q4_0;
#endif
  // Lane-path Q·K row loops stop at the block's last row where this holds: the branch keeps
  // the compiler from hoisting every row's Q loads out of the key loop. Without it RDNA kept
  // all of an fp16 Q in registers (D = 128, 4 rows: 1.5 KB of scratch a lane) and the int8
  // 16-row class needed 256 VGPRs and 500 B of scratch; ptxas spilled int8 16-row instances
  // (D = 256 on sm_75: 356 B; bf16 V at D = 128 on sm_90: 4 B). NVIDIA's 4-row class and f16 K
  // run branch-free (on f16 K the branch cost registers: D = 256, 8 rows, sm_90: 194 -> 252).
#if defined(PACKFA_BACKEND_HIP)
  static constexpr bool kRowGuard = true;
#else
  static constexpr bool kRowGuard = RMAX > 4 && QK != QKMode::f16;
#endif
  // The tensor-core scores come out in log2 units (log2(e) folded into the Q / softmax scale).
  static constexpr bool kScoresLog2 = kMmaQk;
  static constexpr int kStageBytes = L.stage_bytes;
  static constexpr int kPPitch = L.p_pitch;
  static constexpr int kWaveBytes = L.wave_bytes;
  static constexpr int kQBlocks = L.q_blocks;
  static constexpr int kQBytes = L.q_bytes;
  static constexpr int kRowInfoBytes = L.row_info_bytes;
  static constexpr int kWaves = L.waves;
  static constexpr int kThreads = kWaves * arch::kWaveSize;
  static constexpr int kSmemBytes = L.smem_bytes;
  static_assert(L.fits, "shared memory over the per-block limit");
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  static_assert(RMAX % 4 == 0, "rows per block must be a multiple of 4");
};

// ---- small helpers ---------------------------------------------------------------------------
// Copy `nrows` (<= kFaChunk) rows of ROW_BYTES from global (row stride in bytes) into shared
// (PITCH), W bytes per copy. kLanes lanes share a row (each takes every kLanes-th piece):
// every copy has a compile-time offset from one per-lane pointer, so a copy costs about one
// instruction. Rows of a power-of-two number of pieces get one lane per piece (up to 32):
// each wave request then reads whole 128-byte lines of a few rows; 4 lanes per row (8 rows'
// partial lines per request) cost about twice the L1 wavefronts per byte. Other rows (ggml
// q8_0: 17 pieces of 8 bytes) keep 4 lanes per row: with 16 the 17th piece needs a pass of
// its own, and the 16-row class lost 10% at kv = 128k (A/B on the H200, bench/NOTES.md).
// RDNA keeps 4 lanes per row everywhere: its copies go through registers, and whole-line rows
// raised the 4-row instances' VGPRs (q8_0_planar D = 128: 89 -> 109, docs/rdna.md) with no
// AMD measurement to pay for it.
constexpr int stage_lanes(int pieces) {
#if defined(PACKFA_BACKEND_HIP)
  return pieces < 4 ? pieces : 4;
#else
  int l = 1;
  while (l * 2 <= pieces && l * 2 <= 32) l *= 2;
  return (pieces & (pieces - 1)) == 0 ? l : (l < 4 ? l : 4);
#endif
}
template <int ROW_BYTES, int PITCH, int W>
PACKFA_DEV void stage_rows_w(char* smem, const char* g, int64_t stride, int nrows) {
  static_assert(ROW_BYTES % W == 0, "row bytes must be a multiple of the copy width");
  constexpr int kPer = ROW_BYTES / W;           // pieces per row
  constexpr int kLanes = stage_lanes(kPer);     // lanes per row
  constexpr int kRows = arch::kWaveSize / kLanes;  // rows per pass
  constexpr int kM = (kPer + kLanes - 1) / kLanes;  // pieces per lane and row
  const int lane = arch::lane_id();
  const int j = lane % kLanes, r = lane / kLanes;
  const char* src = g + r * stride + j * W;
  char* dst = smem + r * PITCH + j * W;
  const int64_t pass_stride = kRows * stride;
  PACKFA_UNROLL
  for (int pass = 0; pass < kFaChunk / kRows; ++pass) {
    if (r + pass * kRows < nrows) {
      PACKFA_UNROLL
      for (int m = 0; m < kM; ++m) {
        if (kPer % kLanes == 0 || j + m * kLanes < kPer) {
          char* d = dst + pass * kRows * PITCH + m * kLanes * W;
          const char* s = src + m * kLanes * W;
          if constexpr (W == 2) {
            *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(s);
          } else {
            arch::copy_async<W>(d, s);
          }
        }
      }
    }
    src += pass_stride;
  }
}
template <int ROW_BYTES, int PITCH>
PACKFA_DEV void stage_rows(char* smem, const char* g, int64_t stride, int nrows, int width) {
  if constexpr (ROW_BYTES % 16 == 0) {
    if (width >= 16) return stage_rows_w<ROW_BYTES, PITCH, 16>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 8 == 0) {
    if (width >= 8) return stage_rows_w<ROW_BYTES, PITCH, 8>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 4 == 0) {
    if (width >= 4) return stage_rows_w<ROW_BYTES, PITCH, 4>(smem, g, stride, nrows);
  }
  stage_rows_w<ROW_BYTES, PITCH, 2>(smem, g, stride, nrows);
}

// One scale row of BYTES per lane (the lane's own key), widest copies the alignment allows.
template <int BYTES>
PACKFA_DEV void stage_scale_row(char* dst, const char* src, int width) {
  if constexpr (BYTES % 16 == 0) {
    if (width >= 16) {
      PACKFA_UNROLL
      for (int o = 0; o < BYTES; o += 16) arch::copy_async<16>(dst + o, src + o);
      return;
    }
  }
  if constexpr (BYTES % 8 == 0) {
    if (width >= 8) {
      PACKFA_UNROLL
      for (int o = 0; o < BYTES; o += 8) arch::copy_async<8>(dst + o, src + o);
      return;
    }
  }
  if constexpr (BYTES % 4 == 0) {
    if (width >= 4) {
      PACKFA_UNROLL
      for (int o = 0; o < BYTES; o += 4) arch::copy_async<4>(dst + o, src + o);
      return;
    }
  }
  PACKFA_UNROLL
  for (int o = 0; o + 1 < BYTES; o += 2)
    *reinterpret_cast<uint16_t*>(dst + o) = *reinterpret_cast<const uint16_t*>(src + o);
}

// V for kDpl consecutive dims of one row in shared memory; `d` is the block scale (1 for
// f16/bf16) so callers can fold it into p once per row instead of once per value.
template <VFormat VF, int DPL>
PACKFA_DEV void load_v(const char* row, const char* scale_row, int dim0, float (&v)[DPL], float& d) {
  if constexpr (VF == VFormat::q8_0_planar) {  // DPL dims inside one block of 32
    d = arch::half_to_float(reinterpret_cast<const uint16_t*>(scale_row)[dim0 / 32]);
    const int8_t* q = reinterpret_cast<const int8_t*>(row + dim0);
#pragma unroll
    for (int i = 0; i < DPL; ++i) v[i] = static_cast<float>(q[i]);
  } else if constexpr (VF == VFormat::f16 || VF == VFormat::bf16) {
    d = 1.0f;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(row + 2 * dim0);
    uint32_t words[DPL / 2];
    if constexpr (DPL == 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(w);
      words[0] = x.x; words[1] = x.y; words[2] = x.z; words[3] = x.w;
    } else if constexpr (DPL == 4) {
      const uint2 x = *reinterpret_cast<const uint2*>(w);
      words[0] = x.x; words[1] = x.y;
    } else {
      words[0] = w[0];
    }
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      if constexpr (VF == VFormat::f16) {
        arch::half2_to_float2(words[i], v[2 * i], v[2 * i + 1]);
      } else {
        v[2 * i] = __uint_as_float(words[i] << 16);
        v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  } else if constexpr (VF == VFormat::q8_0) {
    const char* blk = row + (dim0 / 32) * 34;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (dim0 & 31));  // 2-byte aligned
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = qs[i];
      v[2 * i] = static_cast<float>(static_cast<int8_t>(pair & 0xff));
      v[2 * i + 1] = static_cast<float>(static_cast<int8_t>(pair >> 8));
    }
  } else {  // q4_0: byte j holds element j (low nibble) and j + 16 (high nibble)
    const char* blk = row + (dim0 / 32) * 18;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const int j = dim0 & 31;
    const int shift = j < 16 ? 0 : 4;
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (j & 15));
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = static_cast<uint32_t>(qs[i]) >> shift;
      v[2 * i] = static_cast<float>(static_cast<int>(pair & 0xf) - 8);
      v[2 * i + 1] = static_cast<float>(static_cast<int>((pair >> 8) & 0xf) - 8);
    }
  }
}

// Per-row facts kept in shared memory (read as broadcasts).
struct RowInfo {
  int pos;      // query position
  int qi;       // query row index within the sequence
  float slope;  // ALiBi slope (0 when off)
  int head;     // q head
  int key_lo, key_hi;  // visible keys [key_lo, key_hi): sliding window and causal limits
  float mask_mul;      // the mask's factor: 1, or the ALiBi slope (AlibiMode::ggml: s += slope · mask)
  int pad;
};

// int8 Q·K, lane = key: 16-byte pieces of the key's row against every query row (Q and its
// per-32 scales in shared memory, read as broadcasts), 4-way dots into int32 per K block of KB
// dims, then one fp32 FMA per block with q_scale·k_scale (softmax scale folded into q_scale).
// Rows >= nrows hold zero Q: computed, never written. q_scale(r, block): Q's block scale.
template <int D, int RMAX, int KB, class T, class QScale>
PACKFA_DEV void qk_int8(float (&s)[RMAX], const char* krow, const uint16_t* kd, const char* q_smem, int nrows,
                        const QScale& q_scale) {
  const int8_t* qs = reinterpret_cast<const int8_t*>(q_smem);
  int isum[RMAX];
  PACKFA_UNROLL
  for (int piece = 0; piece < D / 16; ++piece) {
    const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
    constexpr bool kB16 = KB == 16;
    const bool first = kB16 || (piece & 1) == 0;
    const bool last = kB16 || (piece & 1) == 1 || piece == D / 16 - 1;
    const float kscale = last ? arch::half_to_float(kd[kB16 ? piece : piece / 2]) : 0.0f;
    PACKFA_UNROLL
    for (int r = 0; r < RMAX; ++r) {
      if (T::kRowGuard && r >= nrows) break;
      const int4 qv = *reinterpret_cast<const int4*>(qs + r * D + piece * 16);
      int a = first ? 0 : isum[r];
      a = arch::dot4_i8(qv.x, kv.x, a);
      a = arch::dot4_i8(qv.y, kv.y, a);
      a = arch::dot4_i8(qv.z, kv.z, a);
      a = arch::dot4_i8(qv.w, kv.w, a);
      isum[r] = a;
      if (last) s[r] = fmaf(static_cast<float>(a), q_scale(r, piece / 2) * kscale, s[r]);
    }
  }
}

// int8 Q·K on tensor cores (NVIDIA, every row class): S (16 rows x 32 keys) from one
// mma.m16n8k32.s8 per 32-dim K block (two m16n8k16 for block-16 K or a last half block) into
// int32, then one fp32 FMA per block with q_scale·k_scale. K fragments of two key tiles per
// ldmatrix. qa / qsc: this lane's A fragments of Q and Q's block scales (rows g, g + 8; rows
// g + 8 are skipped when RMAX <= 8).
// sc[n][c]: key tile n, C register c = row g + 8·(c/2), key 8n + 2·(lane%4) + c%2.
template <int D, int KB, int RMAX, class T>
PACKFA_DEV void qk_mma(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[D / 16][4], const char* k_sm,
                       const char* ks_sm, const float (&qsc)[(D + 31) / 32][2]) {
  constexpr int kN = kFaChunk / 8;
  constexpr int kPieces = D / 16;
  constexpr bool kHi = RMAX > 8;
  const int lane = arch::lane_id();
  const int t = lane & 3, mi = lane >> 3, lr = lane & 7;  // ldmatrix: matrix mi, its row lr
  const char* kl = k_sm + (8 * (mi >> 1) + lr) * T::kKPitch + 16 * (mi & 1);
  const char* kd = ks_sm + 2 * t * T::kScalePitch;  // scale row of key 2t (tile n: + 8n rows)
  // K scales come kG blocks per load (8 bytes; one per load for D = 256, whose 16-row class
  // has no registers to spare): kw[n][e] holds blocks kG·i.. of key 8n + 2t + e
  constexpr int kG = D <= 128 ? 4 : 1;
  uint32_t kw[kN][2][(kG + 1) / 2];
  auto scale_block = [&](const int (&acc)[kN][4], int blk, int qb) {
    if (blk % kG == 0) {
      PACKFA_UNROLL
      for (int n = 0; n < kN; ++n)
        PACKFA_UNROLL
        for (int e = 0; e < 2; ++e) {
          const char* src = kd + (8 * n + e) * T::kScalePitch + 2 * blk;
          if constexpr (kG == 4) {
            const uint2 w = *reinterpret_cast<const uint2*>(src);
            kw[n][e][0] = w.x;
            kw[n][e][1] = w.y;
          } else {
            kw[n][e][0] = *reinterpret_cast<const uint16_t*>(src);
          }
        }
    }
    const float q_lo = qsc[qb][0], q_hi = qsc[qb][1];
    const int i = (blk % kG) / 2;
    const bool high = kG > 1 && (blk & 1);
    PACKFA_UNROLL
    for (int n = 0; n < kN; ++n) {
      float k[2];
      PACKFA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const uint32_t w = kw[n][e][i];
        k[e] = arch::half_to_float(static_cast<uint16_t>(high ? w >> 16 : w & 0xffffu));
      }
      sc[n][0] = fmaf(static_cast<float>(acc[n][0]), q_lo * k[0], sc[n][0]);
      sc[n][1] = fmaf(static_cast<float>(acc[n][1]), q_lo * k[1], sc[n][1]);
      if constexpr (kHi) {
        sc[n][2] = fmaf(static_cast<float>(acc[n][2]), q_hi * k[0], sc[n][2]);
        sc[n][3] = fmaf(static_cast<float>(acc[n][3]), q_hi * k[1], sc[n][3]);
      }
    }
  };
  PACKFA_UNROLL
  for (int j = 0; j < (kPieces + 1) / 2; ++j) {  // 32 dims: pieces 2j, 2j + 1
    const bool two = 2 * j + 1 < kPieces;
    uint32_t kb[kN][2];  // B fragments: dims 32j + 4t.. and 32j + 16 + 4t.. of key 8n + g
    PACKFA_UNROLL
    for (int n = 0; n < kN; n += 2) {
      uint32_t r[4];
      arch::ldmatrix_x4(r, kl + 8 * n * T::kKPitch + 32 * j);  // the last half block reads row padding
      kb[n][0] = r[0];
      kb[n][1] = r[1];
      kb[n + 1][0] = r[2];
      kb[n + 1][1] = r[3];
    }
    int acc[kN][4];
    if (KB == 32 && two) {
      const uint32_t a[4] = {qa[2 * j][0], qa[2 * j][1], qa[2 * j + 1][0], qa[2 * j + 1][1]};
      PACKFA_UNROLL
      for (int n = 0; n < kN; ++n) {
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0;
        arch::mma_16x8x32_s8(acc[n], a, kb[n][0], kb[n][1]);
      }
      scale_block(acc, j, j);
    } else {
      PACKFA_UNROLL
      for (int h = 0; h < 2; ++h) {
        if (h == 1 && !two) break;
        const uint32_t a[2] = {qa[2 * j + h][0], qa[2 * j + h][1]};
        PACKFA_UNROLL
        for (int n = 0; n < kN; ++n) {
          acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0;
          arch::mma_16x8x16_s8(acc[n], a, kb[n][h]);
        }
        scale_block(acc, KB == 16 ? 2 * j + h : j, j);
      }
    }
  }
}

// fp16 Q·K on tensor cores (f16 K rows): S (16 rows x 32 keys) += Q·K^T with
// mma.m16n8k16 (fp32 sums of fp16 products), B fragments of two key tiles per ldmatrix.
// qa: A fragments of fp16-rounded Q (rows g, g + 8; dims 2·(lane%4) (+1), + 8).
template <int D, class T>
PACKFA_DEV void qk_mma_f16(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[D / 16][4], const char* k_sm) {
  const int lane = arch::lane_id();
  const int mi = lane >> 3, lr = lane & 7;  // ldmatrix: matrix mi, its row lr
  PACKFA_UNROLL
  for (int piece = 0; piece < D / 16; ++piece)
    PACKFA_UNROLL
    for (int n = 0; n < kFaChunk / 8; n += 2) {
      const int row = 8 * (n + (mi >> 1)) + lr;  // key
      const int pc = 2 * piece + (mi & 1);       // 16-byte piece: dims 8·pc..
      uint32_t b[4];
      arch::ldmatrix_x4(b, k_sm + row * T::kKPitch + 16 * pc);
      arch::mma_16x8x16_f16(sc[n], qa[piece], b[0], b[1]);
      arch::mma_16x8x16_f16(sc[n + 1], qa[piece], b[2], b[3]);
    }
}

// ---- tensor-core P·V (NVIDIA) ----------------------------------------------------------------
// O^T (dims x rows) += V^T (dims x keys) · P^T (keys x rows), mma.m16n8k16, fp32 accumulation.
// A = V straight from the stage: f16 rows through ldmatrix.trans; q8_0/q4_0 bytes become exact
// fp16 integers with the 0x6400 trick (byte in the mantissa of 1024, then one f16x2
// subtraction), so there is no dequant pass. B = P (rows >= RMAX are zero) times the ggml
// block scale of its key, in fp16: the scale varies by key and 32-dim block, so each block
// gets its own B (2 registers per 16 keys). An m-tile row is free to stand for any dim; the
// map below gives each lane contiguous bytes of its key rows.
template <VFormat VF>
PACKFA_DEV int pv_dim(int tile, int m) {
  if constexpr (VF == VFormat::q8_0 || VF == VFormat::q8_0_planar) {  // tile pair 2j, 2j+1 = block j; lane group g owns bytes 4g..4g+3
    return 32 * (tile >> 1) + 4 * (m & 7) + 2 * (tile & 1) + (m >> 3);
  } else if constexpr (VF == VFormat::q4_0) {  // lane group g owns bytes 2g, 2g+1: low nibbles, then high
    return 32 * (tile >> 1) + 16 * (tile & 1) + 2 * (m & 7) + (m >> 3);
  } else {
    return 16 * tile + m;
  }
}

// int8 byte `i` of x and of y -> fp16 pair (x's in the low half), exact.
PACKFA_DEV uint32_t i8_pair_to_half2(uint32_t x, uint32_t y, uint32_t i) {
  const uint32_t r = arch::byte_perm(x, y, i | ((i + 4) << 8));
  return arch::hsub2(arch::and_xor(r, 0x00ff00ffu, 0x64806480u), 0x64806480u);  // (1024 + (q + 128)) - 1152
}
// A fragment of one 16-dim tile from the quant words of keys a, b, c, d: bytes i, i + 1 of
// each, paired (a, b) and (c, d) along the keys.
PACKFA_DEV void i8_tile_to_half2(uint32_t (&a)[4], uint32_t xa, uint32_t xb, uint32_t xc, uint32_t xd, uint32_t i) {
  a[0] = i8_pair_to_half2(xa, xb, i);
  a[1] = i8_pair_to_half2(xa, xb, i + 1);
  a[2] = i8_pair_to_half2(xc, xd, i);
  a[3] = i8_pair_to_half2(xc, xd, i + 1);
}
// Low / high nibble of byte 0 and byte 2 of r -> fp16 pair of (nibble - 8), exact.
PACKFA_DEV uint32_t q4_lo_to_half2(uint32_t r) {
  return arch::hsub2(arch::and_xor(r, 0x000f000fu, 0x64006400u), 0x64086408u);  // (1024 + n) - 1032
}
PACKFA_DEV uint32_t q4_hi_to_half2(uint32_t r) {
  return arch::hfma2(arch::and_xor(r, 0x00f000f0u, 0x64006400u), 0x2c002c00u, 0xd480d480u);  // (1024 + 16n)/16 - 72
}

template <int D, int NT>
struct PvAcc {
  float c[D / 16][NT][4];  // [m-tile][n-tile][mma C register]
};

// P operands of one chunk: pb[16-key step][n-tile][register], and the running-max
// correction of the accumulator columns this lane holds (rows 8·nt + t2, + 1).
template <int NT>
struct PvOperands {
  uint32_t pb[kFaChunk / 16][NT][2];
  float corr[NT][2];
};

// From the lane = key softmax: P in pbuf ([row][key]), corrections in corr_s (rows >= RMAX: 0 / 1).
template <int RMAX, class T>
PACKFA_DEV void pv_operands_from_smem(PvOperands<(RMAX + 7) / 8>& op, const float* pbuf, const float* corr_s) {
  constexpr int NT = (RMAX + 7) / 8;
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  PACKFA_UNROLL
  for (int nt = 0; nt < NT; ++nt) {
    const int r0 = 8 * nt + t2;
    op.corr[nt][0] = r0 < RMAX ? corr_s[r0] : 1.0f;
    op.corr[nt][1] = r0 + 1 < RMAX ? corr_s[r0 + 1] : 1.0f;
    const int row = 8 * nt + g;
    PACKFA_UNROLL
    for (int ks = 0; ks < kFaChunk / 16; ++ks) {
      float2 lo{0.0f, 0.0f}, hi{0.0f, 0.0f};
      if (row < RMAX) {
        lo = *reinterpret_cast<const float2*>(pbuf + row * T::kPPitch + 16 * ks + t2);
        hi = *reinterpret_cast<const float2*>(pbuf + row * T::kPPitch + 16 * ks + t2 + 8);
      }
      op.pb[ks][nt][0] = arch::pack_half2(lo.x, lo.y);
      op.pb[ks][nt][1] = arch::pack_half2(hi.x, hi.y);
    }
  }
}

// vs_sm: q8_0_planar's staged scale rows (kVScalePitch apart); unused otherwise.
template <int D, VFormat VF, int NT, class T>
PACKFA_DEV void pv_mma(PvAcc<D, NT>& acc, const PvOperands<NT>& op, const char* v_sm, const char* vs_sm, int nvalid) {
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  bool rescale = false;
  PACKFA_UNROLL
  for (int nt = 0; nt < NT; ++nt) rescale = rescale || op.corr[nt][0] != 1.0f || op.corr[nt][1] != 1.0f;
  if (arch::wave_any(rescale)) {  // once the running maxima settle, most chunks skip this
    PACKFA_UNROLL
    for (int nt = 0; nt < NT; ++nt)
      PACKFA_UNROLL
      for (int i = 0; i < D / 16; ++i) {
        acc.c[i][nt][0] *= op.corr[nt][0];
        acc.c[i][nt][1] *= op.corr[nt][1];
        acc.c[i][nt][2] *= op.corr[nt][0];
        acc.c[i][nt][3] *= op.corr[nt][1];
      }
  }
  PACKFA_UNROLL
  for (int ks = 0; ks < T::kChunk / 16; ++ks) {
    const int k0 = 16 * ks;
    if (k0 >= nvalid) break;
    const auto& pb = op.pb[ks];
    const char* ka = v_sm + (k0 + t2) * T::kVPitch;  // keys k0+t2, +1, +8, +9
    const char* kb = ka + T::kVPitch;
    const char* kc = ka + 8 * T::kVPitch;
    const char* kd = kc + T::kVPitch;
    if constexpr (VF == VFormat::f16) {
      const int lkey = k0 + (lane & 7) + ((lane >> 4) & 1) * 8;
      const char* lrow = v_sm + lkey * T::kVPitch + ((lane >> 3) & 1) * 16;
      PACKFA_UNROLL
      for (int i = 0; i < D / 16; ++i) {
        uint32_t a[4];
        arch::ldmatrix_x4_trans(a, lrow + 32 * i);
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) arch::mma_16x8x16_f16(acc.c[i][nt], a, pb[nt][0], pb[nt][1]);
      }
    } else {  // q8_0, q8_0_planar, q4_0: per 32-dim block j, its scales (dab, dcd) and tiles 2j, 2j+1
      auto u16 = [&](const char* row, int off) {
        return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(row + off));
      };
      auto w32 = [&](const char* row, int off) { return *reinterpret_cast<const uint32_t*>(row + off); };
      // q8_0_planar: scale rows of keys a..d; wa..wd hold the fp16 scales of blocks j & ~1, j | 1
      const char* sa = vs_sm + (k0 + t2) * T::kVScalePitch;
      const char* sc = sa + 8 * T::kVScalePitch;
      uint32_t wa = 0, wb = 0, wc = 0, wd = 0;
      constexpr int kBlockBytes = VF == VFormat::q8_0 ? 34 : 18;  // ggml blocks: fp16 scale, then quants
      PACKFA_UNROLL
      for (int j = 0; j < D / 32; ++j) {
        uint32_t dab, dcd, a0[4], a1[4];
        if constexpr (VF == VFormat::q8_0_planar) {  // quants 16-byte aligned: one word per key, no straddle
          if ((j & 1) == 0) {
            wa = w32(sa, 2 * j);
            wb = w32(sa + T::kVScalePitch, 2 * j);
            wc = w32(sc, 2 * j);
            wd = w32(sc + T::kVScalePitch, 2 * j);
          }
          const uint32_t sel = (j & 1) ? 0x7632 : 0x5410;
          dab = arch::byte_perm(wa, wb, sel);
          dcd = arch::byte_perm(wc, wd, sel);
          const int o = 32 * j + 4 * g;
          const uint32_t xa = w32(ka, o), xb = w32(kb, o), xc = w32(kc, o), xd = w32(kd, o);
          i8_tile_to_half2(a0, xa, xb, xc, xd, 0);
          i8_tile_to_half2(a1, xa, xb, xc, xd, 2);
        } else {
          const int sb = j * kBlockBytes;
          dab = arch::byte_perm(u16(ka, sb), u16(kb, sb), 0x5410);
          dcd = arch::byte_perm(u16(kc, sb), u16(kd, sb), 0x5410);
          if constexpr (VF == VFormat::q8_0) {
            // bytes 4g..4g+3 of the block's quants: 4-byte aligned for odd j; for even j they
            // straddle two aligned words (w0 bytes 2,3 and w1 bytes 0,1)
            const bool odd = (j & 1) != 0;
            const int o0 = odd ? sb + 2 + 4 * g : sb + 4 * g;
            const int o1 = odd ? o0 : o0 + 4;
            const uint32_t i0 = odd ? 0 : 2, i1 = odd ? 2 : 0;
            const uint32_t xa0 = w32(ka, o0), xb0 = w32(kb, o0), xc0 = w32(kc, o0), xd0 = w32(kd, o0);
            const uint32_t xa1 = odd ? xa0 : w32(ka, o1), xb1 = odd ? xb0 : w32(kb, o1);
            const uint32_t xc1 = odd ? xc0 : w32(kc, o1), xd1 = odd ? xd0 : w32(kd, o1);
            i8_tile_to_half2(a0, xa0, xb0, xc0, xd0, i0);
            i8_tile_to_half2(a1, xa1, xb1, xc1, xd1, i1);
          } else {  // q4_0: bytes 2g, 2g+1 of the block's quants
            const int o = sb + 2 + 2 * g;
            const uint32_t ab0 = arch::byte_perm(u16(ka, o), u16(kb, o), 0x0400);  // byte 2g of keys a, b
            const uint32_t ab1 = arch::byte_perm(u16(ka, o), u16(kb, o), 0x0501);  // byte 2g+1
            const uint32_t cd0 = arch::byte_perm(u16(kc, o), u16(kd, o), 0x0400);
            const uint32_t cd1 = arch::byte_perm(u16(kc, o), u16(kd, o), 0x0501);
            a0[0] = q4_lo_to_half2(ab0);
            a0[1] = q4_lo_to_half2(ab1);
            a0[2] = q4_lo_to_half2(cd0);
            a0[3] = q4_lo_to_half2(cd1);
            a1[0] = q4_hi_to_half2(ab0);
            a1[1] = q4_hi_to_half2(ab1);
            a1[2] = q4_hi_to_half2(cd0);
            a1[3] = q4_hi_to_half2(cd1);
          }
        }
        uint32_t bj[NT][2];  // P times the block scale of its key
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          bj[nt][0] = arch::hmul2(pb[nt][0], dab);
          bj[nt][1] = arch::hmul2(pb[nt][1], dcd);
        }
        PACKFA_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          arch::mma_16x8x16_f16(acc.c[2 * j][nt], a0, bj[nt][0], bj[nt][1]);
          arch::mma_16x8x16_f16(acc.c[2 * j + 1][nt], a1, bj[nt][0], bj[nt][1]);
        }
      }
    }
  }
}

// PAGED: K/V through block tables (kv_view.hpp). A compile-time choice: sharing the kernel
// with a runtime branch cost the contiguous cache 2-20% (the staging code is the key loop's
// largest part; A/B on the H200, bench/NOTES.md "paged KV").
template <int D, VFormat VF, QKMode QK, int RMAX, bool PAGED = false>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS((FaTraits<D, VF, QK, RMAX>::kThreads), 1)
    fa_split_kernel(const FaKernelParams p) {
  using T = FaTraits<D, VF, QK, RMAX>;
  extern __shared__ __align__(16) char smem[];
  char* q_smem = smem;
  RowInfo* rinfo = reinterpret_cast<RowInfo*>(smem + T::kQBytes);
  char* loop_smem = smem + T::kQBytes + T::kRowInfoBytes;

  // grid (KV head, split, sequence x row group): consecutive blocks take different heads, so
  // the blocks that share a multiprocessor stream from different parts of the cache (A/B on
  // the H200, split-major grid: 0-6% slower at 128k, bench/NOTES.md)
  const int kvh = blockIdx.x;
  const int split = blockIdx.y;
  const int b = blockIdx.z / p.row_groups;
  const int rg = blockIdx.z - b * p.row_groups;
  const int row0 = rg * RMAX;
  const int nrows = min(RMAX, p.rows - row0);
  const int tid = threadIdx.x;
  const int wave = tid / arch::kWaveSize;
  const int lane = arch::lane_id();

  PACKFA_TRACE_AT(p, 0);
  // Everything below reads memory a predecessor kernel may write (Q, the cache, lengths).
  pdl::wait();
  PACKFA_TRACE_AT(p, 1);

  // The length load goes out first: the key range and the first chunk's copies wait on it.
  // Clamped into [0, max_kv_len]: reads never pass the cache the caller described
  // (docs/format.md, "Device-side values").
  const int kv_len_raw = p.kv_len[b];
  const int kv_len = min(max(kv_len_raw, 0), p.max_kv_len);
  const bool counts = p.errors && kvh == 0 && split == 0;  // one block per sequence (and row group) counts
  if (counts && rg == 0 && tid == 0 && kv_len != kv_len_raw) atomicAdd(p.errors + 0, 1);

  // Q items: one wave per (row, 32-dim block), lane = dim, in batches of 8 per wave. The first
  // batch is loaded now: Q addresses do not depend on the lengths, so its latency overlaps
  // the length load and the key range below (at kv = 4k the prologue is most of the kernel).
  // Branch-free per item (one type switch per batch, the row's query index by a float
  // reciprocal: exact for row numbers < 2^16), so the loads issue back to back.
  constexpr int kQItems = RMAX * T::kQBlocks;
  constexpr int kQPerWave = (kQItems + T::kWaves - 1) / T::kWaves;
  constexpr int kQBatch = kQPerWave < 8 ? kQPerWave : 8;
  const float inv_gqa = 1.0f / static_cast<float>(p.gqa);
  auto load_q_batch = [&](int k0, float (&x)[kQBatch]) {
    int64_t idx[kQBatch];
    int dim[kQBatch];
    bool ok[kQBatch];
    PACKFA_UNROLL
    for (int k = 0; k < kQBatch; ++k) {
      const int item = wave + (k0 + k) * T::kWaves;
      const int r = item / T::kQBlocks, d = (item - r * T::kQBlocks) * 32 + lane;
      dim[k] = d;
      const int g = row0 + r, qi = static_cast<int>((static_cast<float>(g) + 0.5f) * inv_gqa);
      const int head = kvh * p.gqa + (g - qi * p.gqa);
      ok[k] = k0 + k < kQPerWave && item < kQItems && r < nrows && d < D;
      idx[k] = static_cast<int64_t>(b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
               static_cast<int64_t>(head) * p.q_head + d;
    }
    auto load_all = [&](auto one) {
      PACKFA_UNROLL
      for (int k = 0; k < kQBatch; ++k) x[k] = ok[k] ? one(idx[k]) : 0.0f;
    };
    if (p.q_type == static_cast<int>(DType::f16)) {
      load_all([&](int64_t i) { return arch::half_to_float(static_cast<const uint16_t*>(p.q)[i]); });
    } else if (p.q_type == static_cast<int>(DType::f32)) {
      load_all([&](int64_t i) { return static_cast<const float*>(p.q)[i]; });
    } else {
      load_all([&](int64_t i) { return arch::bf16_to_float(static_cast<const uint16_t*>(p.q)[i]); });
    }
    if (p.smooth) {
      PACKFA_UNROLL
      for (int k = 0; k < kQBatch; ++k)
        if (ok[k]) x[k] *= p.smooth[static_cast<int64_t>(kvh) * D + dim[k]];
    }
  };
  float xq[kQBatch];
  load_q_batch(0, xq);

  // ---- key range of this block, straight from the lengths (no shared memory, no barrier: the
  // first chunk's copies go out as soon as kv_len arrives; at kv = 4k the prologue is most of
  // the kernel) -----------------------------------------------------------------------------------
  // rows row0 .. row0 + nrows - 1 are query rows qi_lo .. qi_hi (row g: qi = g / gqa)
  auto raw_pos_of = [&](int qi) {
    return p.q_pos ? p.q_pos[static_cast<int64_t>(b) * p.nq + qi] : kv_len - p.nq + qi;
  };
  // position of query row qi (also the row table's, below), clamped into [-1, kv_len]: every
  // in-contract position is unchanged, and the key-range arithmetic below cannot overflow
  auto pos_of = [&](int qi) { return min(max(raw_pos_of(qi), -1), kv_len); };
  const int qi_lo = row0 / p.gqa, qi_hi = (row0 + nrows - 1) / p.gqa;
  int pmin = pos_of(qi_lo), pmax = pmin;
  for (int qi = qi_lo + 1; qi <= qi_hi; ++qi) {  // decode rows: qi_lo == qi_hi
    const int pos = pos_of(qi);
    pmin = min(pmin, pos);
    pmax = max(pmax, pos);
  }
  // chunks start at multiples of 32 keys (a paged chunk then spans at most two pages,
  // kv_view.hpp); the rows' own ranges hide the keys before a window
  const int lo = p.window > 0 ? max(0, pmin - p.window + 1) & ~(T::kChunk - 1) : 0;
  const int hi = p.causal ? min(kv_len, pmax + 1) : kv_len;
  // The group's keys [lo, hi) in chunks of 32 from lo; split s owns split_len / 32 of them, and
  // with claim counters waves may also take chunks of other splits (chunk_source.hpp).
  ChunkGroup group;
  group.claims = T::kClaims && p.claims
                     ? p.claims + (static_cast<int64_t>(blockIdx.z) * p.n_kv_heads + kvh) * p.num_splits * kClaimStride
                     : nullptr;
  group.n_all = hi > lo ? (hi - lo + T::kChunk - 1) / T::kChunk : 0;
  group.per_split = p.split_len / T::kChunk;
  group.splits = p.num_splits;
  group.split = split;
  group.pool0 = p.pool0;
  // keys [all_lo, all_hi) are visible to every row of the block (row r: [pos - window + 1, pos + 1)
  // or [0, kv_len))
  const int all_lo = p.window > 0 ? max(0, pmax - p.window + 1) : 0;
  const int all_hi = p.causal ? min(hi, pmin + 1) : hi;
  PACKFA_TRACE_AT(p, 2);

  // ---- per-wave streaming loop ----------------------------------------------------------------
  char* wave_smem = loop_smem + wave * T::kWaveBytes;
  float* pbuf = reinterpret_cast<float*>(wave_smem + T::kStages * T::kStageBytes);
  // the planes of this (sequence, KV head); keys are placed by the view (kv_view.hpp, below)
  const int64_t bseq = PAGED ? 0 : b;  // paged: the seq strides are page strides
  const char* kbase = p.k + bseq * p.k_seq + static_cast<int64_t>(kvh) * p.k_head;
  const char* ksbase = p.ks + bseq * p.ks_seq + static_cast<int64_t>(kvh) * p.ks_head;
  const char* vbase = p.v + bseq * p.v_seq + static_cast<int64_t>(kvh) * p.v_head;
  const char* vsbase = p.vs + bseq * p.vs_seq + static_cast<int64_t>(kvh) * p.vs_head;
  const bool b16 = p.k_block == 16;
  const float softcap = p.softcap;
  const uint16_t* mask_row_base =
      p.mask ? p.mask + static_cast<int64_t>(b) * p.mask_seq : nullptr;
  const bool extras = softcap > 0.0f || mask_row_base || p.alibi_n2 > 0;  // score edits beyond visibility

  // Running max (log2 units, wave-uniform) and lane-partial sums per row. Accumulators:
  // scalar path acc[row][kDpl dims]; tensor-core path oacc[n-tile][4] in mma C layout
  // (rows lane/4 and lane/4 + 8, dims 8·tile + 2·(lane%4) + {0,1}).
  float m_run[RMAX], l_part[RMAX], acc[RMAX][T::kDpl];
  PvAcc<D, (RMAX + 7) / 8> pacc;
  float* corr_s = pbuf + T::kPPitch * RMAX;
  ChunkSource<T::kClaims> work;
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    m_run[r] = kNegInf;
    l_part[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < T::kDpl; ++i) acc[r][i] = 0.0f;
  }
  PACKFA_UNROLL
  for (int i = 0; i < D / 16; ++i)
    PACKFA_UNROLL
    for (int nt = 0; nt < (RMAX + 7) / 8; ++nt)
      PACKFA_UNROLL
      for (int j = 0; j < 4; ++j) pacc.c[i][nt][j] = 0.0f;

  // Rows [r0, r0 + nr) of a chunk: K and V rows from krow / vrow (row r0's address, rows one
  // slot stride apart), the scale rows of lanes r0 .. r0 + nr - 1 (each its own key) from
  // ksrow / vsrow. A contiguous chunk is one such run (r0 = 0, folded); a paged one one or two.
  auto stage_run = [&](char* st, int r0, int nr, const char* krow, const char* vrow, const char* ksrow,
                       const char* vsrow) {
    char* ks_dst = st + T::kChunk * T::kKPitch;
    char* v_dst = ks_dst + (QK == QKMode::f16 ? 0 : T::kChunk * T::kScalePitch);
    const bool mine = lane >= r0 && lane < r0 + nr;
    stage_rows<T::kKRowBytes, T::kKPitch>(st + r0 * T::kKPitch, krow, p.k_slot, nr, 16);
    if constexpr (QK != QKMode::f16) {
      // each lane copies its own key's scale row (2·D/B bytes)
      if (mine) {
        char* dst = ks_dst + lane * T::kScalePitch;
        if (b16) {
          stage_scale_row<2 * D / 16>(dst, ksrow, p.ks_width);
        } else {
          stage_scale_row<2 * D / 32>(dst, ksrow, p.ks_width);
        }
      }
    }
    stage_rows<T::kVRowBytes, T::kVPitch>(v_dst + r0 * T::kVPitch, vrow, p.v_slot, nr, p.v_width);
    if constexpr (VF == VFormat::q8_0_planar) {  // each lane its own key's scale row
      if (mine) stage_scale_row<2 * D / 32>(v_dst + T::kChunk * T::kVPitch + lane * T::kVScalePitch, vsrow, p.vs_width);
    }
  };
  auto stage_chunk = [&](int chunk, int stage) {
    const int key0 = lo + chunk * T::kChunk;
    const int n = min(T::kChunk, hi - key0);
    char* st = wave_smem + stage * T::kStageBytes;
    // The chunk's runs of rows (kv_view.hpp): one from slot key0, or one per page it touches.
    if constexpr (!PAGED) {
      stage_run(st, 0, n, kbase + static_cast<int64_t>(key0) * p.k_slot, vbase + static_cast<int64_t>(key0) * p.v_slot,
                ksbase + static_cast<int64_t>(key0 + lane) * p.ks_slot,
                vsbase + static_cast<int64_t>(key0 + lane) * p.vs_slot);
    } else {  // two runs at most; the view is built here, so nothing of it stays live in the loop
      const KvView view{p.block_table + static_cast<int64_t>(b) * p.table_stride, 31 - __clz(p.page_size),
                        p.num_pages, p.errors};
      const KvRuns ru = view.runs(key0, n);
#pragma unroll 1
      for (int r = 0; r < (ru.split < n ? 2 : 1); ++r) {
        const int r0 = r ? ru.split : 0, nr = r ? n - ru.split : ru.split;
        const int64_t pg = r ? ru.page[1] : ru.page[0];  // selects: an indexed array would go to the stack
        const int s0 = r ? 0 : ru.slot0[0];
        stage_run(st, r0, nr, kbase + pg * p.k_seq + static_cast<int64_t>(s0) * p.k_slot,
                  vbase + pg * p.v_seq + static_cast<int64_t>(s0) * p.v_slot,
                  ksbase + pg * p.ks_seq + static_cast<int64_t>(s0 - r0 + lane) * p.ks_slot,
                  vsbase + pg * p.vs_seq + static_cast<int64_t>(s0 - r0 + lane) * p.vs_slot);
      }
    }
    arch::copy_async_commit();
  };

  int chunk = work.first(group, wave, reinterpret_cast<ChunkGroup*>(corr_s + RMAX));
  if (chunk >= 0) {
    stage_chunk(chunk, 0);  // first chunk: in flight during the Q set-up
    work.template issue<T::kWaves>(chunk);
  }
  PACKFA_TRACE_AT(p, 3);

  // ---- row facts (read after the barrier that ends the Q set-up) ------------------------------
  if (tid < RMAX) {
    RowInfo ri{0, 0, 0.0f, 0, 0, 0, 1.0f, 0};
    if (tid < nrows) {
      const int g = row0 + tid;
      ri.qi = g / p.gqa;
      ri.head = kvh * p.gqa + (g - ri.qi * p.gqa);
      ri.pos = pos_of(ri.qi);
      if (counts && g == ri.qi * p.gqa) {  // one count per query row
        const int raw = raw_pos_of(ri.qi);
        if (raw < 0 || raw >= kv_len) atomicAdd(p.errors + 1, 1);
      }
      if (p.alibi_n2 > 0) {
        const int h = ri.head;
        ri.slope = h < p.alibi_n2 ? powf(p.alibi_m0, static_cast<float>(h + 1))
                                  : powf(p.alibi_m1, static_cast<float>(2 * (h - p.alibi_n2) + 1));
        if (!p.alibi_pos) ri.mask_mul = ri.slope;
      }
      ri.key_lo = p.window > 0 ? ri.pos - p.window + 1 : 0;
      ri.key_hi = p.causal ? ri.pos + 1 : kv_len;
    }
    rinfo[tid] = ri;
  }

  // ---- Q into shared memory, while the first chunk streams in --------------------------------
  // int8 with a wave max for the block scale (softmax scale folded in, and log2(e) where the
  // scores come out in log2 units), or fp16-rounded fp32. One batch of 8 items per wave
  // covers the decode shapes; more would cost registers the loop needs.
  const float q_scale_mul = T::kScoresLog2 ? p.scale * kLog2e : p.scale;
#pragma unroll 1
  for (int k0 = 0; k0 < kQPerWave; k0 += kQBatch) {
    if (k0 > 0) load_q_batch(k0, xq);
    // the batch's wave maxima first, with no branch between them, so their shuffle chains
    // overlap (items past the end hold zeros; at kv = 4k this set-up is on the critical path)
    float amax[kQBatch];
    PACKFA_UNROLL
    for (int k = 0; k < kQBatch; ++k) amax[k] = T::kInt8Q ? arch::group_max(fabsf(xq[k])) : 0.0f;
    PACKFA_UNROLL
    for (int k = 0; k < kQBatch; ++k) {
      const int item = wave + (k0 + k) * T::kWaves;
      if (k0 + k >= kQPerWave || item >= kQItems) break;
      const int r = item / T::kQBlocks, qb = item - r * T::kQBlocks, d = qb * 32 + lane;
      if constexpr (T::kInt8Q) {
        const float qd = amax[k] / 127.0f, inv = amax[k] > 0.0f ? 127.0f / amax[k] : 0.0f;
        const int qv = arch::round_to_int(xq[k] * inv);
        if (d < D) reinterpret_cast<int8_t*>(q_smem)[r * D + d] = static_cast<int8_t>(max(-127, min(127, qv)));
        if (lane == 0) reinterpret_cast<float*>(q_smem + RMAX * D)[r * T::kQBlocks + qb] = qd * q_scale_mul;
      } else {
        if (d < D) reinterpret_cast<float*>(q_smem)[r * D + d] = arch::half_to_float(arch::float_to_half(xq[k]));
      }
    }
  }
  __syncthreads();
  PACKFA_TRACE_AT(p, 4);

  // A fragments of Q for the tensor-core Q·K, rows lane/4 + 8h (zero past RMAX). int8: bytes
  // 4·(lane%4).. of each 16-dim piece in [piece][h]; fp16: dims 2·(lane%4) (+1) in [piece][h],
  // the same + 8 in [piece][2 + h].
  uint32_t qreg[D / 16][4];
  // Q's block scales are loop-invariant: registers for the tensor-core rows g, g + 8 and, on
  // NVIDIA, for all rows of the 4-row class; RDNA reads them from shared memory (16 more VGPRs
  // moved the decode instances further from the 96-VGPR aim, docs/rdna.md).
#if defined(PACKFA_BACKEND_HIP)
  constexpr bool kQsInRegs = false;
#else
  constexpr bool kQsInRegs = RMAX <= 4;
#endif
  constexpr int kQsRows = kQsInRegs ? RMAX : 1;
  float qsc_rows[kQsRows][T::kQBlocks];
  float qsc_frag[T::kQBlocks][2];
  if constexpr (T::kInt8Q) {
    const float* qscale = reinterpret_cast<const float*>(q_smem + RMAX * D);
    PACKFA_UNROLL
    for (int qb = 0; qb < T::kQBlocks; ++qb) {
      if constexpr (kQsInRegs) {
        PACKFA_UNROLL
        for (int r = 0; r < kQsRows; ++r) qsc_rows[r][qb] = qscale[r * T::kQBlocks + qb];
      }
      PACKFA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = (lane >> 2) + 8 * h;
        qsc_frag[qb][h] = r < RMAX ? qscale[r * T::kQBlocks + qb] : 0.0f;
      }
    }
  }
  if constexpr (T::kMmaQk) {
    const int g = lane >> 2, t = lane & 3;
    PACKFA_UNROLL
    for (int piece = 0; piece < D / 16; ++piece)
      PACKFA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        if constexpr (QK == QKMode::packed16_int8) {
          qreg[piece][h] = r < RMAX ? *reinterpret_cast<const uint32_t*>(q_smem + r * D + 16 * piece + 4 * t) : 0u;
          qreg[piece][2 + h] = 0u;
        } else {
          const float* qf = reinterpret_cast<const float*>(q_smem) + r * D + 16 * piece + 2 * t;
          qreg[piece][h] = r < RMAX ? arch::pack_half2(qf[0], qf[1]) : 0u;
          qreg[piece][2 + h] = r < RMAX ? arch::pack_half2(qf[8], qf[9]) : 0u;
        }
      }
  }

  int next = chunk >= 0 ? work.template resolve<T::kWaves>(chunk) : -1;
  for (int it = 0; chunk >= 0; ++it) {
    const int stage = T::kStages == 2 ? (it & 1) : 0;
    if constexpr (T::kStages == 2) {
      if (next >= 0) {
        stage_chunk(next, stage ^ 1);
        arch::copy_async_wait<1>();
      } else {
        arch::copy_async_wait<0>();
      }
    } else {
      if (it > 0) stage_chunk(chunk, 0);  // one buffer: the previous chunk's readers are done
      arch::copy_async_wait<0>();
    }
    if (next >= 0) work.template issue<T::kWaves>(next);  // the chunk after next: resolved after this chunk's work
    const char* st = wave_smem + stage * T::kStageBytes;
    const char* ks_sm = st + T::kChunk * T::kKPitch;
    const char* v_sm = ks_sm + (QK == QKMode::f16 ? 0 : T::kChunk * T::kScalePitch);
    const char* vs_sm = v_sm + T::kChunk * T::kVPitch;  // q8_0_planar's scale rows
    const int key0 = lo + chunk * T::kChunk;
    const int nvalid = min(T::kChunk, hi - key0);
    if constexpr (T::kMmaPv) {
      // last, partial chunk: V rows past nvalid hold stale bytes; their p is 0, but 0 · NaN
      // is NaN in the mma, so they become zeros
      if (nvalid < T::kChunk) {
        uint4* vz = reinterpret_cast<uint4*>(const_cast<char*>(v_sm) + nvalid * T::kVPitch);
        for (int i = lane; i < (T::kChunk - nvalid) * T::kVPitch / 16; i += arch::kWaveSize) vz[i] = uint4{0, 0, 0, 0};
        if constexpr (VF == VFormat::q8_0_planar) {  // and their scales (P·scale would be 0·NaN)
          uint2* sz = reinterpret_cast<uint2*>(const_cast<char*>(vs_sm) + nvalid * T::kVScalePitch);
          for (int i = lane; i < (T::kChunk - nvalid) * T::kVScalePitch / 8; i += arch::kWaveSize) sz[i] = uint2{0, 0};
        }
      }
    }
    arch::sync_wave();
    if (it == 0) PACKFA_TRACE_AT(p, 5);
    const int key = key0 + lane;

    if constexpr (T::kMmaQk) {
      // every key of the chunk visible to every row, no score edits: the per-key checks go
      // (rows past nrows get scores too: computed, never written)
      const bool whole = !extras && key0 >= all_lo && key0 + T::kChunk <= all_hi;
      // ---- scores on tensor cores: S in C fragments (rows g + 8h), softmax in registers,
      // P handed to the P·V mma without shared memory ---------------------------------------
      constexpr int NT = T::kNt;
      const int g = lane >> 2, t2 = 2 * (lane & 3);
      float sc[T::kChunk / 8][4] = {};
      if constexpr (QK == QKMode::f16) {
        qk_mma_f16<D, T>(sc, qreg, st);
        PACKFA_UNROLL
        for (int n = 0; n < T::kChunk / 8; ++n)
          PACKFA_UNROLL
          for (int c = 0; c < 4; ++c) sc[n][c] *= p.scale * kLog2e;
      } else if (b16) {
        qk_mma<D, 16, RMAX, T>(sc, qreg, st, ks_sm, qsc_frag);
      } else {
        qk_mma<D, 32, RMAX, T>(sc, qreg, st, ks_sm, qsc_frag);
      }
      PvOperands<NT> op;
      float corr_row[NT];
      PACKFA_UNROLL
      for (int h = 0; h < NT; ++h) {
        const int r = min(g + 8 * h, RMAX - 1);  // rows past RMAX: an empty key range
        const int2 range = g + 8 * h < RMAX ? *reinterpret_cast<const int2*>(&rinfo[r].key_lo) : int2{0, 0};
        const int khi = min(range.y, hi);
        float mx = kNegInf;
        if (whole) {
          PACKFA_UNROLL
          for (int n = 0; n < T::kChunk / 8; ++n) mx = fmaxf(mx, fmaxf(sc[n][2 * h], sc[n][2 * h + 1]));
        } else {
          PACKFA_UNROLL
          for (int n = 0; n < T::kChunk / 8; ++n)
            PACKFA_UNROLL
            for (int e = 0; e < 2; ++e) {
              const int kk = key0 + 8 * n + t2 + e;
              const bool visible = kk >= range.x && kk < khi;
              float x = sc[n][2 * h + e];  // log2 units
              if (extras) {  // the edits are defined on natural-log scores
                const RowInfo ri = rinfo[r];
                x *= kLn2;
                if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
                if (visible && mask_row_base)
                  x += ri.mask_mul * arch::half_to_float(mask_row_base[static_cast<int64_t>(ri.qi) * p.mask_row +
                                                                       static_cast<int64_t>(ri.head) * p.mask_head + kk]);
                if (p.alibi_pos) x += ri.slope * static_cast<float>(kk - ri.pos);
                x *= kLog2e;
              }
              x = visible ? x : kNegInf;
              sc[n][2 * h + e] = x;
              mx = fmaxf(mx, x);
            }
        }
        mx = fmaxf(mx, arch::shfl_xor(mx, 1));  // the row's 4 lanes
        mx = fmaxf(mx, arch::shfl_xor(mx, 2));
        const float m_new = fmaxf(m_run[h], mx);
        const float corr = m_new == kNegInf ? 1.0f : arch::exp2_fast(m_run[h] - m_new);
        const float m_sub = m_new == kNegInf ? 0.0f : m_new;  // all -inf: exp2(-inf - 0) = 0
        float sum = 0.0f;
        PACKFA_UNROLL
        for (int n = 0; n < T::kChunk / 8; ++n)
          PACKFA_UNROLL
          for (int e = 0; e < 2; ++e) {
            const float pr = arch::exp2_fast(sc[n][2 * h + e] - m_sub);
            sc[n][2 * h + e] = pr;
            sum += pr;
          }
        m_run[h] = m_new;
        l_part[h] = l_part[h] * corr + sum;
        corr_row[h] = corr;
        PACKFA_UNROLL
        for (int ks = 0; ks < T::kChunk / 16; ++ks) {
          op.pb[ks][h][0] = arch::pack_half2(sc[2 * ks][2 * h], sc[2 * ks][2 * h + 1]);
          op.pb[ks][h][1] = arch::pack_half2(sc[2 * ks + 1][2 * h], sc[2 * ks + 1][2 * h + 1]);
        }
      }
      // accumulator columns are rows 8·h + t2 (+1): their corrections live on lanes 4·(t2 (+1))
      PACKFA_UNROLL
      for (int h = 0; h < NT; ++h) {
        op.corr[h][0] = arch::shfl(corr_row[h], 4 * t2);
        op.corr[h][1] = arch::shfl(corr_row[h], 4 * t2 + 4);
      }
      pv_mma<D, VF, NT, T>(pacc, op, v_sm, vs_sm, nvalid);
    } else {
      // ---- Q·K: lane = key, all rows ---------------------------------------------------------
      float s[RMAX];
#pragma unroll
      for (int r = 0; r < RMAX; ++r) s[r] = 0.0f;
      const char* krow = st + lane * T::kKPitch;
      if constexpr (QK == QKMode::packed16_int8) {
        const uint16_t* kd = reinterpret_cast<const uint16_t*>(ks_sm + lane * T::kScalePitch);
        const float* qscale = reinterpret_cast<const float*>(q_smem + RMAX * D);
        auto q_scale = [&](int r, int qb) {
          if constexpr (kQsInRegs) {
            return qsc_rows[r][qb];
          } else {
            return qscale[r * T::kQBlocks + qb];
          }
        };
        if (b16) {
          qk_int8<D, RMAX, 16, T>(s, krow, kd, q_smem, nrows, q_scale);
        } else {
          qk_int8<D, RMAX, 32, T>(s, krow, kd, q_smem, nrows, q_scale);
        }
      } else if constexpr (QK == QKMode::packed16_f16) {
        const float* qf = reinterpret_cast<const float*>(q_smem);
        const uint16_t* kd = reinterpret_cast<const uint16_t*>(ks_sm + lane * T::kScalePitch);
        float part[RMAX];
#pragma unroll
        for (int piece = 0; piece < D / 16; ++piece) {
          const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
          const bool first = b16 || (piece & 1) == 0;
          const bool last = b16 || (piece & 1) == 1 || piece == D / 16 - 1;
          float kf[16];
          const int words[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
          for (int i = 0; i < 16; ++i) kf[i] = static_cast<float>(static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xff));
          const float kscale = last ? arch::half_to_float(kd[b16 ? piece : piece / 2]) : 0.0f;
#pragma unroll
          for (int r = 0; r < RMAX; ++r) {  // rows >= nrows: zero Q, skipped or computed, never written
            if (T::kRowGuard && r >= nrows) break;
            const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 16);
            float a = first ? 0.0f : part[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float4 qv = q4[j];
              a = fmaf(qv.x, kf[4 * j], a);
              a = fmaf(qv.y, kf[4 * j + 1], a);
              a = fmaf(qv.z, kf[4 * j + 2], a);
              a = fmaf(qv.w, kf[4 * j + 3], a);
            }
            part[r] = a;
            if (last) s[r] = fmaf(a, kscale * p.scale, s[r]);
          }
        }
      } else {  // f16 K
        const float* qf = reinterpret_cast<const float*>(q_smem);
#pragma unroll
        for (int piece = 0; piece < D / 8; ++piece) {
          const uint4 kv = *reinterpret_cast<const uint4*>(krow + piece * 16);
          float kf[8];
          arch::half2_to_float2(kv.x, kf[0], kf[1]);
          arch::half2_to_float2(kv.y, kf[2], kf[3]);
          arch::half2_to_float2(kv.z, kf[4], kf[5]);
          arch::half2_to_float2(kv.w, kf[6], kf[7]);
#pragma unroll
          for (int r = 0; r < RMAX; ++r) {  // rows >= nrows: zero Q, skipped or computed, never written
            if (T::kRowGuard && r >= nrows) break;
            const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 8);
            const float4 a0 = q4[0], a1 = q4[1];
            float a = s[r];
            a = fmaf(a0.x, kf[0], a);
            a = fmaf(a0.y, kf[1], a);
            a = fmaf(a0.z, kf[2], a);
            a = fmaf(a0.w, kf[3], a);
            a = fmaf(a1.x, kf[4], a);
            a = fmaf(a1.y, kf[5], a);
            a = fmaf(a1.z, kf[6], a);
            a = fmaf(a1.w, kf[7], a);
            s[r] = a;
          }
        }
#pragma unroll
        for (int r = 0; r < RMAX; ++r) s[r] *= p.scale;
      }

      // ---- options, visibility, online softmax (log2 domain) ------------------------------------
      // All RMAX rows (rows >= nrows have an empty key range and are never written out): no
      // early exit, so the rows' independent shuffle chains overlap.
#pragma unroll
      for (int r = 0; r < RMAX; ++r) {
        const int2 range = *reinterpret_cast<const int2*>(&rinfo[r].key_lo);
        const bool visible = key >= range.x && key < min(range.y, hi);
        float x = s[r];
        if (extras) {
          const RowInfo ri = rinfo[r];
          if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
          if (visible && mask_row_base)
            x += ri.mask_mul * arch::half_to_float(mask_row_base[static_cast<int64_t>(ri.qi) * p.mask_row +
                                                                 static_cast<int64_t>(ri.head) * p.mask_head + key]);
          if (p.alibi_pos) x += ri.slope * static_cast<float>(key - ri.pos);
        }
        x = visible ? x * kLog2e : kNegInf;
        const float m_new = fmaxf(m_run[r], arch::group_max(x));
        const float corr = m_new == kNegInf ? 1.0f : arch::exp2_fast(m_run[r] - m_new);
        const float pr = m_new == kNegInf ? 0.0f : arch::exp2_fast(x - m_new);
        m_run[r] = m_new;
        l_part[r] = l_part[r] * corr + pr;
        if constexpr (T::kMmaPv) {
          if (lane == 0) corr_s[r] = corr;
          pbuf[r * T::kPPitch + lane] = pr;  // [row][key]: B fragments read key pairs
        } else {
#pragma unroll
          for (int i = 0; i < T::kDpl; ++i) acc[r][i] *= corr;
          pbuf[lane * RMAX + r] = pr;  // [key][row]: float4 over rows
        }
      }
      arch::sync_wave();

      if constexpr (T::kMmaPv) {
        PvOperands<(RMAX + 7) / 8> op;
        pv_operands_from_smem<RMAX, T>(op, pbuf, corr_s);
        pv_mma<D, VF, (RMAX + 7) / 8, T>(pacc, op, v_sm, vs_sm, nvalid);
      } else if (lane < T::kPvLanes) {  // ---- scalar P·V: lane = kDpl dims ----------------------
        const int dim0 = lane * T::kDpl;
#pragma unroll 4
        for (int t = 0; t < nvalid; ++t) {
          float v[T::kDpl], vd;
          load_v<VF, T::kDpl>(v_sm + t * T::kVPitch, vs_sm + t * T::kVScalePitch, dim0, v, vd);
          const float4* pt = reinterpret_cast<const float4*>(pbuf + t * RMAX);
#pragma unroll
          for (int r4 = 0; r4 < RMAX / 4; ++r4) {
            if (r4 * 4 >= nrows) break;
            const float4 p4 = pt[r4];
            const float pv[4] = {p4.x * vd, p4.y * vd, p4.z * vd, p4.w * vd};
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
              for (int i = 0; i < T::kDpl; ++i) acc[r4 * 4 + j][i] = fmaf(pv[j], v[i], acc[r4 * 4 + j][i]);
          }
        }
      }
    }
    arch::sync_wave();  // this stage and pbuf are rewritten next iteration
    if (it == 0) PACKFA_TRACE_AT(p, 6);
    chunk = next;
    if (chunk >= 0) next = work.template resolve<T::kWaves>(chunk);
  }
  PACKFA_TRACE_AT(p, 7);

  // ---- merge the waves ----------------------------------------------------------------------
  __syncthreads();  // the loop buffers become the merge area
  float* mg = reinterpret_cast<float*>(loop_smem);
  float* mg_acc = mg;                               // [wave][r][D]
  float* mg_ml = mg + T::kWaves * RMAX * D;         // [wave][r][2]
  if constexpr (T::kMmaQk) {  // m_run/l_part [h]: row lane/4 + 8h, sums spread over the row's 4 lanes
    PACKFA_UNROLL
    for (int h = 0; h < T::kNt; ++h) {
      const float l = arch::group_sum<4>(l_part[h]);
      if ((lane & 3) == 0 && (lane >> 2) + 8 * h < RMAX) {
        mg_ml[(wave * RMAX + (lane >> 2) + 8 * h) * 2] = m_run[h];
        mg_ml[(wave * RMAX + (lane >> 2) + 8 * h) * 2 + 1] = l;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    if constexpr (!T::kMmaQk) {
      const float l = arch::group_sum(l_part[r]);
      if (lane == 0) {
        mg_ml[(wave * RMAX + r) * 2] = m_run[r];
        mg_ml[(wave * RMAX + r) * 2 + 1] = l;
      }
    }
    if constexpr (!T::kMmaPv) {
      if (lane < T::kPvLanes) {
#pragma unroll
        for (int i = 0; i < T::kDpl; ++i) mg_acc[(wave * RMAX + r) * D + lane * T::kDpl + i] = acc[r][i];
      }
    }
  }
  if constexpr (T::kMmaPv) {  // C register c of tile (i, nt): dim pv_dim(i, g + 8·(c/2)), row 8·nt + t2 + c%2
    const int g = lane >> 2, t2 = 2 * (lane & 3);
    PACKFA_UNROLL
    for (int i = 0; i < D / 16; ++i)
      PACKFA_UNROLL
      for (int nt = 0; nt < (RMAX + 7) / 8; ++nt)
        PACKFA_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int row = 8 * nt + t2 + (c & 1);
          if (row < RMAX) mg_acc[(wave * RMAX + row) * D + pv_dim<VF>(i, g + 8 * (c >> 1))] = pacc.c[i][nt][c];
        }
  }
  __syncthreads();
  PACKFA_TRACE_AT(p, 8);

  // Split output is written by every block; the work it reads is done, so dependents may start.
  pdl::launch_dependents();

  // Each thread merges 4 dims of one row (float4 reads of the wave states, one 16-byte store
  // of the partial): at kv = 4k the block's end is on the critical path.
  const bool final_out = p.num_splits == 1;
  for (int item = tid; item < nrows * (D / 4); item += T::kThreads) {
    const int r = item / (D / 4), d = 4 * (item - r * (D / 4));
    float M = kNegInf;
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) M = fmaxf(M, mg_ml[(w * RMAX + r) * 2]);
    float L = 0.0f;
    float4 O = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) {
      const float mw = mg_ml[(w * RMAX + r) * 2];
      const float f = mw == kNegInf ? 0.0f : arch::exp2_fast(mw - M);
      const float4 a = *reinterpret_cast<const float4*>(&mg_acc[(w * RMAX + r) * D + d]);
      L += f * mg_ml[(w * RMAX + r) * 2 + 1];
      O.x += f * a.x;
      O.y += f * a.y;
      O.z += f * a.z;
      O.w += f * a.w;
    }
    const RowInfo ri = rinfo[r];
    if (final_out) {
      if (p.sinks) {
        const float sk = p.sinks[ri.head] * kLog2e;
        const float Mn = fmaxf(M, sk);
        const float f = M == kNegInf ? 0.0f : arch::exp2_fast(M - Mn);
        L = L * f + arch::exp2_fast(sk - Mn);
        O.x *= f;
        O.y *= f;
        O.z *= f;
        O.w *= f;
        M = Mn;
      }
      const float inv = L > 0.0f ? 1.0f / L : 0.0f;
      const int64_t oidx = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(ri.qi) * p.o_row +
                           static_cast<int64_t>(ri.head) * p.o_head + d;
      store_from_float(p.o, p.o_type, oidx, O.x * inv);
      store_from_float(p.o, p.o_type, oidx + 1, O.y * inv);
      store_from_float(p.o, p.o_type, oidx + 2, O.z * inv);
      store_from_float(p.o, p.o_type, oidx + 3, O.w * inv);
      if (d == 0 && p.lse) {
        p.lse[(static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head] =
            L > 0.0f ? (M + log2f(L)) / kLog2e : kNegInf;
      }
    } else {
      const int64_t prow = ((static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head) * p.num_splits + split;
      *reinterpret_cast<float4*>(p.part_o + prow * D + d) = O;
      if (d == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(M, L);
    }
  }
  PACKFA_TRACE_AT(p, 9);
}

}  // namespace packfa::device
