// packfa/device/fa/score_edit.hpp — what happens to a score between Q·K and the softmax, one
// definition for both main loops: which keys a row sees (causal limit, sliding window, the
// block's key range), the edits softcap / mask / ALiBi on natural-log scores, and the sink,
// folded into the softmax state once per row at the end (softmax.hpp).
#pragma once

#include <cstdint>

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"
#include "packfa/device/fa_params.hpp"

namespace packfa::device {

// Per-row facts kept in shared memory (read as broadcasts); set up by rows.hpp.
struct RowInfo {
  int pos;      // query position
  int qi;       // query row index within the sequence
  float slope;  // ALiBi slope (0 when off)
  int head;     // q head
  int key_lo, key_hi;  // visible keys [key_lo, key_hi): sliding window and causal limits
  float mask_mul;      // the mask's factor: 1, or the ALiBi slope (AlibiMode::ggml: s += slope · mask)
  int pad;
};

// The keys [lo, hi) one row sees in this block: its own range cut at the block's end `hi`.
struct KeyWindow {
  int lo, hi;
  PACKFA_DEV bool has(int key) const { return key >= lo && key < hi; }
};
// Row r's own range as one 8-byte broadcast read.
PACKFA_DEV int2 row_keys(const RowInfo* rows, int r) { return *reinterpret_cast<const int2*>(&rows[r].key_lo); }
PACKFA_DEV KeyWindow key_window(int2 range, int hi) { return KeyWindow{range.x, min(range.y, hi)}; }

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)
// The edits of one sequence's scores. `extras` is false when only visibility applies: the
// loops then skip the per-key work (and the tensor-core loop its per-key checks for chunks
// every row sees whole).
struct ScoreEdit {
  const FaKernelParams& p;
  float softcap;       // 0: off
  const uint16_t* mask;  // this sequence's mask, or null
  bool extras;         // any edit beyond visibility

  PACKFA_DEV static ScoreEdit of(const FaKernelParams& p, int b) {
    const float softcap = p.softcap;
    const uint16_t* mask = p.mask ? p.mask + static_cast<int64_t>(b) * p.mask_seq : nullptr;
    return ScoreEdit{p, softcap, mask, softcap > 0.0f || mask || p.alibi_n2 > 0};
  }
  // Score x (natural-log units) of `key` for the row of `ri`; masked values are read for
  // visible keys only (the others become -inf in the caller).
  PACKFA_DEV float apply(float x, bool visible, int key, const RowInfo& ri) const {
    if (softcap > 0.0f) x = softcap * tanhf(x / softcap);
    if (visible && mask)
      x += ri.mask_mul * arch::half_to_float(mask[static_cast<int64_t>(ri.qi) * p.mask_row +
                                                  static_cast<int64_t>(ri.head) * p.mask_head + key]);
    if (p.alibi_pos) x += ri.slope * static_cast<float>(key - ri.pos);
    return x;
  }
  // The sink of q head `head` in log2 units (only when p.sinks is set).
  PACKFA_DEV float sink(int head) const { return p.sinks[head] * kLog2e; }
};
#endif

}  // namespace packfa::device
