// packfa/device/fa/prefill_mma.hpp — the prefill kernel on warp / wave matrix instructions:
// NVIDIA sm_80-89 (mma.sync; also runs on sm_90, PACKFA_PREFILL_KERNEL=mma), RDNA4 and
// RDNA3/3.5 (WMMA). One source; the instruction differences live in device/fa/wave_mma.hpp.
//
// One block: 64 query rows (4 waves of 16; GQA rows packed as in decode: row r = token
// r / gqa, head r % gqa of one KV head) against the visible keys of one sequence, in tiles of
// kN keys (NVIDIA: 64, D 256: 16; RDNA: 16; mma_tile_keys says why):
//   stage  — raw cache rows of the tile (any K / V format, contiguous or paged, through the
//            same KvView as decode and prefill_sm90) into shared memory: cp.async one tile
//            ahead on NVIDIA (two raw slots), synchronous loads on RDNA (one slot); keys past
//            the visible range are zero-filled;
//   widen  — the block turns the raw tile's V into an fp16 tile (by its format's rule; f16 V
//            on NVIDIA is read in place) and the K block scales into fp32 beside it;
//   scores — packed16 K, int8 dot: int8 MMA per 32-dim K scale block (int32, exact), then
//            s += isum · q_scale · k_scale in fp32, exactly as decode scales it (so the
//            kernel-math reference holds); fp16-Q dot: fp16 MMA over the exact int8 values,
//            per block, times k_scale; f16 K: fp16 MMA, fp32 accumulate;
//   edits + online softmax in fp32 (ScoreEdit, SoftmaxState: every option of decode), then
//   O += P·V on the fp16 MMA with P straight from the score registers.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/softmax.hpp"
#include "packfa/device/fa/wave_mma.hpp"
#include "packfa/device/fa/widen.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device::prefill_mma {

constexpr int round16(int x) { return (x + 15) / 16 * 16; }
// An odd number of 16-byte units: rows read 4 or 16 bytes a lane without bank conflicts.
constexpr int odd16(int x) { return (round16(x) / 16) % 2 ? round16(x) : round16(x) + 16; }
constexpr int piece_width(int n) { return n % 16 == 0 ? 16 : (n % 8 == 0 ? 8 : (n % 4 == 0 ? 4 : 2)); }

