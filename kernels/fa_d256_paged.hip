#include "fa_d256_paged.cu"  // the same unit, compiled for HIP
