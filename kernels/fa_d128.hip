#include "fa_d128.cu"  // the same unit, compiled for HIP
