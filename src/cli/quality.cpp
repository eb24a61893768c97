// packfa-cli quality: attention-level quality of packed16 K on realistic synthetic keys.
//
// Reference: exact fp64 attention with the original f16 K and f16 V. Tested: packed16 K
// (B = 32 and 16) × {no smoothing, shift only, shift + scale} × {int8-Q dot, fp16-Q dot},
// computed "as the kernel computes it" (RefMode::kernel_int8 / kernel_f16), with V f16,
// q8_0 and q4_0. Metrics (docs/quality.md): per (query, head) the distribution of
// attention probabilities over the keys; KLD statistics as llama-perplexity
// --kl-divergence; output relative L2 error ||O - O_ref|| / ||O_ref|| per V format.
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "packfa/metrics.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"

namespace {

const char* kUsage =
    "usage: packfa-cli quality [--d 128] [--kv 4096] [--queries 64] [--kv-heads 4] [--seed 1]\n"
    "Attention-level quality of packed16 K against exact fp64 attention (docs/quality.md).\n"
    "  --d D          head dim, a multiple of 32 (32..512)\n"
    "  --kv N         keys (1..262144)\n"
    "  --queries Q    query heads (one query row each), a multiple of --kv-heads (1..1024)\n"
    "  --kv-heads H   (1..128)\n"
    "  --seed S       synthetic-data seed (0..9223372036854775807)\n";

int run_quality(int d, int kv, int queries, int kv_heads, unsigned long long seed);

}  // namespace

int packfa_cli_quality(int argc, char** argv) {
  int d = 128, kv = 4096, queries = 64, kv_heads = 4;
  unsigned long long seed = 1;
  packfa::args::Parser ap("packfa-cli quality", kUsage);
  ap.integer("--d", &d, 32, 512)
      .integer("--kv", &kv, 1, 262144)
      .integer("--queries", &queries, 1, 1024)
      .integer("--kv-heads", &kv_heads, 1, 128)
      .integer("--seed", &seed, 0, LLONG_MAX);
  int rc = 0;
  if (!ap.parse(argc, argv, 1, &rc)) return rc;
  if (d % 32) return ap.fail("--d: " + std::to_string(d) + " is not a multiple of 32 (q8_0/q4_0 V use blocks of 32)");
  if (queries % kv_heads)
    return ap.fail("--queries: " + std::to_string(queries) + " is not a multiple of --kv-heads " + std::to_string(kv_heads));
  try {
    return run_quality(d, kv, queries, kv_heads, seed);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "packfa-cli quality: out of host memory for --kv %d x --queries %d x --d %d: use smaller values\n",
                 kv, queries, d);
    return 1;
  }
}

namespace {
int run_quality(int d, int kv, int queries, int kv_heads, unsigned long long seed) {
  using namespace packfa;
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
}  // namespace
