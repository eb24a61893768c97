// packfa/device/arch.hpp — the only place that knows which GPU vendor compiles us.
//
// Device templates are written once against these thin wrappers (CUTLASS arch/ style):
// 32-lane waves, lane shuffles, the 4-way int8 dot, fp16/bf16 bits, tensor-core tiles,
// exp2, async copies into shared memory. Each wrapper is a no-op-able inline that
// maps to one instruction (or a short, documented fallback). A wrapper the target has no
// instruction for traps (PACKFA_UNSUPPORTED): callers select it at compile time
// (arch::kHasMmaF16), so it is never reached; a wrong selection fails loudly instead of
// computing zeros.
#pragma once

#include <cstdint>

#if defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#define PACKFA_BACKEND_HIP 1
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#define PACKFA_BACKEND_CUDA 1
#endif

#if defined(__CUDA_ARCH__)
#define PACKFA_DEVICE_CUDA 1
#elif defined(__HIP_DEVICE_COMPILE__)
#define PACKFA_DEVICE_HIP 1
#endif

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
#define PACKFA_HD __host__ __device__ __forceinline__
#define PACKFA_DEV __device__ __forceinline__
// Kernel stages that the compiler inlines by its own choice, as it did with the kernel-body
// lambdas they replace: forcing them inline changes the optimizer's order of work and with it
// the machine code of both targets (docs/architecture.md, "Rules that keep it fast").
#define PACKFA_DEV_STAGE __device__ inline
#define PACKFA_GLOBAL __global__
#define PACKFA_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#else
#define PACKFA_HD inline
#define PACKFA_DEV inline
#define PACKFA_DEV_STAGE inline
#define PACKFA_LAUNCH_BOUNDS(threads, min_blocks)
#endif

// Full unrolling on GPU compilers (private arrays indexed by a loop counter stay in
// registers only when the loop is unrolled: RDNA scratch otherwise); nothing for host C++.
#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
#define PACKFA_UNROLL _Pragma("unroll")
#else
#define PACKFA_UNROLL
#endif

// `const T* __restrict__` lets nvcc route loads through the non-coherent path, which a
// PDL wait does not order (see docs/pdl.md). PDL builds therefore drop restrict.
#if defined(PACKFA_PDL) && PACKFA_PDL
#define PACKFA_RESTRICT
#else
#define PACKFA_RESTRICT __restrict__
#endif

namespace packfa::arch {

constexpr int kWaveSize = 32;

#if defined(PACKFA_DEVICE_HIP)
#if !defined(__GFX11__) && !defined(__GFX12__)
#error "packfa device code targets RDNA3/3.5/4 (gfx11xx, gfx12xx) only"
#endif
// RDNA supports wave64 too; every packfa template assumes 32 lanes.
static_assert(__AMDGCN_WAVEFRONT_SIZE == 32, "packfa needs wave32 (compile with -mwavefrontsize64 off)");
#endif

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)  // host pass too: kernel templates name these

#if defined(PACKFA_BACKEND_CUDA)
#define PACKFA_UNSUPPORTED() __trap()
#else
#define PACKFA_UNSUPPORTED() __builtin_trap()
#endif

PACKFA_DEV int lane_id() { return static_cast<int>(threadIdx.x) & (kWaveSize - 1); }

// Orders shared-memory traffic among the lanes of one wave (no block-wide barrier).
PACKFA_DEV void sync_wave() {
#if defined(PACKFA_BACKEND_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
  __builtin_amdgcn_wave_barrier();
#endif
}

// ---- lane exchange -------------------------------------------------------------------
// xor butterflies: on RDNA, masks < 16 stay inside a 16-lane row and map to one DPP
// row_xmask move; mask 16 crosses rows with v_permlanex16 (no LDS round trip).
PACKFA_DEV int shfl_xor(int v, int mask) {
#if defined(PACKFA_BACKEND_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, mask, kWaveSize);
#else
  if (mask < 16) {
    // dpp_ctrl 0x160|m = row_xmask:m (GFX10+); row_mask/bank_mask 0xf = all lanes.
    switch (mask) {
      case 1: return __builtin_amdgcn_update_dpp(0, v, 0x161, 0xf, 0xf, false);
      case 2: return __builtin_amdgcn_update_dpp(0, v, 0x162, 0xf, 0xf, false);
      case 4: return __builtin_amdgcn_update_dpp(0, v, 0x164, 0xf, 0xf, false);
      case 8: return __builtin_amdgcn_update_dpp(0, v, 0x168, 0xf, 0xf, false);
      default: return __shfl_xor(v, mask, kWaveSize);
    }
  }
  if (mask == 16) return __builtin_amdgcn_permlanex16(v, v, 0x76543210u, 0xfedcba98u, false, false);
  return __shfl_xor(v, mask, kWaveSize);
#endif
}
PACKFA_DEV float shfl_xor(float v, int mask) {
  return __int_as_float(shfl_xor(__float_as_int(v), mask));
}
PACKFA_DEV int shfl(int v, int src_lane) {
#if defined(PACKFA_BACKEND_CUDA)
  return __shfl_sync(0xffffffffu, v, src_lane, kWaveSize);
#else
  return __shfl(v, src_lane, kWaveSize);
#endif
}
PACKFA_DEV float shfl(float v, int src_lane) { return __int_as_float(shfl(__float_as_int(v), src_lane)); }

