// Dynamic PDL race detector (built with PACKFA_PDL_STRESS=1: producers spin after
// launch_dependents()). Producer -> consumer chains run many times with PDL on and off on
// poisoned buffers and are compared bitwise. Good chains must be clean; both planted bugs
// (read before wait, never waits) must be flagged; the PTX-8.0 kernel must stay safe because
// launch() refuses it the attribute.
#include <chrono>
#include <string>

#include "packfa/launch.hpp"
#include "pdl_ptx80.hpp"
#include "pdl_race.hpp"
#include "pdl_test_kernels.cuh"
#include "pdl_test_util.hpp"

#if !defined(PACKFA_PDL_STRESS) || !PACKFA_PDL_STRESS
#error "test_pdl_race.cu must be built with PACKFA_PDL_STRESS=1"
#endif

using packfa::pdl_test::compare_pdl_on_off;
using packfa::pdl_test::RaceOptions;
using packfa::pdl_test::Region;
using pdl_test::StageParams;

namespace {

constexpr int kN = 2048;     // 16 blocks of 128: producer and consumer blocks are co-resident
constexpr int kBlock = 128;

template <class Consumer>
packfa::pdl_test::RaceReport run_pair(Consumer consumer, RaceOptions o, pdl_test::ChainBuffers& b,
                                      cudaStream_t s) {
  const dim3 grid((b.n + kBlock - 1) / kBlock), block(kBlock);
  return compare_pdl_on_off(
      s,
      [&](cudaStream_t st, int pdl) -> packfa::Status {
        PACKFA_TRY(packfa::launch(pdl_stage, grid, block, 0, st, StageParams{b.in, b.mid, b.n, 0x1111u}, {pdl}));
        return packfa::launch(consumer, grid, block, 0, st, StageParams{b.mid, b.out, b.n, 0x2222u}, {pdl});
      },
      {Region{b.mid, b.bytes()}, Region{b.out, b.bytes()}}, o);
}

// Whether PDL is on for the chains; a device where it must be (pdl_expected_active) fails
// the test when it is not.
bool pdl_active_here() {
  const auto d = packfa::pdl::query(pdl_stage, 1);
  INFO("PDL decision: " << d.why);
  if (pdl_test::pdl_expected_active()) CHECK(d.active);
  return d.active;
}

}  // namespace

TEST_CASE("stress build: producers linger after launch_dependents()", "[pdl][race]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  if (!pdl_test::device_has_pdl_hw()) {
    WARN("CC < 9.0: launch_dependents() is compiled out of the sm_90 code path");
    return;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const dim3 grid(kN / kBlock), block(kBlock);
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, grid, block, 0, nullptr, StageParams{b.in, b.mid, b.n, 1u}, {0}));
  cudaEventRecord(e0);
  PDL_STATUS_REQUIRE(packfa::launch(pdl_stage, grid, block, 0, nullptr, StageParams{b.in, b.mid, b.n, 1u}, {0}));
  cudaEventRecord(e1);
  PDL_CUDA_REQUIRE(cudaEventSynchronize(e1));
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  INFO("one stage took " << ms * 1000.f << " us, stress spin " << PACKFA_PDL_STRESS_NS << " ns");
  CHECK(ms * 1e6f >= 0.8f * PACKFA_PDL_STRESS_NS);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

TEST_CASE("good producer -> consumer chain is bitwise stable with PDL on", "[pdl][race]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  pdl_active_here();
  RaceOptions o;
  o.runs = 200;
  const auto r = run_pair(pdl_stage, o, b, s);
  INFO(r.summary());
  REQUIRE(r.error.empty());
  CHECK(r.clean());
  // and the reference is the right answer
  const auto out = b.download(b.out);
  for (int i = 0; i < b.n; ++i) REQUIRE(out[i] == pdl_test::mix(pdl_test::mix(b.host_in[i], 0x1111u), 0x2222u));
  cudaStreamDestroy(s);
}

TEST_CASE("planted bug: read before wait is flagged", "[pdl][race][planted]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!pdl_active_here()) return;
  RaceOptions o;
  o.runs = 100;
  o.stop_at_first = true;
  const auto r = run_pair(pdl_bug_read_before_wait, o, b, s);
  INFO(r.summary());
  REQUIRE(r.error.empty());
  CHECK(r.flagged());
  CHECK(r.mismatched_off == 0);  // with PDL off the same kernel is correct
  cudaStreamDestroy(s);
}

TEST_CASE("planted bug: never waits is flagged", "[pdl][race][planted]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!pdl_active_here()) return;
  RaceOptions o;
  o.runs = 100;
  o.stop_at_first = true;
  const auto r = run_pair(pdl_bug_no_wait, o, b, s);
  INFO(r.summary());
  REQUIRE(r.error.empty());
  CHECK(r.flagged());
  CHECK(r.mismatched_off == 0);
  cudaStreamDestroy(s);
}

