// Paged-KV instances of the attention split kernel for head_dim 112 (api.hpp PagedKV).
#include "packfa/device/fa_instances.hpp"

void packfa::register_fa_d112_paged(FaRegistry& reg) {
#if !defined(PACKFA_LEAN_INSTANCES)  // lean (CI): paged instances at D = 128 only
  register_fa_head_dim<112, true>(reg);
#else
  (void)reg;
#endif
}
