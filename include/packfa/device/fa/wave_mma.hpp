// packfa/device/fa/wave_mma.hpp — warp / wave matrix tiles of one 32-lane wave, for the
// warp-level prefill kernel (device/fa/prefill_mma.hpp). The kernel is written once against
// this file; the instruction sets differ only here and in fa/wave_mma_layout.hpp:
//   NVIDIA sm_80+  mma.sync m16n8k32 / m16n8k16 s8 (Q·K), m16n8k16 f16 -> f32 (Q·K, P·V);
//   RDNA4 (gfx12)  v_wmma_i32_16x16x16_iu8, v_wmma_f32_16x16x16_f16 (A / B: 8 values a lane,
//                  lanes 16-31 hold the second half of K);
//   RDNA3 (gfx11)  the same WMMA (A / B: all 16 values of K a lane, lanes 16-31 replicate
//                  lanes 0-15). docs/rdna.md ("Prefill") says why int8 WMMA and not v_dot4.
//
// This file: the operand fragments read from shared memory (Q, K, V, and P from the score
// registers), the Q·K and P·V MMAs, and the global -> shared copies of the kernel's staging.
// fa/wave_mma_layout.hpp (included here) has the rest: which instruction set this compile
// targets (kIsa, kHasWaveMma), and which (query row, column) accumulator element i of a lane
// holds (acc_row / acc_col), with the row reductions over the lanes that share a row. A wave
// owns 16 query rows; scores and O are 16 x 16 accumulator tiles of 8 fp32 values a lane.
//
// Everything that has no instruction on the compiling target traps (PACKFA_UNSUPPORTED): a
// kernel dispatched to the wrong target fails loudly, it never returns zeros.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/wave_mma_layout.hpp"

