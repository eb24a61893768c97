// Pack-on-write kernels produce exactly the bytes of the host packer (pack.hpp).
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/c_api.h"
#include "packfa/format.hpp"
#include "packfa/pack.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

namespace {

// n_tokens x G x D source values of type t (bytes), with a few non-finite and huge values.
std::vector<uint8_t> make_src(DType t, int n, int G, int D, std::mt19937& rng, bool specials) {
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const size_t count = static_cast<size_t>(n) * G * D;
  std::vector<uint8_t> out(count * (t == DType::f32 ? 4 : 2));
  for (size_t i = 0; i < count; ++i) {
    float x = nd(rng);
    if (specials && i % 997 == 5) x = NAN;
    if (specials && i % 1009 == 7) x = INFINITY;
    if (specials && t != DType::f16 && i % 1201 == 3) x = 3.0e7f;  // amax/127 overflows fp16
    if (t == DType::f32) std::memcpy(out.data() + 4 * i, &x, 4);
    if (t == DType::f16) {
      const uint16_t h = fp16_from_float(x);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
    if (t == DType::bf16) {
      const uint16_t h = bf16_from_float(x);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("pack_k_packed16 is bit-identical to pack_k_host", "[pack]") {
  std::mt19937 rng(42);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (int D : {64, 80, 128, 256}) {
      for (int block : {16, 32}) {
        if (D % block) continue;
        for (int smooth = 0; smooth < 2; ++smooth) {
          const int n = 37, G = 3, cap = 64;
          INFO("type " << static_cast<int>(t) << " D " << D << " block " << block << " smooth " << smooth);
          const std::vector<uint8_t> src = make_src(t, n, G, D, rng, true);
          std::vector<int32_t> slots(n);
          std::iota(slots.begin(), slots.end(), 0);
          std::shuffle(slots.begin(), slots.end(), rng);
          for (auto& s : slots) s += cap - n;  // scattered slots
          std::vector<float> shift(G * D), scale(G * D);
          std::uniform_real_distribution<float> u(0.25f, 4.0f);
          for (int i = 0; i < G * D; ++i) {
            shift[i] = u(rng) - 2.0f;
            scale[i] = u(rng);
          }
          const int64_t pay_slot = static_cast<int64_t>(G) * D, sc_slot = static_cast<int64_t>(G) * (2 * D / block);
          std::vector<uint8_t> host_pay(cap * pay_slot, 0x5a), host_sc(cap * sc_slot, 0x5a);

          PackKParams p;
          p.n_tokens = n;
          p.n_kv_heads = G;
          p.head_dim = D;
          p.src_type = t;
          p.src = src.data();
          p.src_token_stride = static_cast<int64_t>(G) * D;
          p.src_head_stride = D;
          p.dst.format = KFormat::packed16;
          p.dst.block = block;
          p.dst.data = host_pay.data();
          p.dst.data_strides = {0, pay_slot, D};
          p.dst.scales = host_sc.data();
          p.dst.scale_strides = {0, sc_slot, 2 * D / block};
          p.slots = slots.data();
          p.smooth_shift = smooth ? shift.data() : nullptr;
          p.dst.smooth_scale = smooth ? scale.data() : nullptr;
          PackStats stats;
          REQUIRE(pack_k_host(p, &stats).ok());

          DeviceBuffer d_src(src.size()), d_pay(host_pay.size()), d_sc(host_sc.size()), d_slots(n * 4),
              d_shift(G * D * 4), d_scale(G * D * 4), d_cnt(8);
          CUDA_CHECK(cudaMemcpy(d_src.ptr, src.data(), src.size(), cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemset(d_pay.ptr, 0x5a, host_pay.size()));
          CUDA_CHECK(cudaMemset(d_sc.ptr, 0x5a, host_sc.size()));
          CUDA_CHECK(cudaMemcpy(d_slots.ptr, slots.data(), n * 4, cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemcpy(d_shift.ptr, shift.data(), G * D * 4, cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemcpy(d_scale.ptr, scale.data(), G * D * 4, cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemset(d_cnt.ptr, 0, 8));
          PackKParams dpp = p;
          dpp.src = d_src.ptr;
          dpp.dst.data = d_pay.ptr;
          dpp.dst.scales = d_sc.ptr;
          dpp.slots = d_slots.as<int32_t>();
          dpp.smooth_shift = smooth ? d_shift.as<float>() : nullptr;
          dpp.dst.smooth_scale = smooth ? d_scale.as<float>() : nullptr;
          dpp.counters = d_cnt.as<int>();
          const Status s = pack_k_packed16(dpp, nullptr);
          INFO(s.to_string());
          REQUIRE(s.ok());
          std::vector<uint8_t> dev_pay(host_pay.size()), dev_sc(host_sc.size());
          int cnt[2];
          CUDA_CHECK(cudaMemcpy(dev_pay.data(), d_pay.ptr, dev_pay.size(), cudaMemcpyDeviceToHost));
          CUDA_CHECK(cudaMemcpy(dev_sc.data(), d_sc.ptr, dev_sc.size(), cudaMemcpyDeviceToHost));
          CUDA_CHECK(cudaMemcpy(cnt, d_cnt.ptr, 8, cudaMemcpyDeviceToHost));
          CHECK(dev_pay == host_pay);
          CHECK(dev_sc == host_sc);
          CHECK(cnt[0] == stats.nonfinite);
          CHECK(cnt[1] == stats.overflow);
          CHECK(stats.nonfinite > 0);
        }
      }
    }
  }
}

TEST_CASE("quantize_v is bit-identical to quantize_v_host", "[pack]") {
  std::mt19937 rng(7);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (VFormat f : {VFormat::q8_0, VFormat::q4_0, VFormat::f16, VFormat::bf16, VFormat::q8_0_planar}) {
      for (int D : {64, 128, 256}) {
        const int n = 29, G = 2, base = 5;
        const int64_t row = v_row_bytes(f, D);
        const int64_t slot = G * row;
        const int64_t srow = v_scale_row_bytes(f, D), sslot = G * srow;  // q8_0_planar's scale plane
        const std::vector<uint8_t> src = make_src(t, n, G, D, rng, false);
        std::vector<uint8_t> host(static_cast<size_t>((n + base) * slot), 0x33);
        std::vector<uint8_t> host_s(static_cast<size_t>((n + base) * sslot), 0x33);
        QuantVParams p;
        p.n_tokens = n;
        p.n_kv_heads = G;
        p.head_dim = D;
        p.src_type = t;
        p.src = src.data();
        p.src_token_stride = static_cast<int64_t>(G) * D;
        p.src_head_stride = D;
        p.dst.format = f;
        p.dst.data = host.data();
        p.dst.strides = {0, slot, row};
        if (srow) {
          p.dst.scales = host_s.data();
          p.dst.scale_strides = {0, sslot, srow};
        }
        p.base_slot = base;
        REQUIRE(quantize_v_host(p).ok());
        DeviceBuffer d_src(src.size()), d_dst(host.size()), d_s(host_s.size());
        CUDA_CHECK(cudaMemcpy(d_src.ptr, src.data(), src.size(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemset(d_dst.ptr, 0x33, host.size()));
        CUDA_CHECK(cudaMemset(d_s.ptr, 0x33, host_s.size() ? host_s.size() : 16));
        QuantVParams dq = p;
        dq.src = d_src.ptr;
        dq.dst.data = d_dst.ptr;
        if (srow) dq.dst.scales = d_s.ptr;
        REQUIRE(quantize_v(dq, nullptr).ok());
        std::vector<uint8_t> dev(host.size()), dev_s(host_s.size());
        CUDA_CHECK(cudaMemcpy(dev.data(), d_dst.ptr, dev.size(), cudaMemcpyDeviceToHost));
        if (srow) CUDA_CHECK(cudaMemcpy(dev_s.data(), d_s.ptr, dev_s.size(), cudaMemcpyDeviceToHost));
        INFO("src " << static_cast<int>(t) << " V " << static_cast<int>(f) << " D " << D);
        CHECK(dev == host);
        CHECK(dev_s == host_s);
      }
    }
  }
}

TEST_CASE("C ABI pack_k / quantize_v write the host packer's bytes", "[pack][c_api]") {
  std::mt19937 rng(11);
  const int n = 21, G = 2, D = 128, block = 16, cap = 32;
  const std::vector<uint8_t> src = make_src(DType::f16, n, G, D, rng, true);
  std::vector<int32_t> slots(n);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<float> shift(G * D, 0.5f), scale(G * D, 2.0f);
  const int64_t pay_slot = static_cast<int64_t>(G) * D, sc_slot = static_cast<int64_t>(G) * (2 * D / block);

  // host reference (C++ API on host buffers)
  std::vector<uint8_t> host_pay(cap * pay_slot, 0x5a), host_sc(cap * sc_slot, 0x5a);
  PackKParams hp;
  hp.n_tokens = n;
  hp.n_kv_heads = G;
  hp.head_dim = D;
  hp.src_type = DType::f16;
  hp.src = src.data();
  hp.src_token_stride = static_cast<int64_t>(G) * D;
  hp.src_head_stride = D;
  hp.dst.block = block;
  hp.dst.data = host_pay.data();
  hp.dst.data_strides = {0, pay_slot, D};
  hp.dst.scales = host_sc.data();
  hp.dst.scale_strides = {0, sc_slot, 2 * D / block};
  hp.slots = slots.data();
  hp.smooth_shift = shift.data();
  hp.dst.smooth_scale = scale.data();
  REQUIRE(pack_k_host(hp, nullptr).ok());

  DeviceBuffer d_src(src.size()), d_pay(host_pay.size()), d_sc(host_sc.size()), d_slots(n * 4), d_shift(G * D * 4),
      d_scale(G * D * 4);
  CUDA_CHECK(cudaMemcpy(d_src.ptr, src.data(), src.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_pay.ptr, 0x5a, host_pay.size()));
  CUDA_CHECK(cudaMemset(d_sc.ptr, 0x5a, host_sc.size()));
  CUDA_CHECK(cudaMemcpy(d_slots.ptr, slots.data(), n * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_shift.ptr, shift.data(), G * D * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_scale.ptr, scale.data(), G * D * 4, cudaMemcpyHostToDevice));
  packfa_pack_k_params k;
  std::memset(&k, 0, sizeof k);
  k.n_tokens = n;
  k.n_kv_heads = G;
  k.head_dim = D;
  k.src_type = 1;  // f16
  k.src = d_src.ptr;
  k.src_token_stride = static_cast<int64_t>(G) * D;
  k.src_head_stride = D;
  k.dst_payload = d_pay.ptr;
  k.dst_payload_strides[1] = pay_slot;
  k.dst_payload_strides[2] = D;
  k.dst_scales = d_sc.ptr;
  k.dst_scale_strides[1] = sc_slot;
  k.dst_scale_strides[2] = 2 * D / block;
  k.block = block;
  k.slots = d_slots.as<int32_t>();
  k.smooth_shift = d_shift.as<float>();
  k.smooth_scale = d_scale.as<float>();
  k.pdl = -1;
  char msg[256];
  REQUIRE(packfa_pack_k(&k, nullptr, msg, sizeof msg) == 0);
  std::vector<uint8_t> dev_pay(host_pay.size()), dev_sc(host_sc.size());
  CUDA_CHECK(cudaMemcpy(dev_pay.data(), d_pay.ptr, dev_pay.size(), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(dev_sc.data(), d_sc.ptr, dev_sc.size(), cudaMemcpyDeviceToHost));
  CHECK(dev_pay == host_pay);
  CHECK(dev_sc == host_sc);

  // V: q4_0 at base_slot 3
  const int64_t vrow = v_row_bytes(VFormat::q4_0, D), vslot = G * vrow;
  const int base = 3;
  std::vector<uint8_t> host_v(static_cast<size_t>((n + base) * vslot), 0x33);
  QuantVParams vp;
  vp.n_tokens = n;
  vp.n_kv_heads = G;
  vp.head_dim = D;
  vp.src_type = DType::f16;
  vp.src = src.data();
  vp.src_token_stride = static_cast<int64_t>(G) * D;
  vp.src_head_stride = D;
  vp.dst.format = VFormat::q4_0;
  vp.dst.data = host_v.data();
  vp.dst.strides = {0, vslot, vrow};
  vp.base_slot = base;
  REQUIRE(quantize_v_host(vp).ok());
  DeviceBuffer d_v(host_v.size());
  CUDA_CHECK(cudaMemset(d_v.ptr, 0x33, host_v.size()));
  packfa_quantize_v_params v;
  std::memset(&v, 0, sizeof v);
  v.n_tokens = n;
  v.n_kv_heads = G;
  v.head_dim = D;
  v.src_type = 1;
  v.src = d_src.ptr;
  v.src_token_stride = static_cast<int64_t>(G) * D;
  v.src_head_stride = D;
  v.v_format = 3;  // q4_0
  v.dst = d_v.ptr;
  v.dst_strides[1] = vslot;
  v.dst_strides[2] = vrow;
  v.base_slot = base;
  v.pdl = -1;
  REQUIRE(packfa_quantize_v(&v, nullptr, msg, sizeof msg) == 0);
  std::vector<uint8_t> dev_v(host_v.size());
  CUDA_CHECK(cudaMemcpy(dev_v.data(), d_v.ptr, dev_v.size(), cudaMemcpyDeviceToHost));
  CHECK(dev_v == host_v);
}
