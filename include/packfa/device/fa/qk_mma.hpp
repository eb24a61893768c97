// packfa/device/fa/qk_mma.hpp — Q·K on tensor cores (NVIDIA sm_80+): the scores of 16 rows x
// 32 keys in mma C fragments. sc[n][c]: key tile n, C register c = row g + 8·(c/2), key
// 8n + 2·(lane%4) + c%2 (g = lane/4). Scores come out in log2 units (log2(e) folded into Q's
// scale, or applied here for fp16 K).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/smem.hpp"
#include "packfa/device/fa/traits.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// This lane's places in a K stage for the mma paths (int8 and fp16-Q): kl, its ldmatrix row
// (matrix lane/8, row lane%8: key 8·(matrix/2) + row, byte 16·(matrix%2)); kd, the scale row of
// key 2·(lane%4) (key tile n: + 8n rows).
template <class T>
struct KTileLane {
  static constexpr int kN = kFaChunk / 8;      // key tiles of 8 a chunk
  static constexpr int kPieces = T::kD / 16;   // 16-dim pieces of a K row
  static constexpr bool kHi = T::kRows > 8;    // rows g + 8 exist
  const char* kl;
  const char* kd;
  PACKFA_DEV KTileLane(const char* k_sm, const char* ks_sm) {
    const int lane = arch::lane_id();
    const int t = lane & 3, mi = lane >> 3, lr = lane & 7;
    kl = k_sm + (8 * (mi >> 1) + lr) * T::kKPitch + 16 * (mi & 1);
    kd = ks_sm + 2 * t * T::kScalePitch;
  }
};

// The int8 K bytes of dims 32j .. 32j + 31 of the chunk's keys as mma B fragments (shared by the
// int8 and fp16-Q paths): kb[n][h] holds bytes 16h + 4t .. + 3 of key 8n + g, two key tiles per
// ldmatrix_x4. kl: this lane's ldmatrix row address (KTileLane).
template <class T>
PACKFA_DEV void k_frags_32(uint32_t (&kb)[kFaChunk / 8][2], const char* kl, int j) {
  PACKFA_UNROLL
  for (int n = 0; n < kFaChunk / 8; n += 2) {
    uint32_t r[4];
    arch::ldmatrix_x4(r, kl + 8 * n * T::kKPitch + 32 * j);  // the last half block reads row padding
    kb[n][0] = r[0];
    kb[n][1] = r[1];
    kb[n + 1][0] = r[2];
    kb[n + 1][1] = r[3];
  }
}

