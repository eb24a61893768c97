// PDL primitives, enrollment trait, launch helper decisions (env switch, per-call override,
// fail-closed for unaware kernels and for a kernel JIT-compiled from PTX 8.0), cache, errors.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "packfa/launch.hpp"
#include "pdl_ptx80.hpp"
#include "pdl_test_kernels.cuh"
#include "pdl_test_util.hpp"

using pdl_test::ScopedEnv;
using pdl_test::StageParams;

namespace {

struct ProbeParams {
  static constexpr bool pdl_aware = true;
  int* out = nullptr;
};

// Exercises both primitives and reports whether the device code has the real instructions.
__global__ void pdl_primitives_kernel(ProbeParams p) {
  packfa::pdl::launch_dependents();
  packfa::pdl::wait();
  if (threadIdx.x == 0 && blockIdx.x == 0) p.out[0] = packfa::pdl::device_has_pdl() ? 90 : 1;
}

struct NotAware {
  int x;
};
struct AwareFalse {
  static constexpr bool pdl_aware = false;
};
struct AwareTrue {
  static constexpr bool pdl_aware = true;
};
static_assert(!packfa::pdl::is_aware_v<NotAware>);
static_assert(!packfa::pdl::is_aware_v<AwareFalse>);
static_assert(packfa::pdl::is_aware_v<AwareTrue>);
static_assert(packfa::pdl::is_aware_v<const AwareTrue&>);
static_assert(packfa::pdl::is_aware_v<StageParams>);
static_assert(!packfa::pdl::is_aware_v<pdl_test::UnawareParams>);

const void* kp(const void* k) { return k; }

}  // namespace

