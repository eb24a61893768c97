// Warp-MMA prefill kernels (sm_80+ / RDNA WMMA) for head_dim 64: the entries of include/packfa/device/fa/prefill_mma_instances.hpp.
#include "packfa/device/fa/prefill_mma_instances.hpp"

PACKFA_FA_PREFILL_MMA_UNIT(64)
