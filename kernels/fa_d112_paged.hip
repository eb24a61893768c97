#include "fa_d112_paged.cu"  // the same unit, compiled for HIP
