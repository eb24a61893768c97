// Main for GPU test binaries. Exit 77 (ctest: skipped) only when there is no CUDA device to
// test: cudaErrorNoDevice, zero devices, or an "insufficient driver" on a machine without any
// NVIDIA device node (no driver installed: a CPU-only CI machine). Any other error, e.g. a
// driver that is present but broken or too old, fails the binary: it must not read as a skip.
#define CATCH_CONFIG_RUNNER
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "packfa_catch.hpp"

namespace {
bool nvidia_device_node_present() {
  struct stat st;
  return stat("/dev/nvidiactl", &st) == 0 || stat("/dev/nvidia0", &st) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  // Listing needs no device (tools/gpu_suite.py lists the cases to run one a process).
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--list", 6) == 0) return Catch::Session().run(argc, argv);
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return Catch::Session().run(argc, argv);
  if (e == cudaSuccess || e == cudaErrorNoDevice ||
      (e == cudaErrorInsufficientDriver && !nvidia_device_node_present())) {
    std::printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  std::printf("FAIL: cudaGetDeviceCount: %s (%s); a device or driver is present but unusable\n",
              cudaGetErrorName(e), cudaGetErrorString(e));
  return 1;
}
