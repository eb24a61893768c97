// fp64 reference attention: textbook equality, every option by hand, kernel modes.
#include <cmath>
#include <limits>
#include <vector>

#include "packfa/metrics.hpp"
#include "packfa/pack.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Tiny dense problem with f32 Q, f16 K, f16 V and any head_dim (the reference allows it).
struct Tiny {
  int B, NQ, H, G, D, C;
  std::vector<float> q;      // [B][NQ][H][D]
  std::vector<uint16_t> k;   // [B][C][G][D]
  std::vector<uint16_t> v;
  std::vector<int32_t> kv_len;
  AttnParams p;
  Tiny(int b, int nq, int h, int g, int d, int c) : B(b), NQ(nq), H(h), G(g), D(d), C(c) {
    q.assign(B * NQ * H * D, 0.0f);
    k.assign(B * C * G * D, 0);
    v.assign(B * C * G * D, 0);
    kv_len.assign(B, C);
    p.batch = B; p.nq = NQ; p.n_q_heads = H; p.n_kv_heads = G; p.head_dim = D; p.max_kv_len = C;
    p.q.type = DType::f32;
    p.q.head_stride = D; p.q.row_stride = H * D; p.q.seq_stride = NQ * H * D;
    p.k.format = KFormat::f16;
    p.k.data_strides = {2LL * C * G * D, 2LL * G * D, 2LL * D};
    p.v.format = VFormat::f16;
    p.v.strides = p.k.data_strides;
    p.causal = false;
    p.scale = 1.0f;
    repoint();
  }
  void repoint() { p.q.data = q.data(); p.k.data = k.data(); p.v.data = v.data(); p.kv_len = kv_len.data(); }
  float& Q(int b, int i, int h, int d) { return q[((b * NQ + i) * H + h) * D + d]; }
  void setK(int b, int j, int g, int d, float x) { k[((b * C + j) * G + g) * D + d] = fp16_from_float(x); }
  void setV(int b, int j, int g, int d, float x) { v[((b * C + j) * G + g) * D + d] = fp16_from_float(x); }
  void run(std::vector<double>* o, std::vector<double>* lse, RefMode m = RefMode::exact) {
    repoint();
    const Status s = reference_attention(p, m, o, lse);
    REQUIRE(s.ok());
  }
};

// value of v row j (scalar per key: all channels = val[j])
void fill_v_scalar(Tiny& t, int b, int g, const std::vector<float>& val) {
  for (int j = 0; j < static_cast<int>(val.size()); ++j)
    for (int d = 0; d < t.D; ++d) t.setV(b, j, g, d, val[j]);
}

}  // namespace

TEST_CASE("reference == textbook softmax(QK^T scale)V to 1e-12 (exact mode, f16 K)", "[ref]") {
  for (VFormat vf : {VFormat::f16, VFormat::q8_0, VFormat::q8_0_planar}) {
    ProblemConfig c;
    c.batch = 2; c.nq = 3; c.n_q_heads = 4; c.n_kv_heads = 2; c.head_dim = 64; c.kv_len = 37;
    c.q_type = DType::f32; c.k_format = KFormat::f16; c.v_format = vf; c.causal = false; c.seed = 3;
    c.slot_pad_bytes = 32;
    HostProblem hp;
    REQUIRE(make_problem(c, &hp).ok());
    std::vector<double> o, lse;
    REQUIRE(reference_attention(hp.params, RefMode::exact, &o, &lse).ok());
    const int D = 64, L = 37, G = 2;
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 4; ++h) {
        const int g = h / 2;
        std::vector<double> q(3 * D), k(L * D), v(L * D), on(3 * D), ln(3);
        for (int i = 0; i < 3; ++i)
          for (int d = 0; d < D; ++d) q[i * D + d] = hp.q_values[((b * 3 + i) * 4 + h) * D + d];
        for (int j = 0; j < L; ++j) {
          for (int d = 0; d < D; ++d) k[j * D + d] = hp.k_values[((b * hp.capacity + j) * G + g) * D + d];
          const uint8_t* row = hp.v_planes[static_cast<int>(vf)].data() + b * hp.v_strides[static_cast<int>(vf)].seq +
                               j * hp.v_strides[static_cast<int>(vf)].slot + g * hp.v_strides[static_cast<int>(vf)].head;
          const uint8_t* scale_row = vf == VFormat::q8_0_planar
                                         ? hp.v_scale_plane.data() + b * hp.v_scale_strides.seq +
                                               j * hp.v_scale_strides.slot + g * hp.v_scale_strides.head
                                         : nullptr;
          dequantize_v_row(vf, row, scale_row, D, v.data() + j * D);
        }
        naive_attention(3, L, D, D, q.data(), k.data(), v.data(), 1.0 / 8.0, on.data(), ln.data());
        for (int i = 0; i < 3; ++i) {
          const size_t r = (b * 3 + i) * 4 + h;
          CHECK(std::fabs(lse[r] - ln[i]) < 1e-12);
          for (int d = 0; d < D; ++d) CHECK(std::fabs(o[r * D + d] - on[i * D + d]) < 1e-12);
        }
      }
  }
}