// Shared-memory layout for kN keys a tile and S raw slots. Depends on the backend only (the
// host registry reads it), not on the gfx generation.
template <int D, VFormat VF, QKMode QK, bool kHip, int N, int S>
struct MmaLayoutN {
  static constexpr int kD = D;
  static constexpr int kWaves = 4, kThreads = 32 * kWaves;
  static constexpr int kM = 16 * kWaves;  // query rows a block
  static constexpr int kN = N;            // keys a tile
  static constexpr int kSlots = S;                              // raw tiles in flight + 1 (RDNA: 1, synchronous)
  static constexpr bool kI8K = QK != QKMode::f16;               // packed16 K: int8 values
  static constexpr bool kI8Q = QK == QKMode::packed16_int8;     // Q quantized to int8
  static constexpr int kKRow = kI8K ? D : 2 * D, kKPitch = odd16(kKRow);
  static constexpr int kKs32Row = D % 32 == 0 ? D / 16 : 2;     // K scale row bytes, block 32
  static constexpr int kKsPitch = kI8K ? round16(D / 8) : 0;    // room for block 16
  static constexpr int kVRow = static_cast<int>(v_row_bytes(VF, D)), kVPitch = odd16(kVRow);
  static constexpr int kVWidth = piece_width(kVRow);            // the dispatcher checks the cache allows it
  static constexpr int kVsPitch = VF == VFormat::q8_0_planar ? round16(D / 16) : 0;
  static constexpr int kRawK = 0, kRawKs = kRawK + kN * kKPitch, kRawV = kRawKs + kN * kKsPitch,
                       kRawVs = kRawV + kN * kVPitch, kRawBytes = kRawVs + kN * kVsPitch;
  // fp16 V tile: NVIDIA [key][dim] (f16 V: the raw rows themselves), RDNA [dim][key]
  static constexpr bool kVInPlace = !kHip && VF == VFormat::f16;
  static constexpr int kVtPitch = kVInPlace ? kVPitch : (kHip ? 2 * kN + 16 : odd16(2 * D));
  static constexpr int kVtBytes = kVInPlace ? 0 : (kHip ? D * kVtPitch : kN * kVtPitch);
  static constexpr int kQPitch = odd16(kI8Q ? D : 2 * D);
  static constexpr int kQBlocks = (D + 31) / 32;
  static constexpr int kKsfBytes = kI8K ? (D / 16) * kN * 4 : 0;  // [block (<= D/16)][key] fp32
  static constexpr int kRows = 0;                                  // RowInfo[kM]
  static constexpr int kPos = kRows + kM * static_cast<int>(sizeof(RowInfo));  // min / max position
  static constexpr int kQ = kPos + 16, kQd = kQ + kM * kQPitch;
  static constexpr int kKsf = kQd + (kI8Q ? round16(kM * kQBlocks * 4) : 0);
  static constexpr int kVt = kKsf + kKsfBytes, kRaw = kVt + kVtBytes;
  static constexpr int kBytes = kRaw + kSlots * kRawBytes;
  static_assert(D % 16 == 0, "head_dim a multiple of 16");
  static_assert(sizeof(RowInfo) == 32, "RowInfo is 32 bytes");
};
// Keys a tile: RDNA 16 (with 32, clang-19's schedule for gfx11 reached 256 VGPRs and spilled
// 8-16 bytes in D 96 / 128 instances; 16 keys: about 185 VGPRs, no scratch); NVIDIA 64, or 32
// where 64 would pass the 99 KB of sm_86 / sm_89 (D 128 f16 K + bf16 V), and 16 at D 256 (O is
// 128 registers a thread: with 32 keys ptxas spilled 4-28 bytes).
// Raw slots (NVIDIA): 3 at D <= 128 where they fit the 99 KB, so two tiles are in flight while
// one is computed (decision "rows-split"; measured the same speed as 2 there, and 4 was 1-2%
// slower, H200 session 14), else 2 (D 256 with 3: ptxas spilled 4 bytes in the fp16-Q f16-V
// instance).
template <int D, VFormat VF, QKMode QK, bool kHip>
constexpr int mma_tile_keys() {
  if (kHip) return 16;
  if (D > 128) return 16;
  return MmaLayoutN<D, VF, QK, false, 64, 2>::kBytes <= 99 * 1024 ? 64 : 32;
}
template <int D, VFormat VF, QKMode QK, bool kHip>
constexpr int mma_raw_slots() {
  if (kHip) return 1;
  return D <= 128 && MmaLayoutN<D, VF, QK, false, mma_tile_keys<D, VF, QK, false>(), 3>::kBytes <= 99 * 1024 ? 3 : 2;
}
template <int D, VFormat VF, QKMode QK, bool kHip>
using MmaLayoutOf = MmaLayoutN<D, VF, QK, kHip, mma_tile_keys<D, VF, QK, kHip>(), mma_raw_slots<D, VF, QK, kHip>()>;
template <int D, VFormat VF, QKMode QK>
using MmaLayout = MmaLayoutOf<D, VF, QK,
#if defined(PACKFA_BACKEND_HIP)
                              true
#else
                              false
#endif
                              >;

// Shared-memory limit of one block on the backend's smallest target (RDNA: 64 KB a workgroup;
// NVIDIA: sm_86 / sm_89 opt in to 99 KB, sm_80 to 163 KB, sm_90 to 227 KB; the dispatcher
// checks the device's own limit).
constexpr bool mma_layout_fits(int bytes, bool hip) { return bytes <= (hip ? 64 * 1024 : 227 * 1024); }

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// Rows [t0, t0 + kN) of a plane into dst (kPitch apart) in W-byte pieces, keys >= valid
// zero-filled.
template <int kN, int kRow, int W, int kPitch, int kThreads>
PACKFA_DEV void stage_plane(char* dst, const KvPlane& pl, const KvView& v, int t0, int valid, int tid) {
  static_assert(kRow % W == 0, "pieces tile the row");
  constexpr int kPieces = kRow / W, kTotal = kN * kPieces;
  PACKFA_UNROLL
  for (int i0 = 0; i0 < kTotal; i0 += kThreads) {
    const int i = i0 + tid;
    if (kTotal % kThreads == 0 || i < kTotal) {
      const int key = i / kPieces, off = (i - key * kPieces) * W;
      const bool ok = t0 + key < valid;
      const char* src = ok ? pl.row(v, t0 + key) + off : pl.base;
      wave::copy_piece<W>(dst + key * kPitch + off, src, ok);
    }
  }
}

