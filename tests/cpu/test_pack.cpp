// Host packing: exact bytes from the spec, round trips, counts, ggml V blocks.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "packfa/pack.hpp"
#include "packfa/synth.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

namespace {

// Pack rows of D f32 values laid out densely [token][head][D] with B; returns payload/scales.
struct Packed {
  std::vector<int8_t> q;
  std::vector<uint16_t> d;
  PackStats st;
};
Packed pack_rows(const std::vector<float>& x, int n_tokens, int G, int D, int B, const float* m = nullptr,
                 const float* s = nullptr) {
  Packed r;
  r.q.assign(static_cast<size_t>(n_tokens) * G * D, 99);
  r.d.assign(static_cast<size_t>(n_tokens) * G * D / B, 0xffff);
  PackKParams p;
  p.n_tokens = n_tokens;
  p.n_kv_heads = G;
  p.head_dim = D;
  p.src_type = DType::f32;
  p.src = x.data();
  p.src_token_stride = static_cast<int64_t>(G) * D;
  p.src_head_stride = D;
  p.dst.block = B;
  p.dst.data = r.q.data();
  p.dst.data_strides.slot = static_cast<int64_t>(G) * D;
  p.dst.data_strides.head = D;
  p.dst.scales = r.d.data();
  p.dst.scale_strides.slot = 2 * static_cast<int64_t>(G) * (D / B);
  p.dst.scale_strides.head = 2 * (D / B);
  p.dst.smooth_scale = s;
  p.smooth_shift = m;
  REQUIRE(pack_k_host(p, &r.st).ok());
  return r;
}

// s is an invalid_argument whose message starts with "field:".
void expect_field(const Status& s, const std::string& field) {
  INFO("status: " << s.to_string());
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().rfind(field + ":", 0) == 0);
}

// Random V source values with per-block magnitudes spread over ~3 decades, so block scales
// differ; block 1 of row 1 is all zeros (d = 0). Layout [token][head][D], f32.
std::vector<float> random_v_source(int T, int G, int D, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(T) * G * D);
  SynthRng rng(seed);
  for (size_t r = 0; r < x.size() / 32; ++r) {
    const double mag = std::pow(10.0, 3.0 * rng.uniform() - 1.0);
    for (size_t i = 0; i < 32; ++i) x[32 * r + i] = static_cast<float>(mag * rng.normal());
  }
  for (int c = 32; c < 64; ++c) x[static_cast<size_t>(1) * D + c] = 0.0f;
  return x;
}

// q8_0 rows of x quantized by quantize_v_host into a dense [token][head] array of
// head_dim / 32 blocks of 34 bytes (the ggml layout the planar format must reproduce).
std::vector<uint8_t> q8_0_rows(const std::vector<float>& x, int T, int G, int D) {
  const int64_t rb = v_row_bytes(VFormat::q8_0, D);
  std::vector<uint8_t> out(static_cast<size_t>(T) * G * rb);
  QuantVParams p;
  p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f32; p.src = x.data();
  p.src_token_stride = static_cast<int64_t>(G) * D; p.src_head_stride = D;
  p.dst.format = VFormat::q8_0; p.dst.data = out.data(); p.dst.strides.slot = G * rb; p.dst.strides.head = rb;
  REQUIRE(quantize_v_host(p).ok());
  return out;
}

}  // namespace

TEST_CASE("packed16: amax 127 gives d = 1.0 (0x3c00) and q = roundf(x)", "[pack]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f; x[1] = -127.0f; x[2] = 0.5f; x[3] = -0.5f; x[4] = 1.49f; x[5] = 2.5f; x[6] = -2.5f; x[7] = 100.7f;
  const Packed r = pack_rows(x, 1, 1, 32, 32);
  CHECK(r.d[0] == 0x3c00);
  const int8_t expect[8] = {127, -127, 1, -1, 1, 3, -3, 101};  // roundf: halves away from zero
  for (int i = 0; i < 8; ++i) CHECK(r.q[i] == expect[i]);
  for (int i = 8; i < 32; ++i) CHECK(r.q[i] == 0);
  CHECK(r.st.nonfinite == 0);
  CHECK(r.st.overflow == 0);
}

