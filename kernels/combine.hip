#include "combine.cu"  // the same unit, compiled for HIP
