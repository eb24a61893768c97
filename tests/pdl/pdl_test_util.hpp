// Small helpers shared by the tests/pdl binaries (one TU each).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "packfa/pdl.hpp"
#include "packfa_catch.hpp"

#define PDL_CUDA_REQUIRE(expr)                                                   \
  do {                                                                            \
    const cudaError_t pdl_e_ = (expr);                                            \
    INFO(#expr << " -> " << cudaGetErrorString(pdl_e_));                           \
    REQUIRE(pdl_e_ == cudaSuccess);                                               \
  } while (0)

#define PDL_STATUS_REQUIRE(expr)                                                 \
  do {                                                                            \
    const ::packfa::Status pdl_s_ = (expr);                                       \
    INFO(#expr << " -> " << pdl_s_.to_string());                                  \
    REQUIRE(pdl_s_.ok());                                                         \
  } while (0)

namespace pdl_test {

// Sets PACKFA_PDL for the scope (nullptr = unset) and re-reads it; restores on exit.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    const char* old = std::getenv("PACKFA_PDL");
    had_ = old != nullptr;
    if (had_) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static void set(const char* v) {
    if (v) setenv("PACKFA_PDL", v, 1);
    else unsetenv("PACKFA_PDL");
    packfa::pdl::reload_env();
  }
  bool had_ = false;
  std::string old_;
};

inline bool device_has_pdl_hw(int* major = nullptr, int* minor = nullptr) {
  int dev = 0, ma = 0, mi = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev);
  if (major) *major = ma;
  if (minor) *minor = mi;
  return ma >= 9;
}

// PDL must be active for a PDL-aware kernel of these binaries (built with sm_90 / compute_90
// code, tests/pdl/CMakeLists.txt) on a CC >= 9.0 device unless PACKFA_PDL switches it off:
// there an inactive decision is a failure, not a vacuous pass. Below CC 9.0 the tests that
// need it return early (nothing to test).
inline bool pdl_expected_active() {
  const packfa::pdl::EnvMode m = packfa::pdl::env_mode();
  return device_has_pdl_hw() && m != packfa::pdl::EnvMode::off && m != packfa::pdl::EnvMode::invalid;
}

// Device buffers for the chain tests: in (pattern), mid, mid2, out; n uint32 each.
struct ChainBuffers {
  int n = 0;
  uint32_t *in = nullptr, *mid = nullptr, *mid2 = nullptr, *out = nullptr;
  std::vector<uint32_t> host_in;
  explicit ChainBuffers(int n_) : n(n_), host_in(static_cast<size_t>(n_)) {
    const size_t b = bytes();
    cudaMalloc(&in, b);
    cudaMalloc(&mid, b);
    cudaMalloc(&mid2, b);
    cudaMalloc(&out, b);
    for (int i = 0; i < n; ++i) host_in[static_cast<size_t>(i)] = 0x12345u * static_cast<uint32_t>(i) + 7u;
    cudaMemcpy(in, host_in.data(), b, cudaMemcpyHostToDevice);
  }
  ~ChainBuffers() {
    cudaFree(in);
    cudaFree(mid);
    cudaFree(mid2);
    cudaFree(out);
  }
  ChainBuffers(const ChainBuffers&) = delete;
  ChainBuffers& operator=(const ChainBuffers&) = delete;
  size_t bytes() const { return static_cast<size_t>(n) * sizeof(uint32_t); }
  bool ok() const { return in && mid && mid2 && out; }
  std::vector<uint32_t> download(const uint32_t* d) const {
    std::vector<uint32_t> h(static_cast<size_t>(n));
    cudaMemcpy(h.data(), d, bytes(), cudaMemcpyDeviceToHost);
    return h;
  }
};

}  // namespace pdl_test
