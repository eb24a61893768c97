// packfa/device/pack.hpp — pack-on-write: new K rows -> packed16 planes, new V rows -> q8_0 /
// q4_0 (or f16/bf16) at given cache slots. Each thread quantizes one block with the very
// functions the host packer uses (format.hpp), so the bytes are identical by construction.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/pack_params.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

// This thread's (token, kv head, block) of a pack / quantize launch: one thread per item,
// blocks fastest. False past the last item.
struct PackItem {
  int64_t t;
  int h, blk;
};
PACKFA_DEV bool pack_item(int n_tokens, int n_kv_heads, int nblk, PackItem* it) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kPackThreads + threadIdx.x;
  if (item >= static_cast<int64_t>(n_tokens) * n_kv_heads * nblk) return false;
  it->blk = static_cast<int>(item % nblk);
  const int64_t th = item / nblk;
  it->h = static_cast<int>(th % n_kv_heads);
  it->t = th / n_kv_heads;
  return true;
}

// One block of B values (B = 16 or 32, a compile-time size so the arrays stay in registers).
template <int B>
PACKFA_DEV void pack_k_block(const PackKKernelParams& p, int64_t t, int h, int blk) {
  const int d0 = blk * B;
  float x[B];
  const int64_t sbase = t * p.src_token + static_cast<int64_t>(h) * p.src_head + d0;
  PACKFA_UNROLL
  for (int i = 0; i < B; ++i) {
    float v = load_as_float(p.src, p.src_type, sbase + i);
    const int64_t c = static_cast<int64_t>(h) * p.head_dim + d0 + i;
    if (p.shift) v = v - p.shift[c];
    if (p.chan_scale) v = v / p.chan_scale[c];
    x[i] = v;
  }
  int8_t q[B];
  Packed16BlockStats st;
  const uint16_t d = packed16_quantize_block(x, B, q, &st);

  const int64_t slot = p.slots ? static_cast<int64_t>(p.slots[t]) : p.base_slot + t;
  if (slot < 0 || (p.n_slots > 0 && slot >= p.n_slots)) return;  // padding token / outside the cache
  char* pay = p.payload + slot_offset(slot, p.page_size, p.pay_page, p.pay_slot) + static_cast<int64_t>(h) * p.pay_head + d0;
  PACKFA_UNROLL
  for (int i = 0; i < B; i += 16) {
    uint32_t w[4];
    PACKFA_UNROLL
    for (int j = 0; j < 4; ++j)
      w[j] = static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j])) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 1])) << 8) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 2])) << 16) |
             (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 3])) << 24);
    *reinterpret_cast<uint4*>(pay + i) = uint4{w[0], w[1], w[2], w[3]};
  }
  *reinterpret_cast<uint16_t*>(p.scales + slot_offset(slot, p.page_size, p.sc_page, p.sc_slot) +
                               static_cast<int64_t>(h) * p.sc_head + 2 * blk) = d;
  if (p.counters && (st.nonfinite | st.overflow)) {
    if (st.nonfinite) atomicAdd(p.counters, st.nonfinite);
    if (st.overflow) atomicAdd(p.counters + 1, st.overflow);
  }
}

// One thread per (token, kv head, block).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kPackThreads, 1) pack_k_kernel(const PackKKernelParams p) {
  pdl::wait();
  pdl::launch_dependents();
  PackItem it;
  if (!pack_item(p.n_tokens, p.n_kv_heads, p.head_dim / p.block, &it)) return;
  if (p.block == 16) {
    pack_k_block<16>(p, it.t, it.h, it.blk);
  } else {
    pack_k_block<32>(p, it.t, it.h, it.blk);
  }
}

// One thread per (token, kv head, 32-value block).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kPackThreads, 1) quantize_v_kernel(const QuantVKernelParams p) {
  pdl::wait();
  pdl::launch_dependents();
  PackItem it;
  if (!pack_item(p.n_tokens, p.n_kv_heads, (p.head_dim + 31) / 32, &it)) return;
  const int64_t t = it.t;
  const int h = it.h, blk = it.blk;
  const int d0 = blk * 32, n = min(32, p.head_dim - d0);
  const int64_t sbase = t * p.src_token + static_cast<int64_t>(h) * p.src_head + d0;
  const int64_t slot = p.slots ? static_cast<int64_t>(p.slots[t]) : p.base_slot + t;
  if (slot < 0 || (p.n_slots > 0 && slot >= p.n_slots)) return;  // padding token / outside the cache
  char* row = p.dst + slot_offset(slot, p.page_size, p.dst_page, p.dst_slot) + static_cast<int64_t>(h) * p.dst_head;
  if (p.dst_format == static_cast<int>(VFormat::f16) || p.dst_format == static_cast<int>(VFormat::bf16)) {
    const bool half = p.dst_format == static_cast<int>(VFormat::f16);
    for (int i = 0; i < n; ++i) {
      const float x = load_as_float(p.src, p.src_type, sbase + i);
      reinterpret_cast<uint16_t*>(row)[d0 + i] = half ? fp16_from_float(x) : bf16_from_float(x);
    }
    return;
  }
  float x[32];  // q8_0 / q4_0 / q8_0_planar: head_dim % 32 == 0, so a whole block
  PACKFA_UNROLL
  for (int i = 0; i < 32; ++i) x[i] = load_as_float(p.src, p.src_type, sbase + i);
  if (p.dst_format == static_cast<int>(VFormat::q8_0_planar)) {
    alignas(16) int8_t q[32];  // read back as two 16-byte words
    uint16_t d;
    q8_0_planar_quantize_block(x, q, &d);
    int4* dq = reinterpret_cast<int4*>(row + d0);  // rows 16-byte aligned (validated)
    dq[0] = *reinterpret_cast<const int4*>(q);
    dq[1] = *reinterpret_cast<const int4*>(q + 16);
    reinterpret_cast<uint16_t*>(p.dst_scales + slot_offset(slot, p.page_size, p.dscale_page, p.dscale_slot) +
                                static_cast<int64_t>(h) * p.dscale_head)[blk] = d;
    return;
  }
  const bool q8 = p.dst_format == static_cast<int>(VFormat::q8_0);
  uint8_t blockb[kQ8_0BlockBytes];
  if (q8) {
    q8_0_quantize_block(x, blockb);
  } else {
    q4_0_quantize_block(x, blockb);
  }
  const int nbytes = q8 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
  char* dst = row + blk * nbytes;
  PACKFA_UNROLL
  for (int i = 0; i < kQ8_0BlockBytes; i += 2)
    if (i < nbytes) *reinterpret_cast<uint16_t*>(dst + i) = static_cast<uint16_t>(blockb[i] | (blockb[i + 1] << 8));
}

}  // namespace packfa::device