TEST_CASE("pdl primitives run plain and under PDL", "[pdl]") {
  int* d = nullptr;
  PDL_CUDA_REQUIRE(cudaMalloc(&d, sizeof(int)));
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int cc_major = 0, cc_minor = 0;
  const bool hw = pdl_test::device_has_pdl_hw(&cc_major, &cc_minor);
  for (int pdl : {0, 1}) {
    PDL_CUDA_REQUIRE(cudaMemsetAsync(d, 0, sizeof(int), s));
    ProbeParams p{d};
    PDL_STATUS_REQUIRE(packfa::launch(pdl_primitives_kernel, dim3(4), dim3(64), 0, s, p, {pdl}));
    // twice back to back, so the second one has a kernel predecessor
    PDL_STATUS_REQUIRE(packfa::launch(pdl_primitives_kernel, dim3(4), dim3(64), 0, s, p, {pdl}));
    PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
    int h = 0;
    PDL_CUDA_REQUIRE(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    INFO("CC " << cc_major << "." << cc_minor << ", pdl=" << pdl);
    CHECK(h == (hw ? 90 : 1));
  }
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST_CASE("env switch PACKFA_PDL and per-call override", "[pdl][decision]") {
  int cc_major = 0, cc_minor = 0;
  const bool hw = pdl_test::device_has_pdl_hw(&cc_major, &cc_minor);
  const void* k = kp(reinterpret_cast<const void*>(&pdl_stage));
  int dev = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);

  SECTION("unset / auto / 1 / on: active on CC >= 9.0") {
    for (const char* v : {static_cast<const char*>(nullptr), "auto", "AUTO", "1", "on", "true", ""}) {
      ScopedEnv env(v);
      const auto d = packfa::pdl::query(k, dev, true, -1);
      INFO("PACKFA_PDL=" << (v ? v : "<unset>") << " -> " << d.why);
      if (hw) {
        CHECK(d.active);
        CHECK(d.ptx_version >= 90);
        CHECK(d.why.find("active") != std::string::npos);
      } else {
        CHECK_FALSE(d.active);
        CHECK(d.why == "compute capability " + std::to_string(cc_major) + "." + std::to_string(cc_minor) + " < 9.0");
      }
    }
  }
  SECTION("0 / off: inactive, and the typed query agrees") {
    for (const char* v : {"0", "off", "OFF", "false"}) {
      ScopedEnv env(v);
      REQUIRE(packfa::pdl::env_mode() == packfa::pdl::EnvMode::off);
      const auto d = packfa::pdl::query(k, dev, true, -1);
      CHECK_FALSE(d.active);
      CHECK(d.why == "env PACKFA_PDL=0");
      CHECK(packfa::pdl::query(pdl_stage).why == "env PACKFA_PDL=0");
    }
  }
  SECTION("garbage value fails closed") {
    ScopedEnv env("maybe");
    CHECK(packfa::pdl::env_mode() == packfa::pdl::EnvMode::invalid);
    const auto d = packfa::pdl::query(k, dev, true, -1);
    CHECK_FALSE(d.active);
    CHECK(d.why.find("not understood") != std::string::npos);
  }
  SECTION("per-call override wins over the env switch") {
    {
      ScopedEnv env("0");
      const auto d = packfa::pdl::query(k, dev, true, 1);
      CHECK(d.active == hw);
    }
    {
      ScopedEnv env("1");
      const auto d = packfa::pdl::query(k, dev, true, 0);
      CHECK_FALSE(d.active);
      CHECK(d.why == "per-call override pdl=0");
    }
  }
  SECTION("env is parsed once until reload_env()") {
    ScopedEnv env("0");
    setenv("PACKFA_PDL", "1", 1);
    CHECK(packfa::pdl::env_mode() == packfa::pdl::EnvMode::off);
    packfa::pdl::reload_env();
    CHECK(packfa::pdl::env_mode() == packfa::pdl::EnvMode::on);
  }
}

TEST_CASE("fail closed: unaware params, old PTX, bad device", "[pdl][decision]") {
  ScopedEnv env("1");
  int dev = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  const bool hw = pdl_test::device_has_pdl_hw();

  SECTION("kernel whose params are not PDL-aware") {
    const auto d = packfa::pdl::query(pdl_stage_unaware, 1);
    CHECK_FALSE(d.active);
    CHECK(d.why == "kernel not declared PDL-aware");
  }
  SECTION("aware kernel JIT-compiled from PTX 8.0") {
    const auto d = packfa::pdl::query(pdl_test::ptx80_kernel(), dev, true, 1);
    INFO(d.why);
    CHECK_FALSE(d.active);
    if (hw) {
      CHECK(d.ptx_version == 80);
      CHECK(d.why == "kernel PTX version 80 < 90");
    }
  }
  SECTION("sm_90 kernel of this binary reports its PTX version") {
    const auto d = packfa::pdl::query(pdl_stage, 1);
    INFO(d.why);
    if (hw) {
      CHECK(d.active);
      CHECK(d.ptx_version >= 90);
    }
  }
  SECTION("device ordinal out of range") {
    const auto d = packfa::pdl::query(reinterpret_cast<const void*>(&pdl_stage), 1000, true, 1);
    CHECK_FALSE(d.active);
    CHECK(d.why.rfind("no device", 0) == 0);
  }
  SECTION("null kernel") {
    CHECK_FALSE(packfa::pdl::query(nullptr, dev, true, 1).active);
  }
}

TEST_CASE("launch() reports what it decided and launches correctly", "[pdl][launch]") {
  ScopedEnv env(nullptr);
  const bool hw = pdl_test::device_has_pdl_hw();
  pdl_test::ChainBuffers b(1000);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const dim3 grid((b.n + 127) / 128), block(128);
  StageParams p1{b.in, b.mid, b.n, 11u};
  StageParams p2{b.mid, b.out, b.n, 22u};

  packfa::pdl::Decision d1, d2, d3;
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, grid, block, 0, s, p1, {-1, &d1}));
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, grid, block, 0, s, p2, {1, &d2}));
  PDL_STATUS_REQUIRE(pdl_test::launch_ptx80(grid, block, s, StageParams{b.out, b.mid2, b.n, 33u}, {1, &d3}));
  PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
  CHECK(d1.active == hw);
  CHECK(d2.active == hw);
  CHECK_FALSE(d3.active);
  INFO(d3.why);
  if (hw) CHECK(d3.why == "kernel PTX version 80 < 90");

  const auto out = b.download(b.out);
  const auto mid2 = b.download(b.mid2);
  for (int i = 0; i < b.n; ++i) {
    const uint32_t e = pdl_test::mix(pdl_test::mix(b.host_in[i], 11u), 22u);
    REQUIRE(out[i] == e);
    REQUIRE(mid2[i] == pdl_test::mix(e, 33u));
  }
  // unaware kernel: plain launch even when asked
  packfa::pdl::Decision d4;
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage_unaware, grid, block, 0, s,
                                    pdl_test::UnawareParams{b.in, b.mid, b.n, 1u}, {1, &d4}));
  CHECK_FALSE(d4.active);
  CHECK(d4.why == "kernel not declared PDL-aware");
  PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
  cudaStreamDestroy(s);
}

