// packfa/device/fa/prefill_registry.hpp — the registry entry of a prefill kernel, one type for
// both prefill kernels (the Hopper wgmma kernel, prefill_instances.hpp; the warp-MMA kernel,
// prefill_mma_instances.hpp): the dispatcher (src/dispatch.cu, prefill_for) reads either the same way.
#pragma once

#include "packfa/device/fa_instances.hpp"

namespace packfa {

struct PrefillInstance {
  FaInstance fa;      // kernel, threads, shared memory, rows per block
  int v_width = 0;    // copy width the kernel uses for V rows (the cache's rows must allow it)
  int vs_width = 0;   // ... for V scale rows (q8_0_planar)
  int ks_width32 = 0, ks_width16 = 0;  // ... for K scale rows of block 32 / 16
};

struct PrefillRegistry {
  PrefillInstance table[2][kNumQKModes][kNumHeadDims][kNumVFormats];  // [paged][QKMode][D][VFormat]
  PrefillInstance& at(bool paged, QKMode qk, int d, VFormat vf) {
    return table[paged ? 1 : 0][static_cast<int>(qk)][head_dim_index(d)][static_cast<int>(vf)];
  }
};

// One entry from a kernel and its shared-memory layout L (kThreads, kBytes, kM, kVWidth), the
// same for both kernels; the scale rows' copy widths are the caller's (each kernel's pieces).
template <class L>
void set_prefill_entry(PrefillInstance& e, FaKernelFn kernel, int vs_width, int ks_width32, int ks_width16) {
  e.fa.kernel = kernel;
  e.fa.threads = L::kThreads;
  e.fa.smem_bytes = L::kBytes;
  e.fa.rows_per_block = L::kM;
  e.fa.mma_qk = true;
  e.v_width = L::kVWidth;
  e.vs_width = vs_width;
  e.ks_width32 = ks_width32;
  e.ks_width16 = ks_width16;
}

}  // namespace packfa