PACKFA_DEV uint16_t ld_u16(const char* p) { return *reinterpret_cast<const uint16_t*>(p); }

// 16 V values (dims 16c .. 16c + 15) of one raw row as fp16 bits, by the format's rule
// (int·scale rounded once to fp16, as prefill_sm90 and decode's tensor-core V).
template <VFormat VF>
PACKFA_DEV void v_values16(const char* vr, const char* vsr, int c, uint16_t (&h)[16]) {
  if constexpr (VF == VFormat::f16) {
    PACKFA_UNROLL
    for (int e = 0; e < 16; ++e) h[e] = ld_u16(vr + 32 * c + 2 * e);
  } else if constexpr (VF == VFormat::bf16) {
    PACKFA_UNROLL
    for (int e = 0; e < 16; ++e) h[e] = arch::float_to_half(arch::bf16_to_float(ld_u16(vr + 32 * c + 2 * e)));
  } else if constexpr (VF == VFormat::q8_0_planar) {
    const float d = arch::half_to_float(ld_u16(vsr + 2 * (c / 2)));
    const uint4 q = *reinterpret_cast<const uint4*>(vr + 16 * c);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    PACKFA_UNROLL
    for (int e = 0; e < 16; ++e)
      h[e] = arch::float_to_half(static_cast<float>(static_cast<int8_t>((w[e / 4] >> (8 * (e % 4))) & 0xff)) * d);
  } else if constexpr (VF == VFormat::q8_0) {  // block c / 2: fp16 d, then 32 int8 (2-byte aligned)
    const char* blk = vr + (c / 2) * kQ8_0BlockBytes;
    const float d = arch::half_to_float(ld_u16(blk));
    const char* q = blk + 2 + 16 * (c & 1);
    PACKFA_UNROLL
    for (int e = 0; e < 16; e += 2) {
      const uint16_t pr = ld_u16(q + e);
      h[e] = arch::float_to_half(static_cast<float>(static_cast<int8_t>(pr & 0xff)) * d);
      h[e + 1] = arch::float_to_half(static_cast<float>(static_cast<int8_t>(pr >> 8)) * d);
    }
  } else {  // q4_0: block c / 2: fp16 d, 16 bytes; element j low nibble of byte j, j + 16 high
    const char* blk = vr + (c / 2) * kQ4_0BlockBytes;
    const float d = arch::half_to_float(ld_u16(blk));
    const int sh = 4 * (c & 1);
    PACKFA_UNROLL
    for (int e = 0; e < 16; e += 2) {
      const uint16_t pr = ld_u16(blk + 2 + e);
      h[e] = arch::float_to_half(static_cast<float>(static_cast<int>((pr >> sh) & 0xf) - 8) * d);
      h[e + 1] = arch::float_to_half(static_cast<float>(static_cast<int>((pr >> (8 + sh)) & 0xf) - 8) * d);
    }
  }
}

