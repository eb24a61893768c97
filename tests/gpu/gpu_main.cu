// Main for GPU test binaries: skip cleanly (exit 77) when no CUDA device is usable.
#define CATCH_CONFIG_RUNNER
#include <cstdio>

#include <cuda_runtime.h>

#include "packfa_catch.hpp"

int main(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
