// packfa-cli quality: attention-level quality of packed16 K on realistic synthetic keys.
//
// Reference: exact fp64 attention with the original f16 K and f16 V. Tested: packed16 K
// (B = 32 and 16) × {no smoothing, shift only, shift + scale} × {int8-Q dot, fp16-Q dot},
// computed "as the kernel computes it" (RefMode::kernel_int8 / kernel_f16), with V f16,
// q8_0 and q4_0. Metrics (docs/quality.md): per (query, head) the distribution of
// attention probabilities over the keys; KLD statistics as llama-perplexity
// --kl-divergence; output relative L2 error ||O - O_ref|| / ||O_ref|| per V format.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "packfa/metrics.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: packfa-cli quality [--d 128] [--kv 4096] [--queries 64] [--kv-heads 4] [--seed 1]\n"
               "  queries: query heads (one query row each), a multiple of --kv-heads\n");
}

}  // namespace

int packfa_cli_quality(int argc, char** argv) {
  using namespace packfa;
  int d = 128, kv = 4096, queries = 64, kv_heads = 4;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc && a != "--help" && a != "-h") {
      std::fprintf(stderr, "quality: %s needs a value\n", a.c_str());
      usage();
      return 2;
    }
    if (a == "--d") d = std::atoi(argv[++i]);
    else if (a == "--kv") kv = std::atoi(argv[++i]);
    else if (a == "--queries") queries = std::atoi(argv[++i]);
    else if (a == "--kv-heads") kv_heads = std::atoi(argv[++i]);
    else if (a == "--seed") seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "quality: unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (d < 32 || d % 32 || kv < 1 || kv_heads < 1 || queries < kv_heads || queries % kv_heads) {
    std::fprintf(stderr, "quality: need --d a multiple of 32, --kv >= 1, --queries a multiple of --kv-heads\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();

  ProblemConfig base;
  base.batch = 1;
  base.nq = 1;
  base.n_q_heads = queries;
  base.n_kv_heads = kv_heads;
  base.head_dim = d;
  base.kv_len = kv;
  base.causal = false;
  base.realistic = true;
  base.seed = seed;

  // Reference: exact mode, original f16 K, f16 V.
  HostProblem ref_problem;
  Status st = make_problem(base, &ref_problem);
  if (!st.ok()) {
    std::fprintf(stderr, "quality: %s\n", st.to_string().c_str());
    return 1;
  }
  const AttnParams ref = ref_problem.make_params(KFormat::f16, VFormat::f16);
  std::vector<std::vector<double>> ref_logits(queries);
  std::vector<double> ref_o, tmp_o;
  double top1 = 0.0, entropy = 0.0;
  for (int h = 0; h < queries; ++h) {
    reference_logits(ref, RefMode::exact, 0, 0, h, &ref_logits[h]);
    std::vector<double> p(kv);
    softmax(ref_logits[h].data(), kv, p.data());
    double mx = 0.0, e = 0.0;
    for (double x : p) {
      mx = std::fmax(mx, x);
      if (x > 0) e -= x * std::log(x);
    }
    top1 += mx / queries;
    entropy += e / queries;
  }
  reference_attention(ref, RefMode::exact, &ref_o, nullptr);
  const int64_t n_o = static_cast<int64_t>(ref_o.size());

  std::printf("packfa quality: D=%d, %d keys, %d query heads over %d KV heads, seed %llu\n", d, kv, queries, kv_heads,
              seed);
  std::printf("synthetic K: 4 outlier channels x8, channel offsets sigma 3 (include/packfa/synth.hpp)\n");
  std::printf("reference attention: mean top-1 probability %.3f, mean entropy %.2f nats (uniform: %.2f)\n\n", top1,
              entropy, std::log(static_cast<double>(kv)));
  std::printf("| K                 | smoothing   | QK dot | mean KLD ± se         | median KLD | p99 KLD  | max KLD  "
              "| same top | RMS Δp   | O err f16 V | O err q8_0 V | O err q4_0 V |\n");
  std::printf("|-------------------|-------------|--------|-----------------------|------------|----------|----------"
              "|----------|----------|-------------|--------------|--------------|\n");

  const VFormat vfs[3] = {VFormat::f16, VFormat::q8_0, VFormat::q4_0};
  {  // f16 K row: the V formats' own error
    double err[3];
    for (int v = 0; v < 3; ++v) {
      reference_attention(ref_problem.make_params(KFormat::f16, vfs[v]), RefMode::exact, &tmp_o, nullptr);
      err[v] = relative_l2_error(ref_o.data(), tmp_o.data(), n_o);
    }
    std::printf("| f16 (reference)   | -           | fp64   | 0                     | 0          | 0        | 0        "
                "| 100.0%%   | 0        | %11.2e | %12.2e | %12.2e |\n",
                err[0], err[1], err[2]);
  }
  const char* smooth_names[3] = {"none", "shift", "shift+scale"};
  for (int block : {32, 16}) {
    for (int sm = 0; sm < 3; ++sm) {
      ProblemConfig c = base;
      c.k_block = block;
      c.smooth_shift = sm >= 1;
      c.smooth_scale = sm >= 2;
      HostProblem hp;
      st = make_problem(c, &hp);
      if (!st.ok()) {
        std::fprintf(stderr, "quality: %s\n", st.to_string().c_str());
        return 1;
      }
      for (RefMode mode : {RefMode::kernel_int8, RefMode::kernel_f16}) {
        const AttnParams p = hp.make_params(KFormat::packed16, VFormat::f16);
        KldAccumulator acc;
        std::vector<double> lg;
        for (int h = 0; h < queries; ++h) {
          reference_logits(p, mode, 0, 0, h, &lg);
          acc.add_logits(ref_logits[h].data(), lg.data(), kv);
        }
        const KldSummary s = acc.summary();
        double err[3];
        for (int v = 0; v < 3; ++v) {
          reference_attention(hp.make_params(KFormat::packed16, vfs[v]), mode, &tmp_o, nullptr);
          err[v] = relative_l2_error(ref_o.data(), tmp_o.data(), n_o);
        }
        char kname[32], kld[64];
        std::snprintf(kname, sizeof kname, "packed16 B=%d", block);
        std::snprintf(kld, sizeof kld, "%.3e ± %.1e", s.mean_kld, s.kld_stderr);
        std::printf("| %-17s | %-11s | %-6s | %-21s | %10.3e | %8.2e | %8.2e | %7.1f%% | %8.2e | %11.2e | %12.2e | "
                    "%12.2e |\n",
                    kname, smooth_names[sm], mode == RefMode::kernel_int8 ? "int8" : "fp16", kld, s.median_kld,
                    s.p99_kld, s.max_kld, 100.0 * s.same_top, s.rms_dp, err[0], err[1], err[2]);
        std::fflush(stdout);
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nKLD over keys per (query, head), nats; RMS Δp: of the reference-top key's probability;\n"
              "O err: ||O - O_ref|| / ||O_ref|| over all heads. %.1f s.\n",
              secs);
  return 0;
}
