// packfa/smoothing.hpp — K smoothing parameters (shift m and channel scale s) from a sample.
//
// The cache stores quantize((k - m) / s) and the kernel multiplies q by s, so
//   q·k = (q∘s)·((k - m)/s) + q·m,
// and q·m is the same for every key: attention probabilities are unchanged (exactly in
// real arithmetic) while outlier channels and channel offsets no longer inflate a block's
// scale. Raw scores and LSE shift by q·m·scale (docs/format.md).
//   m_c = mean over the sample of k_c                      (shift; 0 if disabled)
//   s_c = max|k_c - m_c|^alpha / max|q_c|^(1 - alpha)      (SmoothAttention / QServe, alpha 0.5)
// then s is normalised to geometric mean 1 over the head's channels. Guards: a channel
// whose max|k - m| or max|q| is 0 (or not finite) gets s_c = 1 before normalisation; s is
// clamped to [1e-4, 1e4] after it.
#pragma once

#include <cstdint>
#include <vector>

#include "packfa/status.hpp"

namespace packfa {

struct SmoothingOptions {
  bool shift = true;   // compute m (else m = 0)
  bool scale = true;   // compute s (else s = 1)
  double alpha = 0.5;  // migration strength, 0..1
};

// k_sample: n_k tokens, dense [n_k][n_kv_heads][head_dim] floats;
// q_sample: n_q tokens, dense [n_q][n_q_heads][head_dim] floats (may be null/0 when
// !opt.scale). Kv head g uses the queries of heads g*r .. g*r + r - 1, r = n_q_heads/n_kv_heads.
// shift, scale: resized to [n_kv_heads][head_dim] (m = 0 / s = 1 where disabled).
Status compute_smoothing(int n_kv_heads, int n_q_heads, int head_dim, const float* k_sample, int64_t n_k,
                         const float* q_sample, int64_t n_q, const SmoothingOptions& opt,
                         std::vector<float>* shift, std::vector<float>* scale);

}  // namespace packfa
