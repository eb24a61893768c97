// packfa/device/combine_limits.hpp — sizes shared by the combine kernel and the planner.
#pragma once

namespace packfa::device {
constexpr int kCombineThreads = 128;
constexpr int kMaxSplits = 1024;  // the planner never asks for more (shared weights array)
constexpr int kWarpCombineMaxSplits = 64;  // up to here one wave merges a row (fa_combine_warp_kernel)
}  // namespace packfa::device
