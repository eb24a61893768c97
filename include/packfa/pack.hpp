// packfa/pack.hpp — host (CPU) packing: K rows -> packed16, V rows -> q8_0/q4_0/f16/bf16.
//
// These functions define the bits of the cache: the GPU pack kernels must produce the same
// bytes (they call the same block functions of format.hpp). Every pointer here is a HOST
// pointer. Element order of one stored row is the channel order 0..head_dim-1.
#pragma once

#include <cstdint>

#include "packfa/api.hpp"
#include "packfa/format.hpp"
#include "packfa/status.hpp"

namespace packfa {

// Counts of the deterministic fix-ups applied while packing (docs/format.md):
//   nonfinite: input values (after smoothing) that were NaN/±inf and were stored as q = 0;
//   overflow:  blocks whose amax/127 exceeded 65504 and whose scale was clamped to 65504.
struct PackStats {
  int64_t nonfinite = 0;
  int64_t overflow = 0;
};

// Pack p.n_tokens × p.n_kv_heads rows into the packed16 planes of p.dst.
// Token t, head g reads src[t*src_token_stride + g*src_head_stride + c] (elements of
// p.src_type) and writes the row of slot = slots ? slots[t] : base_slot + t at
//   payload: (int8_t*)dst.data   + slot*dst.data_strides.slot  + g*dst.data_strides.head
//   scales:  (char*)dst.scales   + slot*dst.scale_strides.slot + g*dst.scale_strides.head
// (dst.*.seq is not used: point dst at the sequence's first slot.) With p.page_size > 0 the
// slot is vLLM's slot_mapping: row at (slot / page_size) * dst.*.seq + (slot % page_size) *
// dst.*.slot (+ g * head). A slot < 0, or >= p.n_slots when that is set, skips the token.
// Per element: x = float(src); with smoothing x = (x - m[g][c]) / s[g][c] in fp32 in that
// order (m = p.smooth_shift, s = p.dst.smooth_scale; a null one is skipped); then each block
// of dst.block values goes through packed16_quantize_block. stats (optional) is added to.
Status pack_k_host(const PackKParams& p, PackStats* stats = nullptr);

// Dequantize one packed16 row: out[c] = q[c] * fp16_to_float(scales[c / block]).
// (With smoothing this is the smoothed-domain value (k - m) / s; see unsmooth_k_row.)
void unpack_k_row(const int8_t* payload, const uint16_t* scales, int head_dim, int block, float* out);
void unpack_k_row(const int8_t* payload, const uint16_t* scales, int head_dim, int block, double* out);
// Row (seq, slot, head) of a packed16 or f16 KCache (host pointers), dequantized.
Status unpack_k_host(const KCache& k, int head_dim, int64_t seq, int64_t slot, int head, float* out);
Status unpack_k_host(const KCache& k, int head_dim, int64_t seq, int64_t slot, int head, double* out);
// Undo smoothing of a dequantized row: k = x * s + m (s, m may be null).
void unsmooth_k_row(const double* x, const float* shift, const float* scale, int head_dim, double* k);

// Quantize/convert p.n_tokens × p.n_kv_heads V rows into p.dst (host pointers), same
// addressing as pack_k_host with dst.strides: q8_0/q4_0 rows are head_dim/32 ggml blocks
// (q8_0_quantize_block / q4_0_quantize_block); q8_0_planar splits the same bytes over
// dst.data (int8) and dst.scales (fp16, dst.scale_strides); f16/bf16 rows are converted
// copies (round to nearest even).
Status quantize_v_host(const QuantVParams& p);

// Dequantize one V row of head_dim values stored in format f (scale_row: the row of the
// scale plane for q8_0_planar, ignored otherwise).
void dequantize_v_row(VFormat f, const void* row, const void* scale_row, int head_dim, float* out);
void dequantize_v_row(VFormat f, const void* row, const void* scale_row, int head_dim, double* out);

// float(x) of one source element (f32 as is, f16/bf16 via format.hpp).
inline float load_as_float(DType t, const void* base, int64_t index) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[index];
    case DType::f16: return fp16_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
  }
  return 0.0f;
}

}  // namespace packfa
