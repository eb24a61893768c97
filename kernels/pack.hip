#include "pack.cu"  // the same unit, compiled for HIP
