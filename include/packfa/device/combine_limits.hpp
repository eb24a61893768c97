// packfa/device/combine_limits.hpp — sizes shared by the combine kernel and the planner.
#pragma once

namespace packfa::device {
constexpr int kCombineThreads = 128;
constexpr int kMaxSplits = 1024;  // the planner never asks for more (shared weights array)
constexpr int kWarpCombineMaxSplits = 64;  // up to here a row's (max, sum) pairs fit two per lane of one wave
// From here a row gets a block of kCombineThreads (fa_combine_row_kernel), below one wave
// (fa_combine_warp_kernel). A/B on the H200: a block per row took the 33-split merge after
// the split kernel from 2.5 to 1.0 us (kv 128k and 4k decode, one sequence), while batches
// with 2-5 splits per row ran 1-5% slower with it.
constexpr int kRowCombineMinSplits = 16;
// More than kWarpCombineMaxSplits: a block of kColCombineThreads per (row, kColCombineCols
// float4 columns) (fa_combine_col_kernel), kColCombineBatch loads in flight per thread.
constexpr int kColCombineThreads = 256;
constexpr int kColCombineCols = 16;
constexpr int kColCombineBatch = 8;
}  // namespace packfa::device
