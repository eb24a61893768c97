// packfa/device/fa/prefill_mma_instances.hpp — which warp-MMA prefill kernels a build holds
// (device/fa/prefill_mma.hpp), and their registry; the sibling of prefill_instances.hpp (the
// Hopper wgmma kernel).
//
// Units: kernels/fa_prefill_mma_d<D>.cu (CUDA: the library's architectures from sm_80 on) and
// kernels/fa_prefill_mma_d<D>.hip (HIP: every gfx target; it includes the .cu). Selection
// (src/dispatch.cu, prefill_for): cc 8.x, HIP gfx11 / gfx12, and cc 9.0 when
// PACKFA_PREFILL_KERNEL=mma; enough query rows; caches whose rows allow the copy widths.
#pragma once

#include <cstddef>
#include <utility>

#include "packfa/device/fa/prefill_registry.hpp"
#include "packfa/device/fa_instances.hpp"
#include "packfa/device/fa/prefill_mma.hpp"

namespace packfa {

// Shared memory a block may use on every target of a backend: RDNA 64 KB a workgroup; NVIDIA
// 99 KB (sm_86 / sm_89 opt-in; so sm_80-90 hold the same set and the tests one rule).
constexpr int prefill_mma_smem_limit(bool hip) { return hip ? 64 * 1024 : 99 * 1024; }

template <int D, VFormat VF, QKMode QK, bool kHip>
constexpr bool fa_prefill_mma_fits() {
  return device::prefill_mma::MmaLayoutOf<D, VF, QK, kHip>::kBytes <= prefill_mma_smem_limit(kHip);
}

// What the build holds: every instance of the table on NVIDIA (all fit 99 KB, mma_tile_keys);
// RDNA all but D 256 (registers, below).
// Lean (CI): D 128, int8 dot, q8_0 and f16 V, paged q8_0.
template <int D, VFormat VF, QKMode QK, bool PAGED, bool kHip>
constexpr bool fa_prefill_mma_built(FaSet set) {
  if (D % 16 != 0 || (v_is_blocked(VF) && D % 32 != 0) || set == FaSet::demo) return false;
  if (!fa_prefill_mma_fits<D, VF, QK, kHip>()) return false;
  // RDNA, D 256: O^T alone is 128 of a lane's 256 VGPRs; clang-19 then spilled 8-600 bytes to
  // scratch (kN 32 and 16 tried, docs/rdna.md "Prefill"): those calls run the decode kernel.
  if (kHip && D > 128) return false;
  if (set == FaSet::lean)
    return D == 128 && QK == QKMode::packed16_int8 && (VF == VFormat::q8_0 || (VF == VFormat::f16 && !PAGED));
  return true;
}

template <int D>
void register_prefill_mma_unit(PrefillRegistry& reg);  // kernels/fa_prefill_mma_d<D>.cu / .hip

template <std::size_t... I>
void register_prefill_mma_units(PrefillRegistry& reg, std::index_sequence<I...>) {
  (register_prefill_mma_unit<kHeadDims[I]>(reg), ...);
}
template <int = 0>
void register_prefill_mma_all(PrefillRegistry& reg) {
  register_prefill_mma_units(reg, std::make_index_sequence<kNumHeadDims>{});
}

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
template <int D, VFormat VF, QKMode QK, bool PAGED>
void register_prefill_mma_entry(PrefillRegistry& reg) {
  constexpr bool kHip = kFaBackend == FaBackend::hip;
  if constexpr (fa_prefill_mma_built<D, VF, QK, PAGED, kHip>(kFaUnitSet)) {
    using L = device::prefill_mma::MmaLayout<D, VF, QK>;
    using device::prefill_mma::piece_width;
    set_prefill_entry<L>(reg.at(PAGED, QK, D, VF), &device::prefill_mma::fa_prefill_mma_kernel<D, VF, QK, PAGED>,
                         piece_width(D / 16), piece_width(L::kKs32Row), piece_width(D / 8));
  }
}

template <int D, std::size_t... I>
void register_prefill_mma_entries(PrefillRegistry& reg, std::index_sequence<I...>) {
  constexpr int kPer = kNumQKModes * 2;
  (register_prefill_mma_entry<D, kFaVFormats[I / kPer], kFaQKModes[I / 2 % kNumQKModes], (I % 2) == 1>(reg), ...);
}
#endif

}  // namespace packfa

// The whole of a unit (kernels/fa_prefill_mma_d<D>.cu).
#define PACKFA_FA_PREFILL_MMA_UNIT(D)                                                                  \
  template <int HD>                                                                                    \
  void packfa::register_prefill_mma_unit(packfa::PrefillRegistry& reg) {                            \
    packfa::register_prefill_mma_entries<HD>(                                                          \
        reg, std::make_index_sequence<packfa::kNumVFormats * packfa::kNumQKModes * 2>{});               \
  }                                                                                                    \
  template void packfa::register_prefill_mma_unit<D>(packfa::PrefillRegistry&);
