// packfa/device/fa/prefill_sm90.hpp — the prefill kernel: many query rows over the packed16
// cache on Hopper warpgroup MMA (sm_90a).
//
// One block: 128 query rows (GQA rows packed as in decode: row r = token r / gqa, head
// r % gqa of one KV head) against the visible keys of one sequence, in tiles of kN keys:
//   stage  — cp.async streams the raw cache bytes of tile t + 1 (any K/V format, contiguous or
//            paged) into a shared ring while tile t is computed;
//   widen  — the block turns a raw tile into fp16 K and V tiles in the MMA layout (K: int8 ·
//            block scale; V: its format's rule), ready one tile ahead;
//   scores — S = Q·K^T on wgmma (fp16 in, fp32 out; Q fp16 in shared memory, quantized per
//            32-block first in the int8 dot mode, so prefill and decode agree),
//   edits + online softmax in fp32 registers, then O += P·V on wgmma (P from registers).
// Why fp16 MMA for Q·K and not int8 (decision "prefill-f16-qk", docs/prefill.md): the K
// scale varies per 32 values along head_dim, so int8 MMA partials need one int->float
// convert and FMA per element per 32-block (4 per score at D = 128) on the FP32 pipe, which
// the softmax already saturates; widening K once per tile costs 2·D/128 ops per score.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/wgmma.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device::prefill {

constexpr int round16(int x) { return (x + 15) / 16 * 16; }
// A row pitch that is an odd number of 16-byte units: 8 threads reading 16 bytes of 8
// consecutive rows hit 8 different bank groups.
constexpr int odd16(int x) { return (round16(x) / 16) % 2 ? round16(x) : round16(x) + 16; }

template <int D, VFormat VF, QKMode QK>
struct PrefillLayout {
  static constexpr int kThreads = 256;           // two warpgroups
  static constexpr int kM = 128;                 // query rows per block, 64 per warpgroup
  static constexpr int kN = D <= 128 ? 64 : 32;  // keys per tile
  static constexpr bool kF16K = QK == QKMode::f16;
  static constexpr int kKRow = kF16K ? 2 * D : D;
  static constexpr int kKPitch = odd16(kKRow);
  static constexpr int kVRow = static_cast<int>(v_row_bytes(VF, D));
  static constexpr int kVWidth = kVRow % 16 == 0 ? 16 : (kVRow % 8 == 0 ? 8 : 4);  // the dispatcher checks the cache allows it
  static constexpr int kKsPitch = kF16K ? 0 : round16(D / 16 * 2);  // scale rows (block 16 at most)
  static constexpr int kVPitch = odd16(kVRow);
  static constexpr int kVsPitch = VF == VFormat::q8_0_planar ? round16(D / 32 * 2) : 0;
  // fp16 tiles in the MMA layout [D / 8][rows][8]: 16 bytes of 8 consecutive head-dim values of
  // a row, rows consecutive (a core matrix = 8 rows = 128 contiguous bytes).
  static constexpr int kQBytes = kM * D * 2;
  static constexpr int kTileBytes = kN * D * 2;
  static constexpr int kRawK = 0, kRawKs = kRawK + kN * kKPitch, kRawV = kRawKs + kN * kKsPitch,
                       kRawVs = kRawV + kN * kVPitch, kRawBytes = kRawVs + kN * kVsPitch;
  static constexpr int kQ = 0, kK = kQ + kQBytes, kV = kK + 2 * kTileBytes, kRaw = kV + 2 * kTileBytes;
  static constexpr int kPos = kRaw + 2 * kRawBytes;  // the block's min / max position (2 ints)
  static constexpr int kBytes = kPos + 16;
  static_assert(D % 16 == 0, "head_dim a multiple of 16");
  static_assert(kBytes <= 227 * 1024, "shared memory of one sm_90 block");
};

PACKFA_DEV uint32_t cvt_half2(float lo, float hi) {
  uint32_t r;
#if PACKFA_WGMMA
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  r = arch::pack_half2(lo, hi);
#endif
  return r;
}

