#include "fa_prefill_mma_d80.cu"  // the same unit, compiled for HIP
