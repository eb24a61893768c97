// Bench 8b: trigger-placement tuner. One kernel template, several candidate sites for
// launch_dependents(); each variant is timed as a chain of N dependent kernels in a graph with
// PDL (plus the graph without PDL as the baseline), for a few problem sizes. Best site reported.
//
//   pdl_tune [--n 200] [--reps 20] [--warmup 3] [--work 64] [--json PATH]
//
// Sites: start (before the wait), after_wait, after_load, mid_compute, before_store, end,
// exit (no explicit trigger: implicit at block exit). Early triggers let the next kernel's
// blocks launch sooner but park them (in wait) on SM resources the producer still uses.
#include <cstdio>
#include <string>
#include <vector>

#include "packfa/launch.hpp"
#include "../src/cli/args.hpp"  // strict option parsing, shared with packfa-cli
#include "pdl_bench_util.hpp"

namespace {

struct TuneParams {
  static constexpr bool pdl_aware = true;
  const float* in = nullptr;
  float* out = nullptr;
  int n = 0;
  int work = 0;  // compute iterations per element
};

enum Site : int { kStart, kAfterWait, kAfterLoad, kMidCompute, kBeforeStore, kEnd, kExit, kNumSites };
const char* site_name(int s) {
  static const char* names[] = {"start", "after_wait", "after_load", "mid_compute", "before_store", "end", "exit"};
  return names[s];
}

template <int kSite>
__device__ __forceinline__ void trigger_at(int site) {
  if (kSite == site) packfa::pdl::launch_dependents();
}

template <int kSite>
__global__ void tune_kernel(TuneParams p) {
  const int stride = static_cast<int>(gridDim.x * blockDim.x);
  const int i0 = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  trigger_at<kSite>(kStart);
  packfa::pdl::wait();
  trigger_at<kSite>(kAfterWait);
  for (int i = i0; i < p.n; i += stride) {
    float x = p.in[i];
    if (i == i0) trigger_at<kSite>(kAfterLoad);
    const int half = p.work / 2;
    for (int k = 0; k < half; ++k) x = fmaf(x, 0.9999f, 0.0001f);
    if (i == i0) trigger_at<kSite>(kMidCompute);
    for (int k = half; k < p.work; ++k) x = fmaf(x, 0.9999f, 0.0001f);
    if (i == i0) trigger_at<kSite>(kBeforeStore);
    p.out[i] = x;
  }
  if (i0 >= p.n && (kSite == kAfterLoad || kSite == kMidCompute || kSite == kBeforeStore))
    packfa::pdl::launch_dependents();  // threads without an element still trigger
  trigger_at<kSite>(kEnd);
}

using KernelFn = void (*)(TuneParams);
const KernelFn kKernels[kNumSites] = {tune_kernel<kStart>,      tune_kernel<kAfterWait>,   tune_kernel<kAfterLoad>,
                                      tune_kernel<kMidCompute>, tune_kernel<kBeforeStore>, tune_kernel<kEnd>,
                                      tune_kernel<kExit>};

}  // namespace

