// packfa/device/fa_instances.hpp — the instance table: which kernels a build contains.
//
// A kernel instance is fixed by what changes its inner loop: head dim, V format, Q·K mode
// and the row class (max query rows per block). Instance files (kernels/fa_d*.cu|hip) call
// register_fa_head_dim<D>() once; the dispatcher looks entries up and can answer
// "not compiled" for a hole without crashing.
#pragma once

#include "packfa/device/fa_packed16.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"

namespace packfa {

using FaKernelFn = void (*)(FaKernelParams);

struct FaInstance {
  FaKernelFn kernel = nullptr;
  int threads = 0;
  int smem_bytes = 0;
  int rows_per_block = 0;
  bool claims = false;  // can move work between splits (FaTraits::kClaims)
  bool mma_qk = false;  // scores on tensor cores (FaTraits::kMmaQk)
};

constexpr int kHeadDims[] = {64, 80, 96, 112, 128, 256};
constexpr int kNumHeadDims = 6;
constexpr int kRowClasses[] = {4, 16};
constexpr int kNumRowClasses = 2;

constexpr int head_dim_index(int d) {
  for (int i = 0; i < kNumHeadDims; ++i)
    if (kHeadDims[i] == d) return i;
  return -1;
}

struct FaRegistry {
  // [layout: 0 contiguous, 1 paged][QKMode][D][VFormat][row class]
  FaInstance table[2][3][kNumHeadDims][kNumVFormats][kNumRowClasses];
  FaInstance& at(bool paged, QKMode qk, int d, VFormat vf, int rclass) {
    return table[paged ? 1 : 0][static_cast<int>(qk)][head_dim_index(d)][static_cast<int>(vf)][rclass];
  }
};

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
template <int D, VFormat VF, QKMode QK, int RMAX, bool PAGED>
void register_fa_layout(FaRegistry& reg, int rclass) {
  using T = device::FaTraits<D, VF, QK, RMAX>;
  FaInstance& e = reg.at(PAGED, QK, D, VF, rclass);
  e.kernel = &device::fa_split_kernel<D, VF, QK, RMAX, PAGED>;
  e.threads = T::kThreads;
  e.smem_bytes = T::kSmemBytes;
  e.rows_per_block = RMAX;
  e.claims = T::kClaims;
  e.mma_qk = T::kMmaQk;
}
// Every instance comes contiguous and paged (PAGED); each layout of a head dim has its own
// instance file (kernels/fa_d<D>.cu, fa_d<D>_paged.cu), so the builds run in parallel.
template <int D, VFormat VF, QKMode QK, bool PAGED>
void register_fa_rows(FaRegistry& reg) {
  register_fa_layout<D, VF, QK, 4, PAGED>(reg, 0);
#if !defined(PACKFA_LEAN_INSTANCES)
  register_fa_layout<D, VF, QK, 16, PAGED>(reg, 1);
#else
  if constexpr (D == 128) register_fa_layout<D, VF, QK, 16, PAGED>(reg, 1);
#endif
}

template <int D, VFormat VF, bool PAGED>
void register_fa_v(FaRegistry& reg) {
  register_fa_rows<D, VF, QKMode::packed16_int8, PAGED>(reg);
#if !defined(PACKFA_LEAN_INSTANCES)  // lean (CI): the int8 Q·K instances only
  register_fa_rows<D, VF, QKMode::packed16_f16, PAGED>(reg);
  register_fa_rows<D, VF, QKMode::f16, PAGED>(reg);
#endif
}

// Every V format the head dim allows (ggml blocks need head_dim % 32 == 0). The lean set
// (CI) has paged instances at D = 128 only (kernels/fa_d*_paged.cu); the demo set none.
template <int D, bool PAGED = false>
void register_fa_head_dim(FaRegistry& reg) {

#if defined(PACKFA_DEMO_INSTANCES)  // `./packfa demo` on a GPU: the demo's two kernels only
  if constexpr (D == 128 && !PAGED) {
    register_fa_layout<128, VFormat::q8_0, QKMode::packed16_int8, 4, false>(reg, 0);
    register_fa_layout<128, VFormat::f16, QKMode::f16, 4, false>(reg, 0);
  }
  (void)reg;
#else
  register_fa_v<D, VFormat::f16, PAGED>(reg);
  if constexpr (D % 32 == 0) {
    register_fa_v<D, VFormat::q8_0, PAGED>(reg);
    register_fa_v<D, VFormat::q4_0, PAGED>(reg);
#if !defined(PACKFA_LEAN_INSTANCES)
    register_fa_v<D, VFormat::q8_0_planar, PAGED>(reg);
#else
    if constexpr (D == 128) register_fa_v<D, VFormat::q8_0_planar, PAGED>(reg);
#endif
  }
#if !defined(PACKFA_LEAN_INSTANCES)
  register_fa_v<D, VFormat::bf16, PAGED>(reg);
#endif
#endif  // PACKFA_DEMO_INSTANCES
}
#endif

// Defined by the instance files, one per head dim.
void register_fa_d64(FaRegistry&);
void register_fa_d80(FaRegistry&);
void register_fa_d96(FaRegistry&);
void register_fa_d112(FaRegistry&);
void register_fa_d128(FaRegistry&);
void register_fa_d256(FaRegistry&);
void register_fa_d64_paged(FaRegistry&);
void register_fa_d80_paged(FaRegistry&);
void register_fa_d96_paged(FaRegistry&);
void register_fa_d112_paged(FaRegistry&);
void register_fa_d128_paged(FaRegistry&);
void register_fa_d256_paged(FaRegistry&);

}  // namespace packfa
