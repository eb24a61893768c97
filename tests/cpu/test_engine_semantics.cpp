// Engine semantics on the fp64 reference: ggml's ALiBi rule (bias = slope_h · mask, as
// ggml_soft_max_ext / ggml_flash_attn_ext define it and llama.cpp fills the mask with
// -|p_i - p_j| for ALiBi models), per-head masks, and paged caches read through a block table.
// Every expected value is computed by hand here from the rule, not by the reference.
#include <cmath>
#include <limits>
#include <vector>

#include "packfa/pack.hpp"
#include "packfa/reference.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

namespace {

constexpr uint16_t kMaskNegInf = 0xfc00;

// f32 Q = 0 (all raw scores 0), f16 K = 0, V row j = val[j] in every channel: the output is
// the softmax-weighted mean of val under the biases alone.
struct Biased {
  int NQ, H, C, D = 4;
  std::vector<float> q;
  std::vector<uint16_t> k, v, mask;
  std::vector<int32_t> kv_len, q_pos;
  AttnParams p;
  Biased(int nq, int h, int c, const std::vector<float>& val) : NQ(nq), H(h), C(c) {
    q.assign(NQ * H * D, 0.0f);
    k.assign(C * D, 0);
    v.assign(C * D, 0);
    for (int j = 0; j < C; ++j)
      for (int d = 0; d < D; ++d) v[j * D + d] = fp16_from_float(val[j]);
    kv_len = {C};
    p.batch = 1; p.nq = NQ; p.n_q_heads = H; p.n_kv_heads = 1; p.head_dim = D; p.max_kv_len = C;
    p.q.type = DType::f32;
    p.q.head_stride = D; p.q.row_stride = H * D; p.q.seq_stride = NQ * H * D;
    p.k.format = KFormat::f16;
    p.k.data_strides = {2LL * C * D, 2LL * D, 2LL * D};
    p.v.format = VFormat::f16;
    p.v.strides = p.k.data_strides;
    p.causal = false;
    p.scale = 1.0f;
  }
  void run(std::vector<double>* o) {
    p.q.data = q.data(); p.k.data = k.data(); p.v.data = v.data(); p.kv_len = kv_len.data();
    if (!mask.empty()) p.mask = mask.data();
    if (!q_pos.empty()) p.q_pos = q_pos.data();
    std::vector<double> lse;
    REQUIRE(reference_attention(p, RefMode::exact, o, &lse).ok());
  }
};

// sum_j w_j val_j / sum_j w_j with w_j = exp(bias_j) (bias -inf: 0)
double weighted(const std::vector<double>& bias, const std::vector<float>& val) {
  double num = 0, den = 0;
  for (size_t j = 0; j < bias.size(); ++j) {
    if (std::isinf(bias[j])) continue;
    const double w = std::exp(bias[j]);
    num += w * val[j];
    den += w;
  }
  return num / den;
}

uint16_t h16(double x) { return fp16_from_float(static_cast<float>(x)); }

}  // namespace

TEST_CASE("ggml ALiBi: a llama.cpp mask (-|i - j|) is scaled by the slope, counted once", "[ref][ggml]") {
  const std::vector<float> val = {1, 2, 4, 8};
  const int H = 3;
  const float max_bias = 8.0f;
  Biased t(1, H, 4, val);
  t.q_pos = {3};
  t.p.causal = true;
  t.p.alibi_max_bias = max_bias;
  t.p.alibi_mode = AlibiMode::ggml;
  t.mask = {h16(-3), h16(-2), h16(-1), h16(0)};  // llama.cpp: -|p_i - p_j| for visible keys
  std::vector<double> o;
  t.run(&o);
  for (int h = 0; h < H; ++h) {
    const double s = alibi_slope(h, H, max_bias);
    CHECK(o[h * 4] == Approx(weighted({-3 * s, -2 * s, -s, 0}, val)).epsilon(1e-13));
  }
  // the position mode adds slope·(j - pos) on top of the mask: the distance counts twice
  t.p.alibi_mode = AlibiMode::position;
  t.run(&o);
  for (int h = 0; h < H; ++h) {
    const double s = alibi_slope(h, H, max_bias);
    CHECK(o[h * 4] == Approx(weighted({-3 - 3 * s, -2 - 2 * s, -1 - s, 0}, val)).epsilon(1e-13));
  }
  // and with a pure 0 / -inf mask the position mode gives ggml's result (the old rule unchanged)
  t.mask = {0, 0, 0, 0};
  t.run(&o);
  for (int h = 0; h < H; ++h) {
    const double s = alibi_slope(h, H, max_bias);
    CHECK(o[h * 4] == Approx(weighted({-3 * s, -2 * s, -s, 0}, val)).epsilon(1e-13));
  }
}

TEST_CASE("ggml ALiBi: non-causal (-|i - j| on both sides) and -inf entries", "[ref][ggml]") {
  const std::vector<float> val = {1, 2, 4, 8, 16};
  Biased t(1, 2, 5, val);
  t.q_pos = {2};
  t.p.causal = false;
  t.p.alibi_max_bias = 4.0f;
  t.p.alibi_mode = AlibiMode::ggml;
  t.mask = {h16(-2), h16(-1), h16(0), h16(-1), kMaskNegInf};
  std::vector<double> o;
  t.run(&o);
  for (int h = 0; h < 2; ++h) {
    const double s = alibi_slope(h, 2, 4.0f);
    CHECK(o[h * 4 + 1] ==
          Approx(weighted({-2 * s, -s, 0, -s, -std::numeric_limits<double>::infinity()}, val)).epsilon(1e-13));
  }
  // ALiBi off: ggml's slope is 1, the mask is added as it is
  t.p.alibi_max_bias = 0.0f;
  t.run(&o);
  CHECK(o[0] == Approx(weighted({-2, -1, 0, -1, -std::numeric_limits<double>::infinity()}, val)).epsilon(1e-13));
}

