// packfa/device/fa/prefill_rows.hpp — the query rows of a Hopper prefill block: what each
// accumulator row is (PrefillRow: token, head, position, edits; one table entry a row in shared
// memory) and how the rows leave the block (write_prefill_rows: sinks, normalisation, O and LSE, or the
// decode combine's partials under key splits). Used by fa/prefill_sm90.hpp.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/prefill_tiles.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"

namespace packfa::device::prefill {

// Per accumulator row: where its token sits and what edits its scores get.
struct PrefillRow {
  int qi, h, pos;         // token, query head, position (valid rows: qi < nq)
  float slope, mask_mul;
  float slope_pos;        // AlibiMode::position: slope (else 0)
  const uint16_t* mask;   // the row's mask (key 0), or null
};

// Row R of the block's KV head kvh in sequence b: its token, query head, position (clamped; a
// q_pos outside [0, kv_len) counted in p.errors[1] where `count`), ALiBi slope and mask row.
// first / end: its visible keys [first, end), set for a valid row (qi < nq) only.
PACKFA_DEV PrefillRow prefill_row(const FaKernelParams& p, int R, int b, int kvh, int kv_len, bool count, int& first,
                                  int& end) {
  PrefillRow ri;
  ri.qi = R / p.gqa;
  ri.h = kvh * p.gqa + R % p.gqa;
  ri.pos = -1;
  ri.slope = 0.0f;
  ri.slope_pos = 0.0f;
  ri.mask_mul = 1.0f;
  ri.mask = nullptr;
  if (ri.qi < p.nq) {
    const int pos = p.q_pos ? p.q_pos[static_cast<int64_t>(b) * p.nq + ri.qi] : kv_len - p.nq + ri.qi;
    if (p.q_pos && p.errors && count && (pos < 0 || pos >= kv_len)) atomicAdd(p.errors + 1, 1);
    ri.pos = pos < -1 ? -1 : (pos > kv_len ? kv_len : pos);
    if (p.alibi_n2 > 0) {
      ri.slope = ri.h < p.alibi_n2 ? powf(p.alibi_m0, static_cast<float>(ri.h + 1))
                                   : powf(p.alibi_m1, static_cast<float>(2 * (ri.h - p.alibi_n2) + 1));
      if (!p.alibi_pos) ri.mask_mul = ri.slope;
      else ri.slope_pos = ri.slope;
    }
    end = p.causal ? (ri.pos + 1 < kv_len ? ri.pos + 1 : kv_len) : kv_len;
    first = p.window > 0 ? ri.pos - p.window + 1 : 0;
    if (p.mask)
      ri.mask = p.mask + static_cast<int64_t>(b) * p.mask_seq + static_cast<int64_t>(ri.qi) * p.mask_row +
                static_cast<int64_t>(ri.h) * p.mask_head;
  }
  return ri;
}

// How a row's O leaves: pairs (d, d + 1) as one 8-byte f32 or 4-byte f16 / bf16 store where the
// caller's O allows it, else one store per element in the output type.
enum class OutStore { f32_pairs, f16_pairs, bf16_pairs, elements };

// Both rows' D / 4 values of this thread (times inv[k]) in one store kind K. The kind is chosen
// once, outside the unrolled loops (decision "prefill-epilogue-one-path", docs/prefill.md): with
// the type tested per element, the compiler laid the four kinds' code out interleaved at every
// step, so the one path a call takes jumped over the others' code at each of its 2 · D / 8 steps
// and missed the instruction cache at each (ncu, 512 x 4k: 13% of the kernel's samples).
template <int D, OutStore K>
PACKFA_DEV void store_o_rows(const FaKernelParams& p, const int64_t (&ob)[2], const bool (&valid)[2], const float (&inv)[2],
                             int lane, const float (&o)[D / 2]) {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    if (!valid[k]) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int64_t at = ob[k] + 8 * j + 2 * (lane % 4);
      const float a = o[4 * j + 2 * k] * inv[k], c = o[4 * j + 2 * k + 1] * inv[k];
      if constexpr (K == OutStore::f32_pairs) {
        *reinterpret_cast<float2*>(static_cast<float*>(p.o) + at) = make_float2(a, c);
      } else if constexpr (K == OutStore::f16_pairs) {
        *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + at) = cvt_half2(a, c);
      } else if constexpr (K == OutStore::bf16_pairs) {
        *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.o) + at) =
            static_cast<uint32_t>(arch::float_to_bf16(a)) | (static_cast<uint32_t>(arch::float_to_bf16(c)) << 16);
      } else {
        store_from_float(p.o, p.o_type, at, a);
        store_from_float(p.o, p.o_type, at + 1, c);
      }
    }
  }
}

