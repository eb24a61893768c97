// packfa/device/fa_instances.hpp — the instance table: which kernels a build contains.
//
// A kernel instance is fixed by what changes its inner loop: head dim, V format, Q·K mode,
// the row class (most query rows one block serves) and the cache layout (contiguous or paged,
// api.hpp PagedKV). This file is the one list: the registry and the dispatcher index by it,
// tools/fa_layout_table prints it, and cmake/kernels.cmake reads kHeadDims from it to pick the
// instance units (per head dim kernels/fa_d<D>.cu, a PACKFA_FA_UNIT(D) line, and
// kernels/fa_d<D>_paged.cu, PACKFA_FA_PAGED_UNIT(D): two units so the builds run in parallel;
// each .hip includes its .cu twin).
// The table part is plain constexpr C++ (host tools use it); registration needs a GPU compiler.
#pragma once

#include <cstddef>
#include <utility>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"

namespace packfa {

// cmake/kernels.cmake parses this line (keep it on one line): one instance unit per entry.
constexpr int kHeadDims[] = {64, 80, 96, 112, 128, 256};
constexpr int kNumHeadDims = static_cast<int>(sizeof(kHeadDims) / sizeof(kHeadDims[0]));
constexpr VFormat kFaVFormats[] = {VFormat::f16, VFormat::bf16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar};
constexpr QKMode kFaQKModes[] = {QKMode::packed16_int8, QKMode::packed16_f16, QKMode::f16};
constexpr int kNumQKModes = static_cast<int>(sizeof(kFaQKModes) / sizeof(kFaQKModes[0]));
// Row classes: the dispatcher takes the first class whose bound holds the rows and that is
// compiled (else any compiled class), and runs the rows in groups of the instance's
// rows_per_block (fa_rows_per_block below: may be smaller than the bound).
constexpr int kRowClasses[] = {4, 16};
constexpr int kNumRowClasses = static_cast<int>(sizeof(kRowClasses) / sizeof(kRowClasses[0]));
static_assert(sizeof(kFaVFormats) / sizeof(kFaVFormats[0]) == kNumVFormats, "every V format in the table");

constexpr int head_dim_index(int d) {
  for (int i = 0; i < kNumHeadDims; ++i)
    if (kHeadDims[i] == d) return i;
  return -1;
}

enum class FaBackend { cuda, hip };
#if defined(PACKFA_BACKEND_HIP)
constexpr FaBackend kFaBackend = FaBackend::hip;
#else
constexpr FaBackend kFaBackend = FaBackend::cuda;
#endif

// Rows one block of row class `rclass` serves; 0: not built (its rows run as groups of the
// 4-row class). The wide class holds 16 rows, except at D = 256, where 16 rows of lane-path
// accumulators (16 x 8 fp32 a lane) and softmax state do not fit the register file:
//  - RDNA: 8 rows in every mode (16 rows: 256 VGPRs and 16-140 B of scratch a lane);
//  - NVIDIA: int8 Q·K keeps 16 rows (tensor-core scores from sm_80, no spill, while that path
//    spilled 136 B with 8 rows; sm_75's lane path fits with FaTraits::kRowGuard), fp16-Q and
//    bf16 V run 8 rows (16 rows: ptxas spilled 232-368 B), and f16 K has no wide class (16 rows
//    spilled 64-152 B on every architecture, 8 rows still 56-76 B on sm_75; 4 rows do not).
//    The int8 class at 8 rows on the lane path (decision "d256-rows8", bench/NOTES.md) was
//    measured and rejected: spill-free, but the lane-path Q·K costs each wave twice the time
//    a chunk of the 4-row class does, 1.10-1.70x slower than today's plan on every D = 256 shape.
//  - paged caches at D = 256, int8 Q·K: no wide class (its 16 rows spilled 4-20 B on sm_75,
//    whose lane path the same fatbin carries; 8 rows spill on the lane path too), so paged
//    MTP rows at D = 256 run as groups of the 4-row class on NVIDIA.
constexpr int fa_rows_per_block(FaBackend be, int d, VFormat vf, QKMode qk, int rclass, bool paged = false) {
  if (rclass == 0) return kRowClasses[0];
  if (d < 256) return kRowClasses[rclass];
  if (be == FaBackend::hip) return 8;
  if (paged && qk == QKMode::packed16_int8) return 0;
  if (qk == QKMode::packed16_int8 && vf != VFormat::bf16) return 16;
  return qk == QKMode::f16 ? 0 : 8;
}

// The lean set (PACKFA_INSTANCES=lean, CI builds): int8 Q·K only; the wide row class,
// q8_0_planar V and the paged layout at D = 128 only; no bf16 V.
constexpr bool fa_in_lean_set(int d, VFormat vf, QKMode qk, int rclass, bool paged) {
  return qk == QKMode::packed16_int8 && vf != VFormat::bf16 && (rclass == 0 || d == 128) &&
         (vf != VFormat::q8_0_planar || d == 128) && (!paged || d == 128);
}
// The demo set (PACKFA_INSTANCES=demo, `./packfa demo` on a GPU): the demo's two kernels.
constexpr bool fa_in_demo_set(int d, VFormat vf, QKMode qk, int rclass, bool paged) {
  return d == 128 && rclass == 0 && !paged &&
         ((qk == QKMode::packed16_int8 && vf == VFormat::q8_0) || (qk == QKMode::f16 && vf == VFormat::f16));
}
enum class FaSet { all, lean, demo };

// Whether a build holds the instance: ggml V blocks need head_dim % 32 == 0.
constexpr bool fa_built(FaBackend be, int d, VFormat vf, QKMode qk, int rclass, bool paged, FaSet set) {
  return (d % 32 == 0 || !v_is_blocked(vf)) && fa_rows_per_block(be, d, vf, qk, rclass, paged) > 0 &&
         (set != FaSet::lean || fa_in_lean_set(d, vf, qk, rclass, paged)) &&
         (set != FaSet::demo || fa_in_demo_set(d, vf, qk, rclass, paged));
}

// ---- registry ----------------------------------------------------------------------------------
using FaKernelFn = void (*)(FaKernelParams);

struct FaInstance {
  FaKernelFn kernel = nullptr;
  int threads = 0;
  int smem_bytes = 0;
  int rows_per_block = 0;
  bool claims = false;  // can move work between splits (FaTraits::kClaims)
  bool mma_qk = false;  // scores on tensor cores where the GPU has mma (CUDA, sm_80+; FaTraits::kMmaQk)
  bool k_rounded = false;  // packed16 K multiplied as fp16(k · scale) (decision "prefill-k-rounded")
};

struct FaRegistry {
  // [layout: 0 contiguous, 1 paged][QKMode][D][VFormat][row class]
  FaInstance table[2][kNumQKModes][kNumHeadDims][kNumVFormats][kNumRowClasses];
  FaInstance& at(bool paged, QKMode qk, int d, VFormat vf, int rclass) {
    return table[paged ? 1 : 0][static_cast<int>(qk)][head_dim_index(d)][static_cast<int>(vf)][rclass];
  }
};

// One per head dim and layout, defined and explicitly instantiated by its unit
// (PACKFA_FA_UNIT / PACKFA_FA_PAGED_UNIT below).
template <int D, bool PAGED>
void register_fa_unit(FaRegistry& reg);

template <std::size_t... I>
void register_fa_units(FaRegistry& reg, std::index_sequence<I...>) {
  (register_fa_unit<kHeadDims[I], false>(reg), ...);
  (register_fa_unit<kHeadDims[I], true>(reg), ...);
}
// Every instance of every unit (the dispatcher's registry). A template, so that nothing calls
// the other units' register_fa_unit<D> in an instance unit (where its definition is visible,
// such a call would compile every head dim's kernels there too).
template <int = 0>
void register_fa_all(FaRegistry& reg) {
  register_fa_units(reg, std::make_index_sequence<kNumHeadDims>{});
}

}  // namespace packfa

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
#include "packfa/device/fa_packed16.hpp"