// tanh from one exp2 and one reciprocal: absolute error ~1e-7, which is what a logit needs.
PACKFA_DEV float tanh_fast(float y) {
  const float e = arch::exp2_fast(2.8853900817779268f * fminf(fmaxf(y, -15.0f), 15.0f));  // e^(2y)
  return 1.0f - __fdividef(2.0f, e + 1.0f);
}

// Keeps a register value live and unmoved across an asynchronous MMA that reads it.
PACKFA_DEV void hold(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
PACKFA_DEV void hold(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// cp.async of `w` bytes (4, 8 or 16; 2: a plain copy), zero-filled when !valid.
PACKFA_DEV void copy_piece(char* dst, const char* src, int w, bool valid) {
#if PACKFA_WGMMA
  const uint32_t s = wgmma::smem_addr(dst);
  const int n = valid ? w : 0;
  if (w == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else if (w == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else if (w == 4)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(n) : "memory");
  else
    *reinterpret_cast<uint16_t*>(dst) = valid ? *reinterpret_cast<const uint16_t*>(src) : uint16_t(0);
#else
  (void)dst, (void)src, (void)w, (void)valid;
#endif
}

// One plane of the cache for one (sequence, KV head): rows `slot` bytes apart, or through the
// block table (then `page` bytes between pages).
struct Plane {
  const char* base;
  int64_t slot, page;
  PACKFA_DEV const char* row(const KvView& v, int key) const {
    if (!v.table) return base + key * slot;
    return base + v.page_of(key) * page + (key & ((1 << v.page_shift) - 1)) * slot;
  }
};

// Rows [t0, t0 + kN) of a plane into `dst` (kPitch bytes apart) in W-byte pieces, keys >= valid
// zero-filled. Row length and piece width are compile-time: no divisions in the loop.
template <int kN, int kRow, int W, int kPitch, int kThreads>
PACKFA_DEV void stage_plane(char* dst, const Plane& pl, const KvView& v, int t0, int valid, int tid) {
  static_assert(kRow % W == 0, "pieces tile the row");
  constexpr int kPieces = kRow / W, kTotal = kN * kPieces;
#pragma unroll
  for (int i0 = 0; i0 < kTotal; i0 += kThreads) {
    const int i = i0 + tid;
    if (kTotal % kThreads == 0 || i < kTotal) {
      const int key = i / kPieces, off = (i - key * kPieces) * W;
      const bool ok = t0 + key < valid;
      const char* src = ok ? pl.row(v, t0 + key) + off : pl.base;
      copy_piece(dst + key * kPitch + off, src, W, ok);
    }
  }
}
// Widest copy (<= 16 bytes) that tiles a row of n bytes.
constexpr int piece_width(int n) { return n % 16 == 0 ? 16 : (n % 8 == 0 ? 8 : (n % 4 == 0 ? 4 : 2)); }

// ---- widening: 16 values of a raw row -> 8 fp16 pairs ------------------------------------------
// int8 x4 -> fp16 pairs (exact: 0x64xx is 1024 + byte), times the scale pair s2.
PACKFA_DEV void widen_i8x4(uint32_t x, uint32_t s2, uint32_t& lo, uint32_t& hi) {
  const uint32_t y = x ^ 0x80808080u;
  lo = arch::hmul2(arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4140), 0x64806480u), s2);
  hi = arch::hmul2(arch::hsub2(arch::byte_perm(y, 0x64646464u, 0x4342), 0x64806480u), s2);
}
// four nibbles (one per byte, 0..15) -> (n - 8) · s
PACKFA_DEV void widen_n4(uint32_t x, uint32_t s2, uint32_t& lo, uint32_t& hi) {
  lo = arch::hmul2(arch::hsub2(arch::byte_perm(x, 0x64646464u, 0x4140), 0x64086408u), s2);
  hi = arch::hmul2(arch::hsub2(arch::byte_perm(x, 0x64646464u, 0x4342), 0x64086408u), s2);
}
PACKFA_DEV uint32_t splat(uint16_t h) { return static_cast<uint32_t>(h) * 0x10001u; }
PACKFA_DEV uint32_t ld_u16(const char* p) { return *reinterpret_cast<const uint16_t*>(p); }
// 16 bytes at a 2-byte aligned shared address.
PACKFA_DEV uint4 ld16_a2(const char* p) {
  const uint32_t a = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 3);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(p - a);
  if (a == 0) return make_uint4(w[0], w[1], w[2], w[3]);
  const uint32_t w4 = w[4];
  return make_uint4(arch::byte_perm(w[0], w[1], 0x5432), arch::byte_perm(w[1], w[2], 0x5432),
                    arch::byte_perm(w[2], w[3], 0x5432), arch::byte_perm(w[3], w4, 0x5432));
}
PACKFA_DEV void widen16_i8(const uint4 q, uint32_t s2, uint32_t (&h)[8]) {
  widen_i8x4(q.x, s2, h[0], h[1]);
  widen_i8x4(q.y, s2, h[2], h[3]);
  widen_i8x4(q.z, s2, h[4], h[5]);
  widen_i8x4(q.w, s2, h[6], h[7]);
}
PACKFA_DEV uint32_t bf16x2_to_half2(uint32_t w) {
  return cvt_half2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Writes 16 widened values (head-dim chunk c16 of row `row`) into an MMA-layout tile of `rows`.
PACKFA_DEV void put16(char* tile, int rows, int row, int c16, const uint32_t (&h)[8]) {
  *reinterpret_cast<uint4*>(tile + (2 * c16) * rows * 16 + row * 16) = make_uint4(h[0], h[1], h[2], h[3]);
  *reinterpret_cast<uint4*>(tile + (2 * c16 + 1) * rows * 16 + row * 16) = make_uint4(h[4], h[5], h[6], h[7]);
}

template <int D, VFormat VF, QKMode QK>
PACKFA_DEV void widen_tile(const char* raw, char* kt, char* vt, int k_block, int tid) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kN = L::kN, kItems = kN * D / 16;
  for (int i = tid; i < kItems; i += L::kThreads) {
    const int key = i % kN, c = i / kN;
    uint32_t h[8];
    const char* kr = raw + L::kRawK + key * L::kKPitch;
    if constexpr (L::kF16K) {
      const uint4 a = *reinterpret_cast<const uint4*>(kr + 32 * c), b = *reinterpret_cast<const uint4*>(kr + 32 * c + 16);
      h[0] = a.x, h[1] = a.y, h[2] = a.z, h[3] = a.w, h[4] = b.x, h[5] = b.y, h[6] = b.z, h[7] = b.w;
    } else {
      const uint32_t s = splat(ld_u16(raw + L::kRawKs + key * L::kKsPitch + 2 * (16 * c / k_block)));
      widen16_i8(*reinterpret_cast<const uint4*>(kr + 16 * c), s, h);
    }
    put16(kt, kN, key, c, h);

    const char* vr = raw + L::kRawV + key * L::kVPitch;
    if constexpr (VF == VFormat::f16) {
      const uint4 a = *reinterpret_cast<const uint4*>(vr + 32 * c), b = *reinterpret_cast<const uint4*>(vr + 32 * c + 16);
      h[0] = a.x, h[1] = a.y, h[2] = a.z, h[3] = a.w, h[4] = b.x, h[5] = b.y, h[6] = b.z, h[7] = b.w;
    } else if constexpr (VF == VFormat::bf16) {
      const uint4 a = *reinterpret_cast<const uint4*>(vr + 32 * c), b = *reinterpret_cast<const uint4*>(vr + 32 * c + 16);
      h[0] = bf16x2_to_half2(a.x), h[1] = bf16x2_to_half2(a.y), h[2] = bf16x2_to_half2(a.z);
      h[3] = bf16x2_to_half2(a.w), h[4] = bf16x2_to_half2(b.x), h[5] = bf16x2_to_half2(b.y);
      h[6] = bf16x2_to_half2(b.z), h[7] = bf16x2_to_half2(b.w);
    } else if constexpr (VF == VFormat::q8_0_planar) {
      const uint32_t s = splat(ld_u16(raw + L::kRawVs + key * L::kVsPitch + 2 * (c / 2)));
      widen16_i8(*reinterpret_cast<const uint4*>(vr + 16 * c), s, h);
    } else if constexpr (VF == VFormat::q8_0) {  // block c / 2: fp16 d, then 32 int8
      const char* blk = vr + (c / 2) * kQ8_0BlockBytes;
      widen16_i8(ld16_a2(blk + 2 + 16 * (c & 1)), splat(ld_u16(blk)), h);
    } else {  // q4_0: block c / 2: fp16 d, 16 bytes; element j low nibble of byte j, j + 16 high
      const char* blk = vr + (c / 2) * kQ4_0BlockBytes;
      uint4 q = ld16_a2(blk + 2);
      const uint32_t s = splat(ld_u16(blk));
      const int sh = 4 * (c & 1);
      q.x = (q.x >> sh) & 0x0f0f0f0fu, q.y = (q.y >> sh) & 0x0f0f0f0fu;
      q.z = (q.z >> sh) & 0x0f0f0f0fu, q.w = (q.w >> sh) & 0x0f0f0f0fu;
      widen_n4(q.x, s, h[0], h[1]);
      widen_n4(q.y, s, h[2], h[3]);
      widen_n4(q.z, s, h[4], h[5]);
      widen_n4(q.w, s, h[6], h[7]);
    }
    put16(vt, kN, key, c, h);
  }
}