// True on every lane when `p` holds on any lane of the wave.
PACKFA_DEV bool wave_any(bool p) {
#if defined(PACKFA_BACKEND_CUDA)
  return __any_sync(0xffffffffu, p);
#else
  return __any(p);
#endif
}

// Reductions over groups of `width` consecutive lanes (width a power of two ≤ 32).
template <int width = kWaveSize>
PACKFA_DEV float group_max(float v) {
#pragma unroll
  for (int m = width / 2; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}
template <int width = kWaveSize>
PACKFA_DEV float group_sum(float v) {
#pragma unroll
  for (int m = width / 2; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}

// ---- int8 / f16 dot products ------------------------------------------------------------
// acc + Σ a.byte[i] * b.byte[i], all signed. RDNA3/4: v_dot4_i32_iu8 with both operands
// marked signed (the sudot4 builtin's flags); NVIDIA: dp4a.
PACKFA_DEV int dot4_i8(int a, int b, int acc) {
#if defined(PACKFA_BACKEND_CUDA)
  return __dp4a(a, b, acc);
#else
  return __builtin_amdgcn_sudot4(true, a, true, b, acc, false);
#endif
}

// ---- number formats -----------------------------------------------------------------------
PACKFA_DEV float half_to_float(uint16_t h) {
#if defined(PACKFA_BACKEND_CUDA)
  return __half2float(__ushort_as_half(h));
#else
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
#endif
}
PACKFA_DEV uint16_t float_to_half(float f) {  // round to nearest even
#if defined(PACKFA_BACKEND_CUDA)
  return __half_as_ushort(__float2half_rn(f));
#else
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#endif
}
PACKFA_DEV float bf16_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
PACKFA_DEV uint16_t float_to_bf16(float f) {  // round to nearest even, NaN kept quiet
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// Two fp16 in one word -> two floats (low half first).
PACKFA_DEV void half2_to_float2(uint32_t w, float& lo, float& hi) {
  lo = half_to_float(static_cast<uint16_t>(w & 0xffffu));
  hi = half_to_float(static_cast<uint16_t>(w >> 16));
}

// 2^x, fast hardware approximation (ex2.approx / v_exp_f32); exp2(-inf) = 0.
PACKFA_DEV float exp2_fast(float x) {
#if defined(PACKFA_BACKEND_CUDA)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return __builtin_amdgcn_exp2f(x);
#endif
}

// Round to nearest, ties away from zero (matches std::round on the host).
PACKFA_DEV int round_to_int(float x) { return static_cast<int>(roundf(x)); }

// ---- tensor-core tiles (NVIDIA sm_80+) ------------------------------------------------------
// P·V runs on mma.sync where it exists; kHasMmaF16 = false selects the scalar path (HIP,
// older NVIDIA). The fragment layouts are those of PTX mma.m16n8k16 / ldmatrix.
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
constexpr bool kHasMmaF16 = true;
#else
constexpr bool kHasMmaF16 = false;
#endif

// One tensor-core instruction, or a trap where there is none (the caller's kHasMmaF16 check
// keeps that path from being taken).
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
#define PACKFA_SM80_ASM(...) asm volatile(__VA_ARGS__)
#else
#define PACKFA_SM80_ASM(...) PACKFA_UNSUPPORTED()
#endif

// c (16x8 fp32) += a (16x16 fp16, row) * b (16x8 fp16, col); a: 4 regs, b: 2 regs.
PACKFA_DEV void mma_16x8x16_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  PACKFA_SM80_ASM(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c (16x8 int32) += a (16x16 int8, row) * b (16x8 int8, col); a: 2 regs (rows g, g+8, bytes
// 4·(lane%4)..+3), b: 1 reg (k 4·(lane%4)..+3 of column g). Exact integer dot products: the
// same int32 sums as the 4-way dot.
PACKFA_DEV void mma_16x8x16_s8(int (&c)[4], const uint32_t (&a)[2], uint32_t b) {
  PACKFA_SM80_ASM(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}
// c (16x8 int32) += a (16x32 int8, row) * b (32x8 int8, col); a: 4 regs (rows g, g+8, bytes
// 4·(lane%4)..+3, then the same + 16), b: 2 regs (k 4·(lane%4)..+3, then + 16, of column g).
PACKFA_DEV void mma_16x8x32_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  PACKFA_SM80_ASM(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four 8x8 fp16 matrices from shared memory (lane l gives row address l); lane l receives
// row l/4, elements 2·(l%4), +1 of each; kTrans: the matrices transposed.
template <bool kTrans>
PACKFA_DEV void ldmatrix_x4_impl(uint32_t (&r)[4], const void* smem) {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  }
#else
  (void)r; (void)smem;
  PACKFA_UNSUPPORTED();
#endif
}
PACKFA_DEV void ldmatrix_x4(uint32_t (&r)[4], const void* smem) { ldmatrix_x4_impl<false>(r, smem); }
PACKFA_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) { ldmatrix_x4_impl<true>(r, smem); }
// Two floats -> packed fp16 pair (low half first), round to nearest even.
PACKFA_DEV uint32_t pack_half2(float lo, float hi) {
  return static_cast<uint32_t>(float_to_half(lo)) | (static_cast<uint32_t>(float_to_half(hi)) << 16);
}
// Packed fp16 pair arithmetic (the NVIDIA tensor-core P·V builds its operands with these;
// elsewhere they are never called).
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
#define PACKFA_F16X2(op, ...) asm(op : "=r"(r) : __VA_ARGS__)
#else
#define PACKFA_F16X2(op, ...) (PACKFA_UNSUPPORTED(), r = 0)
#endif
PACKFA_DEV uint32_t hsub2(uint32_t a, uint32_t b) {
  uint32_t r;
  PACKFA_F16X2("sub.rn.f16x2 %0, %1, %2;", "r"(a), "r"(b));
  return r;
}
PACKFA_DEV uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t r;
  PACKFA_F16X2("mul.rn.f16x2 %0, %1, %2;", "r"(a), "r"(b));
  return r;
}
PACKFA_DEV uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  PACKFA_F16X2("fma.rn.f16x2 %0, %1, %2, %3;", "r"(a), "r"(b), "r"(c));
  return r;
}
#undef PACKFA_F16X2
// (a & m) ^ c in one LOP3: with m and c as register operands ptxas cannot split the two
// immediates into two instructions.
PACKFA_DEV uint32_t and_xor(uint32_t a, uint32_t m, uint32_t c) {
#if defined(PACKFA_DEVICE_CUDA)
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(a), "r"(m), "r"(c));
  return r;
#else
  return (a & m) ^ c;
#endif
}
// Byte select: result byte n = byte ((s >> 4n) & 7) of {x (bytes 0-3), y (bytes 4-7)}.
PACKFA_DEV uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(PACKFA_BACKEND_CUDA)
  return __byte_perm(x, y, s);
#else  // plain selection (not used on the HIP path; v_perm_b32 selects by bytes, not nibbles)
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
#endif
}

// ---- global -> shared copies ------------------------------------------------------------
// NVIDIA (sm_80+): cp.async, so a tile streams in while the previous one is computed.
// Elsewhere: an ordinary load + store (synchronous; correctness identical).
template <int bytes>
PACKFA_DEV void copy_async(void* smem, const void* gmem) {
  static_assert(bytes == 4 || bytes == 8 || bytes == 16, "cp.async moves 4, 8 or 16 bytes");
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(bytes) : "memory");
#else
  if constexpr (bytes == 16) *static_cast<uint4*>(smem) = *static_cast<const uint4*>(gmem);
  if constexpr (bytes == 8) *static_cast<uint2*>(smem) = *static_cast<const uint2*>(gmem);
  if constexpr (bytes == 4) *static_cast<uint32_t*>(smem) = *static_cast<const uint32_t*>(gmem);
#endif
}

