// packfa/device/fa/hopper_sync.hpp — thin wrappers over the sm_90 synchronisation the prefill
// kernel's warp specialisation needs: shared-memory mbarriers (a ring slot full / empty),
// named barriers (one warpgroup, not the block) and setmaxnreg (registers moved from the
// producer warpgroup to the consumers). Without sm_90a device code every wrapper traps.
#pragma once

#include <cstdint>

#include "packfa/device/fa/wgmma.hpp"

namespace packfa::device::hopper {

// mbarrier at `bar` (8 bytes of shared memory, 8-byte aligned) completing a phase after
// `count` arrivals.
PACKFA_DEV void mbar_init(uint64_t* bar, int count) {
#if PACKFA_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wgmma::smem_addr(bar)), "r"(count) : "memory");
#else
  (void)bar, (void)count;
  wgmma::unsupported();
#endif
}
// Arrives (release: this thread's earlier shared-memory writes are visible to a waiter).
PACKFA_DEV void mbar_arrive(uint64_t* bar) {
#if PACKFA_WGMMA
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(wgmma::smem_addr(bar)) : "memory");
#else
  (void)bar;
  wgmma::unsupported();
#endif
}
// Waits (acquire) until the phase of parity `parity` has completed.
PACKFA_DEV void mbar_wait(uint64_t* bar, int parity) {
#if PACKFA_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(wgmma::smem_addr(bar)),
      "r"(parity)
      : "memory");
#else
  (void)bar, (void)parity;
  wgmma::unsupported();
#endif
}
// Barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, whole warps.
PACKFA_DEV void named_sync(int id, int threads) {
#if PACKFA_WGMMA
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  (void)id, (void)threads;
  wgmma::unsupported();
#endif
}
// Arrives at barrier `id` without waiting (the threads that bar.sync on it wait for these).
PACKFA_DEV void named_arrive(int id, int threads) {
#if PACKFA_WGMMA
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  (void)id, (void)threads;
  wgmma::unsupported();
#endif
}
// Register budget of the calling warpgroup (every warp of it executes this).
template <int N>
PACKFA_DEV void regs_grow() {
#if PACKFA_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  wgmma::unsupported();
#endif
}
template <int N>
PACKFA_DEV void regs_shrink() {
#if PACKFA_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#else
  wgmma::unsupported();
#endif
}

}  // namespace packfa::device::hopper
