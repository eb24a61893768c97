// packfa/device/fa/traits.hpp — the attention split kernel's compile-time facts: the one place
// with per-backend tuning (which path, how many stages and waves, copy shapes, row guards).
// Every number here was chosen by measurement; the reason stands next to it.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_layout.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"

namespace packfa::device {

#if defined(PACKFA_NO_F16Q_MMA)
constexpr bool kF16qMma = false;
#else
constexpr bool kF16qMma = true;
#endif

template <int D, VFormat VF, QKMode QK, int RMAX>
struct FaTraits {
  static constexpr int kD = D;
  static constexpr VFormat kVF = VF;
  static constexpr QKMode kQK = QK;
  static constexpr int kRows = RMAX;  // query rows one block serves (RMAX)
#if defined(PACKFA_BACKEND_HIP)
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaHipBudget);
#else
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaCudaBudget);
#endif
  static constexpr int kStages = L.stages;
  // Decision "split-stage" (build option PACKFA_SPLIT_STAGE, off until the GPU tests have run
  // on it): one-stage instances on NVIDIA (D = 256, f16 K) copy the next chunk's K once this
  // chunk's scores are done and its V once the P·V is, so the copies overlap the chunk's work
  // instead of preceding it (H100, session 38, lean benches: D 256 16 / 2 heads kv 32k 32.3 ->
  // 30.1 us, kv 4k 12.7 -> 11.8; bench/NOTES.md). RDNA copies synchronously (through
  // registers): nothing to overlap there.
#if defined(PACKFA_SPLIT_STAGE) && !defined(PACKFA_BACKEND_HIP)
  static constexpr bool kSplitStage = L.stages == 1;
#else
  static constexpr bool kSplitStage = false;
#endif
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
  //    instructions (decode rows fill 4 of the 16 mma rows), and P reaches the P·V mma
  //    without a shared-memory round trip; D = 256 decode rows stay on the 4-way dot (on the
  //    mma they spill: 64 accumulator registers for the output alone);
  //  - f16 K (the in-house baseline, plain fp16 caches) for every row class, D <= 128: fp16
  //    products, fp32 sums, like the scalar path;
  //  - the fp16-Q mode, D <= 128 (qk_mma_f16q: K bytes as exact fp16 integers, fp32 block
  //    sums, the lane path's arithmetic; on the lane path it ran at half the int8 mode's speed).
  //    PACKFA_NO_F16Q_MMA (compile definition) keeps it on the lane path, for A/B builds.
  // RDNA runs the 4-way dot / fp32 dots with lane = key.
  static constexpr bool mma_qk_if(bool has_mma) {  // also asked by the host (KernelChoice::mma_qk)
    return has_mma && VF != VFormat::bf16 &&
           ((QK == QKMode::packed16_int8 && (D <= 128 || RMAX == 16)) || (QK == QKMode::f16 && D <= 128) ||
            (QK == QKMode::packed16_f16 && D <= 128 && kF16qMma));
  }
  static constexpr bool kMmaQk = mma_qk_if(arch::kHasMmaF16);
  static constexpr int kNt = (RMAX + 7) / 8;  // n-tiles of 8 query rows
  // Work moves between splits (claim counters, chunk_source.hpp) in the instances where that
  // measured faster on the H200: 4-row classes, D <= 128, V other than q4_0 (q4_0: 68 -> 72 us
  // at kv = 128k; the 16-row class and D = 256 lost 2-9%; bench/NOTES.md, "work moves between
  // splits"). The others compile the static loop alone. RDNA: static (no AMD measurement;
  // every VGPR counts there).
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
  // Q's block scales are loop-invariant: registers for the tensor-core rows g, g + 8 and, on
  // NVIDIA, for all rows of the 4-row class; RDNA reads them from shared memory (16 more VGPRs
  // moved the decode instances further from the 96-VGPR aim, docs/rdna.md).
#if defined(PACKFA_BACKEND_HIP)
  static constexpr bool kQsInRegs = false;
#else
  static constexpr bool kQsInRegs = RMAX <= 4;
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
  // The tensor-core Q·K holds one 16-row m-tile (MmaLoop: a lane's scores are rows g, g + 8).
  static_assert(!mma_qk_if(true) || RMAX <= 16, "tensor-core scores serve at most 16 rows a block");
};

// Lanes that share one row of a global -> shared copy of `pieces` copies (kv_stage.hpp). Rows
// of a power-of-two number of pieces get one lane per piece (up to 32): each wave request then
// reads whole 128-byte lines of a few rows; 4 lanes per row (8 rows' partial lines per request)
// cost about twice the L1 wavefronts per byte. Other rows (ggml q8_0: 17 pieces of 8 bytes)
// keep 4 lanes per row: with 16 the 17th piece needs a pass of its own, and the 16-row class
// lost 10% at kv = 128k (A/B on the H200). RDNA keeps 4 lanes per row everywhere: its copies
// go through registers, and whole-line rows raised the 4-row instances' VGPRs (q8_0_planar
// D = 128: 89 -> 109, docs/rdna.md) with no AMD measurement to pay for it.
constexpr int stage_lanes(int pieces) {
#if defined(PACKFA_BACKEND_HIP)
  return pieces < 4 ? pieces : 4;
#else
  int l = 1;
  while (l * 2 <= pieces && l * 2 <= 32) l *= 2;
  return (pieces & (pieces - 1)) == 0 ? l : (l < 4 ? l : 4);
#endif
}

}  // namespace packfa::device
