// packfa/device/fa_packed16.hpp — split-KV flash-decoding attention over a packed16 (or f16) K
// cache, for decode and small query batches. One source for CUDA and HIP.
//
// Work split. A block serves one (sequence, KV head, row group, split): all gqa × nq query
// rows that read this KV head, so every K/V byte is read once per KV head. Inside the block
// each 32-lane wave is an independent flash-decoding worker: it streams its own chunks of 32
// keys (chunk c goes to wave c % waves) through a private shared-memory buffer (one or two
// stages, fa_layout.hpp) and keeps its own running max / sum / accumulators, so the key loop
// needs no block barrier.
// The waves merge once at the end; the combine kernel (device/combine.hpp) merges splits.
//
// Per chunk:  Q·K   lane = key: 16-byte pieces of its K row against every query row (Q held
//                   in shared memory, read as broadcasts): int8 4-way dots into int32 per
//                   block, then one fp32 FMA with q_scale·k_scale (softmax scale folded in);
//             softmax  wave max per row, exp2, lane-partial sums;
//             P·V   NVIDIA: mma.m16n8k16 (P and V as fp16, fp32 accumulation; q8_0/q4_0 V
//                   dequantized to fp16 16 keys at a time); elsewhere lane = DPL output
//                   dims, V dequantized in registers, fp32 FMAs.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa_layout.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -__builtin_huge_valf();

template <int D, VFormat VF, QKMode QK, int RMAX>
struct FaTraits {
#if defined(PACKFA_BACKEND_HIP)
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaHipBudget);
#else
  static constexpr FaLayout L = fa_layout(D, VF, QK, RMAX, kFaCudaBudget);
#endif
  static constexpr int kStages = L.stages;
  static constexpr int kChunk = kFaChunk;
  static constexpr int kDpl = L.dpl;
  static constexpr int kPvLanes = D / kDpl;
  static constexpr bool kInt8Q = QK == QKMode::packed16_int8;
  static constexpr int kKRowBytes = L.k_row_bytes;
  static constexpr int kKPitch = L.k_pitch;
  static constexpr int kScalePitch = L.scale_pitch;
  static constexpr int kVRowBytes = L.v_row_bytes;
  static constexpr int kVPitch = L.v_pitch;
  // Tensor-core P·V (NVIDIA): bf16 V stays scalar (fp16 operands cannot hold its range);
  // q8_0/q4_0 rows are dequantized to fp16, 16 keys at a time, into the dead K buffer.
  static constexpr bool kMmaPv = arch::kHasMmaF16 && VF != VFormat::bf16;
  static constexpr int kConvPitch = L.conv_pitch;
  static constexpr int kStageBytes = L.stage_bytes;
  static constexpr int kWaveBytes = L.wave_bytes;
  static constexpr int kQBlocks = L.q_blocks;
  static constexpr int kQBytes = L.q_bytes;
  static constexpr int kRowInfoBytes = L.row_info_bytes;
  static constexpr int kWaves = L.waves;
  static constexpr int kThreads = kWaves * arch::kWaveSize;
  static constexpr int kSmemBytes = L.smem_bytes;
  static_assert(L.fits, "shared memory over the per-block limit");
  static_assert(16 * kConvPitch <= kChunk * kKPitch, "fp16 V half-chunk must fit in the K buffer");
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
  static_assert(RMAX % 4 == 0, "rows per block must be a multiple of 4");
};

// ---- small helpers ---------------------------------------------------------------------------
PACKFA_DEV float load_as_float(const void* base, int type, int64_t idx) {
  switch (type) {
    case static_cast<int>(DType::f32): return static_cast<const float*>(base)[idx];
    case static_cast<int>(DType::f16): return arch::half_to_float(static_cast<const uint16_t*>(base)[idx]);
    default: return arch::bf16_to_float(static_cast<const uint16_t*>(base)[idx]);
  }
}
PACKFA_DEV void store_from_float(void* base, int type, int64_t idx, float v) {
  switch (type) {
    case static_cast<int>(DType::f32): static_cast<float*>(base)[idx] = v; break;
    case static_cast<int>(DType::f16): static_cast<uint16_t*>(base)[idx] = arch::float_to_half(v); break;
    default: static_cast<uint16_t*>(base)[idx] = arch::float_to_bf16(v); break;
  }
}