namespace packfa::device::wave {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

#if defined(PACKFA_BACKEND_HIP)
typedef int v2i __attribute__((ext_vector_type(2)));
typedef int v4i __attribute__((ext_vector_type(4)));
typedef int v8i __attribute__((ext_vector_type(8)));
typedef float v8f __attribute__((ext_vector_type(8)));
typedef _Float16 v8h __attribute__((ext_vector_type(8)));
typedef _Float16 v16h __attribute__((ext_vector_type(16)));
#endif

// Shared-memory reads after this point are not moved before it (keeps the compiler from
// hoisting every fragment load of an unrolled loop into registers).
PACKFA_DEV void compiler_fence() { asm volatile("" ::: "memory"); }

// ---- operands ------------------------------------------------------------------------------
// Operands are read from shared memory: Q rows (row r at q + r·pitch), K keys (key k at
// k + k·pitch), both with head_dim along the row; V as the kernel's V tile (v_offset below).
// Row pitches are odd multiples of 16 bytes (conflict-free 4- and 16-byte reads).
template <class T>
PACKFA_DEV T lds(const char* p) { return *reinterpret_cast<const T*>(p); }

// int8 fragments of K = 16 or 32 head-dim values.
template <int K>
struct I8Frag {
  static_assert(K == 16 || K == 32, "int8 pieces of 16 or 32 values");
#if defined(PACKFA_BACKEND_HIP)
  // gfx12: 8 bytes of each 16-value piece; gfx11: all 16 bytes
  static constexpr int kWords = kIsa == Isa::gfx12 ? 2 : 4;
  uint32_t w[K / 16][kWords];
#else
  uint32_t w[K / 8];  // rows g, g + 8 (Q) or one key (K: K / 16 used), bytes 4t.. of each 16
#endif
};

// Query side: rows 0..15 of the wave, values d0 .. d0 + K - 1.
template <int K>
PACKFA_DEV I8Frag<K> q_i8(const char* q, int pitch, int d0, int lane) {
  I8Frag<K> f;
  if constexpr (kRdna) {
#if defined(PACKFA_BACKEND_HIP)
    const char* r = q + (lane & 15) * pitch + d0;
    for (int p = 0; p < K / 16; ++p) {
      if constexpr (kIsa == Isa::gfx12) {
        const uint2 x = lds<uint2>(r + 16 * p + 8 * (lane >> 4));
        f.w[p][0] = x.x, f.w[p][1] = x.y;
      } else {
        const uint4 x = lds<uint4>(r + 16 * p);
        f.w[p][0] = x.x, f.w[p][1] = x.y, f.w[p][2] = x.z, f.w[p][3] = x.w;
      }
    }
#endif
  } else {
#if !defined(PACKFA_BACKEND_HIP)
    const char* r = q + (lane >> 2) * pitch + d0 + 4 * (lane & 3);
    f.w[0] = lds<uint32_t>(r);
    f.w[1] = lds<uint32_t>(r + 8 * pitch);
    if constexpr (K == 32) {
      f.w[2] = lds<uint32_t>(r + 16);
      f.w[3] = lds<uint32_t>(r + 8 * pitch + 16);
    }
#endif
  }
  return f;
}
// Key side: keys 0..15 of a tile, in the query side's shape on both backends (RDNA: key
// lane%16; mma.sync B: key g for n-half 0, g + 8 for n-half 1).
template <int K>
PACKFA_DEV I8Frag<K> k_i8(const char* k, int pitch, int d0, int lane) {
  return q_i8<K>(k, pitch, d0, lane);
}
// acc (one 16x16 tile, int32) += Q·K^T over the fragments' K values: exact integer sums.
template <int K>
PACKFA_DEV void mma_i8(int (&acc)[8], const I8Frag<K>& q, const I8Frag<K>& k) {
#if defined(PACKFA_BACKEND_HIP)
#if defined(PACKFA_DEVICE_HIP)
  v8i c;
  for (int i = 0; i < 8; ++i) c[i] = acc[i];
  for (int p = 0; p < K / 16; ++p) {
    if constexpr (kIsa == Isa::gfx12) {
      const v2i a = {static_cast<int>(k.w[p][0]), static_cast<int>(k.w[p][1])};
      const v2i b = {static_cast<int>(q.w[p][0]), static_cast<int>(q.w[p][1])};
      c = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32_gfx12(true, a, true, b, c, false);
    } else {
      const v4i a = {static_cast<int>(k.w[p][0]), static_cast<int>(k.w[p][1]), static_cast<int>(k.w[p][2]),
                     static_cast<int>(k.w[p][3])};
      const v4i b = {static_cast<int>(q.w[p][0]), static_cast<int>(q.w[p][1]), static_cast<int>(q.w[p][2]),
                     static_cast<int>(q.w[p][3])};
      c = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, a, true, b, c, false);
    }
  }
  for (int i = 0; i < 8; ++i) acc[i] = c[i];
#else
  (void)acc, (void)q, (void)k;
  PACKFA_UNSUPPORTED();
#endif
#else
  int (&c0)[4] = *reinterpret_cast<int(*)[4]>(&acc[0]);
  int (&c1)[4] = *reinterpret_cast<int(*)[4]>(&acc[4]);
  if constexpr (K == 32) {
    const uint32_t a[4] = {q.w[0], q.w[1], q.w[2], q.w[3]};
    arch::mma_16x8x32_s8(c0, a, k.w[0], k.w[2]);
    arch::mma_16x8x32_s8(c1, a, k.w[1], k.w[3]);
  } else {
    const uint32_t a[2] = {q.w[0], q.w[1]};
    arch::mma_16x8x16_s8(c0, a, k.w[0]);
    arch::mma_16x8x16_s8(c1, a, k.w[1]);
  }
#endif
}

// fp16 fragments of 16 head-dim values. NVIDIA: the m16n8k16 k index is a permutation of the
// head dims (k 2t, 2t+1, 2t+8, 2t+9 = dims 4t .. 4t+3), the same on both operands, so a lane
// reads 4 consecutive dims (8 bytes of fp16, 4 bytes of int8 K) per row.
struct F16Frag {
#if defined(PACKFA_BACKEND_HIP)
  uint32_t w[kIsa == Isa::gfx12 ? 4 : 8];
#else
  uint32_t w[4];  // Q: a0..a3 (rows g, g + 8); K: b0, b1 of n-half 0, then of n-half 1
#endif
};

