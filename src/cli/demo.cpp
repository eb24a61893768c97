// src/cli/demo.cpp — `packfa demo`: packed16 attention on a Llama-3.1-8B-like layer (32 q / 8
// KV heads, D 128, one decode row): what ran, the memory it saves, its error against fp16
// attention and, on a GPU, its time against the in-house f16 path. Without a GPU: the CPU
// reference of the same math (the kernel's int8 Q·K and q8_0 V) on fewer keys.
#include "demo.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "args.hpp"
#include "packfa/api.hpp"
#include "packfa/format.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa/version.hpp"

namespace packfa::cli {

namespace {
constexpr int kHeads = 32, kKvHeads = 8, kDim = 128;
constexpr double kMaxRelErr = 3e-2;  // ~4x what int8 Q + packed16 K + q8_0 V give (7e-3): a broken kernel is far above

double rel(const std::vector<double>& a, const std::vector<double>& r) {
  double n = 0, d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    n += (a[i] - r[i]) * (a[i] - r[i]);
    d += r[i] * r[i];
  }
  return std::sqrt(n / d);
}

void print_shape(int kv) {
  const double mib = 1048576.0;
  const double rows = static_cast<double>(kv) * kKvHeads;
  const double k16 = rows * 2 * kDim, kp = rows * (kDim + 2.0 * kDim / 32);
  const double v16 = rows * 2 * kDim, v8 = rows * v_row_bytes(VFormat::q8_0, kDim);
  std::printf("  shape: one decode row, %d q / %d KV heads (a Llama-3.1-8B layer), D %d, %d keys\n", kHeads, kKvHeads,
              kDim, kv);
  std::printf("  formats: K packed16 (int8 + one fp16 scale per 32 values, %.1f bits/value), V q8_0 (llama.cpp's\n"
              "           34-byte blocks, %.1f bits/value), Q quantized to int8 in the kernel, fp32 softmax and P.V\n",
              k_bits_per_value(KFormat::packed16, 32), v_bits_per_value(VFormat::q8_0));
  std::printf("  memory per layer: K %.2f MiB fp16 -> %.2f MiB packed16 (%.1f%% saved); K+V %.2f -> %.2f MiB (%.1f%% saved)\n",
              k16 / mib, kp / mib, 100 * (1 - kp / k16), (k16 + v16) / mib, (kp + v8) / mib,
              100 * (1 - (kp + v8) / (k16 + v16)));
}

int cpu_demo(int kv) {
  ProblemConfig c;
  c.n_q_heads = kHeads;
  c.n_kv_heads = kKvHeads;
  c.head_dim = kDim;
  c.kv_len = kv;
  c.v_format = VFormat::q8_0;
  HostProblem hp;
  Status s = make_problem(c, &hp);
  if (!s.ok()) {
    std::fprintf(stderr, "packfa-cli demo: %s\n", s.to_string().c_str());
    return 1;
  }
  std::vector<double> truth, o;
  const auto t0 = std::chrono::steady_clock::now();
  AttnParams fp16 = hp.make_params(KFormat::f16, VFormat::f16);
  if (!(s = reference_attention(fp16, RefMode::exact, &truth, nullptr)).ok() ||
      !(s = reference_attention(hp.params, RefMode::kernel_int8, &o, nullptr)).ok()) {
    std::fprintf(stderr, "packfa-cli demo: %s\n", s.to_string().c_str());
    return 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  print_shape(kv);
  std::printf("  error vs fp16 K + fp16 V attention (fp64): rel. L2 %.2e (CPU reference of the kernel's math)\n",
              rel(o, truth));
  std::printf("  CPU time: %.1f ms for both fp64 passes (not a kernel time; `./packfa bench` on a GPU)\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count());
  return 0;
}
}  // namespace

int demo(int argc, char** argv) {
  int kv = 0, runs = 20;
  args::Parser ap("packfa-cli demo",
                  "usage: packfa-cli demo [--kv N] [--runs R]\n"
                  "packed16 K + q8_0 V attention on a Llama-3.1-8B-like layer: memory saved, error vs fp16\n"
                  "attention and, on a GPU, the time against the in-house f16 path.\n"
                  "  --kv N     keys (1..262144; default 16384 on a GPU, 2048 for the CPU reference)\n"
                  "  --runs R   timed calls per path on a GPU (1..10000, default 20)\n");
  ap.integer("--kv", &kv, 1, 262144).integer("--runs", &runs, 1, 10000);
  int rc = 0;
  if (!ap.parse(argc, argv, 2, &rc)) return rc;
  const DeviceInfo dev = device_info(0);
  std::printf("packfa %s demo (backend compiled: %s)\n", PACKFA_VERSION_STRING, dev.backend.c_str());
  try {
    if (dev.present) {
      std::printf("  GPU: %s (%d multiprocessors, cc %d.%d)\n", dev.name.c_str(), dev.multiprocessors, dev.cc_major,
                  dev.cc_minor);
      const int n = kv ? kv : 16384;
      GpuDemoResult r;
      const int g = demo_gpu(n, runs, &r);
      if (g >= 0) {
        if (g != 0) {
          std::fprintf(stderr, "packfa-cli demo: GPU run failed: %s\n", r.error.c_str());
          return 1;
        }
        print_shape(n);
        std::printf("  ran: %s\n", r.kernel.c_str());
        std::printf("  error vs fp16 K + fp16 V attention (fp64): rel. L2 %.2e\n", r.rel_err);
        if (r.us_f16 > 0)
          std::printf("  time (median of %d): packed16 K + q8_0 V %.1f us | in-house f16 K + f16 V path %.1f us (%.2fx)\n",
                      runs, r.us_packed, r.us_f16, r.us_f16 / r.us_packed);
        else
          std::printf("  time (median of %d): packed16 K + q8_0 V %.1f us | f16 K path: %s\n", runs, r.us_packed,
                      r.f16_note.c_str());
        std::printf("  against other libraries: bench/peers/ ; full sweep: ./packfa bench\n");
        if (!(r.rel_err >= 0 && r.rel_err < kMaxRelErr)) {
          std::fprintf(stderr, "packfa-cli demo: error %.2e is above %.0e: the GPU result is wrong\n", r.rel_err,
                       kMaxRelErr);
          return 1;
        }
        return 0;
      }
      std::printf("  this build has no GPU backend: running the CPU reference instead\n");
    } else {
      std::printf("  no GPU: %s\n  running the CPU reference of the same math instead\n", dev.why_absent.c_str());
    }
    return cpu_demo(kv ? kv : 2048);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "packfa-cli demo: out of host memory for --kv %d\n", kv);
    return 1;
  }
}

}  // namespace packfa::cli
