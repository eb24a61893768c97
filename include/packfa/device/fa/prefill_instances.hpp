// packfa/device/fa/prefill_instances.hpp — which prefill kernels a build holds, and their registry.
//
// The prefill kernel (device/fa/prefill_sm90.hpp) runs on sm_90a only; its units
// (kernels/fa_prefill_d<D>.cu, one per head dim of the instance table) are compiled for that
// architecture alone, and the dispatcher registers them when the build has them
// (PACKFA_HAS_PREFILL). Selection (src/dispatch.cu): cc 9.0, enough query rows, and caches
// whose rows allow the kernel's copy widths; everything else runs the decode kernel.
#pragma once

#include <cstddef>
#include <utility>

#include "packfa/device/fa/prefill_registry.hpp"
#include "packfa/device/fa_instances.hpp"

namespace packfa {

constexpr bool fa_prefill_built(int d, VFormat vf, QKMode qk, bool paged, FaSet set) {
  if (d % 16 != 0 || (v_is_blocked(vf) && d % 32 != 0) || set == FaSet::demo) return false;
  // shared memory: D 256 with fp16 K and 16-bit V rows needs 228 KB of raw and fp16 rings
  if (d == 256 && qk == QKMode::f16 && (vf == VFormat::f16 || vf == VFormat::bf16)) return false;
  if (set == FaSet::lean)  // CI: the int8 mode at D = 128, paged with q8_0 V
    return d == 128 && qk == QKMode::packed16_int8 && vf != VFormat::bf16 && (!paged || vf == VFormat::q8_0);
  return true;
}

template <int D>
void register_prefill_unit(PrefillRegistry& reg);  // kernels/fa_prefill_d<D>.cu

template <std::size_t... I>
void register_prefill_units(PrefillRegistry& reg, std::index_sequence<I...>) {
  (register_prefill_unit<kHeadDims[I]>(reg), ...);
}
template <int = 0>
void register_prefill_all(PrefillRegistry& reg) {
  register_prefill_units(reg, std::make_index_sequence<kNumHeadDims>{});
}

}  // namespace packfa

#if defined(PACKFA_BACKEND_CUDA)
#include "packfa/device/fa/prefill_sm90.hpp"

namespace packfa {

template <int D, VFormat VF, QKMode QK, bool PAGED>
void register_prefill_entry(PrefillRegistry& reg) {
  if constexpr (fa_prefill_built(D, VF, QK, PAGED, kFaUnitSet)) {
    using device::prefill::piece_width;
    using L = device::prefill::PrefillLayout<D, VF, QK>;
    set_prefill_entry<L>(reg.at(PAGED, QK, D, VF), &device::prefill::fa_prefill_kernel<D, VF, QK, PAGED>,
                         piece_width(D / 16), piece_width(D / 16), piece_width(D / 8));
    reg.at(PAGED, QK, D, VF).fa.k_rounded = L::kKRounded;
  }
}

template <int D, std::size_t... I>
void register_prefill_entries(PrefillRegistry& reg, std::index_sequence<I...>) {
  constexpr int kPer = kNumQKModes * 2;
  (register_prefill_entry<D, kFaVFormats[I / kPer], kFaQKModes[I / 2 % kNumQKModes], (I % 2) == 1>(reg), ...);
}

}  // namespace packfa

#define PACKFA_FA_PREFILL_UNIT(D)                                                                     \
  template <int HD>                                                                                   \
  void packfa::register_prefill_unit(packfa::PrefillRegistry& reg) {                                  \
    packfa::register_prefill_entries<HD>(reg,                                                         \
                                         std::make_index_sequence<packfa::kNumVFormats * packfa::kNumQKModes * 2>{}); \
  }                                                                                                   \
  template void packfa::register_prefill_unit<D>(packfa::PrefillRegistry&);
#endif
