#include "fa_d80.cu"  // the same unit, compiled for HIP
