// Paged-KV instances of the attention split kernel for head_dim 112 (api.hpp PagedKV): the
// entries of the instance table (include/packfa/device/fa_instances.hpp) with this head dim.
#include "packfa/device/fa_instances.hpp"

PACKFA_FA_PAGED_UNIT(112)
