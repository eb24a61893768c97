// Quality metrics, llama.cpp `llama-perplexity --kl-divergence` definitions (docs/quality.md).
#include "packfa/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace packfa {
namespace {

int argmax(const double* x, int n) {
  int im = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[im]) im = i;
  return im;
}

void log_softmax(const double* x, int n, std::vector<double>* out) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  const double l = mx + std::log(s);
  out->resize(n);
  for (int i = 0; i < n; ++i) (*out)[i] = x[i] - l;
}

}  // namespace

double kl_divergence(const double* p, const double* q, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    if (!(p[i] > 0.0)) continue;
    if (!(q[i] > 0.0)) return std::numeric_limits<double>::infinity();
    s += p[i] * std::log(p[i] / q[i]);
  }
  return s;
}

void KldAccumulator::add_probs(const double* p, const double* q, int n, int target) {
  kld_.push_back(kl_divergence(p, q, n));
  const int tp = argmax(p, n), tq = argmax(q, n);
  if (tp == tq) ++same_top_;
  const int t = target >= 0 ? target : tp;
  const double dp = q[t] - p[t];
  sum_dp_ += dp;
  sum_dp2_ += dp * dp;
  max_abs_dp_ = std::max(max_abs_dp_, std::fabs(dp));
  if (target >= 0) {
    ++n_targets_;
    sum_nll_p_ += -std::log(p[t]);
    sum_nll_q_ += -std::log(q[t]);
  }
}

void KldAccumulator::add_logits(const double* ref_logits, const double* test_logits, int n, int target) {
  std::vector<double> lp, lq;
  log_softmax(ref_logits, n, &lp);
  log_softmax(test_logits, n, &lq);
  double kld = 0.0;
  for (int i = 0; i < n; ++i) {
    if (std::isinf(lp[i]) && lp[i] < 0) continue;
    kld += std::exp(lp[i]) * (lp[i] - lq[i]);
  }
  kld_.push_back(kld);
  const int tp = argmax(ref_logits, n), tq = argmax(test_logits, n);
  if (tp == tq) ++same_top_;
  const int t = target >= 0 ? target : tp;
  const double dp = std::exp(lq[t]) - std::exp(lp[t]);
  sum_dp_ += dp;
  sum_dp2_ += dp * dp;
  max_abs_dp_ = std::max(max_abs_dp_, std::fabs(dp));
  if (target >= 0) {
    ++n_targets_;
    sum_nll_p_ += -lp[t];
    sum_nll_q_ += -lq[t];
  }
}

KldSummary KldAccumulator::summary() const {
  KldSummary s;
  s.count = count();
  if (s.count == 0) return s;
  const double n = static_cast<double>(s.count);
  double sum = 0.0, sum2 = 0.0;
  for (double k : kld_) {
    sum += k;
    sum2 += k * k;
  }
  s.mean_kld = sum / n;
  s.kld_stderr = s.count > 1 ? std::sqrt(std::max(0.0, sum2 / n - s.mean_kld * s.mean_kld) / (n - 1)) : 0.0;
  std::vector<double> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size();
  s.median_kld = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
  const double pos = 0.99 * static_cast<double>(m - 1);
  const size_t ip = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(ip);
  s.p99_kld = (1.0 - frac) * sorted[ip] + frac * sorted[std::min(ip + 1, m - 1)];
  s.max_kld = sorted.back();
  s.same_top = static_cast<double>(same_top_) / n;
  s.same_top_stderr = s.count > 1 ? std::sqrt(s.same_top * (1.0 - s.same_top) / (n - 1)) : 0.0;
  s.rms_dp = std::sqrt(sum_dp2_ / n);
  s.mean_dp = sum_dp_ / n;
  s.max_abs_dp = max_abs_dp_;
  s.has_targets = n_targets_ == s.count;
  if (s.has_targets) {
    s.ln_ppl_ratio = (sum_nll_q_ - sum_nll_p_) / n;
    s.ppl_ratio = std::exp(s.ln_ppl_ratio);
  }
  return s;
}

double relative_l2_error(const double* ref, const double* test, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    num += (test[i] - ref[i]) * (test[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace packfa