// int8 Q·K on tensor cores (NVIDIA, every row class): S (16 rows x 32 keys) from one
// mma.m16n8k32.s8 per 32-dim K block (two m16n8k16 for block-16 K or a last half block) into
// int32, then one fp32 FMA per block with q_scale·k_scale. K fragments of two key tiles per
// ldmatrix. qa / qsc: this lane's A fragments of Q and Q's block scales (rows g, g + 8; rows
// g + 8 are skipped when RMAX <= 8).
// sc[n][c]: key tile n, C register c = row g + 8·(c/2), key 8n + 2·(lane%4) + c%2.
template <class T, int KB>
PACKFA_DEV void qk_mma_int8(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[T::kD / 16][4], const char* k_sm,
                            const char* ks_sm, const float (&qsc)[T::kQBlocks][2]) {
  using L = KTileLane<T>;
  constexpr int D = T::kD, kN = L::kN, kPieces = L::kPieces;
  constexpr bool kHi = L::kHi;
  const L kt(k_sm, ks_sm);
  const char *kl = kt.kl, *kd = kt.kd;
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
    k_frags_32<T>(kb, kl, j);
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

// fp16-Q x int8 K on tensor cores (the fp16-Q dot mode, packed16 K): S (16 rows x 32 keys) from
// mma.m16n8k16 with fp16 Q and the K bytes as exact fp16 integers (0x6400 trick, 5 instructions
// per 4 bytes), fp32 sums per K block, then one fp32 FMA per block with the key's scale: the
// lane path's products and block sums (qk_lane_f16q), on the tensor cores. K fragments come from
// the int8 path's ldmatrix (bytes 4t..4t+3 of key g per 16-dim piece); the mma's k index is
// free to stand for any dim, so its k pair (2t, 2t+1) holds dims 4t, 4t+1 and (2t+8, 2t+9) dims
// 4t+2, 4t+3 — q_mma_frags gives Q the same order. Scores times scale·log2(e) at the end.
// (H200, kv 128k, D 128, one row: the lane path ran 162 us against 84 for the int8 mode.)
PACKFA_DEV void i8x4_to_half2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t t = w ^ 0x80808080u;  // q + 128
  lo = arch::hsub2(arch::byte_perm(t, 0x64646464u, 0x5140u), 0x64806480u);  // (1024 + q + 128) - 1152
  hi = arch::hsub2(arch::byte_perm(t, 0x64646464u, 0x7362u), 0x64806480u);
}
template <class T, int KB>
PACKFA_DEV void qk_mma_f16q(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[T::kD / 16][4], const char* k_sm,
                            const char* ks_sm) {
  using L = KTileLane<T>;
  constexpr int kN = L::kN, kPieces = L::kPieces;
  constexpr bool kHi = L::kHi;
  const L kt(k_sm, ks_sm);
  const char *kl = kt.kl, *kd = kt.kd;
  // K scales two blocks per 4-byte load (8-byte loads as in qk_mma_int8 cost 8 more registers
  // here: fp16 Q holds twice the A registers; sm_89 spilled 4 bytes with them)
  uint32_t kw[kN][2];
  auto scale_block = [&](const float (&acc)[kN][4], int blk) {
    if (blk % 2 == 0) {
      PACKFA_UNROLL
      for (int n = 0; n < kN; ++n)
        PACKFA_UNROLL
        for (int e = 0; e < 2; ++e)
          kw[n][e] = *reinterpret_cast<const uint32_t*>(kd + (8 * n + e) * T::kScalePitch + 2 * blk);
    }
    const bool high = blk & 1;
    PACKFA_UNROLL
    for (int n = 0; n < kN; ++n) {
      float k[2];
      PACKFA_UNROLL
      for (int e = 0; e < 2; ++e) {
        const uint32_t w = kw[n][e];
        k[e] = arch::half_to_float(static_cast<uint16_t>(high ? w >> 16 : w & 0xffffu));
      }
      sc[n][0] = fmaf(acc[n][0], k[0], sc[n][0]);
      sc[n][1] = fmaf(acc[n][1], k[1], sc[n][1]);
      if constexpr (kHi) {
        sc[n][2] = fmaf(acc[n][2], k[0], sc[n][2]);
        sc[n][3] = fmaf(acc[n][3], k[1], sc[n][3]);
      }
    }
  };
  PACKFA_UNROLL
  for (int j = 0; j < (kPieces + 1) / 2; ++j) {  // 32 dims: pieces 2j, 2j + 1
    const bool two = 2 * j + 1 < kPieces;
    uint32_t kb[kN][2];  // bytes 4t.. of dims 32j.. and 32j + 16.. of key 8n + g
    k_frags_32<T>(kb, kl, j);
    float acc[kN][4];
    PACKFA_UNROLL
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && !two) break;
      if (KB == 16 || h == 0) {
        PACKFA_UNROLL
        for (int n = 0; n < kN; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
      }
      PACKFA_UNROLL
      for (int n = 0; n < kN; ++n) {
        uint32_t b0, b1;
        i8x4_to_half2x2(kb[n][h], b0, b1);
        arch::mma_16x8x16_f16(acc[n], qa[2 * j + h], b0, b1);
      }
      if (KB == 16) scale_block(acc, 2 * j + h);
    }
    if (KB == 32) scale_block(acc, j);
  }
}

// fp16 Q·K on tensor cores (f16 K rows): S (16 rows x 32 keys) += Q·K^T with
// mma.m16n8k16 (fp32 sums of fp16 products), B fragments of two key tiles per ldmatrix.
// qa: A fragments of fp16-rounded Q (rows g, g + 8; dims 2·(lane%4) (+1), + 8).
template <class T>
PACKFA_DEV void qk_mma_f16(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[T::kD / 16][4], const char* k_sm) {
  constexpr int D = T::kD;
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

// The stage's scores into sc (zeroed here). qa / qsc: q_mma_frags() of q_setup.hpp.
template <class T>
PACKFA_DEV void qk_mma(float (&sc)[kFaChunk / 8][4], const uint32_t (&qa)[T::kD / 16][4],
                       const float (&qsc)[T::kQBlocks][2], const StageSmem& st, bool b16, float scale) {
  PACKFA_UNROLL
  for (int n = 0; n < kFaChunk / 8; ++n)
    PACKFA_UNROLL
    for (int c = 0; c < 4; ++c) sc[n][c] = 0.0f;
  if constexpr (T::kQK == QKMode::f16 || T::kQK == QKMode::packed16_f16) {
    if constexpr (T::kQK == QKMode::f16) {
      qk_mma_f16<T>(sc, qa, st.k);
    } else if (b16) {
      qk_mma_f16q<T, 16>(sc, qa, st.k, st.ks);
    } else {
      qk_mma_f16q<T, 32>(sc, qa, st.k, st.ks);
    }
    PACKFA_UNROLL
    for (int n = 0; n < kFaChunk / 8; ++n)
      PACKFA_UNROLL
      for (int c = 0; c < 4; ++c) sc[n][c] *= scale * kLog2e;
  } else if (b16) {
    qk_mma_int8<T, 16>(sc, qa, st.k, st.ks, qsc);
  } else {
    qk_mma_int8<T, 32>(sc, qa, st.k, st.ks, qsc);
  }
}

#endif

}  // namespace packfa::device
