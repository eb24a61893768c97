// Compile check (tests/pdl/CMakeLists.txt builds it for sm_75/sm_80 only): the PDL helpers and
// primitives compile to plain code below sm_90. Never run; building it is the test.
#define PDL_TEST_TYPES_ONLY
#include "pdl_test_kernels.cuh"

#include "packfa/launch.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#error "compile_sm80.cu is meant for architectures below sm_90"
#endif

__global__ void pdl_compile_check_kernel(pdl_test::StageParams p) {
  static_assert(!packfa::pdl::device_has_pdl(), "no griddepcontrol below sm_90");
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt);
}

static_assert(packfa::pdl::is_aware_v<pdl_test::StageParams>, "StageParams is enrolled");
static_assert(!packfa::pdl::is_aware_v<pdl_test::UnawareParams>, "UnawareParams is not");

packfa::Status pdl_compile_check_launch(const pdl_test::StageParams& p, cudaStream_t s) {
  return packfa::launch(pdl_compile_check_kernel, dim3(1), dim3(32), 0, s, p, packfa::LaunchOptions{1});
}
