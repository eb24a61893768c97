// packfa/device/fa/softmax.hpp — the online-softmax state of one row, in log2 units: a running
// max m and a sum l of 2^(s - m) (lane-partial inside the key loops). The same type merges
// states: the chunks of a wave, the waves of a block (epilogue.hpp) and the splits of a row
// (combine.hpp): M = max(m_i), w_i = 2^(m_i - M), L = Σ w_i·l_i, O = Σ w_i·O_i / L, and
// LSE = (M + log2 L)·ln 2. A row that saw no key keeps m = -inf, l = 0 and writes zeros
// (LSE -inf).
#pragma once

#include "packfa/device/arch.hpp"
#include "packfa/device/fa/common.hpp"

namespace packfa::device {

#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

struct SoftmaxState {
  float m = kNegInf;  // running max (log2 units)
  float l = 0.0f;     // sum of 2^(s - m)

  // A chunk's max mx arrives: m moves up to it. Returns the factor the sums and accumulators
  // so far take (1 while the max stays -inf); l is updated by add().
  PACKFA_DEV float raise(float mx) {
    const float m_new = fmaxf(m, mx);
    const float corr = m_new == kNegInf ? 1.0f : arch::exp2_fast(m - m_new);
    m = m_new;
    return corr;
  }
  // 2^(x - m), 0 while every score so far is -inf.
  PACKFA_DEV float prob(float x) const { return m == kNegInf ? 0.0f : arch::exp2_fast(x - m); }
  // The offset to subtract before exp2 (all -inf: exp2(-inf - 0) = 0).
  PACKFA_DEV float offset() const { return m == kNegInf ? 0.0f : m; }
  PACKFA_DEV void add(float corr, float sum) { l = l * corr + sum; }

  // The weight of a part with max m_part under this state's (merged) max.
  PACKFA_DEV float weight(float m_part) const { return m_part == kNegInf ? 0.0f : arch::exp2_fast(m_part - m); }
  // A sink (log2 units) as one more key of score sk: returns the factor O takes.
  PACKFA_DEV float fold_sink(float sk) {
    const float m_new = fmaxf(m, sk);
    const float f = m == kNegInf ? 0.0f : arch::exp2_fast(m - m_new);
    l = l * f + arch::exp2_fast(sk - m_new);
    m = m_new;
    return f;
  }
  PACKFA_DEV float inv_sum() const { return l > 0.0f ? 1.0f / l : 0.0f; }
  PACKFA_DEV float lse() const { return l > 0.0f ? (m + log2f(l)) / kLog2e : kNegInf; }
};

// The sink of q head h in log2 units, or -inf without sinks (the merges start from it).
PACKFA_DEV float sink_log2(const float* sinks, int h) { return sinks ? sinks[h] * kLog2e : kNegInf; }

// acc += w·v, four FMAs (in place: HIP's float4 is a class, a copy changes its code).
PACKFA_DEV void fma4(float4& acc, float w, const float4& v) {
  acc.x = fmaf(w, v.x, acc.x);
  acc.y = fmaf(w, v.y, acc.y);
  acc.z = fmaf(w, v.z, acc.z);
  acc.w = fmaf(w, v.w, acc.w);
}
// acc += v (the combine kernels' sums over thread groups; in place, as fma4).
PACKFA_DEV void add4(float4& acc, const float4& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

#endif

}  // namespace packfa::device