// [api-error]: the invalid launch is the point, so compute-sanitizer (which reports every failed
// API call) skips this case (scripts/gpu-check.sh).
TEST_CASE("launch() errors come back as Status", "[pdl][launch][api-error]") {
  pdl_test::ChainBuffers b(64);
  REQUIRE(b.ok());
  StageParams p{b.in, b.out, b.n, 1u};
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // 4096 threads per block is an invalid configuration on every NVIDIA GPU.
  const packfa::Status bad = packfa::launch(pdl_stage, dim3(1), dim3(4096), 0, s, p, {1});
  INFO(bad.to_string());
  CHECK(bad.code() == packfa::Code::device_error);
  CHECK(bad.message().find("4096x1x1") != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);  // the error was consumed, not left sticky
  // a later good launch still works
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, dim3(1), dim3(64), 0, s, p, {1}));
  PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
  // the legacy default stream works too (with or without the attribute)
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, dim3(1), dim3(64), 0, nullptr, p, {1}));
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, dim3(1), dim3(64), 0, nullptr, p, {1}));
  PDL_CUDA_REQUIRE(cudaDeviceSynchronize());
  cudaStreamDestroy(s);
  void (*null_kernel)(StageParams) = nullptr;
  CHECK(packfa::launch(null_kernel, dim3(1), dim3(1), 0, nullptr, p).code() == packfa::Code::invalid_argument);
}

TEST_CASE("decision cache is per (device, kernel) and thread-safe", "[pdl][decision]") {
  ScopedEnv env(nullptr);
  packfa::pdl::clear_cache();
  const bool hw = pdl_test::device_has_pdl_hw();
  int dev = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  const void* ks[3] = {reinterpret_cast<const void*>(&pdl_stage), pdl_test::ptx80_kernel(),
                       reinterpret_cast<const void*>(&pdl_primitives_kernel)};
  const bool expect[3] = {hw, false, hw};
  pdl_test::ChainBuffers b(256);
  REQUIRE(b.ok());
  std::atomic<int> wrong{0}, launch_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      cudaSetDevice(dev);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      for (int i = 0; i < 500; ++i) {
        const int j = (i + t) % 3;
        if (packfa::pdl::query(ks[j], dev, true, 1).active != expect[j]) wrong.fetch_add(1);
        if (i % 50 == 0) {
          packfa::pdl::Decision d;
          const auto st = packfa::launch(pdl_stage, dim3(2), dim3(128), 0, s, StageParams{b.in, b.out, b.n, 5u},
                                         {1, (i % 100 == 0) ? &d : nullptr});
          if (!st.ok()) launch_errors.fetch_add(1);
        }
      }
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  CHECK(launch_errors.load() == 0);
  const auto out = b.download(b.out);
  for (int i = 0; i < b.n; ++i) REQUIRE(out[i] == pdl_test::mix(b.host_in[i], 5u));
  // same answer after clearing
  packfa::pdl::clear_cache();
  CHECK(packfa::pdl::query(ks[0], dev, true, 1).active == hw);
  CHECK_FALSE(packfa::pdl::query(ks[1], dev, true, 1).active);
}