int main(int argc, char** argv) {
  int n = 200, reps = 20, warmup = 3, work = 64;
  std::string json_path;
  packfa::args::Parser ap("pdl_tune",
                          "usage: pdl_tune [--n N] [--reps R] [--warmup W] [--work K] [--json PATH]\n");
  ap.integer("--n", &n, 1, 1000000)
      .integer("--reps", &reps, 1, 100000)
      .integer("--warmup", &warmup, 0, 10000)
      .integer("--work", &work, 0, 1000000)
      .text("--json", &json_path);
  int arg_rc = 0;
  if (!ap.parse(argc, argv, 1, &arg_rc)) return arg_rc;
  const char* json = json_path.empty() ? nullptr : json_path.c_str();

  const pdl_bench::Device dev = pdl_bench::device_or_skip();
  const int sms = dev.prop.multiProcessorCount;
  struct Shape {
    std::string name;
    int blocks, threads;
  };
  // tiny: one block; per_sm: one block per SM; full: one wave at full occupancy (8 x 256 threads
  // per SM); waves4: four such waves.
  const std::vector<Shape> shapes = {
      {"tiny", 1, 128}, {"per_sm", sms, 256}, {"full", 8 * sms, 256}, {"waves4", 32 * sms, 256}};
  int max_elems = 0;
  for (const auto& sh : shapes) max_elems = std::max(max_elems, sh.blocks * sh.threads);
  float *buf0 = nullptr, *buf1 = nullptr;
  BENCH_CUDA(cudaMalloc(&buf0, sizeof(float) * max_elems));
  BENCH_CUDA(cudaMalloc(&buf1, sizeof(float) * max_elems));
  BENCH_CUDA(cudaMemset(buf0, 0, sizeof(float) * max_elems));
  BENCH_CUDA(cudaMemset(buf1, 0, sizeof(float) * max_elems));
  cudaStream_t s;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::printf("%s (CC %d.%d), %d SMs; chains of %d kernels in a graph, work %d, median of %d reps\n",
              dev.prop.name, dev.prop.major, dev.prop.minor, sms, n, work, reps);
  std::printf("PDL: %s\n\n", packfa::pdl::query(kKernels[0], 1).why.c_str());
  for (KernelFn k : kKernels) (void)packfa::pdl::query(k, 1);  // probe outside stream capture

  std::vector<std::string> jrows;
  std::string best_summary;
  for (const Shape& sh : shapes) {
    const int elems = sh.blocks * sh.threads;
    auto enqueue = [&](int site, int pdl) {
      return [&, site, pdl](cudaStream_t st, int k) {
        TuneParams p{k % 2 ? buf1 : buf0, k % 2 ? buf0 : buf1, elems, work};
        BENCH_STATUS(packfa::launch(kKernels[site], dim3(sh.blocks), dim3(sh.threads), 0, st, p, packfa::LaunchOptions{pdl}));
      };
    };
    const double base = pdl_bench::time_graph(s, n, reps, warmup, enqueue(kExit, 0));
    std::printf("shape %-10s (%d x %d): graph without PDL %.3f us/kernel\n", sh.name.c_str(), sh.blocks, sh.threads, base);
    std::printf("  %-13s %12s %9s\n", "trigger site", "us/kernel", "vs graph");
    int best = -1;
    double best_us = 1e30;
    std::vector<double> us(kNumSites);
    for (int site = 0; site < kNumSites; ++site) {
      us[site] = pdl_bench::time_graph(s, n, reps, warmup, enqueue(site, 1));
      std::printf("  %-13s %12.3f %8.1f%%\n", site_name(site), us[site], 100.0 * (1.0 - us[site] / base));
      if (us[site] < best_us) {
        best_us = us[site];
        best = site;
      }
    }
    std::printf("  best: %s (%.3f us/kernel, %.1f%% faster than graph without PDL)\n\n", site_name(best), best_us,
                100.0 * (1.0 - best_us / base));
    char buf[1024];
    std::string sites;
    for (int site = 0; site < kNumSites; ++site) {
      char one[96];
      std::snprintf(one, sizeof one, "%s\"%s\": %.4f", site ? ", " : "", site_name(site), us[site]);
      sites += one;
    }
    std::snprintf(buf, sizeof buf,
                  "{\"shape\": \"%s\", \"blocks\": %d, \"threads\": %d, \"graph_us\": %.4f, \"graph_pdl_us\": {%s}, "
                  "\"best_site\": \"%s\", \"best_us\": %.4f, \"best_speedup\": %.4f}",
                  sh.name.c_str(), sh.blocks, sh.threads, base, sites.c_str(), site_name(best), best_us,
                  1.0 - best_us / base);
    jrows.push_back(buf);
  }
  BENCH_CUDA(cudaStreamSynchronize(s));
  if (json) {
    char extra[256];
    std::snprintf(extra, sizeof extra, "  \"config\": {\"n\": %d, \"reps\": %d, \"warmup\": %d, \"work\": %d}", n, reps,
                  warmup, work);
    if (!pdl_bench::write_json(json, "pdl_tune", dev, extra, jrows)) return 1;
  }
  cudaStreamDestroy(s);
  cudaFree(buf0);
  cudaFree(buf1);
  return 0;
}
