// packfa/device/fa/prefill_mma_tiles.hpp — the warp-MMA prefill kernel's shared-memory layout
// and the code that fills it: staging of raw cache rows (cp.async on NVIDIA, synchronous loads
// on RDNA), widening V to an fp16 tile and the K block scales to fp32, and Q set-up
// (device/fa/prefill_mma.hpp runs the main loop over them; the Hopper kernel's counterpart is
// device/fa/prefill_tiles.hpp).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/wave_mma.hpp"
#include "packfa/device/fa/widen.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/format.hpp"

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
  with_dtype(p.q_type, [&](auto type) {  // the type once, outside the unrolled loads
    for (int i = tid; i < L::kM * kBlocks; i += L::kThreads) {
      const int r = i % L::kM, blk = i / L::kM, d0 = 32 * blk, n = D - d0 < 32 ? D - d0 : 32;
      const QRowAt at = q_row_at(p, b, kvh, r0 + r, d0);
      float x[32];
      PACKFA_UNROLL
      for (int e = 0; e < 32; ++e) {
        float v = 0.0f;
        if (at.valid && e < n) {
          v = load_typed<decltype(type)::value>(qp, at.off + e);
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
  });
}

#endif  // backend

}  // namespace packfa::device::prefill_mma
