// packfa/device/fa_layout.hpp — shared-memory layout of the attention split kernel, as plain
// constexpr arithmetic (no device code), so host tools can print it for any backend
// (docs/rdna.md takes its LDS column from here: the kernel's LDS is dynamic).
#pragma once

#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"

namespace packfa {

constexpr int kFaChunk = 32;  // keys per wave iteration (lane = key in Q·K)
constexpr int kFaChunkStateBytes = 32;  // per wave: device/chunk_source.hpp's ChunkGroup

// Chunks each split of a (sequence, KV head) group owns when the group holds `chunks` 32-key
// chunks: the plan's split_len / 32, or with `share` (decision "splits-share-short-lengths",
// fa/rows.hpp) ceil(chunks / splits), at least 1, while the group holds at most a quarter of the
// plan's chunks (splits x split_len / 32). Plain arithmetic: the kernel and the CPU test call it.
constexpr int fa_split_chunks(int chunks, int split_len, int splits, bool share) {
  const int plan = split_len / kFaChunk;
  if (share && 4 * static_cast<int64_t>(chunks) <= static_cast<int64_t>(plan) * splits) {
    const int even = (chunks + splits - 1) / splits;
    return even > 1 ? even : 1;
  }
  return plan;
}

struct FaBudget {
  int stages;      // most stages per wave: 2 = cp.async double buffer (NVIDIA); 1 (RDNA: synchronous copies)
  int smem_limit;  // bytes of shared memory / LDS one block may use
};
constexpr FaBudget kFaCudaBudget{2, 227 * 1024};
constexpr FaBudget kFaHipBudget{1, 64 * 1024};  // RDNA: 64 KB of LDS per workgroup

struct FaLayout {
  int stages, dpl, k_row_bytes, k_pitch, scale_pitch, v_row_bytes, v_pitch, v_scale_pitch;
  int stage_bytes, p_pitch, p_bytes, wave_bytes, q_blocks, q_bytes, row_info_bytes;
  int waves, smem_bytes;
  bool fits;
};

constexpr FaLayout fa_layout(int D, VFormat vf, QKMode qk, int rmax, FaBudget budget) {
  FaLayout l{};
  // Two stages for packed16 K with D <= 128 (measured on the H200, bench/NOTES.md): the double
  // buffer wins there, while for D = 256 and f16 K the occupancy a single buffer allows wins.
  l.stages = (budget.stages >= 2 && D <= 128 && qk != QKMode::f16) ? 2 : 1;
  l.dpl = D <= 64 ? 2 : (D <= 128 ? 4 : 8);  // scalar P·V: dims per lane
  l.k_row_bytes = qk == QKMode::f16 ? 2 * D : D;
  // K rows read 16 bytes per lane (lane = key): 16 bytes of padding keep those reads
  // conflict-free. (An XOR swizzle without padding cost 6% more instructions on the H200 and
  // the saved shared memory bought no extra block per SM; bench/NOTES.md.)
  l.k_pitch = l.k_row_bytes + 16;
  l.scale_pitch = (D / 8 + 7) / 8 * 8;  // room for block 16 (2·D/16 bytes); 8-byte copies
  l.v_row_bytes = static_cast<int>(v_row_bytes(vf, D));
  // fp16/bf16 rows get 16 bytes of padding so ldmatrix row reads hit distinct banks.
  // q8_0_planar rows get 16 bytes too: the P·V word reads of 4 key rows then hit distinct banks.
  const bool wide_pad = vf == VFormat::f16 || vf == VFormat::bf16 || vf == VFormat::q8_0_planar;
  l.v_pitch = (l.v_row_bytes + 15) / 16 * 16 + (wide_pad ? 16 : 0);
  l.v_scale_pitch = vf == VFormat::q8_0_planar ? (D / 16 + 7) / 8 * 8 : 0;  // fp16 per 32 dims; 8-byte copies
  l.stage_bytes = kFaChunk * (l.k_pitch + (qk == QKMode::f16 ? 0 : l.scale_pitch) + l.v_pitch + l.v_scale_pitch);
  // P: [row][key] (tensor-core path; 16 rows get a 40-float pitch so the key-pair reads of 8
  // rows are conflict-free, 4 rows stay at 32: the smaller block still fits twice per SM), or
  // [key][row] (scalar path); then the per-row corrections and the chunk source's state.
  l.p_pitch = kFaChunk + (rmax > 4 ? 8 : 0);
  l.p_bytes = rmax * l.p_pitch * 4 + rmax * 4 + kFaChunkStateBytes;
  l.wave_bytes = l.stages * l.stage_bytes + l.p_bytes;
  l.q_blocks = (D + 31) / 32;
  l.q_bytes = qk == QKMode::packed16_int8 ? rmax * D + rmax * l.q_blocks * 4 : rmax * D * 4;
  l.row_info_bytes = rmax * 32;  // RowInfo
  auto smem_for = [&](int waves) {
    const int loop = waves * l.wave_bytes, merge = waves * rmax * (D + 2) * 4;
    return l.q_bytes + l.row_info_bytes + (loop > merge ? loop : merge);
  };
  // 4 waves (2 for D > 128), fewer when the budget is smaller. PACKFA_D256_WAVES4 (a build
  // option for A/B, not measured yet): the D = 256 int8 16-row class with 4 waves, 2 blocks of
  // 89 KB per H200 SM instead of 4 of 47 KB (the same 8 warps): half the blocks, so half the
  // splits, partials and Q set-ups for a sequence (16/2 heads, kv 32k: 256 splits of 128 keys).
#if defined(PACKFA_D256_WAVES4)
  const bool four = D <= 128 || (rmax == 16 && qk == QKMode::packed16_int8 && v_is_blocked(vf));  // f16 V: 1 block of 122 KB
#else
  const bool four = D <= 128;
#endif
  l.waves = (four && smem_for(4) <= budget.smem_limit) ? 4 : (smem_for(2) <= budget.smem_limit ? 2 : 1);
  l.smem_bytes = smem_for(l.waves);
  l.fits = l.smem_bytes <= budget.smem_limit;
  return l;
}

}  // namespace packfa
