// packfa's own PDL chain — pack K -> quantize V -> attention split -> combine — run many
// times with PDL on and off and compared bitwise (dynamic race detector, docs/pdl.md);
// every byte the chain writes is poisoned before each run. Built with PACKFA_PDL_STRESS=ON
// the producers linger after launch_dependents(), which is when a missing wait shows.
// Also checks the chain's result against the fp64 reference once.
#include <vector>

#include "../pdl/pdl_race.hpp"
#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/pack.hpp"
#include "packfa/pdl.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

TEST_CASE("pack -> quantize_v -> split -> combine: PDL on == PDL off, bitwise", "[pdl]") {
  ProblemConfig c;
  c.n_q_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 128;
  c.kv_len = 600;
  c.v_format = VFormat::q8_0;
  c.o_type = DType::f32;
  c.seed = 77;
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, KFormat::packed16, VFormat::q8_0);
  const int G = c.n_kv_heads, D = c.head_dim, slot = c.kv_len - 1;

  // the new token's K and V rows (f16), written into the last slot by the chain
  std::vector<uint16_t> knew(G * D), vnew(G * D);
  for (int i = 0; i < G * D; ++i) {
    knew[i] = fp16_from_float(0.05f * static_cast<float>((i * 37) % 41 - 20));
    vnew[i] = fp16_from_float(0.03f * static_cast<float>((i * 53) % 29 - 14));
  }
  DeviceBuffer dk(knew.size() * 2), dv(vnew.size() * 2);
  CUDA_CHECK(cudaMemcpy(dk.ptr, knew.data(), knew.size() * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dv.ptr, vnew.data(), vnew.size() * 2, cudaMemcpyHostToDevice));

  PackKParams pk;
  pk.n_tokens = 1;
  pk.n_kv_heads = G;
  pk.head_dim = D;
  pk.src_type = DType::f16;
  pk.src_token_stride = G * D;
  pk.src_head_stride = D;
  pk.dst = dp.params.k;
  pk.base_slot = slot;
  QuantVParams qv;
  qv.n_tokens = 1;
  qv.n_kv_heads = G;
  qv.head_dim = D;
  qv.src_type = DType::f16;
  qv.src_token_stride = G * D;
  qv.src_head_stride = D;
  qv.dst = dp.params.v;
  qv.base_slot = slot;
  AttnParams p = dp.params;
  p.num_splits = 5;  // force split + combine
  size_t ws = 0;
  REQUIRE(fa_workspace_bytes(p, 0, &ws).ok());
  REQUIRE(ws > 0);
  DeviceBuffer dws(ws);
  p.workspace = dws.ptr;
  p.workspace_bytes = ws;

  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto chain = [&](cudaStream_t s, int pdl) -> Status {
    pk.src = dk.ptr;
    qv.src = dv.ptr;
    pk.pdl = qv.pdl = p.pdl = pdl;
    PACKFA_TRY(pack_k_packed16(pk, s));
    PACKFA_TRY(quantize_v(qv, s));
    return fa_packed16_forward(p, s);
  };
  // Everything the chain writes: the new slot's rows in each plane, partials, O, LSE.
  auto slot_region = [&](const void* base, const Strides& s) {
    return pdl_test::Region{static_cast<char*>(const_cast<void*>(base)) + slot * s.slot,
                            static_cast<size_t>(s.head * (G - 1) + (s.head > 0 ? s.head : 0))};
  };
  const std::vector<pdl_test::Region> written = {
      slot_region(p.k.data, p.k.data_strides), slot_region(p.k.scales, p.k.scale_strides),
      slot_region(p.v.data, p.v.strides), {dws.ptr, ws}, {p.o.data, hp.o.size()},
      {p.lse, hp.lse.size() * sizeof(float)}};
  pdl_test::RaceOptions opt;
  opt.runs = 200;
  const pdl_test::RaceReport rep = pdl_test::compare_pdl_on_off(st, chain, written, opt);
  INFO(rep.summary());
  CHECK(rep.clean());

  // The chain's output equals the fp64 reference over the cache with the new token packed.
  pk.src = knew.data();
  pk.dst = hp.params.k;
  qv.src = vnew.data();
  qv.dst = hp.params.v;
  REQUIRE(pack_k_host(pk).ok());
  REQUIRE(quantize_v_host(qv).ok());
  std::vector<double> ref;
  REQUIRE(reference_attention(hp.params, RefMode::kernel_int8, &ref, nullptr).ok());
  const std::vector<double> o = download(DType::f32, p.o.data, static_cast<int64_t>(ref.size()));
  CHECK(rel_err(o, ref) <= 1e-3);
  CUDA_CHECK(cudaStreamDestroy(st));
}
