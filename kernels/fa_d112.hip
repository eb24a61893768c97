#include "fa_d112.cu"  // the same unit, compiled for HIP
