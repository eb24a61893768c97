// Test kernels for the PDL detectors: good stages and planted bugs.
// Include from exactly ONE translation unit per binary (the kernels have external linkage);
// other units define PDL_TEST_TYPES_ONLY first to get only the params types and mix().
// Also compiled to PTX by tests/isa/pdl.cmake for the static checker (planted_ptx.cu).
#pragma once

#include <cstdint>

#include "packfa/pdl.hpp"

namespace pdl_test {

// One chain stage: out[i] = mix(in[i], salt) for i < n.
struct StageParams {
  static constexpr bool pdl_aware = true;
  const uint32_t* in = nullptr;
  uint32_t* out = nullptr;
  int n = 0;
  uint32_t salt = 0;
};
// Same layout, NOT enrolled (no pdl_aware member): launch() must never set the attribute.
struct UnawareParams {
  const uint32_t* in = nullptr;
  uint32_t* out = nullptr;
  int n = 0;
  uint32_t salt = 0;
};
// A stage that also reads a constant table before its wait (allow-listed: param 0, offset 0).
struct TableParams {
  static constexpr bool pdl_aware = true;
  const uint32_t* table = nullptr;  // 16 entries, written once before the chain runs
  const uint32_t* in = nullptr;
  uint32_t* out = nullptr;
  int n = 0;
  uint32_t salt = 0;
};

__host__ __device__ inline uint32_t mix(uint32_t x, uint32_t salt) {
  x ^= salt;
  x *= 0x9E3779B1u;
  x ^= x >> 15;
  x *= 0x85EBCA77u;
  x ^= x >> 13;
  return x;
}

}  // namespace pdl_test

#ifndef PDL_TEST_TYPES_ONLY
// ---- good kernels -------------------------------------------------------------------------------
// Trigger first (in the stress build the producer then lingers ~tens of µs), wait on every path
// (the early exit too), then touch global memory.
__global__ void pdl_stage(pdl_test::StageParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  packfa::pdl::launch_dependents();
  if (i >= p.n) {
    packfa::pdl::wait();
    return;
  }
  packfa::pdl::wait();
  p.out[i] = pdl_test::mix(p.in[i], p.salt);
}

// Correct too, trigger at the end: used where the consumer must reach its reads right after
// its wait returns (no stress spin in between), e.g. the A -> B -> C demonstration.
__global__ void pdl_stage_late_trigger(pdl_test::StageParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  packfa::pdl::wait();
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt);
  packfa::pdl::launch_dependents();
}

__global__ void pdl_stage_unaware(pdl_test::UnawareParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt);
}

// Reads a constant table before the wait: legal only with an allow-list entry for the table
// pointer (static checker: --allow 'pdl_stage_with_table:0+0').
__global__ void pdl_stage_with_table(pdl_test::TableParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const uint32_t t = p.table[threadIdx.x & 15u];
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt ^ t);
}

// ---- planted bugs ---------------------------------------------------------------------------------
// The bugs never call launch_dependents(): in the stress build a trigger spins, which would
// delay the buggy read past the producer's writes and hide the race (as it would in any kernel
// that triggers before its first access; that is not a correctness argument, just timing).

// Bug 1: the first read of predecessor data comes before the wait.
__global__ void pdl_bug_read_before_wait(pdl_test::StageParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.n) {
    packfa::pdl::wait();
    return;
  }
  const uint32_t v = p.in[i];
  packfa::pdl::wait();
  p.out[i] = pdl_test::mix(v, p.salt);
}

// Bug 2: never waits.
__global__ void pdl_bug_no_wait(pdl_test::StageParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < p.n) p.out[i] = pdl_test::mix(p.in[i], p.salt);
}

// Bug 3 (static only): the early exit skips the wait. Harmless for its own reads, but a grid
// whose threads exit unwaited can complete before ITS predecessor, so the next kernel's wait
// no longer covers the grand-predecessor (A -> B -> C, C reads A's output).
__global__ void pdl_bug_exit_before_wait(pdl_test::StageParams p) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= p.n) return;
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();
  p.out[i] = pdl_test::mix(p.in[i], p.salt);
}
#endif  // PDL_TEST_TYPES_ONLY
