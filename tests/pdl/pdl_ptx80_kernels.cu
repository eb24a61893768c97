// Built as PTX for compute_80 ONLY (tests/pdl/CMakeLists.txt: CUDA_ARCHITECTURES 80-virtual), so on
// an sm_90 device it is JIT-compiled from PTX 8.0 with every pdl::wait() compiled out by the
// __CUDA_ARCH__ guard. Its params ARE declared PDL-aware: a compute-capability check alone would
// wrongly enable PDL for it; packfa::launch() must refuse (cudaFuncGetAttributes().ptxVersion 80).
// Doubles as the "helpers compile to plain launches below sm_90" compile check.
#define PDL_TEST_TYPES_ONLY
#include "pdl_test_kernels.cuh"

#include "packfa/launch.hpp"
#include "pdl_ptx80.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#error "pdl_ptx80_kernels.cu must be compiled for compute_80 only"
#endif

__global__ void pdl_stage_ptx80(pdl_test::StageParams p) {
  static_assert(!packfa::pdl::device_has_pdl(), "no PDL instructions below sm_90");
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();  // compiled out: this kernel would race if launched with the attribute
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt);
}

namespace pdl_test {

const void* ptx80_kernel() { return reinterpret_cast<const void*>(&pdl_stage_ptx80); }

packfa::Status launch_ptx80(dim3 grid, dim3 block, cudaStream_t s, const StageParams& p, packfa::LaunchOptions o) {
  return packfa::launch(pdl_stage_ptx80, grid, block, 0, s, p, o);
}

cudaError_t launch_ptx80_forced_pdl(dim3 grid, dim3 block, cudaStream_t s, const StageParams& p) {
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, pdl_stage_ptx80, p);
}

}  // namespace pdl_test
