// packfa::validate(const AttnParams&): every field the kernels rely on (api.hpp).
// Pointers are only checked for null and alignment, never dereferenced (they are device
// pointers). The first bad field is named in the Status message ("field: why").
#include <cmath>
#include <cstdint>

#include "packfa/api.hpp"

namespace packfa {
namespace {

bool aligned(const void* ptr, int64_t a) { return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(a) == 0; }

Status check_strides(const std::string& name, const Strides& s, int64_t multiple) {
  const int64_t v[3] = {s.seq, s.slot, s.head};
  const char* n[3] = {".seq", ".slot", ".head"};
  for (int i = 0; i < 3; ++i) {
    if (v[i] < 0) return invalid(name + n[i], "must be >= 0");
    if (v[i] % multiple) return invalid(name + n[i], "must be a multiple of " + std::to_string(multiple) + " bytes");
  }
  return Status::Ok();
}

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace

Status validate(const AttnParams& p) {
  if (p.batch < 1) return invalid("batch", "must be >= 1");
  if (p.nq < 1) return invalid("nq", "must be >= 1");
  const int d = p.head_dim;
  if (d != 64 && d != 80 && d != 96 && d != 112 && d != 128 && d != 256)
    return invalid("head_dim", "must be one of 64, 80, 96, 112, 128, 256");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (p.n_q_heads < 1) return invalid("n_q_heads", "must be >= 1");
  if (p.n_q_heads % p.n_kv_heads) return invalid("n_q_heads", "must be a multiple of n_kv_heads");
  if (p.max_kv_len < 1) return invalid("max_kv_len", "must be >= 1");

  // Q / O
  if (!p.q.data) return invalid("q.data", "is null");
  if (!valid_dtype(p.q.type)) return invalid("q.type", "unknown dtype");
  if (p.q.seq_stride < 0) return invalid("q.seq_stride", "must be >= 0");
  if (p.q.row_stride < 0) return invalid("q.row_stride", "must be >= 0");
  if (p.q.head_stride < 0) return invalid("q.head_stride", "must be >= 0");
  if (!p.o.data) return invalid("o.data", "is null");
  if (!valid_dtype(p.o.type)) return invalid("o.type", "unknown dtype");
  if (p.o.seq_stride < 0) return invalid("o.seq_stride", "must be >= 0");
  if (p.o.row_stride < 0) return invalid("o.row_stride", "must be >= 0");
  if (p.o.head_stride < 0) return invalid("o.head_stride", "must be >= 0");

  // K
  if (!p.k.data) return invalid("k.data", "is null");
  if (p.k.format == KFormat::packed16) {
    if (!p.k.scales) return invalid("k.scales", "is null");
    if (p.k.block != 16 && p.k.block != 32) return invalid("k.block", "must be 16 or 32");
    if (d % p.k.block) return invalid("k.block", "head_dim must be a multiple of k.block (use 16 for D = 80, 112)");
    if (!aligned(p.k.data, kPacked16Align)) return invalid("k.data", "must be 16-byte aligned");
    PACKFA_TRY(check_strides("k.data_strides", p.k.data_strides, kPacked16Align));
    if (!aligned(p.k.scales, 2)) return invalid("k.scales", "must be 2-byte aligned");
    PACKFA_TRY(check_strides("k.scale_strides", p.k.scale_strides, 2));
  } else if (p.k.format == KFormat::f16) {
    // The dot mode is ignored for f16 K: it always runs the fp16 dot.
    if (p.k.smooth_scale) return invalid("k.smooth_scale", "smoothing applies to packed16 K only");
    if (!aligned(p.k.data, 16)) return invalid("k.data", "must be 16-byte aligned");
    PACKFA_TRY(check_strides("k.data_strides", p.k.data_strides, 16));
  } else {
    return invalid("k.format", "unknown format");
  }
  if (p.dot != DotMode::int8 && p.dot != DotMode::f16) return invalid("dot", "unknown dot mode");

  // V
  if (!p.v.data) return invalid("v.data", "is null");
  switch (p.v.format) {
    case VFormat::q8_0:
    case VFormat::q4_0:
      if (d % kGgmlBlock) return invalid("v.format", "q8_0/q4_0 need head_dim % 32 == 0");
      if (!aligned(p.v.data, 2)) return invalid("v.data", "must be 2-byte aligned");
      PACKFA_TRY(check_strides("v.strides", p.v.strides, 2));
      break;
    case VFormat::f16:
    case VFormat::bf16:
      if (!aligned(p.v.data, 16)) return invalid("v.data", "must be 16-byte aligned");
      PACKFA_TRY(check_strides("v.strides", p.v.strides, 16));
      break;
    case VFormat::q8_0_planar:
      if (d % kGgmlBlock) return invalid("v.format", "q8_0_planar needs head_dim % 32 == 0");
      if (!aligned(p.v.data, 16)) return invalid("v.data", "must be 16-byte aligned");
      PACKFA_TRY(check_strides("v.strides", p.v.strides, 16));
      if (!p.v.scales) return invalid("v.scales", "is null (q8_0_planar keeps its block scales there)");
      if (!aligned(p.v.scales, 2)) return invalid("v.scales", "must be 2-byte aligned");
      PACKFA_TRY(check_strides("v.scale_strides", p.v.scale_strides, 2));
      break;
    default: return invalid("v.format", "unknown format");
  }

  if (!p.kv_len) return invalid("kv_len", "is null");
  if (p.mask) {
    if (p.mask_seq_stride < 0) return invalid("mask_seq_stride", "must be >= 0");
    if (p.mask_row_stride < 0) return invalid("mask_row_stride", "must be >= 0");
  }
  if (p.window < 0) return invalid("window", "must be >= 0");
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) return invalid("softcap", "must be finite and >= 0");
  if (!(p.scale >= 0.0f) || !std::isfinite(p.scale)) return invalid("scale", "must be finite and >= 0");
  if (!(p.alibi_max_bias >= 0.0f) || !std::isfinite(p.alibi_max_bias))
    return invalid("alibi_max_bias", "must be finite and >= 0");
  if (p.num_splits < 0) return invalid("num_splits", "must be >= 0");
  if (p.workspace_bytes > 0 && !p.workspace) return invalid("workspace", "is null but workspace_bytes > 0");
  if (p.pdl < -1 || p.pdl > 1) return invalid("pdl", "must be -1, 0 or 1");
  return Status::Ok();
}

// ---- pack-on-write ---------------------------------------------------------------------
namespace {
bool valid_head_dim(int d) { return d == 64 || d == 80 || d == 96 || d == 112 || d == 128 || d == 256; }
Status check_src(DType t, const void* src, const char* field) {
  if (!src) return invalid(field, "null");
  if (!valid_dtype(t)) return invalid("src_type", "unknown dtype");
  return Status::Ok();
}
bool rows_aligned(const void* base, const Strides& s, uintptr_t a) {
  return ((reinterpret_cast<uintptr_t>(base) | static_cast<uintptr_t>(s.slot) | static_cast<uintptr_t>(s.head)) & (a - 1)) == 0;
}
}  // namespace

Status validate(const PackKParams& p) {
  if (p.n_tokens < 0) return invalid("n_tokens", "negative");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (!valid_head_dim(p.head_dim)) return invalid("head_dim", "must be one of 64, 80, 96, 112, 128, 256");
  PACKFA_TRY(check_src(p.src_type, p.src, "src"));
  if (p.dst.format != KFormat::packed16) return invalid("dst.format", "must be packed16");
  if (p.dst.block != 16 && p.dst.block != 32) return invalid("dst.block", "must be 16 or 32");
  if (p.head_dim % p.dst.block) return invalid("dst.block", "must divide head_dim");
  if (!p.dst.data) return invalid("dst.data", "null");
  if (!p.dst.scales) return invalid("dst.scales", "null");
  if (!rows_aligned(p.dst.data, p.dst.data_strides, 16))
    return invalid("dst.data_strides", "payload rows must start 16-byte aligned");
  if (!rows_aligned(p.dst.scales, p.dst.scale_strides, 2))
    return invalid("dst.scale_strides", "scale rows must be 2-byte aligned");
  if (p.base_slot < 0) return invalid("base_slot", "negative");
  return Status::Ok();
}

Status validate(const QuantVParams& p) {
  if (p.n_tokens < 0) return invalid("n_tokens", "negative");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (!valid_head_dim(p.head_dim)) return invalid("head_dim", "must be one of 64, 80, 96, 112, 128, 256");
  PACKFA_TRY(check_src(p.src_type, p.src, "src"));
  if (!p.dst.data) return invalid("dst.data", "null");
  if (static_cast<int>(p.dst.format) >= kNumVFormats) return invalid("dst.format", "unknown V format");
  if (v_is_blocked(p.dst.format) && p.head_dim % 32)
    return invalid("head_dim", "q8_0/q4_0/q8_0_planar need a multiple of 32");
  const bool planar = p.dst.format == VFormat::q8_0_planar;
  if (!rows_aligned(p.dst.data, p.dst.strides, planar ? 16 : 2))
    return invalid("dst.strides", planar ? "q8_0_planar rows must be 16-byte aligned" : "rows must be 2-byte aligned");
  if (planar && !p.dst.scales) return invalid("dst.scales", "null (q8_0_planar keeps its block scales there)");
  if (planar && !rows_aligned(p.dst.scales, p.dst.scale_strides, 2))
    return invalid("dst.scale_strides", "scale rows must be 2-byte aligned");
  if (p.base_slot < 0) return invalid("base_slot", "negative");
  return Status::Ok();
}

}  // namespace packfa
