// packfa-cli plan: KV cache memory for f16 K vs packed16 K (include/packfa/planner.hpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"
#include "packfa/planner.hpp"

namespace {

const char* vname(packfa::VFormat f) {
  switch (f) {
    case packfa::VFormat::f16: return "f16";
    case packfa::VFormat::bf16: return "bf16";
    case packfa::VFormat::q8_0: return "q8_0";
    case packfa::VFormat::q4_0: return "q4_0";
  }
  return "?";
}

void usage() {
  std::fprintf(stderr,
               "usage: packfa-cli plan [--model NAME | --layers L --kv-heads H --head-dim D\n"
               "                        [--swa-layers N --swa-window W]] [--context 131072]\n"
               "                        [--contexts 1] [--v q4_0|q8_0|f16|bf16|all] [--swa-full] [--list]\n"
               "  --contexts 2: main context + an MTP/draft context of the same shape\n");
}

}  // namespace

int packfa_cli_plan(int argc, char** argv) {
  using namespace packfa;
  std::string model = "llama-3.1-8b", v = "q4_0";
  ModelShape custom;
  bool use_custom = false, swa_full = false;
  long long context = 131072;
  int contexts = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "plan: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") model = next("--model");
    else if (a == "--layers") { custom.n_layers = std::atoi(next("--layers")); use_custom = true; }
    else if (a == "--kv-heads") { custom.n_kv_heads = std::atoi(next("--kv-heads")); use_custom = true; }
    else if (a == "--head-dim") { custom.head_dim = std::atoi(next("--head-dim")); use_custom = true; }
    else if (a == "--swa-layers") { custom.n_swa_layers = std::atoi(next("--swa-layers")); use_custom = true; }
    else if (a == "--swa-window") { custom.swa_window = std::atoi(next("--swa-window")); use_custom = true; }
    else if (a == "--context") context = std::atoll(next("--context"));
    else if (a == "--contexts") contexts = std::atoi(next("--contexts"));
    else if (a == "--v") v = next("--v");
    else if (a == "--swa-full") swa_full = true;
    else if (a == "--list") {
      std::printf("%-20s %6s %8s %8s %10s  %s\n", "model", "layers", "kv_heads", "head_dim", "swa", "source");
      for (const auto& m : model_presets())
        std::printf("%-20s %6d %8d %8d %4d@%-5d  %s\n", m.name.c_str(), m.n_layers, m.n_kv_heads, m.head_dim,
                    m.n_swa_layers, m.swa_window, m.source.c_str());
      return 0;
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "plan: unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  ModelShape m;
  if (use_custom) {
    m = custom;
    m.name = "custom";
    m.source = "command line";
    if (m.n_layers < 1 || m.n_kv_heads < 1 || m.head_dim < 16 || m.head_dim % 16) {
      std::fprintf(stderr, "plan: --layers, --kv-heads >= 1 and --head-dim a multiple of 16 are required\n");
      return 2;
    }
  } else {
    const ModelShape* p = find_model_preset(model);
    if (!p) {
      std::fprintf(stderr, "plan: unknown model %s (see --list)\n", model.c_str());
      return 2;
    }
    m = *p;
  }
  if (context < 1 || contexts < 1) {
    std::fprintf(stderr, "plan: --context and --contexts must be >= 1\n");
    return 2;
  }
  std::vector<VFormat> vfs;
  if (v == "all") vfs = {VFormat::f16, VFormat::q8_0, VFormat::q4_0};
  else if (v == "f16") vfs = {VFormat::f16};
  else if (v == "bf16") vfs = {VFormat::bf16};
  else if (v == "q8_0") vfs = {VFormat::q8_0};
  else if (v == "q4_0") vfs = {VFormat::q4_0};
  else {
    std::fprintf(stderr, "plan: unknown V format %s\n", v.c_str());
    return 2;
  }
  const bool ggml_ok = m.head_dim % 32 == 0;
  std::printf("model %s: %d layers (%d sliding-window, window %d%s), %d KV heads, head_dim %d\n", m.name.c_str(),
              m.n_layers, m.n_swa_layers, m.swa_window, swa_full ? ", counted at full context" : "", m.n_kv_heads,
              m.head_dim);
  std::printf("source: %s\ncontext %lld tokens x %d context%s (KV cache only)\n\n", m.source.c_str(), context,
              contexts, contexts > 1 ? "s (main + draft)" : "");
  std::printf("| K format      | V format | K GiB    | V GiB    | total GiB | vs f16 K  |\n");
  std::printf("|---------------|----------|----------|----------|-----------|-----------|\n");
  for (VFormat vf : vfs) {
    if (!ggml_ok && (vf == VFormat::q8_0 || vf == VFormat::q4_0)) continue;
    const KvBytes base = kv_cache_bytes(m, context, KFormat::f16, 32, vf, contexts, swa_full);
    struct Row {
      const char* name;
      KFormat f;
      int block;
    };
    const Row rows[] = {{"f16", KFormat::f16, 32}, {"packed16 B=32", KFormat::packed16, 32},
                        {"packed16 B=16", KFormat::packed16, 16}};
    for (const Row& r : rows) {
      if (r.f == KFormat::packed16 && m.head_dim % r.block) continue;
      const KvBytes b = kv_cache_bytes(m, context, r.f, r.block, vf, contexts, swa_full);
      std::printf("| %-13s | %-8s | %8.3f | %8.3f | %9.3f | %+8.3f  |\n", r.name, vname(vf), b.k / kBytesPerGiB,
                  b.v / kBytesPerGiB, b.total() / kBytesPerGiB, (b.total() - base.total()) / kBytesPerGiB);
    }
  }
  return 0;
}
