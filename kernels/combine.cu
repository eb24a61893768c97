// Split-KV combine kernel (device/combine.hpp) and its launch.
#include "packfa/device/combine.hpp"
#include "packfa/launch.hpp"

namespace packfa::detail {
// cols: more than kWarpCombineMaxSplits splits merge a block per (row, 64 dims)
// (fa_combine_col_kernel); else one block per row (fa_combine_kernel). The dispatcher decides
// (src/dispatch.cu, combine_cols(): PACKFA_COMBINE_COLS=1, off by default).
Status launch_combine(const CombineParams& cp, int64_t rows, void* stream, int pdl, bool cols) {
  if (cp.num_splits >= device::kRowCombineMinSplits && cp.num_splits <= device::kWarpCombineMaxSplits) {
    auto* kernel = cp.head_dim <= 128 ? &device::fa_combine_row_kernel<1> : &device::fa_combine_row_kernel<2>;
    return launch(kernel, dim3(static_cast<unsigned>(rows)), dim3(device::kCombineThreads), 0, stream, cp,
                  LaunchOptions{pdl});
  }
  if (cp.num_splits <= device::kWarpCombineMaxSplits) {  // one wave per row
    constexpr int kRowsPerBlock = device::kCombineThreads / arch::kWaveSize;
    const dim3 grid(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
    auto* kernel = cp.head_dim <= 128 ? &device::fa_combine_warp_kernel<1> : &device::fa_combine_warp_kernel<2>;
    return launch(kernel, grid, dim3(device::kCombineThreads), 0, stream, cp, LaunchOptions{pdl});
  }
  if (cols) {
    const int64_t col_blocks = (cp.head_dim / 4 + device::kColCombineCols - 1) / device::kColCombineCols;
    return launch(&device::fa_combine_col_kernel, dim3(static_cast<unsigned>(rows * col_blocks)),
                  dim3(device::kColCombineThreads), 0, stream, cp, LaunchOptions{pdl});
  }
  return launch(&device::fa_combine_kernel, dim3(static_cast<unsigned>(rows)), dim3(device::kCombineThreads), 0,
                stream, cp, LaunchOptions{pdl});
}
}  // namespace packfa::detail