TEST_CASE("reference: causal positions, window, q_pos, varlen (hand cases)", "[ref]") {
  // Q = 0 -> all scores 0 -> uniform over the visible keys. v_j = j + 1.
  Tiny t(2, 2, 1, 1, 4, 4);
  t.kv_len = {3, 4};
  fill_v_scalar(t, 0, 0, {1, 2, 3, 100});
  fill_v_scalar(t, 1, 0, {1, 2, 3, 4});
  std::vector<double> o, lse;
  t.p.causal = true;
  t.run(&o, &lse);
  // seq 0: rows at pos 1, 2; seq 1: pos 2, 3
  CHECK(o[0 * 4] == Approx(1.5).epsilon(1e-14));
  CHECK(lse[0] == Approx(std::log(2.0)).epsilon(1e-14));
  CHECK(o[1 * 4] == Approx(2.0).epsilon(1e-14));
  CHECK(lse[1] == Approx(std::log(3.0)).epsilon(1e-14));
  CHECK(o[2 * 4] == Approx(2.0).epsilon(1e-14));
  CHECK(o[3 * 4] == Approx(2.5).epsilon(1e-14));
  CHECK(lse[3] == Approx(std::log(4.0)).epsilon(1e-14));

  t.p.window = 2;  // keys j > pos - 2
  t.run(&o, &lse);
  CHECK(o[0 * 4] == Approx(1.5).epsilon(1e-14));   // pos 1: keys 0, 1
  CHECK(o[1 * 4] == Approx(2.5).epsilon(1e-14));   // pos 2: keys 1, 2
  CHECK(o[3 * 4] == Approx(3.5).epsilon(1e-14));   // pos 3: keys 2, 3
  CHECK(lse[3] == Approx(std::log(2.0)).epsilon(1e-14));

  t.p.window = 0;
  std::vector<int32_t> pos = {0, 2, 1, 9};
  t.p.q_pos = pos.data();
  t.run(&o, &lse);
  CHECK(o[0 * 4] == Approx(1.0).epsilon(1e-14));   // pos 0: key 0 only
  CHECK(lse[0] == Approx(0.0).margin(1e-15));
  CHECK(o[1 * 4] == Approx(2.0).epsilon(1e-14));
  CHECK(o[2 * 4] == Approx(1.5).epsilon(1e-14));
  CHECK(o[3 * 4] == Approx(2.5).epsilon(1e-14));   // pos 9 > kv_len: every key
  t.p.q_pos = nullptr;

  t.kv_len = {0, 1};  // empty sequence: O = 0, LSE = -inf
  t.p.causal = false;
  t.run(&o, &lse);
  CHECK(o[0] == 0.0);
  CHECK(lse[0] == -kInf);
  CHECK(o[2 * 4] == Approx(1.0).epsilon(1e-14));
  CHECK(lse[2] == Approx(0.0).margin(1e-15));
}

