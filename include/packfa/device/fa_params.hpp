// packfa/device/fa_params.hpp — what the attention kernels receive: one struct, by value.
//
// The dispatcher (src/dispatch.cu) fills it from the public AttnParams after validation;
// everything the kernels need is resolved here once (GQA ratio, row groups, split count,
// ALiBi constants, copy widths), so kernels carry no policy.
#pragma once

#include <cstdint>

namespace packfa {

// Which Q·K inner loop a kernel instance runs (a compile-time parameter).
enum class QKMode : int {
  packed16_int8 = 0,  // int8 Q × int8 K on the 4-way dot, per-block fp32 scaling
  packed16_f16 = 1,   // fp16-rounded Q × int8 K in fp32, per-block K scale
  f16 = 2,            // fp16-rounded Q × fp16 K (the in-house baseline / plain f16 caches)
};

// The split kernel runs on a grid of (n_kv_heads, num_splits, batch * row_groups) blocks.
struct FaKernelParams {
  static constexpr bool pdl_aware = true;  // launched through packfa::launch with PDL

  // geometry
  int batch, nq, n_q_heads, n_kv_heads, head_dim;
  int gqa;          // n_q_heads / n_kv_heads
  int rows;         // gqa * nq query rows share one KV head
  int row_groups;   // ceil(rows / rows_per_block)
  int num_splits;   // split-KV count (1: the split kernel writes the final output)
  int split_len;    // keys per split, a multiple of 32 (>= 32)
  int share_len;    // 1: a group of at most a quarter of the plan's keys spreads them over every split (rows.hpp)

  // Q [b][i][h][d], element strides
  const void* q;
  int q_type;       // DType
  int64_t q_seq, q_row, q_head;
  int q_vec;        // 1: 16-byte aligned rows (the pointer and every stride), Q loads of 8 dims

  // K: packed16 payload (+ scales) or fp16 rows; byte strides
  const char* k;
  int64_t k_seq, k_slot, k_head;
  const char* ks;
  int64_t ks_seq, ks_slot, ks_head;
  int k_block;      // 16 or 32 (packed16)
  int ks_width;     // copy width for the scale plane (2, 4, 8 or 16 bytes)
  const float* smooth;  // [n_kv_heads][head_dim] or null

  // V rows, byte strides
  const char* v;
  int64_t v_seq, v_slot, v_head;
  int v_width;      // copy width for V rows
  const char* vs;   // q8_0_planar: fp16 scale plane (else unused)
  int64_t vs_seq, vs_slot, vs_head;
  int vs_width;     // copy width for the V scale plane

  // output
  void* o;
  int o_type;
  int64_t o_seq, o_row, o_head;
  float* lse;

  const int32_t* kv_len;
  const int32_t* q_pos;

  float scale;      // softmax scale
  float softcap;    // 0 = off
  int causal;
  int window;       // 0 = off
  const uint16_t* mask;
  int64_t mask_seq, mask_row;
  const float* sinks;
  int alibi_n2;     // 0 = ALiBi off; else 2^floor(log2(n_q_heads))
  float alibi_m0, alibi_m1;

  // split partials: [b][i][h][split][head_dim] unnormalised O, and [..][split][2] (max, sum)
  float* part_o;
  float* part_ml;
  // Work moving between splits (device/chunk_source.hpp): [b·row_groups + rg][kv_head][split]
  // counters, kClaimStride apart, zeroed in the stream before the kernel (the dispatcher), or
  // null: static splits. Chunks 0 .. pool0 - 1 of each split stay with its own block.
  unsigned* claims;
  int pool0;

  // Paged caches (device/kv_view.hpp): page_size 0 = contiguous, else a power of two >= 16;
  // then k_seq, ks_seq, v_seq, vs_seq are the byte strides between pages.
  const int32_t* block_table;  // [batch][table_stride] page ids
  int64_t table_stride;
  int page_size, num_pages;
  int max_kv_len;   // device lengths are clamped to [0, max_kv_len]
  int* errors;      // out-of-contract counters (api.hpp ErrorCounter) or null
  int64_t mask_head;  // elements between q heads' masks (0: shared)
  int alibi_pos;    // 1: ALiBi as slope · (j - pos) (AlibiMode::position); ggml mode scales the mask

  unsigned long long* trace;  // per-block timeline (builds with PACKFA_TRACE; else unused, null)
};

struct CombineParams {
  static constexpr bool pdl_aware = true;
  int batch, nq, n_q_heads, head_dim, num_splits;
  const float* part_o;
  const float* part_ml;
  const float* sinks;
  void* o;
  int o_type;
  int64_t o_seq, o_row, o_head;
  float* lse;
  unsigned long long* trace;  // as FaKernelParams::trace
};

}  // namespace packfa