// Raw tile -> fp16 V tile (unless read in place) and fp32 K block scales [block][key slot].
template <int D, VFormat VF, QKMode QK>
PACKFA_DEV void widen_tile(const char* raw, char* vt, float* ksf, int k_block, int tid) {
  using L = MmaLayout<D, VF, QK>;
  constexpr int kN = L::kN;
  if constexpr (L::kI8K) {
    const int nb = D / k_block;
    for (int i = tid; i < kN * nb; i += L::kThreads) {
      const int key = i % kN, blk = i / kN;
      ksf[blk * kN + (key & ~15) + wave::key_slot(key & 15)] =
          arch::half_to_float(ld_u16(raw + L::kRawKs + key * L::kKsPitch + 2 * blk));
    }
  }
  if constexpr (!L::kVInPlace) {
    for (int i = tid; i < kN * (D / 16); i += L::kThreads) {
      const int key = i % kN, c = i / kN;
      const char* vr = raw + L::kRawV + key * L::kVPitch;
      const char* vsr = raw + L::kRawVs + key * L::kVsPitch;
      if constexpr (wave::kRdna) {
        uint16_t h[16];
        v_values16<VF>(vr, vsr, c, h);
        PACKFA_UNROLL
        for (int e = 0; e < 16; ++e)
          *reinterpret_cast<uint16_t*>(vt + wave::v_offset(key, 16 * c + e, L::kVtPitch)) = h[e];
      } else {
        uint32_t w[8];
        if constexpr (v_is_blocked(VF)) {  // packed fp16 arithmetic, no conversions (fa/widen.hpp)
          v_pairs16<VF>(vr, vsr, c, w);
        } else {
          uint16_t h[16];
          v_values16<VF>(vr, vsr, c, h);
          PACKFA_UNROLL
          for (int e = 0; e < 8; ++e) w[e] = static_cast<uint32_t>(h[2 * e]) | (static_cast<uint32_t>(h[2 * e + 1]) << 16);
        }
        uint4* dst = reinterpret_cast<uint4*>(vt + wave::v_offset(key, 16 * c, L::kVtPitch));
        dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
        dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
      }
    }
  }
}

// Q rows r0 .. r0 + 63 of KV head kvh into shared memory: int8 mode quantized per 32 values
// (RefMode::kernel_int8: q = round(x · 127 / amax), scale amax / 127), else fp16-rounded.
template <int D, VFormat VF, QKMode QK>
PACKFA_DEV void load_q(const FaKernelParams& p, const void* qp, char* sq, float* sqd, int b, int kvh, int r0, int tid) {
  using L = MmaLayout<D, VF, QK>;
  constexpr int kBlocks = L::kQBlocks;
  for (int i = tid; i < L::kM * kBlocks; i += L::kThreads) {
    const int r = i % L::kM, blk = i / L::kM, d0 = 32 * blk, n = D - d0 < 32 ? D - d0 : 32;
    const int R = r0 + r, qi = R / p.gqa, h = kvh * p.gqa + R % p.gqa;
    const bool valid = qi < p.nq;
    const int64_t off = static_cast<int64_t>(b) * p.q_seq + static_cast<int64_t>(qi) * p.q_row +
                        static_cast<int64_t>(h) * p.q_head + d0;
    float x[32];
    PACKFA_UNROLL
    for (int e = 0; e < 32; ++e) {
      float v = 0.0f;
      if (valid && e < n) {
        v = load_as_float(qp, p.q_type, off + e);
        if (p.smooth) v *= p.smooth[kvh * D + d0 + e];
      }
      x[e] = v;
    }
    char* row = sq + r * L::kQPitch;
    if constexpr (L::kI8Q) {
      float amax = 0.0f;
      PACKFA_UNROLL
      for (int e = 0; e < 32; ++e) amax = fmaxf(amax, fabsf(x[e]));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      uint32_t w[8];
      PACKFA_UNROLL
      for (int j = 0; j < 8; ++j) {
        uint32_t v = 0;
        PACKFA_UNROLL
        for (int e = 0; e < 4; ++e) {
          int q = arch::round_to_int(x[4 * j + e] * inv);
          q = q < -127 ? -127 : (q > 127 ? 127 : q);
          v |= (static_cast<uint32_t>(q) & 0xffu) << (8 * e);
        }
        w[j] = v;
      }
      PACKFA_UNROLL
      for (int j = 0; j < 8; ++j)
        if (4 * j < n) *reinterpret_cast<uint32_t*>(row + d0 + 4 * j) = w[j];
      sqd[r * kBlocks + blk] = amax > 0.0f ? amax / 127.0f : 0.0f;
    } else {
      PACKFA_UNROLL
      for (int j = 0; j < 16; ++j)
        if (2 * j < n) *reinterpret_cast<uint32_t*>(row + 2 * (d0 + 2 * j)) = arch::pack_half2(x[2 * j], x[2 * j + 1]);
    }
  }
}

