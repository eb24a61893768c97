// packfa/device/fa/smem.hpp — the attention split kernel's shared memory, typed: the only code
// that turns the sizes of fa_layout.hpp into offsets.
//
//   [Q: int8 rows + fp32 block scales | fp32 rows][RowInfo x RMAX][loop area]
//   loop area, per wave: [stage 0][stage 1?][P][corrections x RMAX][chunk state]
//            stage: [K rows][K scales (packed16)][V rows][V scale rows (q8_0_planar)]
//   after the key loop the loop area is the wave merge: [wave][row][D] fp32 O, [wave][row][2] (m, l)
#pragma once

#include <cstdint>

#include "packfa/device/chunk_source.hpp"
#include "packfa/device/fa/score_edit.hpp"
#include "packfa/device/fa/traits.hpp"

namespace packfa::device {

// One stage buffer: the chunk's 32 key rows of every plane.
struct StageSmem {
  char* k;   // K rows, kKPitch apart
  char* ks;  // K scale rows, kScalePitch apart (packed16)
  char* v;   // V rows, kVPitch apart
  char* vs;  // V scale rows, kVScalePitch apart (q8_0_planar)
};

template <class T>
struct WaveSmem {
  char* base;
  PACKFA_DEV StageSmem stage(int s) const {
    char* st = base + s * T::kStageBytes;
    char* ks = st + T::kChunk * T::kKPitch;
    char* v = ks + (T::kQK == QKMode::f16 ? 0 : T::kChunk * T::kScalePitch);
    return StageSmem{st, ks, v, v + T::kChunk * T::kVPitch};
  }
  // P of one chunk: [row][kPPitch] (tensor-core P·V) or [key][row] (scalar P·V).
  PACKFA_DEV float* p() const { return reinterpret_cast<float*>(base + T::kStages * T::kStageBytes); }
  PACKFA_DEV float* corr() const { return p() + T::kPPitch * T::kRows; }  // per-row max corrections
  PACKFA_DEV ChunkGroup* chunk_state() const { return reinterpret_cast<ChunkGroup*>(corr() + T::kRows); }
};

template <class T>
struct FaSmem {
  char* base;
  PACKFA_DEV int8_t* q_i8() const { return reinterpret_cast<int8_t*>(base); }  // [row][D] (int8 Q·K)
  PACKFA_DEV float* q_scale() const { return reinterpret_cast<float*>(base + T::kRows * T::kD); }  // [row][kQBlocks]
  PACKFA_DEV float* q_f32() const { return reinterpret_cast<float*>(base); }  // [row][D] (other modes)
  PACKFA_DEV RowInfo* rows() const { return reinterpret_cast<RowInfo*>(base + T::kQBytes); }
  PACKFA_DEV char* loop() const { return base + T::kQBytes + T::kRowInfoBytes; }
  PACKFA_DEV WaveSmem<T> wave(int w) const { return WaveSmem<T>{loop() + w * T::kWaveBytes}; }
  // the wave merge, after the key loop
  PACKFA_DEV float* merge_o() const { return reinterpret_cast<float*>(loop()); }  // [wave][row][D]
  PACKFA_DEV float* merge_ml() const { return merge_o() + T::kWaves * T::kRows * T::kD; }  // [wave][row][2]
};

}  // namespace packfa::device
