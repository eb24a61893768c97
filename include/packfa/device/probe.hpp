// packfa/device/probe.hpp — the portability probe: the smallest kernels that exercise
// packfa::arch on both vendors. They are what the ISA/PTX gates start from (the 4-way int8
// dot must become v_dot4_i32_iu8 on gfx11/gfx12 and dp4a in compute_90 PTX) and what the
// GPU probe test (tests/gpu/test_probe.cu) checks against a CPU computation.
//
// Instances: kernels/probe.cu (CUDA) and kernels/probe.hip (HIP) define the host entry
// points below by calling the inline launchers at the end of this file.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/status.hpp"

namespace packfa {

// out[i] = c[i] + Σ_k a[i].byte[k] * b[i].byte[k] (all bytes signed), i < n. Device pointers.
Status probe_dot4(const int* a, const int* b, const int* c, int* out, int n, void* stream);
// out[i] = Σ in[j] over the group of `width` consecutive lanes holding i (width ∈ {2,4,8,16,32});
// lanes past n contribute 0. Device pointers.
Status probe_group_sum(const float* in, float* out, int n, int width, void* stream);

}  // namespace packfa

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
#include <string>

namespace packfa::device {

constexpr int kProbeThreads = 256;

template <int kThreads>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kThreads, 1)
    dot4_probe(const int* PACKFA_RESTRICT a, const int* PACKFA_RESTRICT b, const int* PACKFA_RESTRICT c,
               int* PACKFA_RESTRICT out, int n) {
  const int i = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (i < n) out[i] = arch::dot4_i8(a[i], b[i], c[i]);
}

// Every lane takes part in the shuffles (no early exit before the reduction).
template <int kThreads, int width>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kThreads, 1)
    group_sum_probe(const float* PACKFA_RESTRICT in, float* PACKFA_RESTRICT out, int n) {
  const int i = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  float v = i < n ? in[i] : 0.0f;
  v = arch::group_sum<width>(v);
  if (i < n) out[i] = v;
}

// ---- host launchers (used by the instance files) ------------------------------------------
#if defined(PACKFA_BACKEND_CUDA)
using probe_stream_t = cudaStream_t;
inline Status probe_last_error(const char* what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::Ok() : Status(Code::device_error, std::string(what) + ": " + cudaGetErrorString(e));
}
#else
using probe_stream_t = hipStream_t;
inline Status probe_last_error(const char* what) {
  const hipError_t e = hipGetLastError();
  return e == hipSuccess ? Status::Ok() : Status(Code::device_error, std::string(what) + ": " + hipGetErrorString(e));
}
#endif

inline Status launch_dot4_probe(const int* a, const int* b, const int* c, int* out, int n, void* stream) {
  if (n < 0) return invalid("n", "must be >= 0");
  if (n == 0) return Status::Ok();
  if (!a || !b || !c || !out) return invalid("a/b/c/out", "null device pointer");
  const int blocks = (n + kProbeThreads - 1) / kProbeThreads;
  dot4_probe<kProbeThreads><<<blocks, kProbeThreads, 0, static_cast<probe_stream_t>(stream)>>>(a, b, c, out, n);
  return probe_last_error("dot4_probe launch");
}

inline Status launch_group_sum_probe(const float* in, float* out, int n, int width, void* stream) {
  if (n < 0) return invalid("n", "must be >= 0");
  if (n == 0) return Status::Ok();
  if (!in || !out) return invalid("in/out", "null device pointer");
  const int blocks = (n + kProbeThreads - 1) / kProbeThreads;
  const auto s = static_cast<probe_stream_t>(stream);
  switch (width) {
    case 2: group_sum_probe<kProbeThreads, 2><<<blocks, kProbeThreads, 0, s>>>(in, out, n); break;
    case 4: group_sum_probe<kProbeThreads, 4><<<blocks, kProbeThreads, 0, s>>>(in, out, n); break;
    case 8: group_sum_probe<kProbeThreads, 8><<<blocks, kProbeThreads, 0, s>>>(in, out, n); break;
    case 16: group_sum_probe<kProbeThreads, 16><<<blocks, kProbeThreads, 0, s>>>(in, out, n); break;
    case 32: group_sum_probe<kProbeThreads, 32><<<blocks, kProbeThreads, 0, s>>>(in, out, n); break;
    default: return invalid("width", "must be 2, 4, 8, 16 or 32");
  }
  return probe_last_error("group_sum_probe launch");
}

}  // namespace packfa::device
#endif
