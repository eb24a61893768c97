// Host entry points of pdl_ptx80_kernels.cu (a kernel compiled from compute_80 PTX only).
#pragma once

#include <cuda_runtime.h>

#include "packfa/launch.hpp"

namespace pdl_test {
struct StageParams;
const void* ptx80_kernel();
// Through packfa::launch (must stay a plain launch whatever the options say).
packfa::Status launch_ptx80(dim3 grid, dim3 block, cudaStream_t s, const StageParams& p, packfa::LaunchOptions o);
// Bypasses packfa::launch and forces the attribute: what a CC-only check would do (demo only).
cudaError_t launch_ptx80_forced_pdl(dim3 grid, dim3 block, cudaStream_t s, const StageParams& p);
}  // namespace pdl_test
