// Bench 8a: a chain of N tiny dependent kernels (each reads its predecessor's output), µs per
// kernel in: stream, stream+PDL, graph, graph+PDL, with the trigger at the start or at the end
// of the kernel (and none: implicit trigger at exit). All launches go through packfa::launch.
//
//   pdl_chain [--n 1000] [--reps 30] [--warmup 5] [--blocks 1] [--threads 128] [--json PATH]
//
// Prints a table and, with --json, writes {bench, gpu, cc, date, commit, config, results,
// graph_pdl_speedup}. graph_pdl_speedup = 1 - (best graph+PDL µs) / (graph µs).
#include <cstdio>
#include <string>
#include <vector>

#include "packfa/launch.hpp"
#include "../src/cli/args.hpp"  // strict option parsing, shared with packfa-cli
#include "pdl_bench_util.hpp"

namespace {

struct TinyParams {
  static constexpr bool pdl_aware = true;
  const float* in = nullptr;
  float* out = nullptr;
  int n = 0;
};

enum Trigger : int { kAtStart = 0, kAtEnd = 1, kImplicit = 2 };

template <int kTrigger>
__global__ void tiny_kernel(TinyParams p) {
  if (kTrigger == kAtStart) packfa::pdl::launch_dependents();
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  packfa::pdl::wait();
  if (i < p.n) p.out[i] = p.in[i] * 0.999f + 1.0f;
  if (kTrigger == kAtEnd) packfa::pdl::launch_dependents();
}

const char* trigger_name(int t) { return t == kAtStart ? "start" : t == kAtEnd ? "end" : "exit"; }

}  // namespace

int main(int argc, char** argv) {
  int n = 1000, reps = 30, warmup = 5, blocks = 1, threads = 128;
  std::string json_path;
  packfa::args::Parser ap("pdl_chain",
                          "usage: pdl_chain [--n N] [--reps R] [--warmup W] [--blocks B] [--threads T] [--json PATH]\n");
  ap.integer("--n", &n, 1, 1000000)
      .integer("--reps", &reps, 1, 100000)
      .integer("--warmup", &warmup, 0, 10000)
      .integer("--blocks", &blocks, 1, 65536)
      .integer("--threads", &threads, 32, 1024)
      .text("--json", &json_path);
  int arg_rc = 0;
  if (!ap.parse(argc, argv, 1, &arg_rc)) return arg_rc;
  const char* json = json_path.empty() ? nullptr : json_path.c_str();

  const pdl_bench::Device dev = pdl_bench::device_or_skip();
  const int elems = blocks * threads;
  float *buf0 = nullptr, *buf1 = nullptr;
  BENCH_CUDA(cudaMalloc(&buf0, sizeof(float) * elems));
  BENCH_CUDA(cudaMalloc(&buf1, sizeof(float) * elems));
  BENCH_CUDA(cudaMemset(buf0, 0, sizeof(float) * elems));
  BENCH_CUDA(cudaMemset(buf1, 0, sizeof(float) * elems));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  void (*kernels[3])(TinyParams) = {tiny_kernel<kAtStart>, tiny_kernel<kAtEnd>, tiny_kernel<kImplicit>};
  const packfa::pdl::Decision dec = packfa::pdl::query(kernels[0], 1);
  for (auto k : kernels) (void)packfa::pdl::query(k, 1);  // probe outside stream capture
  std::printf("%s (CC %d.%d), chain of %d kernels, %d block(s) x %d threads, median of %d reps\n", dev.prop.name,
              dev.prop.major, dev.prop.minor, n, blocks, threads, reps);
  std::printf("PDL for these kernels: %s\n\n", dec.why.c_str());

  auto enqueue = [&](int trig, int pdl) {
    return [&, trig, pdl](cudaStream_t st, int k) {
      TinyParams p{k % 2 ? buf1 : buf0, k % 2 ? buf0 : buf1, elems};
      BENCH_STATUS(packfa::launch(kernels[trig], dim3(blocks), dim3(threads), 0, st, p, packfa::LaunchOptions{pdl}));
    };
  };

  struct Row {
    std::string mode;
    std::string trigger;
    bool pdl;
    double us;
    int prog_edges;
  };
  std::vector<Row> rows;
  rows.push_back({"stream", "-", false, pdl_bench::time_stream(s, n, reps, warmup, enqueue(kAtStart, 0)), -1});
  for (int t : {kAtStart, kAtEnd, kImplicit})
    rows.push_back({"stream", trigger_name(t), true, pdl_bench::time_stream(s, n, reps, warmup, enqueue(t, 1)), -1});
  int pe = 0;
  const double g_plain = pdl_bench::time_graph(s, n, reps, warmup, enqueue(kAtStart, 0), &pe);
  rows.push_back({"graph", "-", false, g_plain, pe});
  double best_gpdl = 1e30;
  std::string best_trig;
  for (int t : {kAtStart, kAtEnd, kImplicit}) {
    const double us = pdl_bench::time_graph(s, n, reps, warmup, enqueue(t, 1), &pe);
    rows.push_back({"graph", trigger_name(t), true, us, pe});
    if (us < best_gpdl) {
      best_gpdl = us;
      best_trig = trigger_name(t);
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(s));

  std::printf("%-8s %-5s %-8s %12s %10s\n", "mode", "pdl", "trigger", "us/kernel", "prog.edges");
  for (const Row& r : rows)
    std::printf("%-8s %-5s %-8s %12.3f %10s\n", r.mode.c_str(), r.pdl ? "on" : "off", r.trigger.c_str(), r.us,
                r.prog_edges < 0 ? "-" : std::to_string(r.prog_edges).c_str());
  const double speedup = g_plain > 0 ? 1.0 - best_gpdl / g_plain : 0.0;
  std::printf("\ngraph+PDL (trigger at %s) vs graph: %.3f -> %.3f us/kernel, %.1f%% faster\n", best_trig.c_str(),
              g_plain, best_gpdl, 100.0 * speedup);

  if (json) {
    std::vector<std::string> jr;
    char buf[256];
    for (const Row& r : rows) {
      std::snprintf(buf, sizeof buf,
                    "{\"mode\": \"%s\", \"pdl\": %s, \"trigger\": \"%s\", \"us_per_kernel\": %.4f, \"programmatic_edges\": %d}",
                    r.mode.c_str(), r.pdl ? "true" : "false", r.trigger.c_str(), r.us, r.prog_edges);
      jr.push_back(buf);
    }
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "  \"config\": {\"n\": %d, \"reps\": %d, \"warmup\": %d, \"blocks\": %d, \"threads\": %d},\n"
                  "  \"pdl_decision\": \"%s\",\n"
                  "  \"graph_us\": %.4f,\n  \"graph_pdl_us\": %.4f,\n  \"graph_pdl_trigger\": \"%s\",\n"
                  "  \"graph_pdl_speedup\": %.4f",
                  n, reps, warmup, blocks, threads, pdl_bench::json_escape(dec.why).c_str(), g_plain, best_gpdl,
                  best_trig.c_str(), speedup);
    if (!pdl_bench::write_json(json, "pdl_chain", dev, extra, jr)) return 1;
  }
  cudaStreamDestroy(s);
  cudaFree(buf0);
  cudaFree(buf1);
  return 0;
}