// int8 x4 -> two fp16 pairs, exact.
PACKFA_DEV void i8x4_to_half2(uint32_t x, uint32_t& lo, uint32_t& hi) {
#if defined(PACKFA_BACKEND_HIP)
  const int b0 = static_cast<int8_t>(x & 0xff), b1 = static_cast<int8_t>((x >> 8) & 0xff);
  const int b2 = static_cast<int8_t>((x >> 16) & 0xff), b3 = static_cast<int8_t>(x >> 24);
  lo = arch::pack_half2(static_cast<float>(b0), static_cast<float>(b1));
  hi = arch::pack_half2(static_cast<float>(b2), static_cast<float>(b3));
#else
  // 0x64xx as fp16 is 1024 + xx: bias the bytes to unsigned, subtract 1024 + 128
  const uint32_t y = x ^ 0x80808080u;
  lo = arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4140), 0x64806480u);
  hi = arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4342), 0x64806480u);
#endif
}

// Query side, fp16 Q rows (2 bytes a value), dims d0 .. d0 + 15.
PACKFA_DEV F16Frag q_f16(const char* q, int pitch, int d0, int lane) {
  F16Frag f;
#if defined(PACKFA_BACKEND_HIP)
  const char* r = q + (lane & 15) * pitch + 2 * d0;
  if constexpr (kIsa == Isa::gfx12) {
    const uint4 x = lds<uint4>(r + 16 * (lane >> 4));
    f.w[0] = x.x, f.w[1] = x.y, f.w[2] = x.z, f.w[3] = x.w;
  } else {
    const uint4 x = lds<uint4>(r), y = lds<uint4>(r + 16);
    f.w[0] = x.x, f.w[1] = x.y, f.w[2] = x.z, f.w[3] = x.w, f.w[4] = y.x, f.w[5] = y.y, f.w[6] = y.z, f.w[7] = y.w;
  }
#else
  const char* r = q + (lane >> 2) * pitch + 2 * (d0 + 4 * (lane & 3));
  const uint2 lo = lds<uint2>(r), hi = lds<uint2>(r + 8 * pitch);
  f.w[0] = lo.x, f.w[2] = lo.y, f.w[1] = hi.x, f.w[3] = hi.y;
#endif
  return f;
}
// Key side, fp16 K (kI8 = false) or int8 K widened exactly to fp16 (kI8 = true).
template <bool kI8>
PACKFA_DEV F16Frag k_f16(const char* k, int pitch, int d0, int lane) {
  F16Frag f;
#if defined(PACKFA_BACKEND_HIP)
  if constexpr (kI8) {
    const char* r = k + (lane & 15) * pitch + d0;
    if constexpr (kIsa == Isa::gfx12) {
      const uint2 x = lds<uint2>(r + 8 * (lane >> 4));
      i8x4_to_half2(x.x, f.w[0], f.w[1]);
      i8x4_to_half2(x.y, f.w[2], f.w[3]);
    } else {
      const uint4 x = lds<uint4>(r);
      i8x4_to_half2(x.x, f.w[0], f.w[1]);
      i8x4_to_half2(x.y, f.w[2], f.w[3]);
      i8x4_to_half2(x.z, f.w[4], f.w[5]);
      i8x4_to_half2(x.w, f.w[6], f.w[7]);
    }
  } else {
    f = q_f16(k, pitch, d0, lane);
  }
#else
  if constexpr (kI8) {
    const char* r = k + (lane >> 2) * pitch + d0 + 4 * (lane & 3);
    i8x4_to_half2(lds<uint32_t>(r), f.w[0], f.w[1]);
    i8x4_to_half2(lds<uint32_t>(r + 8 * pitch), f.w[2], f.w[3]);
  } else {
    const char* r = k + (lane >> 2) * pitch + 2 * (d0 + 4 * (lane & 3));
    const uint2 a = lds<uint2>(r), b = lds<uint2>(r + 8 * pitch);
    f.w[0] = a.x, f.w[1] = a.y, f.w[2] = b.x, f.w[3] = b.y;
  }
#endif
  return f;
}

