// K smoothing: probabilities unchanged in fp64, KLD lowered under quantization; synth data.
#include <cmath>
#include <vector>

#include "packfa/metrics.hpp"
#include "packfa/reference.hpp"
#include "packfa/smoothing.hpp"
#include "packfa/synth.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

TEST_CASE("compute_smoothing: mean shift, sqrt ratio, geometric mean 1", "[smooth]") {
  // one kv head, D = 2, two keys (1, 10) and (3, -10): m = (2, 0), max|k-m| = (1, 10);
  // one query (4, 1): max|q| = (4, 1); s = (sqrt(1/4), sqrt(10/1)) / geomean
  const float k[4] = {1, 10, 3, -10};
  const float q[2] = {4, 1};
  std::vector<float> m, s;
  REQUIRE(compute_smoothing(1, 1, 2, k, 2, q, 1, SmoothingOptions{}, &m, &s).ok());
  CHECK(m[0] == 2.0f);
  CHECK(m[1] == 0.0f);
  const double s0 = 0.5, s1 = std::sqrt(10.0), gm = std::sqrt(s0 * s1);
  CHECK(s[0] == Approx(s0 / gm).epsilon(1e-6));
  CHECK(s[1] == Approx(s1 / gm).epsilon(1e-6));
  CHECK(s[0] * s[1] == Approx(1.0).epsilon(1e-6));
  SmoothingOptions a1;
  a1.alpha = 1.0;  // s = max|k - m| normalised
  REQUIRE(compute_smoothing(1, 1, 2, k, 2, q, 1, a1, &m, &s).ok());
  CHECK(s[1] / s[0] == Approx(10.0).epsilon(1e-6));
  SmoothingOptions shift_only;
  shift_only.scale = false;
  REQUIRE(compute_smoothing(1, 1, 2, k, 2, nullptr, 0, shift_only, &m, &s).ok());
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == 1.0f);
  // zero channel guard: q channel 0 is 0 -> s_c = 1 before normalisation
  const float q0[2] = {0, 1};
  REQUIRE(compute_smoothing(1, 1, 2, k, 2, q0, 1, SmoothingOptions{}, &m, &s).ok());
  CHECK(std::isfinite(s[0]));
  CHECK(s[0] > 0.0f);
  CHECK(compute_smoothing(2, 3, 2, k, 2, q, 1, SmoothingOptions{}, &m, &s).message().rfind("n_q_heads:", 0) == 0);
}

TEST_CASE("smoothing leaves attention probabilities unchanged in fp64 (no quantization)", "[smooth]") {
  const int T = 96, NQ = 4, G = 2, H = 4, D = 64;
  const SynthData sd = synth_attention_data(SynthOptions{}, 21, T, NQ, G, H, D);
  std::vector<float> m, s;
  REQUIRE(compute_smoothing(G, H, D, sd.k.data(), T, sd.q.data(), NQ, SmoothingOptions{}, &m, &s).ok());
  const double scale = 1.0 / 8.0;
  double max_dp = 0.0, max_shift_err = 0.0;
  for (int h = 0; h < H; ++h) {
    const int g = h / (H / G);
    std::vector<double> q(NQ * D), qs(NQ * D), k(T * D), ks(T * D), v(T * D, 0.0), p0(NQ * T), p1(NQ * T), l0(NQ), l1(NQ);
    for (int i = 0; i < NQ; ++i)
      for (int c = 0; c < D; ++c) {
        q[i * D + c] = sd.q[(i * H + h) * D + c];
        qs[i * D + c] = q[i * D + c] * s[g * D + c];
      }
    for (int j = 0; j < T; ++j)
      for (int c = 0; c < D; ++c) {
        k[j * D + c] = sd.k[(j * G + g) * D + c];
        ks[j * D + c] = (k[j * D + c] - m[g * D + c]) / s[g * D + c];
      }
    naive_attention(NQ, T, D, D, q.data(), k.data(), v.data(), scale, nullptr, l0.data(), p0.data());
    naive_attention(NQ, T, D, D, qs.data(), ks.data(), v.data(), scale, nullptr, l1.data(), p1.data());
    for (int i = 0; i < NQ * T; ++i) max_dp = std::fmax(max_dp, std::fabs(p0[i] - p1[i]));
    for (int i = 0; i < NQ; ++i) {  // LSE shifts by q·m·scale
      double qm = 0.0;
      for (int c = 0; c < D; ++c) qm += q[i * D + c] * m[g * D + c];
      max_shift_err = std::fmax(max_shift_err, std::fabs((l0[i] - l1[i]) - qm * scale));
    }
  }
  CHECK(max_dp < 1e-12);
  CHECK(max_shift_err < 1e-9);
}

