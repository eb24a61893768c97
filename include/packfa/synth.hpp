// packfa/synth.hpp — realistic synthetic K/Q/V for quality measurements, deterministic.
//
// Keys of real LLMs are not i.i.d.: a few channels carry values an order of magnitude
// larger than the rest, in the same channels for every token, and channels have sizeable
// non-zero means. Published observations: KIVI (Liu et al., 2024, "KIVI: A Tuning-Free
// Asymmetric 2bit Quantization for KV Cache", fig. 2: Llama-2 keys have fixed outlier
// channels, values do not), KVQuant (Hooper et al., 2024, "KVQuant: Towards 10 Million
// Context Length LLM Inference with KV Cache Quantization", sec. 3: per-channel key
// outliers, pre-RoPE), and SmoothAttention in QServe (Lin et al., 2024) which migrates the
// key outliers into the queries. The generator reproduces those features:
//   k[t][g][c] = offset[g][c] + gain[g][c] * z[t][g][c] * base_sigma,  z ~ N(0, 1)
//   offset ~ N(0, offset_sigma^2) per (kv head, channel); gain = outlier_gain on
//   n_outlier_channels random channels per kv head, 1 elsewhere.
// Queries are correlated with keys so attention is peaked rather than uniform: query
// (t, h) picks a random key j* of its kv head and q = q_focus * z[j*] + q_noise * N(0, 1)
// (latent z, so the key's offset and gain do not appear in q). V ~ N(0, v_sigma^2).
// Random numbers come from a built-in generator (splitmix64 + Box-Muller), so a seed gives
// the same data on every platform and compiler.
#pragma once

#include <cstdint>
#include <vector>

namespace packfa {

struct SynthOptions {
  int n_outlier_channels = 4;
  double outlier_gain = 8.0;
  double offset_sigma = 3.0;
  double base_sigma = 1.0;
  double q_focus = 0.6;
  double q_noise = 0.4;
  double v_sigma = 1.0;
};

// Deterministic random numbers (same sequence everywhere).
class SynthRng {
 public:
  explicit SynthRng(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  uint64_t next_u64();
  double uniform();  // [0, 1)
  double normal();   // N(0, 1)
  int below(int n);  // [0, n)

 private:
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

struct SynthData {
  int n_tokens = 0, n_queries = 0, n_kv_heads = 0, n_q_heads = 0, head_dim = 0;
  std::vector<float> k;  // [n_tokens][n_kv_heads][head_dim]
  std::vector<float> v;  // [n_tokens][n_kv_heads][head_dim]
  std::vector<float> q;  // [n_queries][n_q_heads][head_dim]
  std::vector<int> outlier_channels;  // [n_kv_heads][n_outlier_channels]
  std::vector<float> offset;          // [n_kv_heads][head_dim]
};

// n_q_heads must be a multiple of n_kv_heads; query head h belongs to kv head h / (n_q_heads / n_kv_heads).
SynthData synth_attention_data(const SynthOptions& opt, uint64_t seed, int n_tokens, int n_queries, int n_kv_heads,
                               int n_q_heads, int head_dim);

}  // namespace packfa
