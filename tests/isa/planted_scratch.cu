// Planted failure for the spill / scratch gates (tests/isa/CMakeLists.txt): a private array read
// at a run-time index lives in local memory (NVIDIA) and scratch (RDNA), so the gates must fail
// on this object (ctest WILL_FAIL). Proves they see what they check.
#include "packfa/device/arch.hpp"

PACKFA_GLOBAL void packfa_planted_scratch_kernel(const int* idx, float* out) {
  float a[1024];
  for (int i = 0; i < 1024; ++i) a[i] = out[i] * 2.0f;
  out[threadIdx.x] = a[idx[threadIdx.x] & 1023];
}

#if !defined(__HIP__)
// Planted register spill for the CUDA spill gate: 64 values live across a run-time loop under
// a 32-register bound (256 threads x 8 blocks a multiprocessor); ptxas spills them (sm_90,
// nvcc 13: 488 bytes of spill stores, a 272-byte stack frame). Unlike the array above no
// value needs local memory: only the register limit puts it there.
__global__ void __launch_bounds__(256, 8) packfa_planted_spill_kernel(const float* in, float* out, int n) {
  float a[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) a[i] = in[i * 256 + threadIdx.x];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < 64; ++i) a[i] = fmaf(a[i], a[(i + 1) & 63], in[k]);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += a[i] * (i + 1);
  out[threadIdx.x] = s;
}
#endif
