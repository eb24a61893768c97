// Planted failure for the spill / scratch gates (tests/isa/CMakeLists.txt): a private array read
// at a run-time index lives in local memory (NVIDIA) and scratch (RDNA), so the gates must fail
// on this object (ctest WILL_FAIL). Proves they see what they check.
#include "packfa/device/arch.hpp"

PACKFA_GLOBAL void packfa_planted_scratch_kernel(const int* idx, float* out) {
  float a[1024];
  for (int i = 0; i < 1024; ++i) a[i] = out[i] * 2.0f;
  out[threadIdx.x] = a[idx[threadIdx.x] & 1023];
}