TEST_CASE("wait covers the direct predecessor only: A -> B -> C, C reads A", "[pdl][race]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bool active = pdl_active_here();
  const dim3 grid(kN / kBlock), block(kBlock);
  auto chain = [&](auto middle) {
    return [&, middle](cudaStream_t st, int pdl) -> packfa::Status {
      PACKFA_TRY(packfa::launch(pdl_stage, grid, block, 0, st, StageParams{b.in, b.mid, b.n, 1u}, {pdl}));     // A
      PACKFA_TRY(packfa::launch(middle, grid, block, 0, st, StageParams{b.in, b.mid2, b.n, 2u}, {pdl}));       // B
      return packfa::launch(pdl_stage_late_trigger, grid, block, 0, st, StageParams{b.mid, b.out, b.n, 3u},
                            {pdl});  // C: reads A's output right after its wait
    };
  };
  const std::vector<Region> written = {{b.mid, b.bytes()}, {b.mid2, b.bytes()}, {b.out, b.bytes()}};
  RaceOptions o;
  o.runs = 100;
  // B waits before exiting: C's wait on B transitively covers A.
  const auto good = compare_pdl_on_off(s, chain(pdl_stage), written, o);
  INFO("B waits: " << good.summary());
  CHECK(good.clean());
  // B never waits (reads nothing of A!): it can finish before A, so C's wait no longer covers A.
  o.stop_at_first = true;
  const auto bad = compare_pdl_on_off(s, chain(pdl_bug_no_wait), written, o);
  REQUIRE(bad.error.empty());
  // Demonstration of the rule; reported, not asserted (it depends on scheduling).
  WARN("B never waits: " << bad.summary() << (active && bad.flagged() ? " -> race observed" : ""));
  cudaStreamDestroy(s);
}

TEST_CASE("kernel from PTX 8.0 declared aware: launch() keeps it safe", "[pdl][race]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const bool active = pdl_active_here();
  const dim3 grid(kN / kBlock), block(kBlock);
  const std::vector<Region> written = {{b.mid, b.bytes()}, {b.out, b.bytes()}};
  RaceOptions o;
  o.runs = 100;
  const auto safe = compare_pdl_on_off(
      s,
      [&](cudaStream_t st, int pdl) -> packfa::Status {
        PACKFA_TRY(packfa::launch(pdl_stage, grid, block, 0, st, StageParams{b.in, b.mid, b.n, 1u}, {pdl}));
        return pdl_test::launch_ptx80(grid, block, st, StageParams{b.mid, b.out, b.n, 2u}, {pdl});
      },
      written, o);
  INFO(safe.summary());
  CHECK(safe.clean());
  // What a compute-capability-only check would do: force the attribute on that kernel.
  if (active) {
    o.stop_at_first = true;
    const auto forced = compare_pdl_on_off(
        s,
        [&](cudaStream_t st, int pdl) -> packfa::Status {
          PACKFA_TRY(packfa::launch(pdl_stage, grid, block, 0, st, StageParams{b.in, b.mid, b.n, 1u}, {pdl}));
          if (pdl == 0) return pdl_test::launch_ptx80(grid, block, st, StageParams{b.mid, b.out, b.n, 2u}, {0});
          const cudaError_t e = pdl_test::launch_ptx80_forced_pdl(grid, block, st, StageParams{b.mid, b.out, b.n, 2u});
          return e == cudaSuccess ? packfa::Status::Ok() : packfa::Status(packfa::Code::device_error, cudaGetErrorString(e));
        },
        written, o);
    WARN("PTX-8.0 kernel with the attribute forced (CC-only check): " << forced.summary()
         << (forced.flagged() ? " -> race observed" : ""));
  }
  cudaStreamDestroy(s);
}

TEST_CASE("unaware consumer asked for PDL stays plain and correct", "[pdl][race]") {
  pdl_test::ChainBuffers b(kN);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const dim3 grid(kN / kBlock), block(kBlock);
  RaceOptions o;
  o.runs = 50;
  const auto r = compare_pdl_on_off(
      s,
      [&](cudaStream_t st, int pdl) -> packfa::Status {
        PACKFA_TRY(packfa::launch(pdl_stage, grid, block, 0, st, StageParams{b.in, b.mid, b.n, 1u}, {pdl}));
        return packfa::launch(pdl_stage_unaware, grid, block, 0, st, pdl_test::UnawareParams{b.mid, b.out, b.n, 2u},
                              {pdl});
      },
      {Region{b.mid, b.bytes()}, Region{b.out, b.bytes()}}, o);
  INFO(r.summary());
  CHECK(r.clean());
  cudaStreamDestroy(s);
}
