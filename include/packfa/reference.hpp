// packfa/reference.hpp — the fp64 CPU reference attention every GPU test compares against.
//
// All pointers of the AttnParams given here are HOST pointers (kv_len, q_pos, mask and
// sinks included). Semantics (docs/format.md, "Attention semantics"):
//   score_j = raw(q, k_j) * scale, scale = p.scale > 0 ? p.scale : 1/sqrt(head_dim)
//   softcap:  s = softcap * tanh(s / softcap)                      (p.softcap > 0)
//   mask:     m = float(fp16 mask[b*mask_seq_stride + i*mask_row_stride + h*mask_head_stride + j])
//             (-inf hides j); s += m
//   ALiBi:    (ggml slopes, p.alibi_max_bias > 0) AlibiMode::position: s += slope_h * (j - pos);
//             AlibiMode::ggml: s += slope_h * m instead of m (ggml_soft_max_ext's rule)
//   paged:    K/V rows through the block table (api.hpp PagedKV)
//   visible:  j < kv_len[b] && (!causal || j <= pos) && (window == 0 || j > pos - window)
//   pos = q_pos ? q_pos[b*nq + i] : kv_len[b] - nq + i
//   sinks:    sinks[h] joins the softmax denominator (no value vector)
//   LSE = ln(sum_visible e^s_j [+ e^sink_h]); O = sum p_j v_j; nothing visible and no
//   sink: O = 0, LSE = -inf. GQA: q head h reads kv head h / (n_q_heads / n_kv_heads).
// With K smoothing (k.smooth_scale and/or a shift at pack time) the scores are those of
// the smoothed domain: real score - q·m * scale, and LSE shifts by the same amount;
// probabilities and O are unchanged (up to quantization).
#pragma once

#include <cstdint>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/status.hpp"

namespace packfa {

enum class RefMode : uint8_t {
  // Q as given (to double; times s if k.smooth_scale), K dequantized exactly in fp64
  // (packed16: q*d; f16: the value), V dequantized, fp64 throughout. With f16 K: "true".
  exact = 0,
  // As the int8 kernel computes q·k: Q to fp32 (times s in fp32), quantized per block of
  // 32 (quantize_q_int8), integer dot per K block, raw = sum_b isum_b * qd * kd_b.
  // With f16 K this mode computes the fp16-Q dot (kernel_f16), as the kernel does.
  kernel_int8 = 1,
  // fp16-Q dot: qh = fp16(fp32 x * s); packed16: raw = sum_b kd_b * sum qh*q_k; f16 K:
  // raw = sum qh*k.
  kernel_f16 = 2,
  // The Hopper prefill kernel with K as fp16 tiles (KernelChoice::k_rounded, decision
  // "prefill-k-rounded"): packed16 K as kh = fp16(q_k * kd_b) (one rounding). kernel_int8_k16:
  // Q quantized as kernel_int8, then qr = fp16(fp32 q_i * (qd_b / qd_max)), raw = qd_max *
  // sum qr*kh; kernel_f16_k16: raw = sum qh*kh. With f16 K both are kernel_f16.
  kernel_int8_k16 = 3,
  kernel_f16_k16 = 4,
};
const char* ref_mode_name(RefMode m);

// o: [batch][nq][n_q_heads][head_dim] dense; lse: [batch][nq][n_q_heads] (either may be
// null). Returns invalid_argument for structurally bad params (checked here, more
// leniently than validate(): any head_dim that the K/V formats allow, no alignment).
// threads: rows run on that many threads (the results are bitwise the same for any count);
// 0 = PACKFA_REF_THREADS or the hardware's, fewer for small problems.
Status reference_attention(const AttnParams& p, RefMode mode, std::vector<double>* o, std::vector<double>* lse,
                           int threads = 0);

// Final logits (after scale, softcap, mask, ALiBi) of query row (b, i, head h) over keys
// j = 0..kv_len[b]-1, -inf for keys that are not visible; *sink (optional) gets sinks[h]
// or -inf. Probabilities = softmax over logits plus the sink.
Status reference_logits(const AttnParams& p, RefMode mode, int b, int i, int h, std::vector<double>* logits,
                        double* sink = nullptr);

// Q-row quantization of the int8 kernel path, exactly: x (fp32, already times s) of n
// values; per block of 32 (the last may be shorter): amax = max|x|; amax == 0 -> qd = 0,
// q = 0; else qd = amax / 127.0f, inv = 127.0f / amax, q = clamp((int)roundf(x*inv), ±127).
// qd gets ceil(n/32) scales.
void quantize_q_int8(const float* x, int n, int8_t* q, float* qd);

// ggml ALiBi slope of head h (n_q_heads heads, max_bias > 0).
double alibi_slope(int h, int n_q_heads, float max_bias);

// Textbook softmax(Q K^T * scale) V over dense double arrays (no mask, all keys visible):
// q [nq][d], k [nk][d], v [nk][dv]; o [nq][dv], lse [nq] (natural log), probs [nq][nk]
// (each output optional).
void naive_attention(int nq, int nk, int d, int dv, const double* q, const double* k, const double* v,
                     double scale, double* o, double* lse, double* probs = nullptr);

// Numerically stable softmax / log-sum-exp over n doubles (-inf entries get 0).
double log_sum_exp(const double* x, int n);
void softmax(const double* x, int n, double* p);

}  // namespace packfa
