#include "fa_d256.cu"  // the same unit, compiled for HIP