#if defined(PACKFA_DEVICE_HIP)
PACKFA_DEV v8f to_v8f(const float (&a)[8]) {
  v8f c;
  for (int i = 0; i < 8; ++i) c[i] = a[i];
  return c;
}
PACKFA_DEV void from_v8f(float (&a)[8], v8f c) {
  for (int i = 0; i < 8; ++i) a[i] = c[i];
}
template <int N>
PACKFA_DEV auto as_half_vec(const uint32_t (&w)[N]) {
  if constexpr (N == 4) {
    v8h h;
    for (int i = 0; i < 4; ++i) {
      h[2 * i] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(w[i] & 0xffffu));
      h[2 * i + 1] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(w[i] >> 16));
    }
    return h;
  } else {
    v16h h;
    for (int i = 0; i < 8; ++i) {
      h[2 * i] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(w[i] & 0xffffu));
      h[2 * i + 1] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(w[i] >> 16));
    }
    return h;
  }
}
// c += A·B on the f16 WMMA (A: M side, B: N side fragments as the ISA lays them out).
template <int N>
PACKFA_DEV void wmma_f16(float (&acc)[8], const uint32_t (&a)[N], const uint32_t (&b)[N]) {
  v8f c = to_v8f(acc);
  if constexpr (kIsa == Isa::gfx12)
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(as_half_vec(a), as_half_vec(b), c);
  else
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(as_half_vec(a), as_half_vec(b), c);
  from_v8f(acc, c);
}
#endif

// acc (one 16x16 fp32 tile) += A·B over 16 values, fp16 operands: on NVIDIA two m16n8k16 mma
// (b holds the two 8-column halves); RDNA's wmma forms the transposed tile, B^T·A^T, with the
// operands swapped, which is why the fragments' lane layouts differ between the backends.
template <int N>
PACKFA_DEV void mma_tile_f16(float (&acc)[8], const uint32_t (&a)[N], const uint32_t (&b)[N]) {
#if defined(PACKFA_BACKEND_HIP)
#if defined(PACKFA_DEVICE_HIP)
  wmma_f16(acc, b, a);
#else
  (void)acc, (void)a, (void)b;
  PACKFA_UNSUPPORTED();
#endif
#else
  float (&c0)[4] = *reinterpret_cast<float(*)[4]>(&acc[0]);
  float (&c1)[4] = *reinterpret_cast<float(*)[4]>(&acc[4]);
  arch::mma_16x8x16_f16(c0, a, b[0], b[1]);
  arch::mma_16x8x16_f16(c1, a, b[2], b[3]);
#endif
}

// acc (one 16x16 tile, fp32) += Q·K^T over 16 head-dim values (RDNA: S^T = K·Q^T).
PACKFA_DEV void mma_f16(float (&acc)[8], const F16Frag& q, const F16Frag& k) { mma_tile_f16(acc, q.w, k.w); }

// ---- P·V -------------------------------------------------------------------------------------
// V tile in shared memory as fp16: NVIDIA [key][dim] (ldmatrix.trans gives the B operand),
// RDNA [dim][key] (a lane reads the keys of one dim: the A operand of V^T).
PACKFA_DEV int v_offset(int key, int dim, int pitch) { return kRdna ? dim * pitch + 2 * key : key * pitch + 2 * dim; }