TEST_CASE("reference: mask (ggml layout), softcap, sinks, scale (hand cases)", "[ref]") {
  Tiny t(1, 2, 1, 1, 4, 3);
  fill_v_scalar(t, 0, 0, {1, 2, 4});
  std::vector<double> o, lse;
  // mask row 0: [-inf, -1, 0]; row 1: [0, 0, -2]; row stride 3 (ggml: [nq][kv])
  std::vector<uint16_t> mask = {0xfc00, 0xbc00, 0x0000, 0x0000, 0x0000, 0xc000};
  t.p.mask = mask.data();
  t.p.mask_row_stride = 3;
  t.run(&o, &lse);
  {
    const double e1 = std::exp(-1.0), z = e1 + 1.0;
    CHECK(o[0] == Approx((2 * e1 + 4) / z).epsilon(1e-14));
    CHECK(lse[0] == Approx(std::log(z)).epsilon(1e-14));
    const double e2 = std::exp(-2.0), z1 = 2.0 + e2;
    CHECK(o[4] == Approx((1 + 2 + 4 * e2) / z1).epsilon(1e-14));
  }
  t.p.mask = nullptr;

  // scores: q = (2,0,0,0), k0 = (1,0,0,0), k1 = 0, k2 = (-3,0,0,0), scale 0.5 -> 1, 0, -3
  t.Q(0, 0, 0, 0) = 2.0f;
  t.setK(0, 0, 0, 0, 1.0f);
  t.setK(0, 2, 0, 0, -3.0f);
  t.p.scale = 0.5f;
  t.run(&o, &lse);
  {
    const double z = std::exp(1.0) + 1 + std::exp(-3.0);
    CHECK(lse[0] == Approx(std::log(z)).epsilon(1e-14));
    CHECK(o[0] == Approx((std::exp(1.0) + 2 + 4 * std::exp(-3.0)) / z).epsilon(1e-14));
  }
  t.p.scale = 0.0f;  // default 1/sqrt(4) = 0.5: same
  std::vector<double> o2, lse2;
  t.run(&o2, &lse2);
  CHECK(lse2[0] == Approx(lse[0]).epsilon(1e-15));

  t.p.softcap = 2.0f;  // s = 2 tanh(s / 2)
  t.run(&o, &lse);
  {
    const double a = 2 * std::tanh(0.5), c = 2 * std::tanh(-1.5);
    const double z = std::exp(a) + 1 + std::exp(c);
    CHECK(lse[0] == Approx(std::log(z)).epsilon(1e-14));
    CHECK(o[0] == Approx((std::exp(a) + 2 + 4 * std::exp(c)) / z).epsilon(1e-14));
  }
  t.p.softcap = 0.0f;

  std::vector<float> sinks = {std::log(3.0f)};
  t.p.sinks = sinks.data();
  t.run(&o, &lse);
  {
    const double z = std::exp(1.0) + 1 + std::exp(-3.0) + 3.0;
    CHECK(lse[0] == Approx(std::log(z)).epsilon(1e-6));
    CHECK(o[0] == Approx((std::exp(1.0) + 2 + 4 * std::exp(-3.0)) / z).epsilon(1e-6));
    CHECK(lse[1] == Approx(std::log(6.0)).epsilon(1e-6));  // row 1: Q = 0, three keys + sink 3
  }
  // sink alone (nothing visible): O = 0, LSE = sink
  t.kv_len = {0};
  t.run(&o, &lse);
  CHECK(o[0] == 0.0);
  CHECK(lse[0] == Approx(std::log(3.0)).epsilon(1e-6));
}

TEST_CASE("reference: ALiBi slopes (ggml) and bias slope*(j - pos)", "[ref]") {
  // n_q_heads = 3, max_bias 8: n2 = 2, m0 = 2^-4, m1 = 2^-2; slopes 1/16, 1/256, 1/4
  CHECK(alibi_slope(0, 3, 8.0f) == Approx(1.0 / 16).epsilon(1e-15));
  CHECK(alibi_slope(1, 3, 8.0f) == Approx(1.0 / 256).epsilon(1e-15));
  CHECK(alibi_slope(2, 3, 8.0f) == Approx(1.0 / 4).epsilon(1e-15));
  // 8 heads, max_bias 8: slope_h = 2^-(h+1)
  for (int h = 0; h < 8; ++h) CHECK(alibi_slope(h, 8, 8.0f) == Approx(std::pow(2.0, -(h + 1))).epsilon(1e-15));

  Tiny t(1, 1, 3, 1, 4, 3);
  fill_v_scalar(t, 0, 0, {1, 2, 4});
  t.p.alibi_max_bias = 8.0f;
  t.p.causal = true;  // pos = 2: biases slope*(-2, -1, 0)
  std::vector<double> o, lse;
  t.run(&o, &lse);
  for (int h = 0; h < 3; ++h) {
    const double s = alibi_slope(h, 3, 8.0f);
    const double w0 = std::exp(-2 * s), w1 = std::exp(-s), z = w0 + w1 + 1;
    CHECK(lse[h] == Approx(std::log(z)).epsilon(1e-14));
    CHECK(o[h * 4 + 3] == Approx((w0 + 2 * w1 + 4) / z).epsilon(1e-14));
  }
}