// ---- Q: 128 rows to fp16 in the MMA layout (int8 mode: quantized per 32-block first) ----------
template <int D, VFormat VF, QKMode QK>
PACKFA_DEV void load_q(const FaKernelParams& p, char* sq, int b, int kvh, int r0, int tid) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kBlocks = (D + 31) / 32;
  for (int i = tid; i < L::kM * kBlocks; i += L::kThreads) {
    const int r = i % L::kM, blk = i / L::kM, d0 = 32 * blk, n = D - d0 < 32 ? D - d0 : 32;
    const int R = r0 + r, qi = R / p.gqa, h = kvh * p.gqa + R % p.gqa;
    float x[32];
    const bool valid = qi < p.nq;
    const int64_t off = static_cast<int64_t>(b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
                        static_cast<int64_t>(h) * p.q_head + d0;
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      float v = 0.0f;
      if (valid && e < n) {
        if (p.q_type == static_cast<int>(DType::f32))
          v = static_cast<const float*>(p.q)[off + e];
        else if (p.q_type == static_cast<int>(DType::f16))
          v = arch::half_to_float(static_cast<const uint16_t*>(p.q)[off + e]);
        else
          v = arch::bf16_to_float(static_cast<const uint16_t*>(p.q)[off + e]);
        if (p.smooth) v *= p.smooth[kvh * D + d0 + e];
      }
      x[e] = v;
    }
    if constexpr (QK == QKMode::packed16_int8) {  // RefMode::kernel_int8 / quantize_q_int8
      float amax = 0.0f;
#pragma unroll
      for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(x[e]));
      const float qd = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        int q = arch::round_to_int(x[e] * inv);
        q = q < -127 ? -127 : (q > 127 ? 127 : q);
        x[e] = static_cast<float>(q) * qd;
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (8 * c < n) {
        uint4 w;
        w.x = cvt_half2(x[8 * c + 0], x[8 * c + 1]);
        w.y = cvt_half2(x[8 * c + 2], x[8 * c + 3]);
        w.z = cvt_half2(x[8 * c + 4], x[8 * c + 5]);
        w.w = cvt_half2(x[8 * c + 6], x[8 * c + 7]);
        *reinterpret_cast<uint4*>(sq + ((d0 / 8) + c) * L::kM * 16 + r * 16) = w;
      }
    }
  }
}

