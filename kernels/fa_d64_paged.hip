#include "fa_d64_paged.cu"  // the same unit, compiled for HIP
