// Probe instances (include/packfa/device/probe.hpp): host entry points + their kernels.
#include "packfa/device/probe.hpp"

namespace packfa {
Status probe_dot4(const int* a, const int* b, const int* c, int* out, int n, void* stream) {
  return device::launch_dot4_probe(a, b, c, out, n, stream);
}
Status probe_group_sum(const float* in, float* out, int n, int width, void* stream) {
  return device::launch_group_sum_probe(in, out, n, width, stream);
}
}  // namespace packfa