// Per accumulator row: where its token sits and what edits its scores get.
struct PrefillRow {
  bool valid;
  int qi, h, pos;
  int first, end;        // visible keys [first, end): window, causal, kv_len (empty for invalid rows)
  float slope, mask_mul;
  float slope_pos;       // AlibiMode::position: slope (else 0)
  const uint16_t* mask;  // the row's mask (key 0), or null
};

template <int D, VFormat VF, QKMode QK, bool PAGED>
__global__ void __launch_bounds__(256, 1) fa_prefill_kernel(const FaKernelParams p) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kN = L::kN, kM = L::kM;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(128) char smem[];
  int* s_pos = reinterpret_cast<int*>(smem + L::kPos);

  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int b = blockIdx.z, kvh = blockIdx.y;
  const int r0 = (gridDim.x - 1 - blockIdx.x) * kM;  // later rows first: causal tiles see most keys

  pdl::wait();  // everything below reads memory a predecessor kernel may write
  const int kv_raw = p.kv_len[b];
  const int kv_len = kv_raw < 0 ? 0 : (kv_raw > p.max_kv_len ? p.max_kv_len : kv_raw);
  const bool counts = p.errors && r0 == 0 && kvh == 0;
  if (counts && tid == 0 && kv_len != kv_raw) atomicAdd(p.errors + 0, 1);

  // this thread's two accumulator rows: 64·wg + 16·warp + lane / 4 (+ 8)
  PrefillRow row[2];
  if (tid == 0) s_pos[0] = 0x7fffffff, s_pos[1] = -0x7fffffff;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int R = r0 + 64 * wg + 16 * warp + lane / 4 + 8 * k;
    PrefillRow& ri = row[k];
    ri.qi = R / p.gqa;
    ri.h = kvh * p.gqa + R % p.gqa;
    ri.valid = ri.qi < p.nq;
    ri.pos = -1;
    ri.slope = 0.0f;
    ri.slope_pos = 0.0f;
    ri.first = 0;
    ri.end = 0;
    ri.mask_mul = 1.0f;
    ri.mask = nullptr;
    if (ri.valid) {
      int pos = p.q_pos ? p.q_pos[static_cast<int64_t>(b) * p.nq + ri.qi] : kv_len - p.nq + ri.qi;
      if (p.q_pos && p.errors && kvh == 0 && lane % 4 == 0 && (pos < 0 || pos >= kv_len)) atomicAdd(p.errors + 1, 1);
      ri.pos = pos < -1 ? -1 : (pos > kv_len ? kv_len : pos);
      if (p.alibi_n2 > 0) {
        ri.slope = ri.h < p.alibi_n2 ? powf(p.alibi_m0, static_cast<float>(ri.h + 1))
                                     : powf(p.alibi_m1, static_cast<float>(2 * (ri.h - p.alibi_n2) + 1));
        if (!p.alibi_pos) ri.mask_mul = ri.slope;
        else ri.slope_pos = ri.slope;
      }
      ri.end = p.causal ? (ri.pos + 1 < kv_len ? ri.pos + 1 : kv_len) : kv_len;
      ri.first = p.window > 0 ? ri.pos - p.window + 1 : 0;
      if (p.mask)
        ri.mask = p.mask + static_cast<int64_t>(b) * p.mask_seq + static_cast<int64_t>(ri.qi) * p.mask_row +
                  static_cast<int64_t>(ri.h) * p.mask_head;
      atomicMin(&s_pos[0], ri.pos);
      atomicMax(&s_pos[1], ri.pos);
    }
  }

  char* sq = smem + L::kQ;
  load_q<D, VF, QK>(p, sq, b, kvh, r0, tid);
  __syncthreads();
  const int min_pos = s_pos[0], max_pos = s_pos[1];

  // the block's key range [lo, hi), lo on a tile boundary
  int hi = p.causal ? (max_pos + 1 < kv_len ? max_pos + 1 : kv_len) : kv_len;
  int lo = p.window > 0 ? min_pos - p.window + 1 : 0;
  lo = lo < 0 ? 0 : lo / kN * kN;
  if (min_pos > max_pos) hi = lo;  // no valid row
  const int n_tiles = hi > lo ? (hi - lo + kN - 1) / kN : 0;

  KvView view{nullptr, 0, p.num_pages, p.errors};
  if constexpr (PAGED) {
    view.table = p.block_table + static_cast<int64_t>(b) * p.table_stride;
    view.page_shift = 31 - __clz(p.page_size);
  }
  const int64_t bs = PAGED ? 0 : b;
  const Plane pk{p.k + bs * p.k_seq + kvh * p.k_head, p.k_slot, p.k_seq};
  const Plane pks{p.ks + bs * p.ks_seq + kvh * p.ks_head, p.ks_slot, p.ks_seq};
  const Plane pv{p.v + bs * p.v_seq + kvh * p.v_head, p.v_slot, p.v_seq};
  const Plane pvs{p.vs + bs * p.vs_seq + kvh * p.vs_head, p.vs_slot, p.vs_seq};
  auto stage = [&](int t, int slot) {
#ifdef PACKFA_PREFILL_DEV
    if (p.pool0 & 16) return;
#endif
    char* raw = smem + L::kRaw + slot * L::kRawBytes;
    const int t0 = lo + t * kN;
    constexpr int kT = L::kThreads;
    stage_plane<kN, L::kKRow, 16, L::kKPitch, kT>(raw + L::kRawK, pk, view, t0, hi, tid);
    if constexpr (!L::kF16K) {  // scale rows of block 32 or 16
      if (p.k_block == 32)
        stage_plane<kN, D / 16, piece_width(D / 16), L::kKsPitch, kT>(raw + L::kRawKs, pks, view, t0, hi, tid);
      else
        stage_plane<kN, D / 8, piece_width(D / 8), L::kKsPitch, kT>(raw + L::kRawKs, pks, view, t0, hi, tid);
    }
    stage_plane<kN, L::kVRow, L::kVWidth, L::kVPitch, kT>(raw + L::kRawV, pv, view, t0, hi, tid);
    if constexpr (VF == VFormat::q8_0_planar)
      stage_plane<kN, D / 16, piece_width(D / 16), L::kVsPitch, kT>(raw + L::kRawVs, pvs, view, t0, hi, tid);
    arch::copy_async_commit();
  };
  auto widen = [&](int slot, int buf) {
#ifdef PACKFA_PREFILL_DEV
    if (p.pool0 & 1) return;
#endif
    widen_tile<D, VF, QK>(smem + L::kRaw + slot * L::kRawBytes, smem + L::kK + buf * L::kTileBytes,
                          smem + L::kV + buf * L::kTileBytes, p.k_block, tid);
    wgmma::fence_smem_for_mma();
  };

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float softcap = p.softcap;
  const bool extras = softcap > 0.0f || p.mask || p.alibi_n2 > 0;
  const float sc2 = p.scale * kLog2e, inv_cap = softcap > 0.0f ? 1.0f / softcap : 0.0f;

  if (n_tiles > 0) {
    stage(0, 0);
    if (n_tiles > 1) stage(1, 1);
    if (n_tiles > 1) arch::copy_async_wait<1>(); else arch::copy_async_wait<0>();
    __syncthreads();
    widen(0, 0);
    __syncthreads();
  }
  const uint32_t q_addr = wgmma::smem_addr(sq) + 64 * wg * 16;
  for (int t = 0; t < n_tiles; ++t) {
    const int buf = t & 1, t0 = lo + t * kN;
    // scores: S = Q·K^T (64 x kN per warpgroup)
    float s[kN / 2];
    const uint32_t k_addr = wgmma::smem_addr(smem + L::kK + buf * L::kTileBytes);
    wgmma::fence();
#ifdef PACKFA_PREFILL_DEV
    if (!(p.pool0 & 8))
#endif
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma::mma_ss<kN>(s, wgmma::smem_desc(q_addr + 2 * kk * kM * 16, kM * 16, 128),
                        wgmma::smem_desc(k_addr + 2 * kk * kN * 16, kN * 16, 128), kk > 0);
    wgmma::commit();
    wgmma::wait<0>();

    // edits, visibility (three variants, so the common one is short), online softmax
    const bool full = t0 + kN <= kv_len && (!p.causal || t0 + kN - 1 <= min_pos) &&
                      (p.window <= 0 || t0 > max_pos - p.window);
    const int kb = t0 + 2 * (lane % 4);  // key of s[4j + 2k + e] is kb + 8j + e
#ifdef PACKFA_PREFILL_DEV
    if (!(p.pool0 & 32)) {
#endif
    if (!extras && full) {
#pragma unroll
      for (int i = 0; i < kN / 2; ++i) s[i] *= sc2;
    } else if (!extras) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int key = kb + 8 * j + (v & 1);
          const bool vis = key >= row[v >> 1].first && key < row[v >> 1].end;
          s[4 * j + v] = vis ? s[4 * j + v] * sc2 : -INFINITY;
        }
    } else {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const PrefillRow& ri = row[v >> 1];
          const int key = kb + 8 * j + (v & 1);
          const bool vis = key >= ri.first && key < ri.end;
          float x = s[4 * j + v] * p.scale;
          if (softcap > 0.0f) x = softcap * tanh_fast(x * inv_cap);
          if (ri.mask && vis) x += ri.mask_mul * arch::half_to_float(ri.mask[key]);
          x += ri.slope_pos * static_cast<float>(key - ri.pos);
          s[4 * j + v] = vis ? x * kLog2e : -INFINITY;
        }
    }