TEST_CASE("per-head masks: mask_head_stride selects each head's mask; 0 broadcasts", "[ref][ggml]") {
  const std::vector<float> val = {1, 10, 100};
  const int NQ = 2, H = 2, C = 3;
  Biased t(NQ, H, C, val);
  // mask [head][row][key] (ggml ne[2] = heads): head stride NQ*C, row stride C
  t.mask = {0, kMaskNegInf, 0,   h16(-1), 0, 0,     // head 0: rows 0, 1
            kMaskNegInf, 0, 0,   0, 0, h16(-2)};    // head 1
  t.p.mask_row_stride = C;
  t.p.mask_head_stride = NQ * C;
  std::vector<double> o;
  t.run(&o);
  const double ninf = -std::numeric_limits<double>::infinity();
  auto at = [&](int i, int h) { return o[(i * H + h) * 4 + 2]; };
  CHECK(at(0, 0) == Approx(weighted({0, ninf, 0}, val)).epsilon(1e-13));
  CHECK(at(1, 0) == Approx(weighted({-1, 0, 0}, val)).epsilon(1e-13));
  CHECK(at(0, 1) == Approx(weighted({ninf, 0, 0}, val)).epsilon(1e-13));
  CHECK(at(1, 1) == Approx(weighted({0, 0, -2}, val)).epsilon(1e-13));
  t.p.mask_head_stride = 0;  // every head reads head 0's mask
  t.run(&o);
  CHECK(at(0, 1) == Approx(weighted({0, ninf, 0}, val)).epsilon(1e-13));
  CHECK(at(1, 1) == Approx(weighted({-1, 0, 0}, val)).epsilon(1e-13));
}

TEST_CASE("paged reference: K/V through a scrambled, shared block table == the contiguous cache", "[ref][paged]") {
  // two sequences of 7 and 5 keys, page size 2 (the reference takes any size), D = 4, G = 2
  const int D = 4, G = 2, H = 4, PS = 2, C = 8;
  std::vector<float> q(2 * H * D);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.7 * i);
  std::vector<uint16_t> k(2 * C * G * D), v(2 * C * G * D);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = fp16_from_float(static_cast<float>(std::cos(0.3 * i)));
    v[i] = fp16_from_float(static_cast<float>(std::sin(0.11 * i + 1)));
  }
  // sequence 1 shares sequence 0's first page (prefix caching): its keys 0, 1 are seq 0's
  for (int j = 0; j < 2; ++j)
    for (int x = 0; x < G * D; ++x) {
      k[(C + j) * G * D + x] = k[j * G * D + x];
      v[(C + j) * G * D + x] = v[j * G * D + x];
    }
  std::vector<int32_t> kv_len = {7, 5};
  AttnParams p;
  p.batch = 2; p.nq = 1; p.n_q_heads = H; p.n_kv_heads = G; p.head_dim = D; p.max_kv_len = C;
  p.q = {DType::f32, q.data(), H * D, H * D, D};
  p.k.format = KFormat::f16;
  p.k.data = k.data();
  p.k.data_strides = {2LL * C * G * D, 2LL * G * D, 2LL * D};
  p.v = {VFormat::f16, v.data(), p.k.data_strides};
  p.kv_len = kv_len.data();
  p.causal = true;
  std::vector<double> o_flat, lse_flat;
  REQUIRE(reference_attention(p, RefMode::exact, &o_flat, &lse_flat).ok());

  // HND pages [page][head][slot][D] in scrambled order; seq 1's first page is seq 0's page
  const int npages = 8;
  const std::vector<int32_t> table = {5, 2, 7, 0,   5, 3, 6, 1};  // [seq][4]
  std::vector<uint16_t> kp(npages * G * PS * D, 0x7e00), vp(npages * G * PS * D, 0x7e00);  // NaN where unused
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < kv_len[b]; ++j)
      for (int g = 0; g < G; ++g)
        for (int d = 0; d < D; ++d) {
          const int page = table[b * 4 + j / PS];
          const size_t dst = ((static_cast<size_t>(page) * G + g) * PS + j % PS) * D + d;
          const size_t src = ((static_cast<size_t>(b) * C + j) * G + g) * D + d;
          kp[dst] = k[src];
          vp[dst] = v[src];
        }
  p.k.data = kp.data();
  p.k.data_strides = {2LL * G * PS * D, 2LL * D, 2LL * PS * D};  // {page, slot, head}
  p.v = {VFormat::f16, vp.data(), p.k.data_strides};
  p.paged.block_table = table.data();
  p.paged.table_stride = 4;
  p.paged.page_size = PS;
  p.paged.num_pages = npages;
  std::vector<double> o_paged, lse_paged;
  REQUIRE(reference_attention(p, RefMode::exact, &o_paged, &lse_paged).ok());
  REQUIRE(o_paged.size() == o_flat.size());
  for (size_t i = 0; i < o_flat.size(); ++i) CHECK(o_paged[i] == o_flat[i]);
  for (size_t i = 0; i < lse_flat.size(); ++i) CHECK(lse_paged[i] == lse_flat[i]);
}