// Copy `nrows` rows of ROW_BYTES from global (row stride in bytes) into shared (PITCH), W bytes
// per copy; consecutive lanes take consecutive pieces of a row, so each wave request is
// contiguous in memory.
template <int ROW_BYTES, int PITCH, int W>
PACKFA_DEV void stage_rows_w(char* smem, const char* g, int64_t stride, int nrows) {
  constexpr int kPer = ROW_BYTES / W;
  static_assert(ROW_BYTES % W == 0, "row bytes must be a multiple of the copy width");
  // piece c = lane + 32·i -> (row, col); advanced incrementally (no division in the loop)
  constexpr int kRowStep = arch::kWaveSize / kPer, kColStep = arch::kWaveSize % kPer;
  const int lane = arch::lane_id();
  int row = lane / kPer, col = lane - (lane / kPer) * kPer;
  const char* src = g + row * stride + col * W;
  char* dst = smem + row * PITCH + col * W;
  while (row < nrows) {
    if constexpr (W == 2) {
      *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src);
    } else {
      arch::copy_async<W>(dst, src);
    }
    row += kRowStep;
    col += kColStep;
    src += kRowStep * stride + kColStep * W;
    dst += kRowStep * PITCH + kColStep * W;
    if (col >= kPer) {
      col -= kPer;
      ++row;
      src += stride - kPer * W;
      dst += PITCH - kPer * W;
    }
  }
}
template <int ROW_BYTES, int PITCH>
PACKFA_DEV void stage_rows(char* smem, const char* g, int64_t stride, int nrows, int width) {
  if constexpr (ROW_BYTES % 16 == 0) {
    if (width >= 16) return stage_rows_w<ROW_BYTES, PITCH, 16>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 8 == 0) {
    if (width >= 8) return stage_rows_w<ROW_BYTES, PITCH, 8>(smem, g, stride, nrows);
  }
  if constexpr (ROW_BYTES % 4 == 0) {
    if (width >= 4) return stage_rows_w<ROW_BYTES, PITCH, 4>(smem, g, stride, nrows);
  }
  stage_rows_w<ROW_BYTES, PITCH, 2>(smem, g, stride, nrows);
}

// V for kDpl consecutive dims of one row in shared memory; `d` is the block scale (1 for
// f16/bf16) so callers can fold it into p once per row instead of once per value.
template <VFormat VF, int DPL>
PACKFA_DEV void load_v(const char* row, int dim0, float (&v)[DPL], float& d) {
  if constexpr (VF == VFormat::f16 || VF == VFormat::bf16) {
    d = 1.0f;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(row + 2 * dim0);
    uint32_t words[DPL / 2];
    if constexpr (DPL == 8) {
      const uint4 x = *reinterpret_cast<const uint4*>(w);
      words[0] = x.x; words[1] = x.y; words[2] = x.z; words[3] = x.w;
    } else if constexpr (DPL == 4) {
      const uint2 x = *reinterpret_cast<const uint2*>(w);
      words[0] = x.x; words[1] = x.y;
    } else {
      words[0] = w[0];
    }
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      if constexpr (VF == VFormat::f16) {
        arch::half2_to_float2(words[i], v[2 * i], v[2 * i + 1]);
      } else {
        v[2 * i] = __uint_as_float(words[i] << 16);
        v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
  } else if constexpr (VF == VFormat::q8_0) {
    const char* blk = row + (dim0 / 32) * 34;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (dim0 & 31));  // 2-byte aligned
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = qs[i];
      v[2 * i] = static_cast<float>(static_cast<int8_t>(pair & 0xff));
      v[2 * i + 1] = static_cast<float>(static_cast<int8_t>(pair >> 8));
    }
  } else {  // q4_0: byte j holds element j (low nibble) and j + 16 (high nibble)
    const char* blk = row + (dim0 / 32) * 18;
    d = arch::half_to_float(*reinterpret_cast<const uint16_t*>(blk));
    const int j = dim0 & 31;
    const int shift = j < 16 ? 0 : 4;
    const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (j & 15));
