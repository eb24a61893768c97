#include "fa_prefill_mma_d256.cu"  // the same unit, compiled for HIP