TEST_CASE("reference: GQA maps q head h to kv head h / (H / G)", "[ref]") {
  Tiny t(1, 1, 4, 2, 4, 2);
  // kv head 0: v = (10, 20); kv head 1: v = (30, 40); keys identical -> uniform
  fill_v_scalar(t, 0, 0, {10, 20});
  fill_v_scalar(t, 0, 1, {30, 40});
  // make head 1's kv head strongly prefer key 1 for q heads 2,3: k[1][g=1] = (50, 0, 0, 0), q = e0
  t.setK(0, 1, 1, 0, 50.0f);
  for (int h = 0; h < 4; ++h) t.Q(0, 0, h, 0) = 1.0f;
  std::vector<double> o, lse;
  t.run(&o, &lse);
  CHECK(o[0 * 4] == Approx(15.0).epsilon(1e-14));
  CHECK(o[1 * 4] == Approx(15.0).epsilon(1e-14));
  const double w = std::exp(50.0);
  CHECK(o[2 * 4] == Approx((30 + 40 * w) / (1 + w)).epsilon(1e-14));
  CHECK(o[3 * 4] == Approx((30 + 40 * w) / (1 + w)).epsilon(1e-14));
  CHECK(lse[2] == Approx(std::log1p(w)).epsilon(1e-14));
}

TEST_CASE("quantize_q_int8: per block of 32, short last block, amax 0", "[ref][kernel]") {
  std::vector<float> x(48, 0.0f);
  x[0] = 127.0f; x[1] = 63.5f; x[2] = -0.5f; x[3] = 0.49f;  // block 0: qd = 1, inv = 1
  x[40] = -2.0f; x[41] = 1.0f;                               // block 2 (16 values): qd = 2/127
  // block 1 (values 32..39 only) is zero in [32, 40): elements 32..39 -> but 40, 41 are in block 1
  std::vector<int8_t> q(48);
  float qd[2];
  quantize_q_int8(x.data(), 48, q.data(), qd);
  CHECK(qd[0] == 1.0f);
  CHECK(q[0] == 127);
  CHECK(q[1] == 64);
  CHECK(q[2] == -1);
  CHECK(q[3] == 0);
  CHECK(qd[1] == 2.0f / 127.0f);
  CHECK(q[40] == -127);
  CHECK(q[41] == static_cast<int8_t>(std::roundf(1.0f * (127.0f / 2.0f))));  // 63.5 -> 64
  std::vector<float> z(16, 0.0f);
  float zd[1];
  quantize_q_int8(z.data(), 16, q.data(), zd);
  CHECK(zd[0] == 0.0f);
  CHECK(q[0] == 0);
}