namespace {
double measured_kld(bool shift, bool scale, RefMode mode, int block) {
  ProblemConfig c;
  c.batch = 1; c.nq = 1; c.n_q_heads = 16; c.n_kv_heads = 2; c.head_dim = 128; c.kv_len = 512;
  c.causal = false; c.k_block = block; c.seed = 5; c.smooth_shift = shift; c.smooth_scale = scale;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  const AttnParams ref = hp.make_params(KFormat::f16, VFormat::f16);
  KldAccumulator acc;
  std::vector<double> a, b;
  for (int h = 0; h < c.n_q_heads; ++h) {
    REQUIRE(reference_logits(ref, RefMode::exact, 0, 0, h, &a).ok());
    REQUIRE(reference_logits(hp.params, mode, 0, 0, h, &b).ok());
    acc.add_logits(a.data(), b.data(), static_cast<int>(a.size()));
  }
  return acc.summary().mean_kld;
}
}  // namespace

TEST_CASE("smoothing lowers the measured KLD on the outlier generator", "[smooth]") {
  for (int block : {32, 16}) {
    const double none = measured_kld(false, false, RefMode::kernel_int8, block);
    const double sh = measured_kld(true, false, RefMode::kernel_int8, block);
    const double both = measured_kld(true, true, RefMode::kernel_int8, block);
    INFO("B=" << block << " none " << none << " shift " << sh << " shift+scale " << both);
    CHECK(none > 0.0);
    CHECK(sh < none);
    CHECK(both < none);
  }
}

TEST_CASE("synth: deterministic, outlier channels and offsets as configured", "[synth]") {
  const SynthData a = synth_attention_data(SynthOptions{}, 42, 2000, 3, 2, 4, 64);
  const SynthData b = synth_attention_data(SynthOptions{}, 42, 2000, 3, 2, 4, 64);
  CHECK(a.k == b.k);
  CHECK(a.q == b.q);
  CHECK(a.v == b.v);
  const SynthData c = synth_attention_data(SynthOptions{}, 43, 2000, 3, 2, 4, 64);
  CHECK(a.k != c.k);
  REQUIRE(a.outlier_channels.size() == 8);
  for (int g = 0; g < 2; ++g) {
    std::vector<double> sd(64, 0.0), mean(64, 0.0);
    for (int t = 0; t < 2000; ++t)
      for (int ch = 0; ch < 64; ++ch) mean[ch] += a.k[(t * 2 + g) * 64 + ch] / 2000.0;
    for (int t = 0; t < 2000; ++t)
      for (int ch = 0; ch < 64; ++ch) {
        const double dlt = a.k[(t * 2 + g) * 64 + ch] - mean[ch];
        sd[ch] += dlt * dlt / 2000.0;
      }
    for (int ch = 0; ch < 64; ++ch) {
      bool out = false;
      for (int i = 0; i < 4; ++i) out = out || a.outlier_channels[g * 4 + i] == ch;
      CHECK(std::sqrt(sd[ch]) == Approx(out ? 8.0 : 1.0).epsilon(0.1));
      CHECK(mean[ch] == Approx(a.offset[g * 64 + ch]).margin(out ? 0.6 : 0.1));
    }
  }
}