#pragma unroll
    for (int i = 0; i < DPL / 2; ++i) {
      const uint32_t pair = static_cast<uint32_t>(qs[i]) >> shift;
      v[2 * i] = static_cast<float>(static_cast<int>(pair & 0xf) - 8);
      v[2 * i + 1] = static_cast<float>(static_cast<int>((pair >> 8) & 0xf) - 8);
    }
  }
}

// Per-row facts kept in shared memory (read as broadcasts).
struct RowInfo {
  int pos;      // query position
  int qi;       // query row index within the sequence
  float slope;  // ALiBi slope (0 when off)
  int head;     // q head
};

// Tensor-core P·V of one wave's chunk (NVIDIA). P (rows x 32 keys, from pbuf) is the
// fp16 A operand; V rows (fp16: straight from the stage; q8_0/q4_0: dequantized to fp16
// into `conv`, the K buffer, which Q·K no longer needs) are loaded with ldmatrix.trans as
// the B operand; fp32 accumulation in oacc (mma C layout). Rows >= RMAX are zero in A.
template <int D, VFormat VF, int RMAX, class T>
PACKFA_DEV void pv_mma(float (&oacc)[D / 8][4], const float* pbuf, const float* corr_s, const char* v_sm,
                       char* conv, int nvalid) {
  const int lane = arch::lane_id();
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  const float c_lo = g < RMAX ? corr_s[g] : 1.0f;
  const float c_hi = g + 8 < RMAX ? corr_s[g + 8] : 1.0f;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    oacc[nt][0] *= c_lo;
    oacc[nt][1] *= c_lo;
    oacc[nt][2] *= c_hi;
    oacc[nt][3] *= c_hi;
  }
  auto P = [&](int row, int key) { return row < RMAX ? pbuf[key * RMAX + row] : 0.0f; };
#pragma unroll
  for (int ks = 0; ks < T::kChunk / 16; ++ks) {
    const int k0 = 16 * ks;
    if (k0 >= nvalid) break;
    uint32_t a[4];
    a[0] = arch::pack_half2(P(g, k0 + t2), P(g, k0 + t2 + 1));
    a[1] = arch::pack_half2(P(g + 8, k0 + t2), P(g + 8, k0 + t2 + 1));
    a[2] = arch::pack_half2(P(g, k0 + t2 + 8), P(g, k0 + t2 + 9));
    a[3] = arch::pack_half2(P(g + 8, k0 + t2 + 8), P(g + 8, k0 + t2 + 9));
    const char* vsrc;
    int pitch;
    if constexpr (VF == VFormat::f16) {
      if (k0 + 16 > nvalid) {  // last, partial chunk: rows past nvalid are stale; make them 0
        char* vz = const_cast<char*>(v_sm);
        for (int gi = lane; gi < 16 * (D / 8); gi += arch::kWaveSize) {
          const int row = k0 + gi / (D / 8);
          if (row >= nvalid) *reinterpret_cast<uint4*>(vz + row * T::kVPitch + 16 * (gi % (D / 8))) = uint4{0, 0, 0, 0};
        }
        arch::sync_wave();
      }
      vsrc = v_sm + k0 * T::kVPitch;
      pitch = T::kVPitch;
    } else {
      // dequantize keys k0..k0+15 (rows past nvalid hold stale bytes: their p is 0, but
      // 0 * NaN is NaN, so they are written as zeros)
      constexpr int kGroups = D / 4;  // 4 dims per item; 16 rows x kGroups items, 32 per step
      constexpr int kRowStep = arch::kWaveSize / kGroups, kGrpStep = arch::kWaveSize % kGroups;
      int row = lane / kGroups, grp = lane - (lane / kGroups) * kGroups;
#pragma unroll
      for (int it = 0; it < 16 * kGroups / arch::kWaveSize; ++it) {
        uint2 w{0, 0};
        if (k0 + row < nvalid) {
          float v[4], vd;
          load_v<VF, 4>(v_sm + (k0 + row) * T::kVPitch, 4 * grp, v, vd);
          w.x = arch::pack_half2(v[0] * vd, v[1] * vd);
          w.y = arch::pack_half2(v[2] * vd, v[3] * vd);
        }
        *reinterpret_cast<uint2*>(conv + row * T::kConvPitch + 8 * grp) = w;
        row += kRowStep;
        grp += kGrpStep;
        if (grp >= kGroups) {
          grp -= kGroups;
          ++row;
        }
      }
      arch::sync_wave();
      vsrc = conv;
      pitch = T::kConvPitch;
    }
    const char* lrow = vsrc + ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (lane >> 4) * 16;
#pragma unroll
    for (int np = 0; np < D / 16; ++np) {
      uint32_t bfr[4];
      arch::ldmatrix_x4_trans(bfr, lrow + np * 32);
      arch::mma_16x8x16_f16(oacc[2 * np], a, bfr[0], bfr[1]);
      arch::mma_16x8x16_f16(oacc[2 * np + 1], a, bfr[2], bfr[3]);
    }
    if constexpr (VF != VFormat::f16) arch::sync_wave();  // conv is rewritten next step
  }
}