// P of one 16-key tile (the score registers after exp2) as the operand of P·V.
struct PFrag {
  uint32_t w[kIsa == Isa::gfx11 ? 8 : 4];
};
PACKFA_DEV PFrag p_frag(const float (&s)[8], int lane) {
  PFrag f;
  if constexpr (kIsa == Isa::gfx11) {  // all 16 keys a lane: the partner lane (l ^ 16) has the other parity
    const int h = lane >> 4;
    for (int i = 0; i < 8; ++i) {
      const float o = arch::shfl_xor(s[i], 16);
      f.w[i] = h == 0 ? arch::pack_half2(s[i], o) : arch::pack_half2(o, s[i]);  // keys 2i, 2i + 1
    }
  } else {  // NVIDIA: A fragment a0..a3; gfx12: keys 8·(lane/16) + 0..7 in order
    (void)lane;
    if constexpr (kRdna) {
      for (int i = 0; i < 4; ++i) f.w[i] = arch::pack_half2(s[2 * i], s[2 * i + 1]);
    } else {
      f.w[0] = arch::pack_half2(s[0], s[1]);
      f.w[1] = arch::pack_half2(s[2], s[3]);
      f.w[2] = arch::pack_half2(s[4], s[5]);
      f.w[3] = arch::pack_half2(s[6], s[7]);
    }
  }
  return f;
}
// V of keys key0 .. key0 + 15, dims dim0 .. dim0 + 15.
struct VFrag {
  uint32_t w[kIsa == Isa::gfx11 ? 8 : 4];
};
PACKFA_DEV VFrag v_frag(const char* vt, int pitch, int key0, int dim0, int lane) {
  VFrag f;
  if constexpr (kRdna) {
    const char* r = vt + v_offset(key0, dim0 + (lane & 15), pitch);
    if constexpr (kIsa == Isa::gfx12) {
      const uint4 x = lds<uint4>(r + 16 * (lane >> 4));
      f.w[0] = x.x, f.w[1] = x.y, f.w[2] = x.z, f.w[3] = x.w;
    } else {
      const uint4 x = lds<uint4>(r), y = lds<uint4>(r + 16);
      f.w[0] = x.x, f.w[1] = x.y, f.w[2] = x.z, f.w[3] = x.w;
      f.w[4] = y.x, f.w[5] = y.y, f.w[6] = y.z, f.w[7] = y.w;
    }
  } else {
#if !defined(PACKFA_BACKEND_HIP)
    const int m = lane >> 3, r = lane & 7;  // matrix m: keys 8·(m&1) + r, dims 8·(m>>1)
    arch::ldmatrix_x4_trans(f.w, vt + v_offset(key0 + 8 * (m & 1) + r, dim0 + 8 * (m >> 1), pitch));
#endif
  }
  return f;
}
// o (one 16x16 tile: 16 rows x 16 dims) += P·V (RDNA: O^T = V^T·P^T).
PACKFA_DEV void mma_pv(float (&o)[8], const PFrag& p, const VFrag& v) { mma_tile_f16(o, p.w, v.w); }

// ---- global -> shared copies -----------------------------------------------------------------
// W bytes (16, 8, 4: cp.async on NVIDIA, zero-filled when !valid; 2: a plain copy); RDNA: a
// plain load and store (the kernel stages synchronously there).
template <int W>
PACKFA_DEV void copy_piece(char* dst, const char* src, bool valid) {
#if defined(PACKFA_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  if constexpr (W >= 4) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    const int n = valid ? W : 0;
    if constexpr (W == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(W), "r"(n) : "memory");
    return;
  }
#endif
  if constexpr (W == 16) *reinterpret_cast<uint4*>(dst) = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
  else if constexpr (W == 8) *reinterpret_cast<uint2*>(dst) = valid ? *reinterpret_cast<const uint2*>(src) : make_uint2(0, 0);
  else if constexpr (W == 4) *reinterpret_cast<uint32_t*>(dst) = valid ? *reinterpret_cast<const uint32_t*>(src) : 0u;
  else *reinterpret_cast<uint16_t*>(dst) = valid ? *reinterpret_cast<const uint16_t*>(src) : uint16_t(0);
}

#endif  // backend

}  // namespace packfa::device::wave