// The scores of one tile: s[n][i] = Q·K^T of key tile n, element i (wave_mma.hpp's layout),
// scaled as decode scales them (natural-log units before the softmax scale).
template <int D, VFormat VF, QKMode QK, int KB, int kT>
PACKFA_DEV void tile_scores(float (&s)[kT][8], const char* qw, const float* qdw, const char* kt, const float* ksf,
                            int lane) {
  using L = MmaLayout<D, VF, QK>;
  static_assert(kT == L::kN / 16, "key tiles");
  PACKFA_UNROLL
  for (int n = 0; n < kT; ++n)
    PACKFA_UNROLL
    for (int i = 0; i < 8; ++i) s[n][i] = 0.0f;
  if constexpr (QK == QKMode::f16) {
    PACKFA_UNROLL
    for (int pc = 0; pc < D / 16; ++pc) {
      const wave::F16Frag qf = wave::q_f16(qw, L::kQPitch, 16 * pc, lane);
      PACKFA_UNROLL
      for (int n = 0; n < kT; ++n)
        wave::mma_f16(s[n], qf, wave::k_f16<false>(kt + 16 * n * L::kKPitch, L::kKPitch, 16 * pc, lane));
    }
  } else {
    PACKFA_UNROLL
    for (int blk = 0; blk < D / KB; ++blk) {
      const int d0 = blk * KB;
      float qd[wave::kLaneRows];
      if constexpr (QK == QKMode::packed16_int8) {
        PACKFA_UNROLL
        for (int r = 0; r < wave::kLaneRows; ++r) qd[r] = qdw[wave::slot_row(r, lane) * L::kQBlocks + d0 / 32];
      }
      [[maybe_unused]] wave::I8Frag<KB> qi;
      [[maybe_unused]] wave::F16Frag qh[KB / 16];
      if constexpr (QK == QKMode::packed16_int8) {
        qi = wave::q_i8<KB>(qw, L::kQPitch, d0, lane);
      } else {
        PACKFA_UNROLL
        for (int h = 0; h < KB / 16; ++h) qh[h] = wave::q_f16(qw, L::kQPitch, d0 + 16 * h, lane);
      }
      PACKFA_UNROLL
      for (int n = 0; n < kT; ++n) {
        const char* kn = kt + 16 * n * L::kKPitch;
        float kd[8];
        wave::load_key_vals(ksf + blk * L::kN + 16 * n, lane, kd);
        if constexpr (QK == QKMode::packed16_int8) {
          // NVIDIA: the int32 sum starts at the bits of 2^23 + 2^22 (decision "prefill-biased-isum"):
          // its bits as a float are then 12582912 + isum exactly (|isum| <= 32·127² < 2^22), so
          // one FADD replaces the I2F, which issues at a quarter of the FP32 rate
          constexpr int kBias = wave::kRdna ? 0 : 0x4B400000;
          int acc[8] = {kBias, kBias, kBias, kBias, kBias, kBias, kBias, kBias};
          wave::mma_i8<KB>(acc, qi, wave::k_i8<KB>(kn, L::kKPitch, d0, lane));
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) {
            const float isum = wave::kRdna ? static_cast<float>(acc[i]) : __int_as_float(acc[i]) - 12582912.0f;
            s[n][i] = fmaf(isum, qd[wave::acc_slot(i)] * kd[i], s[n][i]);
          }
        } else {  // fp16 Q x the exact int8 values: fp32 block sum, times the K scale
          float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
          PACKFA_UNROLL
          for (int h = 0; h < KB / 16; ++h)
            wave::mma_f16(acc, qh[h], wave::k_f16<true>(kn, L::kKPitch, d0 + 16 * h, lane));
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) s[n][i] = fmaf(acc[i], kd[i], s[n][i]);
        }
      }
    }
  }
}