// A consumer thread's two rows (my_row, my_row + 8) at the end of the key loop: O (the wgmma
// accumulator layout of 64 x D), the running max m and sum l (log2 units, per-thread sums).
// split_out: write partial `part` of p.num_splits (O unnormalised, (m, l)) for the decode
// combine; else sinks, O / l in the output type, LSE.
template <int D>
PACKFA_DEV void write_prefill_rows(const FaKernelParams& p, const PrefillRow* s_rows, int my_row, int lane, int b, int part,
                           bool split_out, float (&o)[D / 2], float (&m)[2], float (&l)[2]) {
  PrefillRow ri[2];
  bool valid[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    l[k] += __shfl_xor_sync(0xffffffffu, l[k], 1);
    l[k] += __shfl_xor_sync(0xffffffffu, l[k], 2);
    ri[k] = s_rows[my_row + 8 * k];
    valid[k] = ri[k].qi < p.nq;
  }
  if (split_out) {  // the partials: O unnormalised, (m, l) in log2 units, as decode's write_rows
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (!valid[k]) continue;
      const int64_t prow = ((static_cast<int64_t>(b) * p.nq + ri[k].qi) * p.n_q_heads + ri[k].h) * p.num_splits + part;
      float* po = p.part_o + prow * D + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < D / 8; ++j) *reinterpret_cast<float2*>(po + 8 * j) = make_float2(o[4 * j + 2 * k], o[4 * j + 2 * k + 1]);
      if (lane % 4 == 0) *reinterpret_cast<float2*>(p.part_ml + prow * 2) = make_float2(m[k], l[k]);
    }
    return;
  }
  float inv[2];
  int64_t ob[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    float scale_o = 1.0f;
    if (p.sinks && valid[k]) {
      const float sk = p.sinks[ri[k].h] * 1.4426950408889634f;
      const float mf = fmaxf(m[k], sk);
      const float c = arch::exp2_fast(m[k] - mf);
      l[k] = l[k] * c + arch::exp2_fast(sk - mf);
      scale_o = c;
      m[k] = mf;
    }
    inv[k] = l[k] > 0.0f ? scale_o / l[k] : 0.0f;
    ob[k] = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(ri[k].qi) * p.o_row +
            static_cast<int64_t>(ri[k].h) * p.o_head;
  }
  // Pairs go out as one store where base and the three strides keep every even element at a
  // multiple of two elements (validate() asks only for element alignment, so an O at an odd
  // element offset or with odd strides is legal and takes one store per element).
  const int64_t esize = p.o_type == static_cast<int>(DType::f32) ? 4 : 2;
  const bool o_pairs = reinterpret_cast<uintptr_t>(p.o) % (2 * esize) == 0 && (p.o_seq | p.o_row | p.o_head) % 2 == 0;
  if (!o_pairs) store_o_rows<D, OutStore::elements>(p, ob, valid, inv, lane, o);
  else if (p.o_type == static_cast<int>(DType::f16)) store_o_rows<D, OutStore::f16_pairs>(p, ob, valid, inv, lane, o);
  else if (p.o_type == static_cast<int>(DType::bf16)) store_o_rows<D, OutStore::bf16_pairs>(p, ob, valid, inv, lane, o);
  else store_o_rows<D, OutStore::f32_pairs>(p, ob, valid, inv, lane, o);
  if (p.lse && lane % 4 == 0) {
#pragma unroll
    for (int k = 0; k < 2; ++k)
      if (valid[k])
        p.lse[(static_cast<int64_t>(b) * p.nq + ri[k].qi) * p.n_q_heads + ri[k].h] =
            l[k] > 0.0f ? (m[k] + log2f(l[k])) * 0.6931471805599453f : -INFINITY;
  }
}

}  // namespace packfa::device::prefill
