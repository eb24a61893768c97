// PDL under CUDA graphs: stream capture of launch()es with the attribute produces programmatic
// edges (cudaGraphGetEdges with edge data, CUDA >= 12.3), plain launches produce none, and the
// instantiated graph replays bitwise-correctly under the stress build.
#include <string>
#include <vector>

#include "packfa/launch.hpp"
#include "pdl_test_kernels.cuh"
#include "pdl_test_util.hpp"

#if !defined(CUDART_VERSION) || CUDART_VERSION < 12030
#error "test_pdl_graph.cu needs CUDA >= 12.3 (graph edge data)"
#endif

using pdl_test::StageParams;

namespace {

struct EdgeCount {
  int total = 0, programmatic = 0;
};

cudaError_t get_edges(cudaGraph_t g, std::vector<cudaGraphNode_t>& from, std::vector<cudaGraphNode_t>& to,
                      std::vector<cudaGraphEdgeData>& data, size_t* n) {
#if CUDART_VERSION >= 13000
  return cudaGraphGetEdges(g, from.empty() ? nullptr : from.data(), to.empty() ? nullptr : to.data(),
                           data.empty() ? nullptr : data.data(), n);
#else
  return cudaGraphGetEdges_v2(g, from.empty() ? nullptr : from.data(), to.empty() ? nullptr : to.data(),
                              data.empty() ? nullptr : data.data(), n);
#endif
}

EdgeCount count_edges(cudaGraph_t g) {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;
  size_t n = 0;
  PDL_CUDA_REQUIRE(get_edges(g, from, to, data, &n));
  from.resize(n);
  to.resize(n);
  data.resize(n);
  if (n) PDL_CUDA_REQUIRE(get_edges(g, from, to, data, &n));
  EdgeCount c;
  c.total = static_cast<int>(n);
  for (size_t i = 0; i < n; ++i) {
    if (data[i].type != cudaGraphDependencyTypeProgrammatic) continue;
    ++c.programmatic;
    cudaGraphNodeType tf, tt;
    PDL_CUDA_REQUIRE(cudaGraphNodeGetType(from[i], &tf));
    PDL_CUDA_REQUIRE(cudaGraphNodeGetType(to[i], &tt));
    CHECK(tf == cudaGraphNodeTypeKernel);
    CHECK(tt == cudaGraphNodeTypeKernel);
  }
  return c;
}

// memset(poison) -> A (plain: its predecessor is a memset node) -> B -> C with `pdl` on B, C.
cudaGraph_t capture_chain(cudaStream_t s, pdl_test::ChainBuffers& b, int pdl, void (*middle)(StageParams)) {
  const dim3 grid((b.n + 127) / 128), block(128);
  cudaGraph_t g = nullptr;
  PDL_CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaMemsetAsync(b.mid, 0xA5, b.bytes(), s);
  cudaMemsetAsync(b.mid2, 0xA5, b.bytes(), s);
  cudaMemsetAsync(b.out, 0xA5, b.bytes(), s);
  const packfa::Status s1 = packfa::launch(pdl_stage, grid, block, 0, s, StageParams{b.in, b.mid, b.n, 1u}, {0});
  const packfa::Status s2 = packfa::launch(middle, grid, block, 0, s, StageParams{b.mid, b.mid2, b.n, 2u}, {pdl});
  const packfa::Status s3 = packfa::launch(pdl_stage, grid, block, 0, s, StageParams{b.mid2, b.out, b.n, 3u}, {pdl});
  const cudaError_t e = cudaStreamEndCapture(s, &g);
  INFO(s1.to_string() << " / " << s2.to_string() << " / " << s3.to_string());
  REQUIRE(s1.ok());
  REQUIRE(s2.ok());
  REQUIRE(s3.ok());
  PDL_CUDA_REQUIRE(e);
  return g;
}

std::vector<uint32_t> expected(const pdl_test::ChainBuffers& b) {
  std::vector<uint32_t> e(static_cast<size_t>(b.n));
  for (int i = 0; i < b.n; ++i)
    e[i] = pdl_test::mix(pdl_test::mix(pdl_test::mix(b.host_in[i], 1u), 2u), 3u);
  return e;
}

// Replays the graph `runs` times; returns how many replays produced a wrong output.
int replay_mismatches(cudaGraph_t g, cudaStream_t s, const pdl_test::ChainBuffers& b, int runs, bool stop_at_first) {
  cudaGraphExec_t ex = nullptr;
  PDL_CUDA_REQUIRE(cudaGraphInstantiate(&ex, g, 0));
  const auto want = expected(b);
  int bad = 0;
  for (int r = 0; r < runs; ++r) {
    PDL_CUDA_REQUIRE(cudaGraphLaunch(ex, s));
    PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
    if (b.download(b.out) != want) {
      ++bad;
      if (stop_at_first) break;
    }
  }
  cudaGraphExecDestroy(ex);
  return bad;
}

}  // namespace

TEST_CASE("captured PDL launches become programmatic edges and replay correctly", "[pdl][graph]") {
  pdl_test::ChainBuffers b(2048);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const auto d = packfa::pdl::query(pdl_stage, 1);
  INFO("PDL: " << d.why);
  if (pdl_test::pdl_expected_active()) REQUIRE(d.active);  // CC >= 9.0 with compute_90 code

  cudaGraph_t g_on = capture_chain(s, b, 1, pdl_stage);
  const EdgeCount on = count_edges(g_on);
  INFO("PDL on: " << on.total << " edges, " << on.programmatic << " programmatic");
  if (d.active) CHECK(on.programmatic == 2);  // A -> B and B -> C
  else CHECK(on.programmatic == 0);
  CHECK(replay_mismatches(g_on, s, b, 200, false) == 0);

  cudaGraph_t g_off = capture_chain(s, b, 0, pdl_stage);
  const EdgeCount off = count_edges(g_off);
  INFO("PDL off: " << off.total << " edges, " << off.programmatic << " programmatic");
  CHECK(off.programmatic == 0);
  CHECK(off.total == on.total);
  CHECK(replay_mismatches(g_off, s, b, 20, false) == 0);

  cudaGraphDestroy(g_on);
  cudaGraphDestroy(g_off);
  cudaStreamDestroy(s);
}

TEST_CASE("planted bug inside a graph: reported", "[pdl][graph][planted]") {
  pdl_test::ChainBuffers b(2048);
  REQUIRE(b.ok());
  cudaStream_t s;
  PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  (void)packfa::pdl::query(pdl_bug_read_before_wait, 1);  // probe outside the capture
  const auto d = packfa::pdl::query(pdl_stage, 1);
  INFO("PDL: " << d.why);
  if (pdl_test::pdl_expected_active()) REQUIRE(d.active);
  if (!d.active) {  // below CC 9.0 (or PACKFA_PDL=0): nothing to plant
    cudaStreamDestroy(s);
    return;
  }
  cudaGraph_t g = capture_chain(s, b, 1, pdl_bug_read_before_wait);
  CHECK(count_edges(g).programmatic == 2);
  const int bad = replay_mismatches(g, s, b, 50, true);
  // Same kernels as the stream-mode planted-bug tests (which assert); here reported only.
  WARN("read-before-wait inside a graph: " << (bad ? "race observed" : "no race observed in 50 replays"));
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}
