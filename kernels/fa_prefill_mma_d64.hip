#include "fa_prefill_mma_d64.cu"  // the same unit, compiled for HIP
