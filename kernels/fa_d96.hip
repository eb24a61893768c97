#include "fa_d96.cu"  // the same unit, compiled for HIP
