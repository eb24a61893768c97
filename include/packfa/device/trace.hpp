// packfa/device/trace.hpp — optional per-block timeline of the attention kernels (a build
// with -DPACKFA_TRACE; otherwise the points compile to nothing). Thread 0 of each block writes
// the SM clock and the global timer at numbered points (and its SM id) into params.trace, which the
// dispatcher takes from detail::g_trace; packfa-bench --trace prints the timeline
// (bench/NOTES.md). Used to find where short kernels (kv = 4k) spend their time.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"

namespace packfa::device {

constexpr int kTracePoints = 12;       // points per block
constexpr int kTraceBlocks = 4096;     // blocks per kernel that are recorded
constexpr int kTraceKernels = 2;       // split kernel, combine kernel

#if defined(PACKFA_TRACE) && defined(PACKFA_BACKEND_CUDA)
PACKFA_DEV void trace_at(unsigned long long* buf, int point) {
#if defined(__CUDA_ARCH__)
  if (buf && threadIdx.x == 0) {
    const unsigned blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (blk >= static_cast<unsigned>(kTraceBlocks)) return;
    unsigned long long gt;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
    buf[(blk * kTracePoints + point) * 2] = static_cast<unsigned long long>(clock64());
    buf[(blk * kTracePoints + point) * 2 + 1] = gt;
    if (point == 0) {  // the last slot of the block: its multiprocessor
      unsigned sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      buf[(blk * kTracePoints + kTracePoints - 1) * 2] = sm;
    }
  }
#else
  (void)buf, (void)point;
#endif
}
#define PACKFA_TRACE_AT(params, point) ::packfa::device::trace_at((params).trace, (point))
#else
#define PACKFA_TRACE_AT(params, point) ((void)0)
#endif

}  // namespace packfa::device
