// src/cli/demo.cpp — `packfa demo`: toolchain/GPU facts, then packed16 attention on a default
// shape (GPU when present, else the CPU reference of the same math on a smaller default).
#include "demo.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/format.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"

namespace packfa::cli {

namespace {
double rel(const std::vector<double>& a, const std::vector<double>& r) {
  double n = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    n += (a[i] - r[i]) * (a[i] - r[i]);
    d += r[i] * r[i];
  }
  return std::sqrt(n / d);
}
}  // namespace

int demo(int argc, char** argv) {
  int kv = 16384;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--kv") kv = std::atoi(argv[i + 1]);
  const DeviceInfo dev = device_info(0);
  std::printf("packfa demo\n  backend compiled: %s\n", dev.backend.c_str());
  const double kb = k_bits_per_value(KFormat::packed16, 32);
  std::printf("  packed16 K: %.1f bits/value vs 16 for fp16 -> %.1f%% less K memory\n", kb, 100.0 * (1 - kb / 16));
  if (dev.present) {
    std::printf("  GPU: %s (%d multiprocessors, cc %d.%d)\n", dev.name.c_str(), dev.multiprocessors, dev.cc_major,
                dev.cc_minor);
    const int rc = demo_gpu(kv, 20);
    if (rc >= 0) return rc;
  } else {
    std::printf("  no GPU found (%s): running the CPU reference of the same math on a smaller default\n",
                dev.why_absent.c_str());
  }
  // CPU: Llama-3.1-8B-like head layout (32 q / 8 KV heads, D 128), 2048 keys, one decode row.
  ProblemConfig c;
  c.n_q_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.kv_len = 2048;
  c.v_format = VFormat::q8_0;
  HostProblem hp;
  Status s = make_problem(c, &hp);
  if (!s.ok()) {
    std::printf("error: %s\n", s.to_string().c_str());
    return 1;
  }
  std::vector<double> truth, o;
  const auto t0 = std::chrono::steady_clock::now();
  AttnParams fp16 = hp.make_params(KFormat::f16, VFormat::f16);
  if (!(s = reference_attention(fp16, RefMode::exact, &truth, nullptr)).ok()) return 1;
  const auto t1 = std::chrono::steady_clock::now();
  if (!(s = reference_attention(hp.params, RefMode::kernel_int8, &o, nullptr)).ok()) return 1;
  std::printf("  CPU reference, 32 q / 8 KV heads, D 128, kv %d, packed16 K + q8_0 V (int8 Q):\n", c.kv_len);
  std::printf("    rel. error vs fp16 K + fp16 V attention: %.2e\n", rel(o, truth));
  std::printf("    fp64 reference time: %.1f ms per pass\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  return 0;
}

}  // namespace packfa::cli
