#include "fa_d80_paged.cu"  // the same unit, compiled for HIP
