// Shared bits of the PDL benchmarks (bench/pdl_chain.cu, bench/pdl_tune.cu): timing with
// events, medians, JSON output. Options: src/cli/args.hpp (strict parsing, shared with packfa-cli).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "packfa/api.hpp"  // device_info

#ifndef PACKFA_GIT_COMMIT
#define PACKFA_GIT_COMMIT "unknown"
#endif

#define BENCH_CUDA(expr)                                                                     \
  do {                                                                                      \
    const cudaError_t bench_e_ = (expr);                                                    \
    if (bench_e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(bench_e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

#define BENCH_STATUS(expr)                                                                   \
  do {                                                                                      \
    const ::packfa::Status bench_s_ = (expr);                                               \
    if (!bench_s_.ok()) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, bench_s_.to_string().c_str()); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace pdl_bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string commit() {
  const char* e = std::getenv("PACKFA_COMMIT");
  return (e && *e) ? std::string(e) : std::string(PACKFA_GIT_COMMIT);
}

inline std::string utc_now() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o;
}

struct Device {
  int id = 0;
  cudaDeviceProp prop{};
};

// Exit 77 (skipped: non-zero, nothing was measured) when there is no usable device, like the
// GPU tests; the reason names the cause (packfa::device_info: no driver, no device, ...).
inline Device device_or_skip() {
  Device d;
  const packfa::DeviceInfo info = packfa::device_info(0);
  if (!info.present) {
    std::printf("SKIP: no CUDA device to measure on: %s\n", info.why_absent.c_str());
    std::exit(77);
  }
  BENCH_CUDA(cudaGetDevice(&d.id));
  BENCH_CUDA(cudaGetDeviceProperties(&d.prop, d.id));
  return d;
}

// {"bench": ..., "gpu": ..., "date": ..., "commit": ..., <extra>, "results": [<rows>]}
inline bool write_json(const char* path, const std::string& bench, const Device& d, const std::string& extra_fields,
                       const std::vector<std::string>& rows) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    return false;
  }
  std::fprintf(f, "{\n  \"bench\": \"%s\",\n  \"gpu\": \"%s\",\n  \"cc\": \"%d.%d\",\n  \"date\": \"%s\",\n  \"commit\": \"%s\",\n",
               bench.c_str(), json_escape(d.prop.name).c_str(), d.prop.major, d.prop.minor, utc_now().c_str(),
               json_escape(commit()).c_str());
  if (!extra_fields.empty()) std::fprintf(f, "%s,\n", extra_fields.c_str());
  std::fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "    %s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  std::printf("wrote %s\n", path);
  return true;
}

}  // namespace pdl_bench

namespace pdl_bench {

// µs per kernel (median over reps) of a chain of n launches enqueued on a stream.
template <class Enqueue>
double time_stream(cudaStream_t s, int n, int reps, int warmup, Enqueue&& enqueue_one) {
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int r = 0; r < warmup + reps; ++r) {
    BENCH_CUDA(cudaEventRecord(e0, s));
    for (int k = 0; k < n; ++k) enqueue_one(s, k);
    BENCH_CUDA(cudaEventRecord(e1, s));
    BENCH_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= warmup) us.push_back(1000.0 * ms / n);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(us);
}

// Same chain captured once into a graph; µs per kernel of a replay (median over reps).
template <class Enqueue>
double time_graph(cudaStream_t s, int n, int reps, int warmup, Enqueue&& enqueue_one, int* programmatic_edges = nullptr) {
  cudaGraph_t g = nullptr;
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < n; ++k) enqueue_one(s, k);
  BENCH_CUDA(cudaStreamEndCapture(s, &g));
  if (programmatic_edges) {
    size_t ne = 0;
#if CUDART_VERSION >= 13000
    BENCH_CUDA(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
    std::vector<cudaGraphNode_t> from(ne), to(ne);
    std::vector<cudaGraphEdgeData> data(ne);
    if (ne) BENCH_CUDA(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &ne));
#elif CUDART_VERSION >= 12030
    BENCH_CUDA(cudaGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &ne));
    std::vector<cudaGraphNode_t> from(ne), to(ne);
    std::vector<cudaGraphEdgeData> data(ne);
    if (ne) BENCH_CUDA(cudaGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &ne));
#else
    std::vector<cudaGraphEdgeData> data;
#endif
    int c = 0;
    for (const auto& d : data) c += d.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
    *programmatic_edges = c;
  }
  cudaGraphExec_t ex = nullptr;
  BENCH_CUDA(cudaGraphInstantiate(&ex, g, 0));
  BENCH_CUDA(cudaGraphUpload(ex, s));
  cudaEvent_t e0, e1;
  BENCH_CUDA(cudaEventCreate(&e0));
  BENCH_CUDA(cudaEventCreate(&e1));
  std::vector<double> us;
  for (int r = 0; r < warmup + reps; ++r) {
    BENCH_CUDA(cudaEventRecord(e0, s));
    BENCH_CUDA(cudaGraphLaunch(ex, s));
    BENCH_CUDA(cudaEventRecord(e1, s));
    BENCH_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= warmup) us.push_back(1000.0 * ms / n);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  return median(us);
}

}  // namespace pdl_bench
