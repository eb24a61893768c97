// src/cli/demo.hpp — the main job: `packfa demo`.
#pragma once

namespace packfa::cli {
// Runs packed16 attention on a default model shape and prints K memory saved, error vs an
// fp16 reference and time. With no GPU it runs the CPU reference of the same math on a
// smaller default. Returns a process exit code.
int demo(int argc, char** argv);
// GPU part (demo_gpu.cu); returns -1 when no GPU backend/device is usable.
int demo_gpu(int kv, int warm_runs);
}  // namespace packfa::cli
