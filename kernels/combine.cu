// Split-KV combine kernel (device/combine.hpp) and its launch.
#include "packfa/device/combine.hpp"
#include "packfa/launch.hpp"

namespace packfa::detail {
Status launch_combine(const CombineParams& cp, int64_t rows, void* stream, int pdl) {
  return launch(&device::fa_combine_kernel, dim3(static_cast<unsigned>(rows)), dim3(device::kCombineThreads), 0,
                stream, cp, LaunchOptions{pdl});
}
}  // namespace packfa::detail
