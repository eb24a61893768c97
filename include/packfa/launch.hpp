// packfa/launch.hpp — the one host launch helper every packfa kernel goes through.
//
//   struct MyParams { static constexpr bool pdl_aware = true; const float* in; float* out; };
//   __global__ void my_kernel(MyParams p) { /* index math */ packfa::pdl::wait(); ... }
//   PACKFA_TRY(packfa::launch(my_kernel, grid, block, smem, stream, params));
//
// The params struct is the kernel's only argument. The launch gets
// cudaLaunchAttributeProgrammaticStreamSerialization only when pdl::query() allows it:
// the params type is PDL-aware, the switch (per-call override, else env PACKFA_PDL) allows
// it, the device has CC >= 9.0 and this very kernel was compiled from PTX >= 9.0 (cached per
// (device, kernel)). Everything else is a plain launch; HIP is always a plain launch.
// Needs a CUDA or HIP compiler (dim3); host-only code can use pdl.hpp's query().
#pragma once

#include <cstddef>

#include "packfa/pdl.hpp"
#include "packfa/status.hpp"

#if !defined(PACKFA_BACKEND_CUDA) && !defined(PACKFA_BACKEND_HIP)
#error "packfa/launch.hpp needs nvcc or a HIP compiler (use packfa/pdl.hpp from plain C++)"
#endif

namespace packfa {

struct LaunchOptions {
  int pdl = -1;  // -1: env PACKFA_PDL / auto, 0: off, 1: on (still fail-closed)
  // Optional: receives what this launch decided (active + reason). Costs a string copy.
  pdl::Decision* decision = nullptr;
};

namespace detail {
// Non-template body (src/pdl_host.cu): decides, launches with cudaLaunchKernelExC /
// hipLaunchKernel, checks the launch error. `args` is the kernel's argument array.
Status launch_raw(const void* kernel, dim3 grid, dim3 block, size_t smem_bytes, void* stream, void** args,
                  bool aware, const LaunchOptions& opt);
}  // namespace detail

template <class Params>
Status launch(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem_bytes, void* stream, const Params& params,
              LaunchOptions opt = {}) {
  if (kernel == nullptr) return invalid("kernel", "null kernel pointer");
  // The runtime copies the argument buffer at launch; pointing at `params` is enough.
  void* args[] = {const_cast<void*>(static_cast<const void*>(&params))};
  return detail::launch_raw(reinterpret_cast<const void*>(kernel), grid, block, smem_bytes, stream, args,
                            pdl::is_aware_v<Params>, opt);
}

}  // namespace packfa
