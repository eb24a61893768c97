// Paged-KV instances of the attention split kernel for head_dim 128 (api.hpp PagedKV).
#include "packfa/device/fa_instances.hpp"

void packfa::register_fa_d128_paged(FaRegistry& reg) { register_fa_head_dim<128, true>(reg); }
