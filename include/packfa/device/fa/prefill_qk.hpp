// packfa/device/fa/prefill_qk.hpp — the scores of the Hopper prefill kernel: S = Q·K^T as chains
// of wgmma over the shared-memory tiles of prefill_tiles.hpp, and for packed16 K the exact
// per-block scaling (decision "prefill-exact-qk"). Used by fa/prefill_sm90.hpp's consumers.
#pragma once

#include <cstdint>

#include "packfa/device/fa/prefill_tiles.hpp"

#ifndef PACKFA_PREFILL_SCALES_EARLY
#define PACKFA_PREFILL_SCALES_EARLY 1
#endif
#ifndef PACKFA_PREFILL_QD_REGS
#define PACKFA_PREFILL_QD_REGS 0
#endif
// decision "prefill-q-regs" (below)
#ifndef PACKFA_PREFILL_Q_REGS
#define PACKFA_PREFILL_Q_REGS 1
#endif

namespace packfa::device::prefill {
// ---- scores -------------------------------------------------------------------------------------
// One chain of N k16 steps (head-dim values 16·kk0 ..) of S = Q·K^T into acc, issued and committed.
// qd0 / kd0: descriptors of Q's and this slot's K tile at k step 0; a step adds its byte
// offset / 16 to the address field (it stays below 2^14: shared memory is < 256 KB), so the
// loop does no descriptor arithmetic beyond one add.
template <class L, int N>
PACKFA_DEV void qk_chain(uint64_t qd0, uint64_t kd0, int kk0, float (&acc)[L::kN / 2]) {
  constexpr int kM = L::kM, kN = L::kN;
  wgmma::fence();
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int kk = kk0 + i;
    if constexpr (L::kSwizzle)  // K-major, 128-byte swizzle: 16 values = 32 bytes along a row
      wgmma::mma_ss<kN>(acc, qd0 + (((kk >> 2) * kM * 128 + (kk & 3) * 32) >> 4),
                        kd0 + (((kk >> 2) * kN * 128 + (kk & 3) * 32) >> 4), i > 0);
    else
      wgmma::mma_ss<kN>(acc, qd0 + ((2 * kk * kM * 16) >> 4), kd0 + ((2 * kk * kN * 16) >> 4), i > 0);
  }
  wgmma::commit();
}
// Decision "prefill-q-regs" (compile definition PACKFA_PREFILL_Q_REGS, 1; 0 for A/B builds;
// docs/prefill.md): the one-chain scores (prefill-k-rounded) of the two-producer instances take
// Q as the A operand from registers for their first kSteps k steps instead of from shared
// memory. An m64n64k16 from shared memory reads 2 KB of A and 2 KB of B in the 32 tensor cycles
// it takes, 128 bytes a cycle: the shared-memory pipe's whole width, which the producers'
// staging and widening also need. Q is the same for every tile, so it is read once: 4
// registers a step. 4 steps: with all 8 at D 128 ptxas spilled 16 bytes at the consumers' 184
// registers (5: 8 bytes). The one-producer instances (f16 / bf16 V, f16 K: consumer-bound)
// measured within ±1% with all 8 steps, so they keep shared memory. Interleaved layout only.
// Not at D 64, where the scores' wgmma and P·V's have the same shape (m64n64k16, A from
// registers): test_prefill failed every D 64 case there (relative error ~0.87, H100, CUDA 13.0
// ptxas; the PTX read correct, the SASS not examined), and passed at D 80-128.
#ifndef PACKFA_PREFILL_Q_REG_STEPS
#define PACKFA_PREFILL_Q_REG_STEPS 4
#endif
template <class L>
struct QRegs {
  static constexpr bool kOn = PACKFA_PREFILL_Q_REGS != 0 && PACKFA_PREFILL_Q_REG_STEPS > 0 && L::kD > 64 &&
                              L::kD <= 128 && L::kN == 64 && !L::kSwizzle && L::kKRounded && L::kProducerWgs == 2;
  static constexpr int kSteps = !kOn ? 0 : (PACKFA_PREFILL_Q_REG_STEPS < L::kD / 16 ? PACKFA_PREFILL_Q_REG_STEPS : L::kD / 16);
  uint32_t f[kSteps > 0 ? kSteps : 1][4];
  // rows `row` and row + 8 of the block's Q tile (K-major, core matrices of 8 rows x 16 bytes,
  // kM·16 bytes apart along K): the A fragment of k step kk is (row, 16kk + 2t), (row + 8, ..),
  // (row, 16kk + 8 + 2t), (row + 8, ..), t = lane % 4, two fp16 a register (wgmma.hpp's layout)
  PACKFA_DEV void load(const char* sq, int row, int lane) {
    const char* base = sq + (row / 8) * 128 + (row % 8) * 16 + (lane % 4) * 4;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
      for (int v = 0; v < 4; ++v)
        f[kk][v] = *reinterpret_cast<const uint32_t*>(base + (2 * kk + v / 2) * L::kM * 16 + (v % 2) * 128);
  }
};
// The one-chain scores S = Q·K^T over the whole head dim (f16 K, prefill-k-rounded), issued
// and committed: Q's first QRegs::kSteps k steps from registers, the rest from shared memory
// at descriptor qd0; kd0: this slot's K tile.
template <class L>
PACKFA_DEV void qk_one_chain(const QRegs<L>& q, uint64_t qd0, uint64_t kd0, float (&acc)[L::kN / 2]) {
  constexpr int kN = L::kN, kM = L::kM, kR = QRegs<L>::kSteps;
  if constexpr (kR == 0) {
    qk_chain<L, L::kD / 16>(qd0, kd0, 0, acc);
  } else {
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < L::kD / 16; ++kk) {
      if (kk < kR) wgmma::mma_rs<kN>(acc, q.f[kk < kR ? kk : 0], kd0 + ((2 * kk * kN * 16) >> 4), kk > 0);
      else wgmma::mma_ss<kN>(acc, qd0 + ((2 * kk * kM * 16) >> 4), kd0 + ((2 * kk * kN * 16) >> 4), kk > 0);
    }
    wgmma::commit();
  }
}
// Descriptor of an operand tile at shared address `addr` in the layout L uses (K-major).
template <class L, int kRows>
PACKFA_DEV uint64_t kmajor_desc(uint32_t addr) {
  if constexpr (L::kSwizzle) return wgmma::smem_desc_sw128(addr, 16, 1024);
  else return wgmma::smem_desc(addr, kRows * 16, 128);
}

