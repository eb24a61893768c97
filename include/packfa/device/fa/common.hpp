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
#endif

}  // namespace packfa::device
