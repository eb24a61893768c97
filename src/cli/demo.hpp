// src/cli/demo.hpp — the main job: `packfa demo`.
#pragma once

#include <string>

namespace packfa::cli {
// Runs packed16 attention on a Llama-3.1-8B-like layer and prints the shape, the formats, the
// K/V memory saved, the error against fp16 attention and (on a GPU) the time against the
// in-house f16 path. With no GPU it runs the CPU reference of the same math on a smaller
// default. Returns a process exit code (2: bad options).
int demo(int argc, char** argv);

struct GpuDemoResult {
  double rel_err = -1;      // ||O - O_ref|| / ||O_ref|| against fp64 fp16-K + fp16-V attention
  double us_packed = -1;    // median event time of packed16 K + q8_0 V
  double us_f16 = -1;       // the same call over fp16 K + fp16 V (-1: that kernel is not compiled)
  std::string kernel;       // instance that ran (KernelChoice::name)
  std::string f16_note;     // why us_f16 is missing
  std::string error;        // set when the run failed
};
// GPU part (demo_gpu.cu). Returns 0 (ran), 1 (failed: r->error), -1 (no GPU backend compiled).
int demo_gpu(int kv, int runs, GpuDemoResult* r);
}  // namespace packfa::cli
