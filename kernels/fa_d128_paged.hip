#include "fa_d128_paged.cu"  // the same unit, compiled for HIP
