// packfa/device/fa/prefill_producer.hpp — the Hopper prefill kernel's producer warpgroups:
// cp.async staging of raw cache tiles and their widening into the fp16 ring the consumers read
// (decisions "prefill-warp-specialised", "prefill-lean-producer", "prefill-two-producers";
// the layout and the widening itself: prefill_tiles.hpp; the kernel: prefill_sm90.hpp).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/hopper_sync.hpp"
#include "packfa/device/fa/prefill_tiles.hpp"
#include "packfa/device/fa/wgmma.hpp"
#include "packfa/device/fa_params.hpp"
#include "packfa/device/kv_view.hpp"

namespace packfa::device::prefill {

// Producer warpgroup wg (of L::kProducerWgs; tid: the thread's index in the block) of a block
// whose keys [lo, hi) of sequence b, KV head kvh are n_tiles tiles of L::kN from lo; full /
// empty: the fp16 ring's mbarriers.
template <int D, VFormat VF, QKMode QK, bool PAGED>
PACKFA_DEV void produce(const FaKernelParams& p, char* smem, int b, int kvh, int lo, int hi, int n_tiles, int wg,
                        int tid, uint64_t* full, uint64_t* empty) {
  using L = PrefillLayout<D, VF, QK>;
  constexpr int kN = L::kN, kS = L::kStages, kPw = L::kProducerWgs;
  hopper::regs_shrink<L::kProducerRegs>();
  // two producer warpgroups (prefill-two-producers): warpgroup wg the tiles wg, wg + 2, ..,
  // in raw slot wg, its own barrier; one: every tile, raw slots t & 1
  const int ptid = tid - 128 * wg, bar = wg == 0 ? 1 : 5;
  const KvPlanes planes = kv_planes<PAGED>(p, b, kvh);
  const KvView& view = planes.view;
  const KvPlane &pk = planes.k, &pks = planes.ks, &pv = planes.v, &pvs = planes.vs;
  constexpr int kT = L::kProducerThreads;
  auto stage = [&](int t) {  // raw ring slot t & 1; always one commit group
    if (PACKFA_PREFILL_ABLATE == 4 || PACKFA_PREFILL_ABLATE == 5) {  // measurement only: no staging
      arch::copy_async_commit();
      return;
    }
    constexpr bool kLean = !PAGED && D <= 128 && L::kVWidth >= 4 &&
                           (L::kF16K || (piece_width(L::kKs32Row) >= 4 && piece_width(D / 8) >= 4)) &&
                           (VF != VFormat::q8_0_planar || piece_width(D / 16) >= 4);
    if constexpr (kLean) {  // contiguous planes, pieces of >= 4 bytes: stage_rows
      if (t < n_tiles) {
        char* raw = smem + L::kRaw + (t & 1) * L::kRawBytes;
        const int t0 = lo + t * kN, n_valid = hi - t0;
        stage_rows<kN, L::kKRow, 16, L::kKPitch, kT>(raw + L::kRawK, pk.base + t0 * pk.slot, pk.slot, n_valid, ptid);
        if constexpr (!L::kF16K) {
          if (p.k_block == 32)
            stage_rows<kN, L::kKs32Row, piece_width(L::kKs32Row), L::kKs32Pitch, kT>(raw + L::kRawKs, pks.base + t0 * pks.slot, pks.slot, n_valid, ptid);
          else
            stage_rows<kN, D / 8, piece_width(D / 8), L::kKsPitch, kT>(raw + L::kRawKs, pks.base + t0 * pks.slot, pks.slot, n_valid, ptid);
        }
        stage_rows<kN, L::kVRow, L::kVWidth, L::kVPitch, kT>(raw + L::kRawV, pv.base + t0 * pv.slot, pv.slot, n_valid, ptid);
        if constexpr (VF == VFormat::q8_0_planar)
          stage_rows<kN, D / 16, piece_width(D / 16), L::kVsPitch, kT>(raw + L::kRawVs, pvs.base + t0 * pvs.slot, pvs.slot, n_valid, ptid);
      }
      arch::copy_async_commit();
      return;
    }
    if (t < n_tiles) {
      char* raw = smem + L::kRaw + (t & 1) * L::kRawBytes;
      const int t0 = lo + t * kN;
      stage_plane<kN, L::kKRow, 16, L::kKPitch, kT, PAGED || (D > 128)>(raw + L::kRawK, pk, view, t0, hi, ptid);
      if constexpr (!L::kF16K) {  // scale rows of block 32 or 16
        if (p.k_block == 32)
          stage_plane<kN, L::kKs32Row, piece_width(L::kKs32Row), L::kKs32Pitch, kT, PAGED || (D > 128)>(raw + L::kRawKs, pks, view, t0, hi, ptid);
        else
          stage_plane<kN, D / 8, piece_width(D / 8), L::kKsPitch, kT, PAGED || (D > 128)>(raw + L::kRawKs, pks, view, t0, hi, ptid);
      }
      stage_plane<kN, L::kVRow, L::kVWidth, L::kVPitch, kT, PAGED || (D > 128)>(raw + L::kRawV, pv, view, t0, hi, ptid);
      if constexpr (VF == VFormat::q8_0_planar)
        stage_plane<kN, D / 16, piece_width(D / 16), L::kVsPitch, kT, PAGED || (D > 128)>(raw + L::kRawVs, pvs, view, t0, hi, ptid);
    }
    arch::copy_async_commit();
  };
  stage(wg);
  if (kPw == 1) stage(1);
  for (int t = wg; t < n_tiles; t += kPw) {
    const int s = t % kS;
    if (kPw == 1) arch::copy_async_wait<1>();  // this thread's pieces of tile t landed (t + 1 may be in flight)
    else arch::copy_async_wait<0>();
    hopper::named_sync(bar, kT);  // everyone's
    if (t >= kS) hopper::mbar_wait(empty + s, (t / kS - 1) & 1);  // tile t - kS read by all consumers
    if (PACKFA_PREFILL_ABLATE != 1 && PACKFA_PREFILL_ABLATE != 4 && PACKFA_PREFILL_ABLATE != 5) {
      widen_tile<D, VF, QK, kT>(smem + L::kRaw + (t & 1) * L::kRawBytes, smem + L::kK + s * L::kTileBytes,
                                smem + L::kV + s * L::kTileBytes,
                                reinterpret_cast<float*>(smem + L::kKsf + s * L::kKsfBytes), p.k_block, ptid);
    }
    wgmma::fence_smem_for_mma();
    hopper::mbar_arrive(full + s);
    hopper::named_sync(bar, kT);  // raw slot t & 1 read by everyone
    stage(t + 2);
  }
}

}  // namespace packfa::device::prefill
