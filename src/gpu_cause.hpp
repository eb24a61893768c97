// src/gpu_cause.hpp — why a device call failed, in words a user can act on.
//
// Why: with no driver at all the CUDA runtime answers cudaErrorInsufficientDriver, "CUDA
// driver version is insufficient for CUDA runtime version", and users go to upgrade a driver
// that does not exist. Here the runtime's code is checked against the machine (device nodes,
// the driver library, the driver's and runtime's versions, the device's architecture) and the
// real cause comes first; the runtime's own string follows in parentheses.
// Included by src/dispatch.cu (device_info, gpu_error), compiled as CUDA or HIP.
#pragma once

#include <string>

#include <dirent.h>
#include <unistd.h>

#if defined(PACKFA_BACKEND_HIP)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#include <dlfcn.h>
#endif

namespace packfa::detail {

// Any /dev/<prefix>N device node (nvidia0, nvidia1, ...).
inline bool has_device_node(const char* prefix) {
  DIR* d = opendir("/dev");
  if (!d) return false;
  bool found = false;
  const std::string p = prefix;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > p.size() && n.compare(0, p.size(), p) == 0 && n[p.size()] >= '0' && n[p.size()] <= '9') {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

#if defined(PACKFA_BACKEND_HIP)
inline std::string gpu_cause(hipError_t e) {
  const std::string rt = hipGetErrorString(e);
  if (e == hipErrorNoDevice || e == hipErrorInsufficientDriver) {
    if (access("/dev/kfd", F_OK) != 0) return "no AMD GPU driver / no GPU visible (no /dev/kfd; " + rt + ")";
    if (e == hipErrorNoDevice)
      return "no HIP device visible (the driver is there: check HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES and "
             "the render group; " + rt + ")";
    return "the AMD GPU driver is too old for this HIP runtime (" + rt + ")";
  }
  if (e == hipErrorInvalidDevice) {
    int n = 0;
    if (hipGetDeviceCount(&n) == hipSuccess)
      return "no such HIP device: " + std::to_string(n) + " visible (ordinals 0.." + std::to_string(n - 1) + "; " + rt + ")";
    (void)hipGetLastError();
    return rt;
  }
  if (e == hipErrorNoBinaryForGpu || e == hipErrorInvalidDeviceFunction)
    return "this build has no code for the GPU's architecture: add it to PACKFA_HIP_TARGETS and rebuild (" + rt + ")";
  return rt;
}
#else
inline std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

inline std::string gpu_cause(cudaError_t e) {
  const std::string rt = cudaGetErrorString(e);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    const bool nodes = has_device_node("nvidia");
    void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (lib) dlclose(lib);
    if (!nodes || !lib)
      return std::string("no NVIDIA driver / no GPU visible (") +
             (!lib && !nodes ? "no libcuda.so.1, no /dev/nvidia* device"
                             : !lib ? "no libcuda.so.1: the driver library is not installed or not mounted"
                                    : "no /dev/nvidia* device") +
             "; the CUDA runtime says: " + rt + ")";
    if (e == cudaErrorNoDevice)
      return "no CUDA device visible (the driver is loaded: check CUDA_VISIBLE_DEVICES; " + rt + ")";
    int drv = 0, run = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&run);
    return "the NVIDIA driver is too old for this CUDA runtime: the driver supports CUDA " + cuda_version_string(drv) +
           ", packfa was built with CUDA " + cuda_version_string(run) + " (update the driver; " + rt + ")";
  }
  if (e == cudaErrorInvalidDevice) {
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess)
      return "no such CUDA device: " + std::to_string(n) + " visible (ordinals 0.." + std::to_string(n - 1) + "; " + rt + ")";
    (void)cudaGetLastError();
    return rt;
  }
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    int dev = 0, major = 0, minor = 0;
    std::string arch;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ==
                                                  cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
      arch = " (sm_" + std::to_string(major * 10 + minor) + ")";
    (void)cudaGetLastError();
    return "this build has no code for the GPU's architecture" + arch +
           ": rebuild with -DCMAKE_CUDA_ARCHITECTURES=native or add it to the list (" + rt + ")";
  }
  return rt;
}
#endif

}  // namespace packfa::detail
