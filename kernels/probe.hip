#include "probe.cu"  // the same unit, compiled for HIP