template <int D, VFormat VF, QKMode QK, bool PAGED>
__global__ void __launch_bounds__(128, 1) fa_prefill_mma_kernel(const FaKernelParams p) {
  using L = MmaLayout<D, VF, QK>;
  constexpr int kN = L::kN, kM = L::kM, kT = kN / 16;
  static_assert(L::kThreads == 128, "launch bounds");
  if constexpr (!wave::kHasWaveMma) {
    PACKFA_UNSUPPORTED();  // no warp / wave MMA on this target: dispatched wrongly
  } else {
    extern __shared__ __align__(16) char smem[];
    RowInfo* rows = reinterpret_cast<RowInfo*>(smem + L::kRows);
    int* s_pos = reinterpret_cast<int*>(smem + L::kPos);
    const int tid = threadIdx.x, w = tid / 32, lane = tid % 32;
    const int b = blockIdx.z, kvh = blockIdx.y;
    // blockIdx.x = row tile x split (decision "rows-split"); later rows first: causal tiles see
    // most keys
    const int splits = p.num_splits, bx = gridDim.x - 1 - blockIdx.x;
    const int rg = bx / splits, split = bx - rg * splits;

    pdl::wait();  // everything below reads memory a predecessor kernel may write
    const int kv_raw = p.kv_len[b];
    const int kv_len = kv_raw < 0 ? 0 : (kv_raw > p.max_kv_len ? p.max_kv_len : kv_raw);
    if (p.errors && rg == 0 && split == 0 && kvh == 0 && tid == 0 && kv_len != kv_raw) atomicAdd(p.errors + 0, 1);

    BlockRows br;
    br.kvh = kvh;
    br.split = split;
    br.b = b;
    br.rg = rg;
    br.row0 = rg * kM;
    br.nrows = min(kM, p.rows - br.row0);
    const QueryPos pos{p, p.q_pos, b, kv_len};
    if (tid == 0) s_pos[0] = 0x7fffffff, s_pos[1] = -0x7fffffff;
    __syncthreads();
    set_row_facts<kM>(rows, p, br, pos, tid);
    if (tid < br.nrows) {
      const int q = rows[tid].pos;
      atomicMin(&s_pos[0], q);
      atomicMax(&s_pos[1], q);
    }
    load_q<D, VF, QK>(p, p.q, smem + L::kQ, reinterpret_cast<float*>(smem + L::kQd), b, kvh, br.row0, tid);
    __syncthreads();

    BlockKeys keys;
    keys.pmin = s_pos[0];
    keys.pmax = s_pos[1];
    keys.hi = p.causal ? min(kv_len, keys.pmax + 1) : kv_len;
    keys.lo = p.window > 0 ? max(0, keys.pmin - p.window + 1) / kN * kN : 0;
    if (keys.pmin > keys.pmax) keys.hi = keys.lo;  // no row
    keys_seen_by_all(keys, p);
    if (splits > 1) {  // this split's keys: split_len is a multiple of every tile size (the planner)
      keys.lo = max(keys.lo, split * p.split_len);
      keys.hi = min(keys.hi, (split + 1) * p.split_len);
    }
    const int n_tiles = keys.hi > keys.lo ? (keys.hi - keys.lo + kN - 1) / kN : 0;

    const KvPlanes planes = kv_planes<PAGED>(p, b, kvh);
    const KvView& view = planes.view;
    const KvPlane &pk = planes.k, &pks = planes.ks, &pv = planes.v, &pvs = planes.vs;
    auto raw_slot = [&](int t) { return smem + L::kRaw + (t % L::kSlots) * L::kRawBytes; };
    auto stage = [&](int t) {
      char* raw = raw_slot(t);
      const int t0 = keys.lo + t * kN;
      constexpr int kTh = L::kThreads;
      stage_plane<kN, L::kKRow, 16, L::kKPitch, kTh>(raw + L::kRawK, pk, view, t0, keys.hi, tid);
      if constexpr (L::kI8K) {
        if (p.k_block == 32)
          stage_plane<kN, L::kKs32Row, piece_width(L::kKs32Row), L::kKsPitch, kTh>(raw + L::kRawKs, pks, view, t0, keys.hi, tid);
        else
          stage_plane<kN, D / 8, piece_width(D / 8), L::kKsPitch, kTh>(raw + L::kRawKs, pks, view, t0, keys.hi, tid);
      }
      stage_plane<kN, L::kVRow, L::kVWidth, L::kVPitch, kTh>(raw + L::kRawV, pv, view, t0, keys.hi, tid);
      if constexpr (VF == VFormat::q8_0_planar)
        stage_plane<kN, D / 16, piece_width(D / 16), L::kVsPitch, kTh>(raw + L::kRawVs, pvs, view, t0, keys.hi, tid);
      arch::copy_async_commit();
    };

    const ScoreEdit edit = ScoreEdit::of(p, b);
    const float sc2 = p.scale * kLog2e;
    // this lane's rows (wave w: block rows 16w ..): their visible keys and facts
    KeyWindow win[wave::kLaneRows];
    PACKFA_UNROLL
    for (int r = 0; r < wave::kLaneRows; ++r) win[r] = key_window(row_keys(rows, 16 * w + wave::slot_row(r, lane)), keys.hi);
    SoftmaxState st[wave::kLaneRows];
    float o[D / 16][8];
    PACKFA_UNROLL
    for (int j = 0; j < D / 16; ++j)
      PACKFA_UNROLL
      for (int i = 0; i < 8; ++i) o[j][i] = 0.0f;

    const char* qw = smem + L::kQ + 16 * w * L::kQPitch;
    const float* qdw = reinterpret_cast<const float*>(smem + L::kQd) + 16 * w * L::kQBlocks;
    const float* ksf = reinterpret_cast<const float*>(smem + L::kKsf);
    // kSlots - 1 tiles in flight: one commit group per tile (an empty one past the last), so
    // "all but the newest kSlots - 2 groups done" means tile t landed
    constexpr int kAhead = L::kSlots - 1;
    if constexpr (kAhead > 0) {
      PACKFA_UNROLL
      for (int i = 0; i < kAhead; ++i) {
        if (i < n_tiles) stage(i);
        else arch::copy_async_commit();
      }
    }
    for (int t = 0; t < n_tiles; ++t) {
      const int t0 = keys.lo + t * kN;
      if constexpr (kAhead > 0) {
        arch::copy_async_wait<kAhead - 1>();
        __syncthreads();  // tile t landed for every thread; tile t - 1 is done (its slot, V tile free)
        if (t + kAhead < n_tiles) stage(t + kAhead);
        else arch::copy_async_commit();
      } else {
        __syncthreads();  // tile t - 1 is done
        stage(t);
        __syncthreads();
      }
      const char* raw = raw_slot(t);
      widen_tile<D, VF, QK>(raw, smem + L::kVt, reinterpret_cast<float*>(smem + L::kKsf), p.k_block, tid);
      __syncthreads();

      // scores
      float s[kT][8];
      const char* kt = raw + L::kRawK;
      if constexpr (QK == QKMode::f16) {
        tile_scores<D, VF, QK, 16, kT>(s, qw, qdw, kt, ksf, lane);
      } else if constexpr (D % 32 == 0) {
        if (p.k_block == 32) tile_scores<D, VF, QK, 32, kT>(s, qw, qdw, kt, ksf, lane);
        else tile_scores<D, VF, QK, 16, kT>(s, qw, qdw, kt, ksf, lane);
      } else {
        tile_scores<D, VF, QK, 16, kT>(s, qw, qdw, kt, ksf, lane);
      }

      // visibility and edits (three variants, so the common one is short), in log2 units
      const bool full = t0 >= keys.all_lo && t0 + kN <= keys.all_hi;
      if (!edit.extras && full) {
        PACKFA_UNROLL
        for (int n = 0; n < kT; ++n)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) s[n][i] *= sc2;
      } else if (!edit.extras) {
        PACKFA_UNROLL
        for (int n = 0; n < kT; ++n)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) {
            const int key = t0 + 16 * n + wave::acc_col(i, lane);
            s[n][i] = win[wave::acc_slot(i)].has(key) ? s[n][i] * sc2 : kNegInf;
          }
      } else {
        RowInfo ri[wave::kLaneRows];
        PACKFA_UNROLL
        for (int r = 0; r < wave::kLaneRows; ++r) ri[r] = rows[16 * w + wave::slot_row(r, lane)];
        PACKFA_UNROLL
        for (int n = 0; n < kT; ++n)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) {
            const int key = t0 + 16 * n + wave::acc_col(i, lane);
            const int r = wave::acc_slot(i);
            const bool vis = win[r].has(key);
            const float x = edit.apply(s[n][i] * p.scale, vis, key, ri[r]);
            s[n][i] = vis ? x * kLog2e : kNegInf;
          }
      }

      // online softmax (SoftmaxState: l stays lane-partial until the end)
      float corr[wave::kLaneRows];
      PACKFA_UNROLL
      for (int r = 0; r < wave::kLaneRows; ++r) {
        float mx = kNegInf;
        PACKFA_UNROLL
        for (int n = 0; n < kT; ++n)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i)
            if (wave::acc_slot(i) == r) mx = fmaxf(mx, s[n][i]);
        corr[r] = st[r].raise(wave::row_max(mx));
        float sum = 0.0f;
        PACKFA_UNROLL
        for (int n = 0; n < kT; ++n)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i)
            if (wave::acc_slot(i) == r) {
              s[n][i] = st[r].prob(s[n][i]);
              sum += s[n][i];
            }
        st[r].add(corr[r], sum);
      }
      bool moved = false;
      PACKFA_UNROLL
      for (int r = 0; r < wave::kLaneRows; ++r) moved = moved || corr[r] != 1.0f;
      if (arch::wave_any(moved)) {
        PACKFA_UNROLL
        for (int j = 0; j < D / 16; ++j)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i) o[j][i] *= corr[wave::acc_slot(i)];
      }

      // O += P·V: P as fp16 operands first (the scores die), then one 16-dim tile of O at a time
      const char* vt = L::kVInPlace ? raw + L::kRawV : smem + L::kVt;
      wave::PFrag pf[kT];
      PACKFA_UNROLL
      for (int kk = 0; kk < kT; ++kk) pf[kk] = wave::p_frag(s[kk], lane);
      PACKFA_UNROLL
      for (int j = 0; j < D / 16; ++j) {
        PACKFA_UNROLL
        for (int kk = 0; kk < kT; ++kk) wave::mma_pv(o[j], pf[kk], wave::v_frag(vt, L::kVtPitch, 16 * kk, 16 * j, lane));
      }
    }

    pdl::launch_dependents();
    // epilogue: full row sums; one split: sinks, normalise, write O and LSE; several: the
    // split's partial (O unnormalised, (m, l)) for the combine kernel, as decode's write_rows
    PACKFA_UNROLL
    for (int r = 0; r < wave::kLaneRows; ++r) {
      const int R = 16 * w + wave::slot_row(r, lane);
      st[r].l = wave::row_sum(st[r].l);
      const RowInfo ri = rows[R];
      const bool valid = R < br.nrows;
      if (splits > 1) {
        if (!valid) continue;
        const int64_t prow = ((static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head) * splits + split;
        float* po = p.part_o + prow * D;
        PACKFA_UNROLL
        for (int j = 0; j < D / 16; ++j)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i)
            if (wave::acc_slot(i) == r) po[16 * j + wave::acc_col(i, lane)] = o[j][i];
        if (wave::row_leader(lane)) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(st[r].m, st[r].l);
        continue;
      }
      float f = 1.0f;
      if (p.sinks && valid) f = st[r].fold_sink(edit.sink(ri.head));
      const float inv = st[r].inv_sum() * f;
      if (!valid) continue;
      const int64_t ob = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(ri.qi) * p.o_row +
                         static_cast<int64_t>(ri.head) * p.o_head;
      PACKFA_UNROLL
      for (int j = 0; j < D / 16; ++j)
        PACKFA_UNROLL
        for (int i = 0; i < 8; ++i)
          if (wave::acc_slot(i) == r) store_from_float(p.o, p.o_type, ob + 16 * j + wave::acc_col(i, lane), o[j][i] * inv);
      if (p.lse && wave::row_leader(lane))
        p.lse[(static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head] = st[r].lse();
    }
  }
}

#endif  // backend

}  // namespace packfa::device::prefill_mma
