// Quality metrics on distribution pairs with known values; planner by hand arithmetic.
#include <cmath>
#include <vector>

#include "packfa/metrics.hpp"
#include "packfa/planner.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

TEST_CASE("KLD of hand-made pairs", "[metrics]") {
  const double p[2] = {0.5, 0.5}, q[2] = {0.25, 0.75};
  // 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln(4/3)
  CHECK(kl_divergence(p, q, 2) == Approx(0.5 * std::log(4.0 / 3.0)).epsilon(1e-15));
  CHECK(kl_divergence(p, p, 2) == 0.0);
  const double p3[3] = {1.0, 0.0, 0.0}, q3[3] = {0.5, 0.25, 0.25};
  CHECK(kl_divergence(p3, q3, 3) == Approx(std::log(2.0)).epsilon(1e-15));
  const double q0[3] = {0.0, 0.5, 0.5};
  CHECK(std::isinf(kl_divergence(p3, q0, 3)));
}

TEST_CASE("KldAccumulator: llama.cpp statistics by hand", "[metrics]") {
  KldAccumulator acc;
  // pair 1: logits -> P = (1/2, 1/2), Q = (1/4, 3/4); target 1
  const double lp[2] = {0.0, 0.0}, lq[2] = {0.0, std::log(3.0)};
  acc.add_logits(lp, lq, 2, 1);
  // pair 2: identical P = Q = (0.8, 0.2), target 0
  const double a[2] = {0.8, 0.2};
  acc.add_probs(a, a, 2, 0);
  // pair 3: P = (0.9, 0.1), Q = (0.6, 0.4), target 0
  const double p3[2] = {0.9, 0.1}, q3[2] = {0.6, 0.4};
  acc.add_probs(p3, q3, 2, 0);
  const double k1 = 0.5 * std::log(4.0 / 3.0), k2 = 0.0, k3 = 0.9 * std::log(0.9 / 0.6) + 0.1 * std::log(0.1 / 0.4);
  const KldSummary s = acc.summary();
  CHECK(s.count == 3);
  const double mean = (k1 + k2 + k3) / 3;
  CHECK(s.mean_kld == Approx(mean).epsilon(1e-12));
  const double var = (k1 * k1 + k2 * k2 + k3 * k3) / 3 - mean * mean;
  CHECK(s.kld_stderr == Approx(std::sqrt(var / 2)).epsilon(1e-12));
  // sorted: 0, k1 (0.1438), k3 (0.2263): median k1; p99 at 0.99 * 2 = 1.98
  CHECK(k1 < k3);
  CHECK(s.median_kld == Approx(k1).epsilon(1e-12));
  CHECK(s.p99_kld == Approx(0.02 * k1 + 0.98 * k3).epsilon(1e-12));
  CHECK(s.max_kld == Approx(k3).epsilon(1e-12));
  // argmax: pair 1 ref ties -> index 0, test -> 1: differ; pair 2 same; pair 3 same
  CHECK(s.same_top == Approx(2.0 / 3.0).epsilon(1e-15));
  // dp at the targets: 0.75 - 0.5, 0, 0.6 - 0.9
  CHECK(s.rms_dp == Approx(std::sqrt((0.0625 + 0.09) / 3)).epsilon(1e-12));
  CHECK(s.mean_dp == Approx((0.25 - 0.3) / 3).epsilon(1e-12));
  CHECK(s.max_abs_dp == Approx(0.3).epsilon(1e-12));
  REQUIRE(s.has_targets);
  // PPL ratio = exp(mean -ln q_t) / exp(mean -ln p_t) = ((1/0.75)(1/0.8)(1/0.6))^(1/3) / ((1/0.5)(1/0.8)(1/0.9))^(1/3)
  const double r = std::cbrt((0.5 * 0.8 * 0.9) / (0.75 * 0.8 * 0.6));
  CHECK(s.ppl_ratio == Approx(r).epsilon(1e-12));
}

TEST_CASE("KldAccumulator without targets uses the reference top token for dp", "[metrics]") {
  KldAccumulator acc;
  const double p[3] = {0.2, 0.7, 0.1}, q[3] = {0.3, 0.6, 0.1};
  acc.add_probs(p, q, 3);
  const KldSummary s = acc.summary();
  CHECK_FALSE(s.has_targets);
  CHECK(s.ppl_ratio == 0.0);
  CHECK(s.rms_dp == Approx(0.1).epsilon(1e-12));
  CHECK(s.same_top == 1.0);
  CHECK(s.median_kld == s.max_kld);
  const double r[2] = {3.0, 4.0}, t[2] = {3.0, 4.0 + 5e-3};
  CHECK(relative_l2_error(r, t, 2) == Approx(1e-3).epsilon(1e-9));
}

TEST_CASE("planner: bytes by hand arithmetic", "[planner]") {
  const ModelShape* m = find_model_preset("Llama-3.1-8B");
  REQUIRE(m != nullptr);
  CHECK(m->n_layers == 32);
  CHECK(m->n_kv_heads == 8);
  CHECK(m->head_dim == 128);
  const int64_t ctx = 131072;
  // rows = 32 layers * 8 heads * 131072 tokens = 2^25
  const int64_t rows = int64_t(1) << 25;
  KvBytes f = kv_cache_bytes(*m, ctx, KFormat::f16, 32, VFormat::q4_0, 1);
  CHECK(f.k == rows * 256);              // 8 GiB
  CHECK(f.v == rows * 72);               // 4 blocks * 18 B = 2.25 GiB
  CHECK(f.k / kBytesPerGiB == 8.0);
  CHECK(f.v / kBytesPerGiB == 2.25);
  KvBytes p = kv_cache_bytes(*m, ctx, KFormat::packed16, 32, VFormat::q4_0, 1);
  CHECK(p.k == rows * 136);              // 128 int8 + 4 fp16 scales = 4.25 GiB
  CHECK(p.k / kBytesPerGiB == 4.25);
  CHECK(p.total() == rows * (136 + 72));
  KvBytes p16 = kv_cache_bytes(*m, ctx, KFormat::packed16, 16, VFormat::q8_0, 2);
  CHECK(p16.k == 2 * rows * 144);        // 128 + 8 * 2
  CHECK(p16.v == 2 * rows * 136);        // 4 blocks * 34 B
  CHECK(k_row_bytes(KFormat::packed16, 16, 80) == 90);
  // Gemma-3-27B: 10 global layers at 131072 + 52 sliding layers at 1024 tokens, 16 heads
  const ModelShape* gm = find_model_preset("gemma-3-27b");
  REQUIRE(gm != nullptr);
  KvBytes g = kv_cache_bytes(*gm, ctx, KFormat::f16, 32, VFormat::f16, 1);
  CHECK(g.k == (10LL * 131072 + 52LL * 1024) * 16 * 256);
  KvBytes gf = kv_cache_bytes(*gm, ctx, KFormat::f16, 32, VFormat::f16, 1, /*swa_full=*/true);
  CHECK(gf.k == 62LL * 131072 * 16 * 256);
  KvBytes gs = kv_cache_bytes(*gm, 512, KFormat::f16, 32, VFormat::f16, 1);  // short context: all layers 512
  CHECK(gs.k == 62LL * 512 * 16 * 256);
  CHECK(find_model_preset("no-such-model") == nullptr);
}
