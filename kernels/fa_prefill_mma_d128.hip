#include "fa_prefill_mma_d128.cu"  // the same unit, compiled for HIP
