// K smoothing parameters (include/packfa/smoothing.hpp).
#include "packfa/smoothing.hpp"

#include <algorithm>
#include <cmath>

namespace packfa {

Status compute_smoothing(int n_kv_heads, int n_q_heads, int head_dim, const float* k_sample, int64_t n_k,
                         const float* q_sample, int64_t n_q, const SmoothingOptions& opt,
                         std::vector<float>* shift, std::vector<float>* scale) {
  if (n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (n_q_heads < 1 || n_q_heads % n_kv_heads) return invalid("n_q_heads", "must be a multiple of n_kv_heads");
  if (head_dim < 1) return invalid("head_dim", "must be >= 1");
  if (n_k < 1 || !k_sample) return invalid("k_sample", "needs at least one token");
  if (opt.scale && (n_q < 1 || !q_sample)) return invalid("q_sample", "needs at least one token when scale is on");
  if (!(opt.alpha >= 0.0 && opt.alpha <= 1.0)) return invalid("alpha", "must be in [0, 1]");
  if (!shift || !scale) return invalid("shift", "output is null");
  const int d = head_dim, r = n_q_heads / n_kv_heads;
  shift->assign(static_cast<size_t>(n_kv_heads) * d, 0.0f);
  scale->assign(static_cast<size_t>(n_kv_heads) * d, 1.0f);
  std::vector<double> m(d), kmax(d), qmax(d), s(d);
  for (int g = 0; g < n_kv_heads; ++g) {
    std::fill(m.begin(), m.end(), 0.0);
    if (opt.shift) {
      for (int64_t t = 0; t < n_k; ++t)
        for (int c = 0; c < d; ++c) m[c] += k_sample[(t * n_kv_heads + g) * d + c];
      for (int c = 0; c < d; ++c) {
        m[c] /= static_cast<double>(n_k);
        (*shift)[static_cast<size_t>(g) * d + c] = static_cast<float>(m[c]);
      }
      // use the stored (fp32) shift from here on, as the packer will
      for (int c = 0; c < d; ++c) m[c] = (*shift)[static_cast<size_t>(g) * d + c];
    }
    if (!opt.scale) continue;
    std::fill(kmax.begin(), kmax.end(), 0.0);
    std::fill(qmax.begin(), qmax.end(), 0.0);
    for (int64_t t = 0; t < n_k; ++t)
      for (int c = 0; c < d; ++c)
        kmax[c] = std::max(kmax[c], std::fabs(static_cast<double>(k_sample[(t * n_kv_heads + g) * d + c]) - m[c]));
    for (int64_t t = 0; t < n_q; ++t)
      for (int hh = 0; hh < r; ++hh)
        for (int c = 0; c < d; ++c)
          qmax[c] = std::max(qmax[c], std::fabs(static_cast<double>(q_sample[(t * n_q_heads + g * r + hh) * d + c])));
    double log_sum = 0.0;
    for (int c = 0; c < d; ++c) {
      const bool ok = kmax[c] > 0.0 && qmax[c] > 0.0 && std::isfinite(kmax[c]) && std::isfinite(qmax[c]);
      s[c] = ok ? std::pow(kmax[c], opt.alpha) / std::pow(qmax[c], 1.0 - opt.alpha) : 1.0;
      log_sum += std::log(s[c]);
    }
    const double gm = std::exp(log_sum / d);
    for (int c = 0; c < d; ++c)
      (*scale)[static_cast<size_t>(g) * d + c] = static_cast<float>(std::min(1e4, std::max(1e-4, s[c] / gm)));
  }
  return Status::Ok();
}

}  // namespace packfa
