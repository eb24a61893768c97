#include "fa_d64.cu"  // the same unit, compiled for HIP
