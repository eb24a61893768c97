#include "fa_prefill_mma_d96.cu"  // the same unit, compiled for HIP