namespace packfa {

// set for the instance units by cmake/kernels.cmake
#if defined(PACKFA_LEAN_INSTANCES)
constexpr FaSet kFaUnitSet = FaSet::lean;
#elif defined(PACKFA_DEMO_INSTANCES)
constexpr FaSet kFaUnitSet = FaSet::demo;
#else
constexpr FaSet kFaUnitSet = FaSet::all;
#endif

template <int D, VFormat VF, QKMode QK, int RC, bool PAGED>
void register_fa_entry(FaRegistry& reg) {
  if constexpr (fa_built(kFaBackend, D, VF, QK, RC, PAGED, kFaUnitSet)) {
    constexpr int R = fa_rows_per_block(kFaBackend, D, VF, QK, RC, PAGED);
    using T = device::FaTraits<D, VF, QK, R>;
    FaInstance& e = reg.at(PAGED, QK, D, VF, RC);
    e.kernel = &device::fa_split_kernel<D, VF, QK, R, PAGED>;
    e.threads = T::kThreads;
    e.smem_bytes = T::kSmemBytes;
    e.rows_per_block = R;
    e.claims = T::kClaims;
    e.mma_qk = kFaBackend == FaBackend::cuda && T::mma_qk_if(true);  // device code of sm_80+
  }
}

template <int D, bool PAGED, std::size_t... I>
void register_fa_entries(FaRegistry& reg, std::index_sequence<I...>) {
  constexpr int kPerV = kNumQKModes * kNumRowClasses;
  (register_fa_entry<D, kFaVFormats[I / kPerV], kFaQKModes[I / kNumRowClasses % kNumQKModes],
                     static_cast<int>(I % kNumRowClasses), PAGED>(reg),
   ...);
}

// Every instance of one head dim and layout the table holds (vendoring: call this from your
// own .cu/.hip).
template <int D, bool PAGED = false>
void register_fa_head_dim(FaRegistry& reg) {
  register_fa_entries<D, PAGED>(reg, std::make_index_sequence<kNumVFormats * kNumQKModes * kNumRowClasses>{});
}

}  // namespace packfa

// The whole of an instance unit (kernels/fa_d<D>.cu, fa_d<D>_paged.cu): the definition of
// register_fa_unit and its explicit instantiation for D and one layout, so only the unit
// compiles those kernels.
#define PACKFA_FA_UNIT_OF(D, PAGED)                                                            \
  template <int HD, bool PG>                                                                   \
  void packfa::register_fa_unit(packfa::FaRegistry& reg) {                                     \
    packfa::register_fa_head_dim<HD, PG>(reg);                                                 \
  }                                                                                            \
  template void packfa::register_fa_unit<D, PAGED>(packfa::FaRegistry&);
#define PACKFA_FA_UNIT(D) PACKFA_FA_UNIT_OF(D, false)
#define PACKFA_FA_PAGED_UNIT(D) PACKFA_FA_UNIT_OF(D, true)
#endif
