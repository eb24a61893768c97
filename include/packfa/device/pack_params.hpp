// packfa/device/pack_params.hpp — parameters of the pack-on-write kernels (device/pack.hpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define PACKFA_DEV_HOST_INLINE __host__ __device__ inline
#else
#define PACKFA_DEV_HOST_INLINE inline
#endif

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
  // paged cache (api.hpp): slot -> page slot / page_size, offset slot % page_size; 0 = flat
  int page_size;
  int64_t pay_page, sc_page;    // bytes between pages
  int64_t n_slots;              // capacity (0 = unchecked): slots < 0 or >= n_slots are skipped
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
  int page_size;                // as PackKKernelParams
  int64_t dst_page, dscale_page;
  int64_t n_slots;
};

// Byte offset of cache slot `slot` in a plane: flat (slot · slot_stride) or paged.
PACKFA_DEV_HOST_INLINE int64_t slot_offset(int64_t slot, int page_size, int64_t page_stride, int64_t slot_stride) {
  if (page_size <= 0) return slot * slot_stride;
  return (slot / page_size) * page_stride + (slot % page_size) * slot_stride;
}

}  // namespace packfa::device