// The same copy to a shared-space address the caller already holds (shared_addr_kept); the
// generic pointer serves the targets without cp.async.
template <int bytes>
PACKFA_DEV void copy_async(void* smem, uint32_t saddr, const void* gmem) {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  (void)smem;
  if constexpr (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(gmem) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(saddr), "l"(gmem), "n"(bytes) : "memory");
#else
  (void)saddr;
  copy_async<bytes>(smem, gmem);
#endif
}
// A shared-memory pointer's shared-space address, computed here once and kept in a register by
// the caller. Decision "shared-base-kept": from plain pointers NVVM re-materialises the
// `extern __shared__` symbol's address at each copy (22 times in the D 128 4-row q4_0 kernel),
// and on sm_90 ptxas turns each into an S2R SR_CgaCtaId (a CTA's shared window sits at its
// cluster rank << 24) in front of the copy that needs it — 43650bd's kernel read it once. The
// empty asm makes the value opaque, so it is not re-derived. 0 where there is no cp.async.
PACKFA_DEV uint32_t shared_addr_kept(const void* p) {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm("" : "+r"(s));
  return s;
#else
  (void)p;
  return 0;
#endif
}
PACKFA_DEV void copy_async_commit() {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Wait until at most `pending` committed groups are still in flight (this thread's).
template <int pending>
PACKFA_DEV void copy_async_wait() {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#endif
}

#endif  // device

}  // namespace packfa::arch
