// Pack-on-write kernels (device/pack.hpp) and their launches.
#include "packfa/device/pack.hpp"
#include "packfa/launch.hpp"

namespace packfa::detail {
Status launch_pack_k(const device::PackKKernelParams& kp, int64_t items, void* stream, int pdl) {
  const dim3 grid(static_cast<unsigned>((items + device::kPackThreads - 1) / device::kPackThreads));
  return launch(&device::pack_k_kernel, grid, dim3(device::kPackThreads), 0, stream, kp, LaunchOptions{pdl});
}
Status launch_quantize_v(const device::QuantVKernelParams& kp, int64_t items, void* stream, int pdl) {
  const dim3 grid(static_cast<unsigned>((items + device::kPackThreads - 1) / device::kPackThreads));
  return launch(&device::quantize_v_kernel, grid, dim3(device::kPackThreads), 0, stream, kp, LaunchOptions{pdl});
}
}  // namespace packfa::detail