// Q's block scales of a consumer thread's rows r and r + 8 (int8 mode; load_q's table
// [kM][(D + 31) / 32]): read from shared memory where used, or (decision "prefill-qd-regs",
// PACKFA_PREFILL_QD_REGS, head dims up to 128) read once into registers, since Q is the same
// for every tile of the block.
template <class L>
struct QdRows {
  static constexpr int kB = (L::kD + 31) / 32;
  static constexpr bool kRegs = PACKFA_PREFILL_QD_REGS != 0 && L::kD <= 128;
  const float* row;  // row r's entries; row r + 8 is 8·kB floats on
  float reg[2][kRegs ? kB : 1];
  PACKFA_DEV void init(const float* table_row) {
    row = table_row;
    if constexpr (kRegs) {
#pragma unroll
      for (int k = 0; k < 2; ++k)
#pragma unroll
        for (int b = 0; b < kB; ++b) reg[k][b] = row[8 * kB * k + b];
    }
  }
  PACKFA_DEV float at(int k, int b) const {
    if constexpr (kRegs) return reg[k][b];
    else return row[8 * kB * k + b];
  }
};

// packed16 K (decision "prefill-exact-qk"): the fp16 tile holds the exact int8 values, so one
// chain per K scale block gives the block's exact integer sum (fp16 products of integers are
// exact, and so are their fp32 sums), scaled as the decode kernel scales it:
// s += isum_b · qd_b · kd_b (qd = 1 in the fp16-Q mode; in the int8 mode qd includes the
// softmax scale). Two accumulators: block b + 1 is on the tensor cores while block b is scaled.
// issued() runs once the last chain is on the tensor cores (the ping-pong hand-over).
template <class L, QKMode QK, int kBlk, class Issued>
PACKFA_DEV void qk_blocked(uint64_t qd0, uint64_t kd0, const float* ksf, const QdRows<L>& qd_rows, int lane,
                           float (&sv)[L::kN / 2], Issued&& issued) {
  constexpr int kN = L::kN, kSteps = kBlk / 16, kNb = L::kD / kBlk;
  constexpr int kAcc = L::kD <= 128 && kNb > 1 ? 2 : 1;  // D 256: one accumulator (the register file is full)
  float acc[kAcc][kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) sv[i] = 0.0f;
#pragma unroll
  for (int c = 0; c < kAcc; ++c) qk_chain<L, kSteps>(qd0, kd0, c * kSteps, acc[c]);
  if constexpr (kNb <= kAcc) issued();
#pragma unroll
  for (int b = 0; b < kNb; ++b) {
    // the block's scales are read before the wait (it clobbers memory, so the compiler keeps
    // loads after it): their latency then runs under the chain (decision "prefill-scales-early")
    float qd[2] = {1.0f, 1.0f};
    float2 kd[kN / 8];
    auto load_kd = [&] {
      if constexpr (QK == QKMode::packed16_int8) qd[0] = qd_rows.at(0, b * kBlk / 32), qd[1] = qd_rows.at(1, b * kBlk / 32);
      if constexpr (L::kKs128) {  // this lane's keys 8j + 2t + {0, 1}: kN / 16 words (decision "prefill-ks128")
        const float4* w = reinterpret_cast<const float4*>(ksf + b * L::kKsBlk + (lane % 4) * L::kKsP);
#pragma unroll
        for (int q = 0; q < kN / 16; ++q) {
          const float4 v = w[q];
          kd[2 * q] = make_float2(v.x, v.y), kd[2 * q + 1] = make_float2(v.z, v.w);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kN / 8; ++j) kd[j] = *reinterpret_cast<const float2*>(ksf + b * kN + 8 * j + 2 * (lane % 4));
      }
    };
    constexpr bool kEarly = PACKFA_PREFILL_SCALES_EARLY != 0;
    if constexpr (kEarly) load_kd();
    if (b + 1 < kNb && kAcc == 2) wgmma::wait<1>();  // chain b done, b + 1 may run
    else wgmma::wait<0>();
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) hold(acc[b % kAcc][i]);
    if constexpr (!kEarly) load_kd();
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        sv[4 * j + 2 * k] = fmaf(acc[b % kAcc][4 * j + 2 * k], kd[j].x * qd[k], sv[4 * j + 2 * k]);
        sv[4 * j + 2 * k + 1] = fmaf(acc[b % kAcc][4 * j + 2 * k + 1], kd[j].y * qd[k], sv[4 * j + 2 * k + 1]);
      }
    }
    if (b + kAcc < kNb) {
      qk_chain<L, kSteps>(qd0, kd0, (b + kAcc) * kSteps, acc[b % kAcc]);
      if (b + kAcc == kNb - 1) issued();
    }
  }
}

}  // namespace packfa::device::prefill
