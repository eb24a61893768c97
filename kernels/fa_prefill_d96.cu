// Prefill kernels (sm_90a) for head_dim 96: the entries of include/packfa/device/fa/prefill_instances.hpp.
#include "packfa/device/fa/prefill_instances.hpp"

PACKFA_FA_PREFILL_UNIT(96)
