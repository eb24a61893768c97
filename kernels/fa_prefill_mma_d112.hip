#include "fa_prefill_mma_d112.cu"  // the same unit, compiled for HIP
