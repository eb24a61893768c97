// make_problem (testing.hpp): params valid, planes consistent with the true K/V, poison.
#include <cmath>
#include <vector>

#include "packfa/pack.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

TEST_CASE("make_problem: params pass validate for every format and head_dim", "[problem]") {
  struct Case { int d, block; VFormat v; KFormat k; int64_t pad; };
  const Case cases[] = {{128, 32, VFormat::q4_0, KFormat::packed16, 0}, {80, 16, VFormat::f16, KFormat::packed16, 32},
                        {112, 16, VFormat::bf16, KFormat::f16, 0},     {64, 32, VFormat::q8_0, KFormat::packed16, 16},
                        {256, 32, VFormat::q8_0, KFormat::f16, 0}};
  for (const Case& c : cases) {
    ProblemConfig cfg;
    cfg.head_dim = c.d; cfg.k_block = c.block; cfg.v_format = c.v; cfg.k_format = c.k; cfg.slot_pad_bytes = c.pad;
    cfg.batch = 2; cfg.nq = 3; cfg.kv_lens = {5, 40}; cfg.capacity = 48; cfg.mask = true; cfg.sinks = true;
    cfg.explicit_q_pos = true; cfg.smooth_shift = true; cfg.smooth_scale = true;
    HostProblem hp;
    REQUIRE(make_problem(cfg, &hp).ok());
    INFO("d " << c.d);
    CHECK(validate(hp.params).ok());
    CHECK(hp.params.max_kv_len == 40);
    CHECK(hp.pack_nonfinite == 0);
    std::vector<double> o, lse;
    REQUIRE(reference_attention(hp.params, RefMode::exact, &o, &lse).ok());
    for (double x : o) CHECK(std::isfinite(x));
    // moving keeps the buffers (and the params) valid
    HostProblem moved = std::move(hp);
    CHECK(moved.params.q.data == moved.q.data());
    CHECK(validate(moved.params).ok());
  }
}

TEST_CASE("make_problem: packed16 plane = pack of the true K (smoothed domain)", "[problem]") {
  ProblemConfig cfg;
  cfg.head_dim = 128; cfg.n_kv_heads = 2; cfg.n_q_heads = 4; cfg.kv_len = 20; cfg.smooth_shift = true;
  cfg.smooth_scale = true; cfg.slot_pad_bytes = 16;
  HostProblem hp;
  REQUIRE(make_problem(cfg, &hp).ok());
  REQUIRE(hp.smooth_shift.size() == 256);
  REQUIRE(hp.smooth_scale.size() == 256);
  std::vector<double> x(128), k(128);
  for (int j = 0; j < 20; ++j)
    for (int g = 0; g < 2; ++g) {
      REQUIRE(unpack_k_host(hp.params.k, 128, 0, j, g, x.data()).ok());
      for (int c = 0; c < 128; ++c) {
        const float t = (hp.k_values[(j * 2 + g) * 128 + c] - hp.smooth_shift[g * 128 + c]) / hp.smooth_scale[g * 128 + c];
        const uint16_t* sc = reinterpret_cast<const uint16_t*>(hp.k_scales.data() + j * hp.k_scale_strides.slot +
                                                                g * hp.k_scale_strides.head);
        CHECK(std::fabs(x[c] - t) <= fp16_to_float(sc[c / 32]) / 2 * (1 + 1e-6));
      }
      unsmooth_k_row(x.data(), hp.smooth_shift.data() + g * 128, hp.smooth_scale.data() + g * 128, 128, k.data());
      std::vector<double> kf(128);
      REQUIRE(unpack_k_host(hp.make_params(KFormat::f16, VFormat::f16).k, 128, 0, j, g, kf.data()).ok());
      for (int c = 0; c < 128; ++c) CHECK(kf[c] == hp.k_values[(j * 2 + g) * 128 + c]);
    }
}

TEST_CASE("make_problem: poisoned unused slots are never read by the reference", "[problem]") {
  ProblemConfig cfg;
  cfg.batch = 2; cfg.kv_lens = {3, 17}; cfg.capacity = 32; cfg.poison_unused = true; cfg.nq = 2;
  for (VFormat v : {VFormat::f16, VFormat::bf16, VFormat::q8_0, VFormat::q4_0}) {
    cfg.v_format = v;
    HostProblem hp;
    REQUIRE(make_problem(cfg, &hp).ok());
    std::vector<double> o, lse;
    for (RefMode m : {RefMode::exact, RefMode::kernel_int8, RefMode::kernel_f16}) {
      REQUIRE(reference_attention(hp.params, m, &o, &lse).ok());
      for (double x : o) CHECK(std::isfinite(x));
    }
    std::vector<float> row(128);
    REQUIRE(unpack_k_host(hp.params.k, 128, 0, 5, 0, row.data()).ok());
    CHECK(std::isnan(row[0]));
  }
}
