// packfa/device/combine_limits.hpp — sizes shared by the combine kernel and the planner.
#pragma once

namespace packfa::device {
constexpr int kCombineThreads = 128;
constexpr int kMaxSplits = 1024;  // the planner never asks for more (shared weights array)
}  // namespace packfa::device
