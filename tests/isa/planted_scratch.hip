#include "planted_scratch.cu"  // the same kernel, compiled for HIP