TEST_CASE("packed16: q is rounded against the rounded fp16 d", "[pack]") {
  // amax = 1: 1/127 = 0.0078740... -> fp16 2^-7 * (1 + 8/1024) = 0.00787353515625, bits 0x2008.
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f; x[1] = 0.5f; x[2] = -0.25f; x[3] = 0.0039f;
  const Packed r = pack_rows(x, 1, 1, 16, 16);
  CHECK(r.d[0] == 0x2008);
  CHECK(r.q[0] == 127);  // 1 / 0.0078735 = 127.007
  CHECK(r.q[1] == 64);   // 63.504
  CHECK(r.q[2] == -32);  // -31.752
  CHECK(r.q[3] == 0);    // 0.4953 -> 0
}

TEST_CASE("packed16: amax 0 gives d = 0 and q = 0; per-block scales", "[pack]") {
  std::vector<float> x(64, 0.0f);
  for (int i = 32; i < 64; ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 254.0f * (i - 32) / 31.0f;
  const Packed r = pack_rows(x, 1, 1, 64, 32);
  CHECK(r.d[0] == 0x0000);
  CHECK(r.d[1] == 0x4000);  // 254 / 127 = 2.0
  for (int i = 0; i < 32; ++i) CHECK(r.q[i] == 0);
  CHECK(r.q[63] == 127);  // i = 63 is odd: +254
  CHECK(r.q[62] == static_cast<int8_t>(std::roundf(x[62] / 2.0f)));
}

TEST_CASE("packed16: non-finite inputs count as 0, fp16 overflow clamps d to 65504", "[pack]") {
  std::vector<float> x(32, 1.0f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity();
  x[3] = 127.0f;
  Packed r = pack_rows(x, 1, 1, 32, 32);
  CHECK(r.st.nonfinite == 3);
  CHECK(r.st.overflow == 0);
  CHECK(r.d[0] == 0x3c00);
  CHECK(r.q[0] == 0);
  CHECK(r.q[1] == 0);
  CHECK(r.q[2] == 0);
  CHECK(r.q[3] == 127);
  CHECK(r.q[4] == 1);

  std::vector<float> y(32, 0.0f);
  y[0] = 1.0e7f;   // 1e7 / 127 = 78740 > 65504
  y[1] = 65504.0f; // 65504 / 65504 = 1
  y[2] = -3.0e6f;  // -45.8 -> -46
  r = pack_rows(y, 1, 1, 32, 32);
  CHECK(r.st.overflow == 1);
  CHECK(r.d[0] == 0x7bff);
  CHECK(r.q[0] == 127);  // 152.7 clamps
  CHECK(r.q[1] == 1);
  CHECK(r.q[2] == -46);

  std::vector<float> z(32, std::numeric_limits<float>::infinity());
  r = pack_rows(z, 1, 1, 32, 32);
  CHECK(r.st.nonfinite == 32);
  CHECK(r.d[0] == 0);
}

TEST_CASE("packed16: round trip |k - unpack(pack(k))| <= d/2, B = 32 and 16, smoothing", "[pack]") {
  const int T = 40, G = 3, D = 128;
  const SynthData sd = synth_attention_data(SynthOptions{}, 7, T, 1, G, G, D);
  std::vector<float> m(G * D), s(G * D);
  SynthRng rng(3);
  for (int i = 0; i < G * D; ++i) {
    m[i] = static_cast<float>(3.0 * rng.normal());
    s[i] = static_cast<float>(0.25 + 2.0 * rng.uniform());
  }
  for (int B : {32, 16}) {
    for (int mode = 0; mode < 3; ++mode) {
      const float* mp = mode >= 1 ? m.data() : nullptr;
      const float* sp = mode >= 2 ? s.data() : nullptr;
      const Packed r = pack_rows(sd.k, T, G, D, B, mp, sp);
      CHECK(r.st.nonfinite == 0);
      int64_t bad = 0;
      std::vector<double> out(D);
      for (int t = 0; t < T; ++t)
        for (int g = 0; g < G; ++g) {
          const size_t row = static_cast<size_t>(t * G + g);
          unpack_k_row(r.q.data() + row * D, r.d.data() + row * (D / B), D, B, out.data());
          for (int c = 0; c < D; ++c) {
            float x = sd.k[row * D + c];
            if (mp) x = x - mp[g * D + c];
            if (sp) x = x / sp[g * D + c];
            const double d = fp16_to_float(r.d[row * (D / B) + c / B]);
            if (std::fabs(static_cast<double>(x) - out[c]) > d / 2 * (1 + 1e-6)) ++bad;
          }
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("packed16: strided destination, slots, f16/bf16 sources, unpack_k_host", "[pack]") {
  const int G = 2, D = 64, B = 32, T = 3;
  std::vector<float> xf(T * G * D);
  SynthRng rng(11);
  for (auto& v : xf) v = static_cast<float>(rng.normal() * 4);
  std::vector<uint16_t> xh(xf.size()), xb(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) {
    xh[i] = fp16_from_float(xf[i]);
    xb[i] = bf16_from_float(xf[i]);
  }
  for (DType t : {DType::f16, DType::bf16}) {
    const int slots_n = 8;
    const int64_t slot_stride = 256, scale_slot_stride = 16;  // padded
    std::vector<int8_t> payload(slots_n * slot_stride, 0);
    std::vector<uint16_t> scales(slots_n * scale_slot_stride / 2, 0);
    const int32_t slots[T] = {5, 1, 6};
    PackKParams p;
    p.n_tokens = T;
    p.n_kv_heads = G;
    p.head_dim = D;
    p.src_type = t;
    p.src = t == DType::f16 ? static_cast<const void*>(xh.data()) : xb.data();
    p.src_token_stride = G * D;
    p.src_head_stride = D;
    p.dst.block = B;
    p.dst.data = payload.data();
    p.dst.data_strides.slot = slot_stride;
    p.dst.data_strides.head = 96;
    p.dst.scales = scales.data();
    p.dst.scale_strides.slot = scale_slot_stride;
    p.dst.scale_strides.head = 6;
    p.slots = slots;
    REQUIRE(pack_k_host(p, nullptr).ok());
    for (int tok = 0; tok < T; ++tok)
      for (int g = 0; g < G; ++g) {
        std::vector<float> row(D);
        for (int c = 0; c < D; ++c)
          row[c] = t == DType::f16 ? fp16_to_float(xh[(tok * G + g) * D + c]) : bf16_to_float(xb[(tok * G + g) * D + c]);
        int8_t q[D];
        uint16_t d[2];
        for (int b = 0; b < 2; ++b) d[b] = packed16_quantize_block(row.data() + 32 * b, 32, q + 32 * b, nullptr);
        const int8_t* got = payload.data() + slots[tok] * slot_stride + g * 96;
        CHECK(std::memcmp(got, q, D) == 0);
        const uint16_t* gd = scales.data() + (slots[tok] * scale_slot_stride + g * 6) / 2;
        CHECK(gd[0] == d[0]);
        CHECK(gd[1] == d[1]);
        std::vector<float> un(D);
        REQUIRE(unpack_k_host(p.dst, D, 0, slots[tok], g, un.data()).ok());
        for (int c = 0; c < D; ++c) CHECK(un[c] == static_cast<float>(q[c]) * fp16_to_float(d[c / 32]));
      }
    // untouched slot
    for (int i = 0; i < slot_stride; ++i) CHECK(payload[0 * slot_stride + i] == 0);
  }
}

TEST_CASE("pack_k_host / quantize_v_host name the bad field", "[pack]") {
  std::vector<float> x(64, 1.0f);
  std::vector<int8_t> q(64);
  std::vector<uint16_t> d(4);
  PackKParams p;
  p.n_tokens = 1; p.n_kv_heads = 1; p.head_dim = 64; p.src_type = DType::f32; p.src = x.data();
  p.dst.data = q.data(); p.dst.scales = d.data(); p.dst.block = 32;
  REQUIRE(pack_k_host(p).ok());
  { auto c = p; c.dst.block = 8; expect_field(pack_k_host(c), "dst.block"); }
  { auto c = p; c.head_dim = 48; expect_field(pack_k_host(c), "head_dim"); }
  { auto c = p; c.src = nullptr; expect_field(pack_k_host(c), "src"); }
  { auto c = p; c.dst.scales = nullptr; expect_field(pack_k_host(c), "dst.scales"); }
  { auto c = p; c.dst.format = KFormat::f16; expect_field(pack_k_host(c), "dst.format"); }
  { auto c = p; c.dst.data_strides.slot = -1; expect_field(pack_k_host(c), "dst.data_strides.slot"); }
  QuantVParams v;
  v.n_tokens = 1; v.n_kv_heads = 1; v.head_dim = 48; v.src_type = DType::f32; v.src = x.data();
  v.dst.format = VFormat::q8_0; v.dst.data = q.data();
  expect_field(quantize_v_host(v), "head_dim");
  v.head_dim = 32; v.dst.data = nullptr;
  expect_field(quantize_v_host(v), "dst.data");
}

TEST_CASE("q8_0 block bytes by hand (ggml rules)", "[pack][v]") {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f; x[1] = -127.0f; x[2] = 0.5f; x[3] = -0.5f; x[4] = 2.5f; x[5] = -3.4f; x[31] = 64.0f;
  uint8_t blk[34];
  QuantVParams p;
  p.n_tokens = 1; p.n_kv_heads = 1; p.head_dim = 32; p.src_type = DType::f32; p.src = x.data();
  p.dst.format = VFormat::q8_0; p.dst.data = blk;
  REQUIRE(quantize_v_host(p).ok());
  uint8_t expect[34] = {0x00, 0x3c, 0x7f, 0x81, 0x01, 0xff, 0x03, 0xfd};  // d = 1.0, q = 127,-127,1,-1,3,-3
  expect[33] = 0x40;                                                      // 64
  CHECK(std::memcmp(blk, expect, 34) == 0);
  std::vector<double> back(32);
  dequantize_v_row(VFormat::q8_0, blk, nullptr, 32, back.data());
  CHECK(back[5] == -3.0);
  CHECK(back[31] == 64.0);
}

TEST_CASE("q4_0 block bytes by hand (ggml rules and nibble order)", "[pack][v]") {
  // signed extreme -8 -> d = -8 / -8 = 1.0; nibble = min(15, (int)(x / d + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f; x[1] = 7.0f; x[2] = 7.4f; x[4] = -0.6f; x[5] = 0.5f; x[16] = 3.0f; x[17] = -3.0f;
  uint8_t blk[18];
  QuantVParams p;
  p.n_tokens = 1; p.n_kv_heads = 1; p.head_dim = 32; p.src_type = DType::f32; p.src = x.data();
  p.dst.format = VFormat::q4_0; p.dst.data = blk;
  REQUIRE(quantize_v_host(p).ok());
  // nibbles n0..: 0, 15, 15, 8, 7, 9, 8...; n16 = 11, n17 = 5; byte j = n_j | n_{j+16} << 4.
  const uint8_t expect[18] = {0x00, 0x3c, 0xb0, 0x5f, 0x8f, 0x88, 0x87, 0x89, 0x88, 0x88,
                              0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  CHECK(std::memcmp(blk, expect, 18) == 0);
  std::vector<float> back(32);
  dequantize_v_row(VFormat::q4_0, blk, nullptr, 32, back.data());
  CHECK(back[0] == -8.0f);
  CHECK(back[1] == 7.0f);
  CHECK(back[16] == 3.0f);
  CHECK(back[17] == -3.0f);

  // positive extreme +8 -> d = -1.0 (0xbc00): x = 8 -> (int)(-8 + 8.5) = 0 -> value (0 - 8) * -1 = 8.
  std::vector<float> y(32, 0.0f);
  y[0] = 8.0f; y[1] = -4.0f;
  p.src = y.data();
  REQUIRE(quantize_v_host(p).ok());
  CHECK(blk[0] == 0x00);
  CHECK(blk[1] == 0xbc);
  CHECK(blk[2] == 0x80);  // n0 = 0, n16 = 8
  CHECK(blk[3] == 0x8c);  // n1 = (int)(4 + 8.5) = 12
}

TEST_CASE("V f16/bf16 conversions and q8_0/q4_0/q8_0_planar error bounds", "[pack][v]") {
  const int D = 128, T = 5;
  std::vector<float> x(T * D);
  SynthRng rng(5);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  for (int f = 0; f < kNumVFormats; ++f) {
    const VFormat vf = static_cast<VFormat>(f);
    const int64_t rb = v_row_bytes(vf, D), srb = v_scale_row_bytes(vf, D);
    std::vector<uint8_t> buf(T * rb);
    std::vector<uint16_t> scales(T * srb / 2);  // empty unless the format has a scale plane
    QuantVParams p;
    p.n_tokens = T; p.n_kv_heads = 1; p.head_dim = D; p.src_type = DType::f32; p.src = x.data();
    p.src_token_stride = D; p.dst.format = vf; p.dst.data = buf.data(); p.dst.strides.slot = rb;
    if (srb) {
      p.dst.scales = scales.data();
      p.dst.scale_strides.slot = srb;
    }
    REQUIRE(quantize_v_host(p).ok());
    for (int t = 0; t < T; ++t) {
      std::vector<double> back(D);
      dequantize_v_row(vf, buf.data() + t * rb, srb ? scales.data() + t * srb / 2 : nullptr, D, back.data());
      for (int b = 0; b < D / 32; ++b) {
        float amax = 0;
        for (int c = 32 * b; c < 32 * b + 32; ++c) amax = std::fmax(amax, std::fabs(x[t * D + c]));
        for (int c = 32 * b; c < 32 * b + 32; ++c) {
          const double err = std::fabs(back[c] - x[t * D + c]);
          if (vf == VFormat::f16) CHECK(back[c] == fp16_to_float(fp16_from_float(x[t * D + c])));
          if (vf == VFormat::bf16) CHECK(back[c] == bf16_to_float(bf16_from_float(x[t * D + c])));
          if (vf == VFormat::q8_0 || vf == VFormat::q8_0_planar) CHECK(err <= amax / 127 * 0.51 + 1e-3 * amax);
          if (vf == VFormat::q4_0) CHECK(err <= amax / 8 * 1.01 + 1e-3 * amax);
        }
      }
    }
  }
}

TEST_CASE("q8_0_planar: quantize_v_host writes q8_0's bytes split over two planes", "[pack][v]") {
  // Payload byte 32b + i of a row is q8_0 block b's byte 2 + i; scale element b is q8_0
  // block b's bytes 0..1 (little-endian fp16 d). Scattered slots and base_slot addressing,
  // padded slot strides; bytes outside the written rows stay untouched.
  const int T = 5, G = 2, n_slots = 9;
  const int32_t slots[T] = {7, 2, 0, 5, 8};
  const int64_t base_slot = 3;
  const uint8_t payload_fill = 0xab;
  const uint16_t scale_fill = 0xcdcd;
  for (int D : {64, 128, 256}) {
    const int nb = D / 32;
    const std::vector<float> x = random_v_source(T, G, D, 40 + D);
    const std::vector<uint8_t> ref = q8_0_rows(x, T, G, D);
    for (bool use_slots : {true, false}) {
      INFO("D = " << D << (use_slots ? ", slots[]" : ", base_slot"));
      const int64_t pay_head = D, pay_slot = G * pay_head + 48;    // 48 pad bytes, rows stay 16-aligned
      const int64_t sc_head = 2 * nb, sc_slot = G * sc_head + 6;   // 3 pad scales
      std::vector<uint8_t> payload(n_slots * pay_slot, payload_fill);
      std::vector<uint16_t> scales(n_slots * sc_slot / 2, scale_fill);
      QuantVParams p;
      p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f32; p.src = x.data();
      p.src_token_stride = static_cast<int64_t>(G) * D; p.src_head_stride = D;
      p.dst.format = VFormat::q8_0_planar;
      p.dst.data = payload.data(); p.dst.strides.slot = pay_slot; p.dst.strides.head = pay_head;
      p.dst.scales = scales.data(); p.dst.scale_strides.slot = sc_slot; p.dst.scale_strides.head = sc_head;
      if (use_slots) p.slots = slots;
      else p.base_slot = base_slot;
      REQUIRE(quantize_v_host(p).ok());

      std::vector<bool> payload_written(payload.size(), false), scale_written(scales.size(), false);
      int64_t bad_payload = 0, bad_scale = 0;
      for (int t = 0; t < T; ++t) {
        const int64_t slot = use_slots ? slots[t] : base_slot + t;
        for (int g = 0; g < G; ++g) {
          const uint8_t* ref_row = ref.data() + static_cast<size_t>(t * G + g) * nb * kQ8_0BlockBytes;
          const int64_t prow = slot * pay_slot + g * pay_head, srow = (slot * sc_slot + g * sc_head) / 2;
          for (int b = 0; b < nb; ++b) {
            const uint8_t* blk = ref_row + b * kQ8_0BlockBytes;
            for (int i = 0; i < 32; ++i) {
              if (payload[prow + 32 * b + i] != blk[2 + i]) ++bad_payload;
              payload_written[prow + 32 * b + i] = true;
            }
            if (scales[srow + b] != static_cast<uint16_t>(blk[0] | (blk[1] << 8))) ++bad_scale;
            scale_written[srow + b] = true;
          }
        }
      }
      CHECK(bad_payload == 0);
      CHECK(bad_scale == 0);
      int64_t touched = 0;
      for (size_t i = 0; i < payload.size(); ++i) touched += !payload_written[i] && payload[i] != payload_fill;
      for (size_t i = 0; i < scales.size(); ++i) touched += !scale_written[i] && scales[i] != scale_fill;
      CHECK(touched == 0);
    }
  }
}

TEST_CASE("q8_0_planar: dequantize_v_row equals q8_0's for the same source values", "[pack][v]") {
  const int T = 3, G = 2;
  for (int D : {64, 128, 256}) {
    INFO("D = " << D);
    const int nb = D / 32;
    const std::vector<float> x = random_v_source(T, G, D, 70 + D);
    const std::vector<uint8_t> ref = q8_0_rows(x, T, G, D);
    // planar rows, dense: row r at payload r*D, scales r*nb
    std::vector<int8_t> payload(static_cast<size_t>(T) * G * D);
    std::vector<uint16_t> scales(static_cast<size_t>(T) * G * nb);
    QuantVParams p;
    p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f32; p.src = x.data();
    p.src_token_stride = static_cast<int64_t>(G) * D; p.src_head_stride = D;
    p.dst.format = VFormat::q8_0_planar;
    p.dst.data = payload.data(); p.dst.strides.slot = G * D; p.dst.strides.head = D;
    p.dst.scales = scales.data(); p.dst.scale_strides.slot = 2 * G * nb; p.dst.scale_strides.head = 2 * nb;
    REQUIRE(quantize_v_host(p).ok());
    int64_t bad_f = 0, bad_d = 0, nonzero = 0;
    for (int r = 0; r < T * G; ++r) {
      std::vector<float> want_f(D), got_f(D);
      std::vector<double> want_d(D), got_d(D);
      const uint8_t* q8_row = ref.data() + static_cast<size_t>(r) * nb * kQ8_0BlockBytes;
      dequantize_v_row(VFormat::q8_0, q8_row, nullptr, D, want_f.data());
      dequantize_v_row(VFormat::q8_0, q8_row, nullptr, D, want_d.data());
      dequantize_v_row(VFormat::q8_0_planar, payload.data() + r * D, scales.data() + r * nb, D, got_f.data());
      dequantize_v_row(VFormat::q8_0_planar, payload.data() + r * D, scales.data() + r * nb, D, got_d.data());
      for (int c = 0; c < D; ++c) {
        bad_f += got_f[c] != want_f[c];
        bad_d += got_d[c] != want_d[c];
        nonzero += want_d[c] != 0.0;
      }
    }
    CHECK(bad_f == 0);
    CHECK(bad_d == 0);
    CHECK(nonzero > T * G * D / 2);  // the comparison is not between all-zero rows
  }
}

TEST_CASE("quantize_v_host q8_0_planar names the bad field", "[pack][v]") {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> data(128);
  std::vector<uint16_t> scales(2);
  QuantVParams v;
  v.n_tokens = 1; v.n_kv_heads = 1; v.head_dim = 64; v.src_type = DType::f32; v.src = x.data();
  v.dst.format = VFormat::q8_0_planar; v.dst.data = data.data(); v.dst.scales = scales.data();
  REQUIRE(quantize_v_host(v).ok());
  { auto c = v; c.dst.scales = nullptr; expect_field(quantize_v_host(c), "dst.scales"); }
  for (int d : {48, 80, 16}) { auto c = v; c.head_dim = d; expect_field(quantize_v_host(c), "head_dim"); }
  { auto c = v; c.dst.scale_strides.slot = -2; expect_field(quantize_v_host(c), "dst.scale_strides.slot"); }
  { auto c = v; c.dst.data = nullptr; expect_field(quantize_v_host(c), "dst.data"); }
  // the other formats have no scale plane: a null dst.scales is fine for them
  { auto c = v; c.dst.format = VFormat::q8_0; c.dst.scales = nullptr; CHECK(quantize_v_host(c).ok()); }
}

TEST_CASE("q8_0 / q4_0 / q8_0_planar: non-finite inputs count as 0 (docs/format.md)", "[pack][v]") {
  std::vector<float> x(32), z(32);
  SynthRng rng(5);
  for (int i = 0; i < 32; ++i) x[i] = z[i] = static_cast<float>(3.0 * rng.normal());
  x[0] = NAN; x[7] = INFINITY; x[31] = -INFINITY;  // first, middle and last: ggml's MAX depends on where a NaN sits
  z[0] = z[7] = z[31] = 0.0f;
  uint8_t a[34], b[34];
  q8_0_quantize_block(x.data(), a);
  q8_0_quantize_block(z.data(), b);
  CHECK(std::memcmp(a, b, 34) == 0);
  CHECK(a[2] == 0);   // q = 0
  CHECK(a[33] == 0);
  q4_0_quantize_block(x.data(), a);
  q4_0_quantize_block(z.data(), b);
  CHECK(std::memcmp(a, b, 18) == 0);
  CHECK((a[2] & 0xf) == 8);  // nibble 8: value 0
  CHECK((a[17] >> 4) == 8);
  int8_t q[32];
  uint16_t d = 0;
  q8_0_planar_quantize_block(x.data(), q, &d);
  q8_0_quantize_block(z.data(), b);
  CHECK(d == static_cast<uint16_t>(b[0] | (b[1] << 8)));
  CHECK(std::memcmp(q, b + 2, 32) == 0);
  // a block of nothing but NaN is a block of zeros: d = 0
  std::vector<float> n(32, NAN);
  q8_0_quantize_block(n.data(), a);
  for (int i = 0; i < 34; ++i) CHECK(a[i] == 0);
  q4_0_quantize_block(n.data(), a);
  CHECK(a[0] == 0);
  CHECK(a[1] == 0x80);  // d = 0 / -8 = -0, as in ggml
  for (int i = 2; i < 18; ++i) CHECK(a[i] == 0x88);
}

// Paged destinations (vLLM slot_mapping) and skipped tokens: slot < 0 and slot >= n_slots
// write nothing; slot s lands in page s / page_size at offset s % page_size.
TEST_CASE("pack_k_host / quantize_v_host: paged slots and skipped tokens", "[pack][paged]") {
  const int G = 2, D = 64, T = 5, PAGE = 16, PAGES = 4;
  std::vector<float> x(T * G * D);
  SynthRng rng(21);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  const int32_t slots[T] = {17, -1, 63, 70, 0};  // 70 >= n_slots = 64: skipped
  // HND-like pages: [page][head][offset] rows, page stride 2 * 16 rows
  const Strides pay = {G * PAGE * D, D, PAGE * D}, sc = {G * PAGE * 4, 4, PAGE * 4};
  std::vector<int8_t> q(PAGES * G * PAGE * D, 99);
  std::vector<uint16_t> d(PAGES * G * PAGE * 2, 0xffff);
  PackKParams p;
  p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f32; p.src = x.data();
  p.src_token_stride = G * D; p.src_head_stride = D;
  p.dst.data = q.data(); p.dst.data_strides = pay; p.dst.scales = d.data(); p.dst.scale_strides = sc;
  p.slots = slots; p.page_size = PAGE; p.n_slots = PAGES * PAGE;
  REQUIRE(pack_k_host(p).ok());
  std::vector<bool> written(PAGES * PAGE, false);
  for (int t = 0; t < T; ++t) {
    const int s = slots[t];
    if (s < 0 || s >= PAGES * PAGE) continue;
    written[s] = true;
    for (int g = 0; g < G; ++g) {
      int8_t want[D];
      uint16_t wd[2];
      for (int b = 0; b < 2; ++b) wd[b] = packed16_quantize_block(x.data() + (t * G + g) * D + 32 * b, 32, want + 32 * b, nullptr);
      const int64_t off = (s / PAGE) * pay.seq + (s % PAGE) * pay.slot + g * pay.head;
      CHECK(std::memcmp(q.data() + off, want, D) == 0);
      const int64_t soff = ((s / PAGE) * sc.seq + (s % PAGE) * sc.slot + g * sc.head) / 2;
      CHECK(d[soff] == wd[0]);
      CHECK(d[soff + 1] == wd[1]);
    }
  }
  for (int s = 0; s < PAGES * PAGE; ++s)  // every other slot's rows untouched
    if (!written[s])
      for (int g = 0; g < G; ++g)
        CHECK(q[(s / PAGE) * pay.seq + (s % PAGE) * pay.slot + g * pay.head] == 99);

  // the same slots through quantize_v_host (q8_0 rows of 68 bytes, NHD pages)
  const int64_t rb = v_row_bytes(VFormat::q8_0, D);
  const Strides vs = {PAGE * G * rb, G * rb, rb};
  std::vector<uint8_t> v(PAGES * PAGE * G * rb, 0x5a);
  QuantVParams qv;
  qv.n_tokens = T; qv.n_kv_heads = G; qv.head_dim = D; qv.src_type = DType::f32; qv.src = x.data();
  qv.src_token_stride = G * D; qv.src_head_stride = D;
  qv.dst.format = VFormat::q8_0; qv.dst.data = v.data(); qv.dst.strides = vs;
  qv.slots = slots; qv.page_size = PAGE; qv.n_slots = PAGES * PAGE;
  REQUIRE(quantize_v_host(qv).ok());
  for (int t = 0; t < T; ++t) {
    const int s = slots[t];
    if (s < 0 || s >= PAGES * PAGE) continue;
    for (int g = 0; g < G; ++g) {
      uint8_t want[2 * 34];
      for (int b = 0; b < 2; ++b) q8_0_quantize_block(x.data() + (t * G + g) * D + 32 * b, want + 34 * b);
      CHECK(std::memcmp(v.data() + (s / PAGE) * vs.seq + (s % PAGE) * vs.slot + g * vs.head, want, 68) == 0);
    }
  }
  for (int s = 0; s < PAGES * PAGE; ++s)  // rows of the slots nobody wrote keep their bytes
    if (!written[s])
      for (int g = 0; g < G; ++g)
        for (int64_t i = 0; i < rb; ++i) CHECK(v[(s / PAGE) * vs.seq + (s % PAGE) * vs.slot + g * vs.head + i] == 0x5a);
  { auto c = p; c.page_size = 24; expect_field(pack_k_host(c), "page_size"); }
  { auto c = qv; c.n_slots = -1; expect_field(quantize_v_host(c), "n_slots"); }
}
