// packfa/metrics.hpp — quality metrics over pairs of distributions (reference P, test Q),
// with the definitions of llama.cpp's `llama-perplexity --kl-divergence` (docs/quality.md
// has the formulas). A "pair" is one distribution over n categories: attention
// probabilities over keys for one (query, head), or vocabulary logits for one token.
#pragma once

#include <cstdint>
#include <vector>

namespace packfa {

// KLD(P || Q) = sum_i p_i * ln(p_i / q_i) over p_i > 0 (nats). q_i = 0 where p_i > 0 gives +inf.
double kl_divergence(const double* p, const double* q, int n);

struct KldSummary {
  int64_t count = 0;         // number of pairs
  double mean_kld = 0;       // mean over pairs of KLD(P || Q)
  double kld_stderr = 0;     // sqrt((mean(KLD^2) - mean^2) / (count - 1))
  double median_kld = 0;     // of the sorted per-pair KLDs (mean of the middle two if even)
  double p99_kld = 0;        // 99th percentile, linear interpolation at 0.99 * (count - 1)
  double max_kld = 0;
  double same_top = 0;       // fraction of pairs with argmax P == argmax Q (first index on ties)
  double same_top_stderr = 0;// sqrt(f (1 - f) / (count - 1))
  double rms_dp = 0;         // sqrt(mean(dp^2)), dp = q_t - p_t (t: target, else argmax P)
  double mean_dp = 0;        // mean(dp)
  double max_abs_dp = 0;
  bool has_targets = false;  // every pair was given a target
  double ppl_ratio = 0;      // exp(mean(-ln q_t)) / exp(mean(-ln p_t)); 0 unless has_targets
  double ln_ppl_ratio = 0;   // mean(-ln q_t) - mean(-ln p_t)
};

class KldAccumulator {
 public:
  // Logits (natural units, any offset; -inf = impossible) of P and Q over n categories.
  // target: the observed category (llama.cpp: the next token) or -1.
  void add_logits(const double* ref_logits, const double* test_logits, int n, int target = -1);
  // Probabilities (each summing to 1).
  void add_probs(const double* p, const double* q, int n, int target = -1);
  KldSummary summary() const;
  int64_t count() const { return static_cast<int64_t>(kld_.size()); }
  const std::vector<double>& klds() const { return kld_; }

 private:
  std::vector<double> kld_;
  int64_t same_top_ = 0, n_targets_ = 0;
  double sum_dp_ = 0, sum_dp2_ = 0, max_abs_dp_ = 0, sum_nll_p_ = 0, sum_nll_q_ = 0;
};

// Relative L2 error ||test - ref|| / ||ref|| of two vectors of n doubles (0 if both are 0).
double relative_l2_error(const double* ref, const double* test, int64_t n);

}  // namespace packfa
