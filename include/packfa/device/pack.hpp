// packfa/device/pack.hpp — pack-on-write: new K rows -> packed16 planes, new V rows -> q8_0 /
// q4_0 (or f16/bf16) at given cache slots. Each thread quantizes one block with the very
// functions the host packer uses (format.hpp), so the bytes are identical by construction.
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_packed16.hpp"
#include "packfa/device/pack_params.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {




// One thread per (token, kv head, block).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kPackThreads, 1) pack_k_kernel(const PackKKernelParams p) {
  const int nblk = p.head_dim / p.block;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kPackThreads + threadIdx.x;
  const int64_t total = static_cast<int64_t>(p.n_tokens) * p.n_kv_heads * nblk;
  pdl::wait();
  pdl::launch_dependents();
  if (item >= total) return;
  const int blk = static_cast<int>(item % nblk);
  const int64_t th = item / nblk;
  const int h = static_cast<int>(th % p.n_kv_heads);
  const int64_t t = th / p.n_kv_heads;
  const int d0 = blk * p.block;

  float x[32];
  const int64_t sbase = t * p.src_token + static_cast<int64_t>(h) * p.src_head + d0;
  for (int i = 0; i < p.block; ++i) {
    float v = load_as_float(p.src, p.src_type, sbase + i);
    const int64_t c = static_cast<int64_t>(h) * p.head_dim + d0 + i;
    if (p.shift) v = v - p.shift[c];
    if (p.chan_scale) v = v / p.chan_scale[c];
    x[i] = v;
  }
  int8_t q[32];
  Packed16BlockStats st;
  const uint16_t d = packed16_quantize_block(x, p.block, q, &st);

  const int64_t slot = p.slots ? static_cast<int64_t>(p.slots[t]) : p.base_slot + t;
  char* pay = p.payload + slot * p.pay_slot + static_cast<int64_t>(h) * p.pay_head + d0;
  for (int i = 0; i < p.block; i += 16) {
    uint4 w;
    uint32_t words[4];
    for (int j = 0; j < 4; ++j)
      words[j] = static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j])) |
                 (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 1])) << 8) |
                 (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 2])) << 16) |
                 (static_cast<uint32_t>(static_cast<uint8_t>(q[i + 4 * j + 3])) << 24);
    w.x = words[0]; w.y = words[1]; w.z = words[2]; w.w = words[3];
    *reinterpret_cast<uint4*>(pay + i) = w;
  }
  *reinterpret_cast<uint16_t*>(p.scales + slot * p.sc_slot + static_cast<int64_t>(h) * p.sc_head + 2 * blk) = d;
  if (p.counters && (st.nonfinite | st.overflow)) {
    if (st.nonfinite) atomicAdd(p.counters, st.nonfinite);
    if (st.overflow) atomicAdd(p.counters + 1, st.overflow);
  }
}



// One thread per (token, kv head, 32-value block).
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS(kPackThreads, 1) quantize_v_kernel(const QuantVKernelParams p) {
  const int nblk = (p.head_dim + 31) / 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kPackThreads + threadIdx.x;
  const int64_t total = static_cast<int64_t>(p.n_tokens) * p.n_kv_heads * nblk;
  pdl::wait();
  pdl::launch_dependents();
  if (item >= total) return;
  const int blk = static_cast<int>(item % nblk);
  const int64_t th = item / nblk;
  const int h = static_cast<int>(th % p.n_kv_heads);
  const int64_t t = th / p.n_kv_heads;
  const int d0 = blk * 32, n = min(32, p.head_dim - d0);
  float x[32];
  const int64_t sbase = t * p.src_token + static_cast<int64_t>(h) * p.src_head + d0;
  for (int i = 0; i < n; ++i) x[i] = load_as_float(p.src, p.src_type, sbase + i);
  const int64_t slot = p.slots ? static_cast<int64_t>(p.slots[t]) : p.base_slot + t;
  char* row = p.dst + slot * p.dst_slot + static_cast<int64_t>(h) * p.dst_head;
  switch (p.dst_format) {
    case static_cast<int>(VFormat::q8_0): {
      uint8_t blockb[kQ8_0BlockBytes];
      q8_0_quantize_block(x, blockb);
      for (int i = 0; i < kQ8_0BlockBytes; i += 2)
        *reinterpret_cast<uint16_t*>(row + blk * kQ8_0BlockBytes + i) =
            static_cast<uint16_t>(blockb[i] | (blockb[i + 1] << 8));
      break;
    }
    case static_cast<int>(VFormat::q4_0): {
      uint8_t blockb[kQ4_0BlockBytes];
      q4_0_quantize_block(x, blockb);
      for (int i = 0; i < kQ4_0BlockBytes; i += 2)
        *reinterpret_cast<uint16_t*>(row + blk * kQ4_0BlockBytes + i) =
            static_cast<uint16_t>(blockb[i] | (blockb[i + 1] << 8));
      break;
    }
    case static_cast<int>(VFormat::f16):
      for (int i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(row)[d0 + i] = fp16_from_float(x[i]);
      break;
    default:
      for (int i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(row)[d0 + i] = bf16_from_float(x[i]);
      break;
  }
}

}  // namespace packfa::device
