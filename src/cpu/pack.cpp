// Host packing: K -> packed16, V -> q8_0 / q4_0 / f16 / bf16 (docs/format.md).
#include "packfa/pack.hpp"

#include <vector>

namespace packfa {
namespace {

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool valid_vformat(VFormat f) {
  return f == VFormat::f16 || f == VFormat::bf16 || f == VFormat::q8_0 || f == VFormat::q4_0 ||
         f == VFormat::q8_0_planar;
}

bool valid_page_size(int s) { return s == 0 || s == 16 || s == 32 || s == 64 || s == 128 || s == 256; }

Status check_slot_fields(int page_size, int64_t n_slots) {
  if (!valid_page_size(page_size)) return invalid("page_size", "must be 0, 16, 32, 64, 128 or 256 (" + std::to_string(page_size) + ")");
  if (n_slots < 0) return invalid("n_slots", "must be >= 0 (" + std::to_string(n_slots) + ")");
  return Status::Ok();
}

// Byte offset of a slot's row (head 0) in a destination plane, as the pack kernels address it:
// flat slot * stride.slot, or paged (vLLM's slot_mapping) page * stride.seq + offset *
// stride.slot. False: the token is skipped (slot < 0, or slot >= n_slots when n_slots is set).
bool slot_offset(int64_t slot, int page_size, int64_t n_slots, const Strides& s, int64_t* off) {
  if (slot < 0 || (n_slots > 0 && slot >= n_slots)) return false;
  *off = page_size > 0 ? (slot / page_size) * s.seq + (slot % page_size) * s.slot : slot * s.slot;
  return true;
}

Status check_strides(const char* name, const Strides& s) {
  if (s.seq < 0) return invalid(std::string(name) + ".seq", "must be >= 0");
  if (s.slot < 0) return invalid(std::string(name) + ".slot", "must be >= 0");
  if (s.head < 0) return invalid(std::string(name) + ".head", "must be >= 0");
  return Status::Ok();
}

template <class T>
void unpack_row_impl(const int8_t* q, const uint16_t* sc, int d, int block, T* out) {
  for (int c = 0; c < d; ++c) out[c] = static_cast<T>(q[c]) * static_cast<T>(fp16_to_float(sc[c / block]));
}

template <class T>
Status unpack_k_impl(const KCache& k, int head_dim, int64_t seq, int64_t slot, int head, T* out) {
  if (head_dim <= 0) return invalid("head_dim", "must be > 0");
  if (!k.data) return invalid("k.data", "is null");
  if (!out) return invalid("out", "is null");
  const char* row = static_cast<const char*>(k.data) + seq * k.data_strides.seq + slot * k.data_strides.slot +
                    head * k.data_strides.head;
  if (k.format == KFormat::f16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
    for (int c = 0; c < head_dim; ++c) out[c] = static_cast<T>(fp16_to_float(h[c]));
    return Status::Ok();
  }
  if (k.format != KFormat::packed16) return invalid("k.format", "unknown format");
  if (!k.scales) return invalid("k.scales", "is null");
  if (k.block != 16 && k.block != 32) return invalid("k.block", "must be 16 or 32");
  if (head_dim % k.block) return invalid("head_dim", "must be a multiple of k.block");
  const uint16_t* sc = reinterpret_cast<const uint16_t*>(static_cast<const char*>(k.scales) +
                                                         seq * k.scale_strides.seq +
                                                         slot * k.scale_strides.slot + head * k.scale_strides.head);
  unpack_row_impl(reinterpret_cast<const int8_t*>(row), sc, head_dim, k.block, out);
  return Status::Ok();
}

template <class T>
void dequant_v_impl(VFormat f, const void* row, const void* scale_row, int d, T* out) {
  const uint8_t* b = static_cast<const uint8_t*>(row);
  switch (f) {
    case VFormat::q8_0_planar: {
      const uint16_t* sc = static_cast<const uint16_t*>(scale_row);
      for (int c = 0; c < d; ++c)
        out[c] = static_cast<T>(fp16_to_float(sc[c / 32]) * static_cast<float>(reinterpret_cast<const int8_t*>(b)[c]));
      return;
    }
    case VFormat::f16:
      for (int c = 0; c < d; ++c) out[c] = static_cast<T>(fp16_to_float(static_cast<const uint16_t*>(row)[c]));
      return;
    case VFormat::bf16:
      for (int c = 0; c < d; ++c) out[c] = static_cast<T>(bf16_to_float(static_cast<const uint16_t*>(row)[c]));
      return;
    case VFormat::q8_0:
      for (int c = 0; c < d; ++c) out[c] = static_cast<T>(q8_0_value(b + (c / 32) * kQ8_0BlockBytes, c % 32));
      return;
    case VFormat::q4_0:
      for (int c = 0; c < d; ++c) out[c] = static_cast<T>(q4_0_value(b + (c / 32) * kQ4_0BlockBytes, c % 32));
      return;
  }
}

}  // namespace

Status pack_k_host(const PackKParams& p, PackStats* stats) {
  if (p.n_tokens < 0) return invalid("n_tokens", "must be >= 0");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (p.head_dim < 1) return invalid("head_dim", "must be >= 1");
  if (!valid_dtype(p.src_type)) return invalid("src_type", "unknown dtype");
  if (p.dst.format != KFormat::packed16) return invalid("dst.format", "must be packed16");
  if (p.dst.block != 16 && p.dst.block != 32) return invalid("dst.block", "must be 16 or 32");
  if (p.head_dim % p.dst.block) return invalid("head_dim", "must be a multiple of dst.block");
  if (p.src_token_stride < 0) return invalid("src_token_stride", "must be >= 0");
  if (p.src_head_stride < 0) return invalid("src_head_stride", "must be >= 0");
  PACKFA_TRY(check_strides("dst.data_strides", p.dst.data_strides));
  PACKFA_TRY(check_strides("dst.scale_strides", p.dst.scale_strides));
  if (p.base_slot < 0) return invalid("base_slot", "must be >= 0");
  PACKFA_TRY(check_slot_fields(p.page_size, p.n_slots));
  if (p.n_tokens == 0) return Status::Ok();
  if (!p.src) return invalid("src", "is null");
  if (!p.dst.data) return invalid("dst.data", "is null");
  if (!p.dst.scales) return invalid("dst.scales", "is null");

  const int d = p.head_dim, B = p.dst.block;
  std::vector<float> x(d);
  PackStats total;
  for (int t = 0; t < p.n_tokens; ++t) {
    const int64_t slot = p.slots ? p.slots[t] : p.base_slot + t;
    int64_t pay_off = 0, sc_off = 0;
    if (!slot_offset(slot, p.page_size, p.n_slots, p.dst.data_strides, &pay_off)) continue;  // skipped token
    slot_offset(slot, p.page_size, p.n_slots, p.dst.scale_strides, &sc_off);
    for (int g = 0; g < p.n_kv_heads; ++g) {
      const int64_t base = t * p.src_token_stride + g * p.src_head_stride;
      const float* m = p.smooth_shift ? p.smooth_shift + static_cast<int64_t>(g) * d : nullptr;
      const float* s = p.dst.smooth_scale ? p.dst.smooth_scale + static_cast<int64_t>(g) * d : nullptr;
      for (int c = 0; c < d; ++c) {
        float v = load_as_float(p.src_type, p.src, base + c);
        if (m) v = v - m[c];
        if (s) v = v / s[c];
        x[c] = v;
      }
      int8_t* q = static_cast<int8_t*>(const_cast<void*>(p.dst.data)) + pay_off + g * p.dst.data_strides.head;
      uint16_t* sc = reinterpret_cast<uint16_t*>(static_cast<char*>(const_cast<void*>(p.dst.scales)) + sc_off +
                                                 g * p.dst.scale_strides.head);
      for (int b = 0; b < d / B; ++b) {
        Packed16BlockStats st;
        sc[b] = packed16_quantize_block(x.data() + b * B, B, q + b * B, &st);
        total.nonfinite += st.nonfinite;
        total.overflow += st.overflow;
      }
    }
  }
  if (stats) {
    stats->nonfinite += total.nonfinite;
    stats->overflow += total.overflow;
  }
  return Status::Ok();
}

void unpack_k_row(const int8_t* payload, const uint16_t* scales, int head_dim, int block, float* out) {
  unpack_row_impl(payload, scales, head_dim, block, out);
}
void unpack_k_row(const int8_t* payload, const uint16_t* scales, int head_dim, int block, double* out) {
  unpack_row_impl(payload, scales, head_dim, block, out);
}
Status unpack_k_host(const KCache& k, int head_dim, int64_t seq, int64_t slot, int head, float* out) {
  return unpack_k_impl(k, head_dim, seq, slot, head, out);
}
Status unpack_k_host(const KCache& k, int head_dim, int64_t seq, int64_t slot, int head, double* out) {
  return unpack_k_impl(k, head_dim, seq, slot, head, out);
}
void unsmooth_k_row(const double* x, const float* shift, const float* scale, int head_dim, double* k) {
  for (int c = 0; c < head_dim; ++c) {
    double v = x[c];
    if (scale) v *= static_cast<double>(scale[c]);
    if (shift) v += static_cast<double>(shift[c]);
    k[c] = v;
  }
}

Status quantize_v_host(const QuantVParams& p) {
  if (p.n_tokens < 0) return invalid("n_tokens", "must be >= 0");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (p.head_dim < 1) return invalid("head_dim", "must be >= 1");
  if (!valid_dtype(p.src_type)) return invalid("src_type", "unknown dtype");
  if (!valid_vformat(p.dst.format)) return invalid("dst.format", "unknown format");
  const bool planar = p.dst.format == VFormat::q8_0_planar;
  if (v_is_blocked(p.dst.format) && p.head_dim % kGgmlBlock)
    return invalid("head_dim", "q8_0/q4_0/q8_0_planar need a multiple of 32");
  if (p.src_token_stride < 0) return invalid("src_token_stride", "must be >= 0");
  if (p.src_head_stride < 0) return invalid("src_head_stride", "must be >= 0");
  PACKFA_TRY(check_strides("dst.strides", p.dst.strides));
  if (planar) PACKFA_TRY(check_strides("dst.scale_strides", p.dst.scale_strides));
  if (p.base_slot < 0) return invalid("base_slot", "must be >= 0");
  PACKFA_TRY(check_slot_fields(p.page_size, p.n_slots));
  if (p.n_tokens == 0) return Status::Ok();
  if (!p.src) return invalid("src", "is null");
  if (!p.dst.data) return invalid("dst.data", "is null");
  if (planar && !p.dst.scales) return invalid("dst.scales", "is null");

  const int d = p.head_dim;
  std::vector<float> x(d);
  for (int t = 0; t < p.n_tokens; ++t) {
    const int64_t slot = p.slots ? p.slots[t] : p.base_slot + t;
    int64_t row_off = 0, sc_off = 0;
    if (!slot_offset(slot, p.page_size, p.n_slots, p.dst.strides, &row_off)) continue;  // skipped token
    if (planar) slot_offset(slot, p.page_size, p.n_slots, p.dst.scale_strides, &sc_off);
    for (int g = 0; g < p.n_kv_heads; ++g) {
      const int64_t base = t * p.src_token_stride + g * p.src_head_stride;
      for (int c = 0; c < d; ++c) x[c] = load_as_float(p.src_type, p.src, base + c);
      uint8_t* row = static_cast<uint8_t*>(const_cast<void*>(p.dst.data)) + row_off + g * p.dst.strides.head;
      switch (p.dst.format) {
        case VFormat::f16:
          for (int c = 0; c < d; ++c) reinterpret_cast<uint16_t*>(row)[c] = fp16_from_float(x[c]);
          break;
        case VFormat::bf16:
          for (int c = 0; c < d; ++c) reinterpret_cast<uint16_t*>(row)[c] = bf16_from_float(x[c]);
          break;
        case VFormat::q8_0:
          for (int b = 0; b < d / 32; ++b) q8_0_quantize_block(x.data() + 32 * b, row + b * kQ8_0BlockBytes);
          break;
        case VFormat::q4_0:
          for (int b = 0; b < d / 32; ++b) q4_0_quantize_block(x.data() + 32 * b, row + b * kQ4_0BlockBytes);
          break;
        case VFormat::q8_0_planar: {
          uint16_t* sc = reinterpret_cast<uint16_t*>(static_cast<char*>(const_cast<void*>(p.dst.scales)) + sc_off +
                                                     g * p.dst.scale_strides.head);
          for (int b = 0; b < d / 32; ++b)
            q8_0_planar_quantize_block(x.data() + 32 * b, reinterpret_cast<int8_t*>(row) + 32 * b, sc + b);
          break;
        }
      }
    }
  }
  return Status::Ok();
}

void dequantize_v_row(VFormat f, const void* row, const void* scale_row, int head_dim, float* out) {
  dequant_v_impl(f, row, scale_row, head_dim, out);
}
void dequantize_v_row(VFormat f, const void* row, const void* scale_row, int head_dim, double* out) {
  dequant_v_impl(f, row, scale_row, head_dim, out);
}

}  // namespace packfa
