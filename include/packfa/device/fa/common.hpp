// packfa/device/fa/common.hpp — small device helpers every kernel may include: log2 / ln
// constants, -inf, and loads / stores of the runtime-typed tensors (f32, f16, bf16). The
// attention stages, the combine kernels and pack-on-write use these; nothing here depends on
// the attention kernel.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/format.hpp"

namespace packfa::device {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kNegInf = -__builtin_huge_valf();

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
// Element idx of a tensor of runtime DType `type` (f32, f16, else bf16), as fp32.
PACKFA_DEV float load_as_float(const void* base, int type, int64_t idx) {
  switch (type) {
    case static_cast<int>(DType::f32): return static_cast<const float*>(base)[idx];
    case static_cast<int>(DType::f16): return arch::half_to_float(static_cast<const uint16_t*>(base)[idx]);
    default: return arch::bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
  }
}
// fp32 v into element idx of a tensor of runtime DType `type` (round to nearest even).
PACKFA_DEV void store_from_float(void* base, int type, int64_t idx, float v) {
  switch (type) {
    case static_cast<int>(DType::f32): static_cast<float*>(base)[idx] = v; break;
    case static_cast<int>(DType::f16): static_cast<uint16_t*>(base)[idx] = arch::float_to_half(v); break;
    default: static_cast<uint16_t*>(base)[idx] = arch::float_to_bf16(v); break;
  }
}
// The same with the type a compile-time DType value, for loops over many elements: they choose
// the type once outside (with_dtype). A runtime switch per element of an unrolled loop lays the
// three types' code out interleaved, so the one path a call runs jumps over the others at every
// element and misses the instruction cache (decision "prefill-epilogue-one-path", docs/prefill.md).
template <int kType>
PACKFA_DEV float load_typed(const void* base, int64_t idx) {
  if constexpr (kType == static_cast<int>(DType::f32)) return static_cast<const float*>(base)[idx];
  else if constexpr (kType == static_cast<int>(DType::f16)) return arch::half_to_float(static_cast<const uint16_t*>(base)[idx]);
  else return arch::bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
}
template <int kType>
PACKFA_DEV void store_typed(void* base, int64_t idx, float v) {
  if constexpr (kType == static_cast<int>(DType::f32)) static_cast<float*>(base)[idx] = v;
  else if constexpr (kType == static_cast<int>(DType::f16)) static_cast<uint16_t*>(base)[idx] = arch::float_to_half(v);
  else static_cast<uint16_t*>(base)[idx] = arch::float_to_bf16(v);
}
template <int kType>
struct DTypeTag {
  static constexpr int value = kType;
};
// f(DTypeTag<type>{}) for the runtime DType `type` (f32, f16, else bf16, as load_as_float).
template <class F>
PACKFA_DEV void with_dtype(int type, F&& f) {
  if (type == static_cast<int>(DType::f16)) f(DTypeTag<static_cast<int>(DType::f16)>{});
  else if (type == static_cast<int>(DType::f32)) f(DTypeTag<static_cast<int>(DType::f32)>{});
  else f(DTypeTag<static_cast<int>(DType::bf16)>{});
}
#endif

}  // namespace packfa::device
