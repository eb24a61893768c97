// packfa/device/pack_params.hpp — parameters of the pack-on-write kernels (device/pack.hpp).
#pragma once

#include <cstdint>

namespace packfa::device {

constexpr int kPackThreads = 128;

struct PackKKernelParams {
  static constexpr bool pdl_aware = true;
  int n_tokens, n_kv_heads, head_dim, block;
  int src_type;
  const void* src;
  int64_t src_token, src_head;  // elements
  char* payload;
  int64_t pay_slot, pay_head;   // bytes
  char* scales;
  int64_t sc_slot, sc_head;     // bytes
  const int32_t* slots;
  int64_t base_slot;
  const float* shift;           // m [n_kv_heads][D] or null
  const float* chan_scale;      // s [n_kv_heads][D] or null
  int* counters;                // [nonfinite, overflow] or null
};

struct QuantVKernelParams {
  static constexpr bool pdl_aware = true;
  int n_tokens, n_kv_heads, head_dim;
  int src_type;
  const void* src;
  int64_t src_token, src_head;  // elements
  int dst_format;               // VFormat
  char* dst;
  int64_t dst_slot, dst_head;   // bytes
  char* dst_scales;             // q8_0_planar: fp16 scale plane
  int64_t dscale_slot, dscale_head;  // bytes
  const int32_t* slots;
  int64_t base_slot;
};

}  // namespace packfa::device
