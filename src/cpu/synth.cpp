// Realistic synthetic attention data (include/packfa/synth.hpp).
#include "packfa/synth.hpp"

#include <cmath>

namespace packfa {

uint64_t SynthRng::next_u64() {  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double SynthRng::uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
double SynthRng::normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
  spare_ = r * std::sin(a);
  have_spare_ = true;
  return r * std::cos(a);
}
int SynthRng::below(int n) { return static_cast<int>(next_u64() % static_cast<uint64_t>(n)); }

SynthData synth_attention_data(const SynthOptions& opt, uint64_t seed, int n_tokens, int n_queries, int n_kv_heads,
                               int n_q_heads, int head_dim) {
  SynthData s;
  s.n_tokens = n_tokens;
  s.n_queries = n_queries;
  s.n_kv_heads = n_kv_heads;
  s.n_q_heads = n_q_heads;
  s.head_dim = head_dim;
  const int d = head_dim, G = n_kv_heads;
  const int nout = opt.n_outlier_channels < d ? opt.n_outlier_channels : d;
  SynthRng rng(seed);
  std::vector<double> gain(static_cast<size_t>(G) * d, 1.0);
  s.offset.resize(static_cast<size_t>(G) * d);
  s.outlier_channels.clear();
  for (int g = 0; g < G; ++g) {
    for (int c = 0; c < d; ++c) s.offset[static_cast<size_t>(g) * d + c] = static_cast<float>(opt.offset_sigma * rng.normal());
    int picked = 0;
    while (picked < nout) {
      const int c = rng.below(d);
      if (gain[static_cast<size_t>(g) * d + c] != 1.0) continue;
      gain[static_cast<size_t>(g) * d + c] = opt.outlier_gain;
      s.outlier_channels.push_back(c);
      ++picked;
    }
  }
  std::vector<double> z(static_cast<size_t>(n_tokens) * G * d);
  s.k.resize(z.size());
  s.v.resize(z.size());
  for (size_t t = 0; t < static_cast<size_t>(n_tokens); ++t)
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < d; ++c) {
        const size_t i = (t * G + g) * d + c, gc = static_cast<size_t>(g) * d + c;
        z[i] = rng.normal();
        s.k[i] = static_cast<float>(s.offset[gc] + gain[gc] * z[i] * opt.base_sigma);
      }
  for (auto& x : s.v) x = static_cast<float>(opt.v_sigma * rng.normal());
  const int r = n_q_heads / n_kv_heads;
  s.q.resize(static_cast<size_t>(n_queries) * n_q_heads * d);
  for (size_t t = 0; t < static_cast<size_t>(n_queries); ++t)
    for (int h = 0; h < n_q_heads; ++h) {
      const int g = h / r;
      const size_t j = n_tokens > 0 ? static_cast<size_t>(rng.below(n_tokens)) : 0;
      for (int c = 0; c < d; ++c) {
        const double zj = n_tokens > 0 ? z[(j * G + g) * d + c] : 0.0;
        s.q[(t * n_q_heads + h) * d + c] = static_cast<float>(opt.q_focus * zj + opt.q_noise * rng.normal());
      }
    }
  return s;
}

}  // namespace packfa
