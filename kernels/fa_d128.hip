// Instances of the attention split kernel for head_dim 128 (all V formats, Q·K modes, row classes).
#include "packfa/device/fa_instances.hpp"

void packfa::register_fa_d128(FaRegistry& reg) { register_fa_head_dim<128>(reg); }