TEST_CASE("kernel_int8 mode on a hand-made D = 64 row is exact", "[ref][kernel]") {
  // Q block 0: x = (127, 63.5, 3, 0...) -> q = (127, 64, 3), qd = 1. Q block 1: x = (-127, 10) -> qd 1.
  // K (B = 32): block 0 q_k = (1, 2, -1), d = 0.5 (0x3800); block 1 q_k = (2, 5), d = 1.0.
  // isum_0 = 127 + 128 - 3 = 252, raw_0 = 252 * 1 * 0.5 = 126; isum_1 = -254 + 50 = -204 -> -204.
  // exact: 127*0.5 + 63.5*1 - 3*0.5 + (-127*2 + 10*5) = 63.5 + 63.5 - 1.5 - 204 = -78.5
  const int D = 64;
  std::vector<float> q(D, 0.0f);
  q[0] = 127; q[1] = 63.5f; q[2] = 3; q[32] = -127; q[33] = 10;
  std::vector<int8_t> kq(D, 0);
  kq[0] = 1; kq[1] = 2; kq[2] = -1; kq[32] = 2; kq[33] = 5;
  std::vector<uint16_t> ks = {0x3800, 0x3c00};
  std::vector<uint16_t> v(D, 0);
  int32_t L = 1;
  AttnParams p;
  p.n_q_heads = 1; p.n_kv_heads = 1; p.head_dim = D; p.max_kv_len = 1;
  p.q.type = DType::f32; p.q.data = q.data();
  p.k.data = kq.data(); p.k.scales = ks.data(); p.k.block = 32;
  p.v.data = v.data();
  p.kv_len = &L;
  p.scale = 1.0f;
  std::vector<double> lg;
  REQUIRE(reference_logits(p, RefMode::kernel_int8, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == 126.0 - 204.0);
  REQUIRE(reference_logits(p, RefMode::exact, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == -78.5);
  REQUIRE(reference_logits(p, RefMode::kernel_f16, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == -78.5);  // all values fp16-exact
  // K as fp16 tiles (prefill-k-rounded): every q_k * d and q * qd / qd_max is fp16-exact here
  REQUIRE(reference_logits(p, RefMode::kernel_int8_k16, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == 126.0 - 204.0);
  REQUIRE(reference_logits(p, RefMode::kernel_f16_k16, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == -78.5);
  {  // one rounding: q_k = 127, d = 1 + 2^-10 (0x3c01): 127.1240234375 -> fp16 127.125 (ulp 1/16)
    std::vector<float> q1(32, 0.0f);
    q1[0] = 127.0f;  // q = 127, qd = 1
    std::vector<int8_t> k1(32, 0);
    k1[0] = 127;
    std::vector<uint16_t> s1 = {0x3c01};
    std::vector<uint16_t> v1(32, 0);
    AttnParams p1 = p;
    p1.head_dim = 32; p1.q.data = q1.data(); p1.k.data = k1.data(); p1.k.scales = s1.data(); p1.v.data = v1.data();
    REQUIRE(reference_logits(p1, RefMode::kernel_int8, 0, 0, 0, &lg).ok());
    CHECK(lg[0] == 127.0 * 127.0 * (1.0 + 1.0 / 1024));
    REQUIRE(reference_logits(p1, RefMode::kernel_int8_k16, 0, 0, 0, &lg).ok());
    CHECK(lg[0] == 127.0 * 127.125);
    REQUIRE(reference_logits(p1, RefMode::kernel_f16_k16, 0, 0, 0, &lg).ok());
    CHECK(lg[0] == 127.0 * 127.125);
    // Q rescaled by its largest block scale: a second Q block of amax 63.5 (qd 0.5, q = 127)
    // enters as 127 * 0.5 = 63.5, the row's factor 1
    std::vector<float> q2b(64, 0.0f);
    q2b[0] = 127.0f; q2b[32] = 63.5f;
    std::vector<int8_t> k2b(64, 0);
    k2b[0] = 127; k2b[32] = 2;
    std::vector<uint16_t> s2b = {0x3c01, 0x3c00};
    std::vector<uint16_t> v2b(64, 0);
    p1.head_dim = 64; p1.q.data = q2b.data(); p1.k.data = k2b.data(); p1.k.scales = s2b.data(); p1.v.data = v2b.data();
    REQUIRE(reference_logits(p1, RefMode::kernel_int8_k16, 0, 0, 0, &lg).ok());
    CHECK(lg[0] == 127.0 * 127.125 + 63.5 * 2.0);
  }
  // smoothing scale multiplies q in fp32 before quantizing: s = 2 on channel 1 -> x1 = 127
  std::vector<float> s(D, 1.0f);
  s[1] = 2.0f;
  p.k.smooth_scale = s.data();
  REQUIRE(reference_logits(p, RefMode::kernel_int8, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == (127 + 254 - 3) * 0.5 - 204.0);
  // B = 16 on D = 80: Q blocks 32, 32, 16 map to K blocks 0,1 | 2,3 | 4
  const int D2 = 80;
  std::vector<float> q2(D2, 0.0f);
  q2[70] = 2.0f; q2[71] = 1.0f;  // last Q block: qd = 2/127, q = (127, 64)
  std::vector<int8_t> k2(D2, 0);
  k2[70] = 3; k2[71] = -1;
  std::vector<uint16_t> s2 = {0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x4000};  // block 4: d = 2
  std::vector<uint16_t> v2(D2, 0);
  p.head_dim = D2; p.q.data = q2.data(); p.k.data = k2.data(); p.k.scales = s2.data(); p.k.block = 16;
  p.k.smooth_scale = nullptr; p.v.data = v2.data();
  REQUIRE(reference_logits(p, RefMode::kernel_int8, 0, 0, 0, &lg).ok());
  CHECK(lg[0] == Approx((127.0 * 3 - 64) * static_cast<double>(2.0f / 127.0f) * 2.0).epsilon(1e-15));
}

TEST_CASE("kernel modes are close to exact mode on realistic data", "[ref][kernel]") {
  ProblemConfig c;
  c.batch = 2; c.nq = 2; c.n_q_heads = 8; c.n_kv_heads = 2; c.head_dim = 128; c.kv_lens = {200, 77};
  c.seed = 9; c.mask = true; c.sinks = true; c.softcap = 30.0f;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  std::vector<double> oe, le, oi, li, of, lf;
  REQUIRE(reference_attention(hp.params, RefMode::exact, &oe, &le).ok());
  REQUIRE(reference_attention(hp.params, RefMode::kernel_int8, &oi, &li).ok());
  REQUIRE(reference_attention(hp.params, RefMode::kernel_f16, &of, &lf).ok());
  const double ei = relative_l2_error(oe.data(), oi.data(), static_cast<int64_t>(oe.size()));
  const double ef = relative_l2_error(oe.data(), of.data(), static_cast<int64_t>(oe.size()));
  CHECK(ei < 0.05);
  CHECK(ef < 0.01);
  CHECK(ef <= ei);
  for (size_t r = 0; r < le.size(); ++r) {
    CHECK(std::fabs(li[r] - le[r]) < 0.2);
    CHECK(std::fabs(lf[r] - le[r]) < 0.02);
  }
  // K as fp16 tiles (prefill-k-rounded): a rounding each K value, small against the int8 modes'
  // own distance from exact, and not nothing
  std::vector<double> oi16, li16, of16, lf16;
  REQUIRE(reference_attention(hp.params, RefMode::kernel_int8_k16, &oi16, &li16).ok());
  REQUIRE(reference_attention(hp.params, RefMode::kernel_f16_k16, &of16, &lf16).ok());
  CHECK(oi16 != oi);
  CHECK(of16 != of);
  CHECK(relative_l2_error(oi.data(), oi16.data(), static_cast<int64_t>(oi.size())) < 2e-3);
  CHECK(relative_l2_error(of.data(), of16.data(), static_cast<int64_t>(of.size())) < 2e-3);
  for (size_t r = 0; r < le.size(); ++r) {
    CHECK(std::fabs(li16[r] - li[r]) < 5e-3);
    CHECK(std::fabs(lf16[r] - lf[r]) < 5e-3);
  }
  // f16 K: kernel_int8 runs the fp16-Q dot
  AttnParams pf = hp.make_params(KFormat::f16, VFormat::f16);
  REQUIRE(reference_attention(pf, RefMode::kernel_int8, &oi, &li).ok());
  REQUIRE(reference_attention(pf, RefMode::kernel_f16, &of, &lf).ok());
  CHECK(oi == of);
  CHECK(li == lf);
}

TEST_CASE("reference rows on several threads: bitwise the rows of one thread", "[ref]") {
  // 2 x 3 x 8 = 48 rows over uneven thread counts (row ranges of 6-7 and 1-2 rows, more
  // threads than rows); masks, sinks and mixed lengths so that rows differ
  ProblemConfig c;
  c.batch = 2; c.nq = 3; c.n_q_heads = 8; c.n_kv_heads = 2; c.head_dim = 64; c.kv_lens = {300, 41};
  c.seed = 21; c.mask = true; c.sinks = true;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  std::vector<double> o1, l1;
  REQUIRE(reference_attention(hp.params, RefMode::kernel_int8, &o1, &l1, 1).ok());
  REQUIRE(o1.size() == 48u * 64u);
  int nonzero = 0;
  for (size_t r = 0; r < l1.size(); ++r) nonzero += std::isfinite(l1[r]) ? 1 : 0;
  CHECK(nonzero == 48);  // every row has visible keys: a skipped row would show
  for (int t : {2, 7, 31, 48, 100}) {
    std::vector<double> ot, lt;
    REQUIRE(reference_attention(hp.params, RefMode::kernel_int8, &ot, &lt, t).ok());
    INFO("threads " << t);
    CHECK(ot == o1);
    CHECK(lt == l1);
  }
  std::vector<double> oa, la;  // automatic count
  REQUIRE(reference_attention(hp.params, RefMode::kernel_int8, &oa, &la).ok());
  CHECK(oa == o1);
  CHECK(la == l1);
}

TEST_CASE("reference rejects structurally bad params with the field name", "[ref]") {
  Tiny t(1, 1, 2, 1, 4, 2);
  t.repoint();
  std::vector<double> o;
  AttnParams p = t.p;
  p.n_q_heads = 3;
  p.n_kv_heads = 2;
  CHECK(reference_attention(p, RefMode::exact, &o, nullptr).message().rfind("n_q_heads:", 0) == 0);
  p = t.p;
  p.kv_len = nullptr;
  CHECK(reference_attention(p, RefMode::exact, &o, nullptr).message().rfind("kv_len:", 0) == 0);
  p = t.p;
  p.k.format = KFormat::packed16;
  CHECK(reference_attention(p, RefMode::exact, &o, nullptr).message().rfind("k.scales:", 0) == 0);
}
