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
// The shared-memory layout, staging, widening and Q set-up live in device/fa/prefill_mma_tiles.hpp
// (as the Hopper kernel's in prefill_tiles.hpp); this file: the scores of a tile and the kernel.
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa/prefill_mma_tiles.hpp"
#include "packfa/device/fa/rows.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/softmax.hpp"
#include "packfa/device/fa/wave_mma.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"
#include "packfa/format.hpp"
#include "packfa/pdl.hpp"

namespace packfa::device::prefill_mma {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

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
      with_dtype(p.o_type, [&](auto type) {  // the type once, outside the unrolled stores
        PACKFA_UNROLL
        for (int j = 0; j < D / 16; ++j)
          PACKFA_UNROLL
          for (int i = 0; i < 8; ++i)
            if (wave::acc_slot(i) == r)
              store_typed<decltype(type)::value>(p.o, ob + 16 * j + wave::acc_col(i, lane), o[j][i] * inv);
      });
      if (p.lse && wave::row_leader(lane))
        p.lse[(static_cast<int64_t>(b) * p.nq + ri.qi) * p.n_q_heads + ri.head] = st[r].lse();
    }
  }
}

#endif  // backend

}  // namespace packfa::device::prefill_mma
