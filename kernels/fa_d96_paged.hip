#include "fa_d96_paged.cu"  // the same unit, compiled for HIP