#ifdef PACKFA_PREFILL_DEV
    }
#endif
    float corr[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * k], s[4 * j + 2 * k + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[k], mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      corr[k] = arch::exp2_fast(m[k] - m_use);
      m[k] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pr = arch::exp2_fast(s[4 * j + 2 * k + e] - m_use);
          s[4 * j + 2 * k + e] = pr;
          sum += pr;
        }
      l[k] = l[k] * corr[k] + sum;
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j + 0] *= corr[0], o[4 * j + 1] *= corr[0];
      o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
    }
    // O += P·V
    uint32_t pf[kN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      pf[kk][0] = cvt_half2(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = cvt_half2(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = cvt_half2(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = cvt_half2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    const uint32_t v_addr = wgmma::smem_addr(smem + L::kV + buf * L::kTileBytes);
    wgmma::fence();
#ifdef PACKFA_PREFILL_DEV
    if (!(p.pool0 & 4))
#endif
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) wgmma::mma_rs_tb<D>(o, pf[kk], wgmma::smem_desc(v_addr + 256 * kk, 128, kN * 16));
    wgmma::commit();

    // meanwhile: widen tile t + 1 (staged one tile ago), stage tile t + 2 into the freed slot
    if (t + 1 < n_tiles) {
      arch::copy_async_wait<0>();
      __syncthreads();
      widen((t + 1) & 1, buf ^ 1);
      __syncthreads();  // every thread is done reading raw slot (t + 1) & 1 ... and t & 1
      if (t + 2 < n_tiles) stage(t + 2, t & 1);
    }
    wgmma::wait<0>();
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk)
      hold(pf[kk][0]), hold(pf[kk][1]), hold(pf[kk][2]), hold(pf[kk][3]);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) hold(o[i]);
    __syncthreads();  // the next tile's buffers are complete; this tile's are free
  }

  pdl::launch_dependents();
  // epilogue: sinks, normalise, write O and LSE
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    l[k] += __shfl_xor_sync(0xffffffffu, l[k], 1);
    l[k] += __shfl_xor_sync(0xffffffffu, l[k], 2);
    const PrefillRow& ri = row[k];
    float scale_o = 1.0f;
    if (p.sinks && ri.valid) {
      const float sk = p.sinks[ri.h] * kLog2e;
      const float mf = fmaxf(m[k], sk);
      const float c = arch::exp2_fast(m[k] - mf);
      l[k] = l[k] * c + arch::exp2_fast(sk - mf);
      scale_o = c;
      m[k] = mf;
    }
    const float inv = l[k] > 0.0f ? scale_o / l[k] : 0.0f;
    if (!ri.valid) continue;
    const int64_t ob = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(ri.qi) * p.o_row +
                       static_cast<int64_t>(ri.h) * p.o_head;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int d = 8 * j + 2 * (lane % 4);
      const float a = o[4 * j + 2 * k] * inv, c = o[4 * j + 2 * k + 1] * inv;
      if (p.o_type == static_cast<int>(DType::f32)) {
        *reinterpret_cast<float2*>(static_cast<float*>(p.o) + ob + d) = make_float2(a, c);
      } else if (p.o_type == static_cast<int>(DType::f16)) {
        *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + ob + d) = cvt_half2(a, c);
      } else {
        *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + ob + d) =
            static_cast<uint32_t>(arch::float_to_bf16(a)) | (static_cast<uint32_t>(arch::float_to_bf16(c)) << 16);
      }
    }
    if (p.lse && lane % 4 == 0)
      p.lse[(static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.h] =
          l[k] > 0.0f ? (m[k] + log2f(l[k])) * 0.6931471805599453f : -INFINITY;
  }
}

}  // namespace packfa::device::prefill
