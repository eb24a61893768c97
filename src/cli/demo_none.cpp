// demo_gpu for builds without a GPU backend.
#include "demo.hpp"

int packfa::cli::demo_gpu(int, int, GpuDemoResult*) { return -1; }