template <int D, VFormat VF, QKMode QK, int RMAX>
PACKFA_GLOBAL void PACKFA_LAUNCH_BOUNDS((FaTraits<D, VF, QK, RMAX>::kThreads), 1)
    fa_split_kernel(const FaKernelParams p) {
  using T = FaTraits<D, VF, QK, RMAX>;
  extern __shared__ __align__(16) char smem[];
  char* q_smem = smem;
  RowInfo* rinfo = reinterpret_cast<RowInfo*>(smem + T::kQBytes);
  char* loop_smem = smem + T::kQBytes + T::kRowInfoBytes;

  const int split = blockIdx.x;
  const int kvh = blockIdx.y;
  const int b = blockIdx.z / p.row_groups;
  const int rg = blockIdx.z - b * p.row_groups;
  const int row0 = rg * RMAX;
  const int nrows = min(RMAX, p.rows - row0);
  const int tid = threadIdx.x;
  const int wave = tid / arch::kWaveSize;
  const int lane = arch::lane_id();

  // Everything below reads memory a predecessor kernel may write (Q, the cache, lengths).
  pdl::wait();

  const int kv_len = p.kv_len[b];

  // ---- row facts + Q into shared memory ---------------------------------------------------
  if (tid < RMAX) {
    RowInfo ri{0, 0, 0.0f, 0};
    if (tid < nrows) {
      const int g = row0 + tid;
      ri.qi = g / p.gqa;
      ri.head = kvh * p.gqa + (g - ri.qi * p.gqa);
      ri.pos = p.q_pos ? p.q_pos[static_cast<int64_t>(b) * p.nq + ri.qi] : kv_len - p.nq + ri.qi;
      if (p.alibi_n2 > 0) {
        const int h = ri.head;
        ri.slope = h < p.alibi_n2 ? powf(p.alibi_m0, static_cast<float>(h + 1))
                                  : powf(p.alibi_m1, static_cast<float>(2 * (h - p.alibi_n2) + 1));
      }
    }
    rinfo[tid] = ri;
  }
  __syncthreads();

  // Q: all threads load (coalesced) into fp32 scratch (the loop buffers are still free),
  // then one thread per (row, 32-block) quantizes (int8 mode) or rounds to fp16.
  float* qtmp = reinterpret_cast<float*>(loop_smem);
  for (int item = tid; item < RMAX * D; item += T::kThreads) {
    const int r = item / D, d = item - r * D;
    float x = 0.0f;
    if (r < nrows) {
      const int64_t idx = static_cast<int64_t>(b) * p.q_seq + static_cast<int64_t>(rinfo[r].qi) * p.q_row +
                          static_cast<int64_t>(rinfo[r].head) * p.q_head + d;
      x = load_as_float(p.q, p.q_type, idx);
      if (p.smooth) x *= p.smooth[static_cast<int64_t>(kvh) * D + d];
    }
    qtmp[item] = x;
  }
  __syncthreads();
  for (int item = tid; item < RMAX * T::kQBlocks; item += T::kThreads) {
    const int r = item / T::kQBlocks, qb = item - r * T::kQBlocks;
    const int d0 = qb * 32, n = min(32, D - d0);
    const float* x = qtmp + r * D + d0;
    if constexpr (T::kInt8Q) {
      float amax = 0.0f;
      for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
      const float qd = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t* qrow = reinterpret_cast<int8_t*>(q_smem) + r * D + d0;
      for (int i = 0; i < n; ++i) {
        const int qv = arch::round_to_int(x[i] * inv);
        qrow[i] = static_cast<int8_t>(max(-127, min(127, qv)));
      }
      float* qscale = reinterpret_cast<float*>(q_smem + RMAX * D);
      qscale[r * T::kQBlocks + qb] = qd * p.scale;
    } else {
      float* qrow = reinterpret_cast<float*>(q_smem) + r * D + d0;
      for (int i = 0; i < n; ++i) qrow[i] = arch::half_to_float(arch::float_to_half(x[i]));
    }
  }
  __syncthreads();

  // ---- key range of this block ----------------------------------------------------------------
  int lo = 0, hi = kv_len;
  {
    int pmin = 0x7fffffff, pmax = -1;
    for (int r = 0; r < nrows; ++r) {
      pmin = min(pmin, rinfo[r].pos);
      pmax = max(pmax, rinfo[r].pos);
    }
    if (p.causal) hi = min(hi, pmax + 1);
    if (p.window > 0) lo = max(0, pmin - p.window + 1);
  }
  const int k_begin = lo + split * p.split_len;
  const int k_end = min(hi, k_begin + p.split_len);
  const int nchunks = k_end > k_begin ? (k_end - k_begin + T::kChunk - 1) / T::kChunk : 0;

  // ---- per-wave streaming loop ----------------------------------------------------------------
  char* wave_smem = loop_smem + wave * T::kWaveBytes;
  float* pbuf = reinterpret_cast<float*>(wave_smem + T::kStages * T::kStageBytes);
  const char* kbase = p.k + static_cast<int64_t>(b) * p.k_seq + static_cast<int64_t>(kvh) * p.k_head;
  const char* ksbase = p.ks + static_cast<int64_t>(b) * p.ks_seq + static_cast<int64_t>(kvh) * p.ks_head;
  const char* vbase = p.v + static_cast<int64_t>(b) * p.v_seq + static_cast<int64_t>(kvh) * p.v_head;
  const bool b16 = p.k_block == 16;
  const int scale_bytes = 2 * D / p.k_block;
  const float softcap = p.softcap;
  const uint16_t* mask_row_base =
      p.mask ? p.mask + static_cast<int64_t>(b) * p.mask_seq : nullptr;

  // Running max (log2 units, wave-uniform) and lane-partial sums per row. Accumulators:
  // scalar path acc[row][kDpl dims]; tensor-core path oacc[n-tile][4] in mma C layout
  // (rows lane/4 and lane/4 + 8, dims 8·tile + 2·(lane%4) + {0,1}).
  float m_run[RMAX], l_part[RMAX], acc[RMAX][T::kDpl];
  float oacc[D / 8][4];
  float* corr_s = pbuf + T::kChunk * RMAX;
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    m_run[r] = kNegInf;
    l_part[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < T::kDpl; ++i) acc[r][i] = 0.0f;
  }
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) oacc[nt][j] = 0.0f;

  auto stage_chunk = [&](int chunk, int stage) {
    const int key0 = k_begin + chunk * T::kChunk;
    const int n = min(T::kChunk, k_end - key0);
    char* st = wave_smem + stage * T::kStageBytes;
    char* ks_dst = st + T::kChunk * T::kKPitch;
    char* v_dst = ks_dst + (QK == QKMode::f16 ? 0 : T::kChunk * T::kScalePitch);
    stage_rows<T::kKRowBytes, T::kKPitch>(st, kbase + static_cast<int64_t>(key0) * p.k_slot, p.k_slot, n, 16);
    if constexpr (QK != QKMode::f16) {
      // each lane copies its own key's scale row (2·D/B bytes)
      if (lane < n) {
        const char* src = ksbase + static_cast<int64_t>(key0 + lane) * p.ks_slot;
        char* dst = ks_dst + lane * T::kScalePitch;
        if (p.ks_width >= 8 && scale_bytes % 8 == 0) {
          for (int o = 0; o < scale_bytes; o += 8) arch::copy_async<8>(dst + o, src + o);
        } else if (p.ks_width >= 4 && scale_bytes % 4 == 0) {
          for (int o = 0; o < scale_bytes; o += 4) arch::copy_async<4>(dst + o, src + o);
        } else {
          for (int o = 0; o < scale_bytes; o += 2)
            *reinterpret_cast<uint16_t*>(dst + o) = *reinterpret_cast<const uint16_t*>(src + o);
        }
      }
    }
    stage_rows<T::kVRowBytes, T::kVPitch>(v_dst, vbase + static_cast<int64_t>(key0) * p.v_slot, p.v_slot, n,
                                          p.v_width);
    arch::copy_async_commit();
  };

  int it = 0;
  int chunk = wave;
  if (T::kStages == 2 && chunk < nchunks) stage_chunk(chunk, 0);
  for (; chunk < nchunks; chunk += T::kWaves, ++it) {
    const int stage = T::kStages == 2 ? (it & 1) : 0;
    if constexpr (T::kStages == 2) {
      const int next = chunk + T::kWaves;
      if (next < nchunks) {
        stage_chunk(next, stage ^ 1);
        arch::copy_async_wait<1>();
      } else {
        arch::copy_async_wait<0>();
      }
    } else {
      stage_chunk(chunk, 0);  // one buffer: the previous chunk's readers are done
      arch::copy_async_wait<0>();
    }
    arch::sync_wave();

    const char* st = wave_smem + stage * T::kStageBytes;
    const char* ks_sm = st + T::kChunk * T::kKPitch;
    const char* v_sm = ks_sm + (QK == QKMode::f16 ? 0 : T::kChunk * T::kScalePitch);
    const int key0 = k_begin + chunk * T::kChunk;
    const int nvalid = min(T::kChunk, k_end - key0);
    const int key = key0 + lane;

    // ---- Q·K: lane = key, all rows ---------------------------------------------------------
    float s[RMAX];
#pragma unroll
    for (int r = 0; r < RMAX; ++r) s[r] = 0.0f;
    const char* krow = st + lane * T::kKPitch;
    if constexpr (QK == QKMode::packed16_int8) {
      const int8_t* qs = reinterpret_cast<const int8_t*>(q_smem);
      const float* qscale = reinterpret_cast<const float*>(q_smem + RMAX * D);
      const uint16_t* kd = reinterpret_cast<const uint16_t*>(ks_sm + lane * T::kScalePitch);
      int isum[RMAX];
#pragma unroll
      for (int piece = 0; piece < D / 16; ++piece) {
        const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
        const bool first = b16 || (piece & 1) == 0;
        const bool last = b16 || (piece & 1) == 1 || piece == D / 16 - 1;
        const float kscale = last ? arch::half_to_float(kd[b16 ? piece : piece / 2]) : 0.0f;
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r < nrows) {
            const int4 qv = *reinterpret_cast<const int4*>(qs + r * D + piece * 16);
            int a = first ? 0 : isum[r];
            a = arch::dot4_i8(qv.x, kv.x, a);
            a = arch::dot4_i8(qv.y, kv.y, a);
            a = arch::dot4_i8(qv.z, kv.z, a);
            a = arch::dot4_i8(qv.w, kv.w, a);
            isum[r] = a;
            if (last) s[r] = fmaf(static_cast<float>(a), qscale[r * T::kQBlocks + piece / 2] * kscale, s[r]);
          }
        }
      }
    } else if constexpr (QK == QKMode::packed16_f16) {
      const float* qf = reinterpret_cast<const float*>(q_smem);
      const uint16_t* kd = reinterpret_cast<const uint16_t*>(ks_sm + lane * T::kScalePitch);
      float part[RMAX];
#pragma unroll
      for (int piece = 0; piece < D / 16; ++piece) {
        const int4 kv = *reinterpret_cast<const int4*>(krow + piece * 16);
        const bool first = b16 || (piece & 1) == 0;
        const bool last = b16 || (piece & 1) == 1 || piece == D / 16 - 1;
        float kf[16];
        const int words[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
        for (int i = 0; i < 16; ++i) kf[i] = static_cast<float>(static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xff));
        const float kscale = last ? arch::half_to_float(kd[b16 ? piece : piece / 2]) : 0.0f;
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r < nrows) {
            const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 16);
            float a = first ? 0.0f : part[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const float4 qv = q4[j];
              a = fmaf(qv.x, kf[4 * j], a);
              a = fmaf(qv.y, kf[4 * j + 1], a);
              a = fmaf(qv.z, kf[4 * j + 2], a);
              a = fmaf(qv.w, kf[4 * j + 3], a);
            }
            part[r] = a;
            if (last) s[r] = fmaf(a, kscale * p.scale, s[r]);
          }
        }
      }
    } else {  // f16 K
      const float* qf = reinterpret_cast<const float*>(q_smem);
#pragma unroll
      for (int piece = 0; piece < D / 8; ++piece) {
        const uint4 kv = *reinterpret_cast<const uint4*>(krow + piece * 16);
        float kf[8];
        arch::half2_to_float2(kv.x, kf[0], kf[1]);
        arch::half2_to_float2(kv.y, kf[2], kf[3]);
        arch::half2_to_float2(kv.z, kf[4], kf[5]);
        arch::half2_to_float2(kv.w, kf[6], kf[7]);
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r < nrows) {
            const float4* q4 = reinterpret_cast<const float4*>(qf + r * D + piece * 8);
            const float4 a0 = q4[0], a1 = q4[1];
            float a = s[r];
            a = fmaf(a0.x, kf[0], a);
            a = fmaf(a0.y, kf[1], a);
            a = fmaf(a0.z, kf[2], a);
            a = fmaf(a0.w, kf[3], a);
            a = fmaf(a1.x, kf[4], a);
            a = fmaf(a1.y, kf[5], a);
            a = fmaf(a1.z, kf[6], a);
            a = fmaf(a1.w, kf[7], a);
            s[r] = a;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < RMAX; ++r) s[r] *= p.scale;
    }

    // ---- options, visibility, online softmax (log2 domain) ------------------------------------
    // All RMAX rows (rows >= nrows hold zeros and are never written out): no early exit,
    // so the rows' independent shuffle chains overlap.
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      const RowInfo ri = rinfo[r];
      float x = s[r];
      if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
      bool visible = lane < nvalid;
      if (p.causal) visible = visible && key <= ri.pos;
      if (p.window > 0) visible = visible && key > ri.pos - p.window;
      if (visible && mask_row_base)
        x += arch::half_to_float(mask_row_base[static_cast<int64_t>(ri.qi) * p.mask_row + key]);
      if (p.alibi_n2 > 0) x += ri.slope * static_cast<float>(key - ri.pos);
      x = visible ? x * kLog2e : kNegInf;
      const float m_new = fmaxf(m_run[r], arch::group_max(x));
      const float corr = m_new == kNegInf ? 1.0f : arch::exp2_fast(m_run[r] - m_new);
      const float pr = m_new == kNegInf ? 0.0f : arch::exp2_fast(x - m_new);
      m_run[r] = m_new;
      l_part[r] = l_part[r] * corr + pr;
      if constexpr (T::kMmaPv) {
        if (lane == 0) corr_s[r] = corr;
      } else {
#pragma unroll
        for (int i = 0; i < T::kDpl; ++i) acc[r][i] *= corr;
      }
      pbuf[lane * RMAX + r] = pr;
    }
    arch::sync_wave();

    if constexpr (T::kMmaPv) {
      pv_mma<D, VF, RMAX, T>(oacc, pbuf, corr_s, v_sm, const_cast<char*>(st), nvalid);
    } else if (lane < T::kPvLanes) {  // ---- scalar P·V: lane = kDpl dims ----------------------
      const int dim0 = lane * T::kDpl;
#pragma unroll 4
      for (int t = 0; t < nvalid; ++t) {
        float v[T::kDpl], vd;
        load_v<VF, T::kDpl>(v_sm + t * T::kVPitch, dim0, v, vd);
        const float4* pt = reinterpret_cast<const float4*>(pbuf + t * RMAX);
#pragma unroll
        for (int r4 = 0; r4 < RMAX / 4; ++r4) {
          if (r4 * 4 >= nrows) break;
          const float4 p4 = pt[r4];
          const float pv[4] = {p4.x * vd, p4.y * vd, p4.z * vd, p4.w * vd};
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int i = 0; i < T::kDpl; ++i) acc[r4 * 4 + j][i] = fmaf(pv[j], v[i], acc[r4 * 4 + j][i]);
        }
      }
    }
    arch::sync_wave();  // this stage and pbuf are rewritten next iteration
  }

  // ---- merge the waves ----------------------------------------------------------------------
  __syncthreads();  // the loop buffers become the merge area
  float* mg = reinterpret_cast<float*>(loop_smem);
  float* mg_acc = mg;                               // [wave][r][D]
  float* mg_ml = mg + T::kWaves * RMAX * D;         // [wave][r][2]
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    const float l = arch::group_sum(l_part[r]);
    if (lane == 0) {
      mg_ml[(wave * RMAX + r) * 2] = m_run[r];
      mg_ml[(wave * RMAX + r) * 2 + 1] = l;
    }
    if constexpr (!T::kMmaPv) {
      if (lane < T::kPvLanes) {
#pragma unroll
        for (int i = 0; i < T::kDpl; ++i) mg_acc[(wave * RMAX + r) * D + lane * T::kDpl + i] = acc[r][i];
      }
    }
  }
  if constexpr (T::kMmaPv) {
    const int g = lane >> 2, c2 = 2 * (lane & 3);
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      if (g < RMAX) {
        mg_acc[(wave * RMAX + g) * D + nt * 8 + c2] = oacc[nt][0];
        mg_acc[(wave * RMAX + g) * D + nt * 8 + c2 + 1] = oacc[nt][1];
      }
      if (g + 8 < RMAX) {
        mg_acc[(wave * RMAX + g + 8) * D + nt * 8 + c2] = oacc[nt][2];
        mg_acc[(wave * RMAX + g + 8) * D + nt * 8 + c2 + 1] = oacc[nt][3];
      }
    }
  }
  __syncthreads();

  // Split output is written by every block; the work it reads is done, so dependents may start.
  pdl::launch_dependents();

  const bool final_out = p.num_splits == 1;
  for (int item = tid; item < nrows * D; item += T::kThreads) {
    const int r = item / D, d = item - r * D;
    float M = kNegInf;
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) M = fmaxf(M, mg_ml[(w * RMAX + r) * 2]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < T::kWaves; ++w) {
      const float mw = mg_ml[(w * RMAX + r) * 2];
      const float f = mw == kNegInf ? 0.0f : arch::exp2_fast(mw - M);
      L += f * mg_ml[(w * RMAX + r) * 2 + 1];
      O += f * mg_acc[(w * RMAX + r) * D + d];
    }
    const RowInfo ri = rinfo[r];
    if (final_out) {
      if (p.sinks) {
        const float sk = p.sinks[ri.head] * kLog2e;
        const float Mn = fmaxf(M, sk);
        const float f = M == kNegInf ? 0.0f : arch::exp2_fast(M - Mn);
        L = L * f + arch::exp2_fast(sk - Mn);
        O *= f;
        M = Mn;
      }
      const float out = L > 0.0f ? O / L : 0.0f;
      const int64_t oidx = static_cast<int64_t>(b) * p.o_seq + static_cast<int64_t>(ri.qi) * p.o_row +
                           static_cast<int64_t>(ri.head) * p.o_head + d;
      store_from_float(p.o, p.o_type, oidx, out);
      if (d == 0 && p.lse) {
        p.lse[(static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head] =
            L > 0.0f ? (M + log2f(L)) / kLog2e : kNegInf;
      }
    } else {
      const int64_t prow = ((static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head) * p.num_splits + split;
      p.part_o[prow * D + d] = O;
      if (d == 0) {
        p.part_ml[prow * 2] = M;
        p.part_ml[prow * 2 + 1] = L;
      }
    }
  }
}

}  // namespace packfa::device
