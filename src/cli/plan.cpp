// packfa-cli plan: KV cache memory for f16 K vs packed16 K (include/packfa/planner.hpp).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "packfa/planner.hpp"

namespace {

const char* vname(packfa::VFormat f) {
  switch (f) {
    case packfa::VFormat::f16: return "f16";
    case packfa::VFormat::bf16: return "bf16";
    case packfa::VFormat::q8_0: return "q8_0";
    case packfa::VFormat::q4_0: return "q4_0";
    case packfa::VFormat::q8_0_planar: return "q8_0_planar";
  }
  return "?";
}

const char* kUsage =
    "usage: packfa-cli plan [--model NAME | --layers L --kv-heads H --head-dim D\n"
    "                        [--swa-layers N --swa-window W]] [--context 131072]\n"
    "                        [--contexts 1] [--v q4_0|q8_0|q8_0_planar|f16|bf16|all] [--swa-full] [--list]\n"
    "KV cache GiB of f16 K vs packed16 K (B = 32 and 16) for a model preset (--list) or a custom shape.\n"
    "  --model NAME     a preset (default llama-3.1-8b); not combined with the custom-shape options\n"
    "  --layers L       layers holding a KV cache (1..1024)     --kv-heads H   (1..256)\n"
    "  --head-dim D     a multiple of 16 (16..512)              --swa-layers N of L with a sliding window\n"
    "  --swa-window W   tokens a sliding-window layer keeps     --swa-full     count them at full context\n"
    "  --context N      tokens (1..2147483647)                  --contexts C   1..8 (2: main + an MTP/draft context)\n"
    "  --v FORMAT       V cache format (default q4_0); q8_0/q4_0/q8_0_planar need head_dim % 32 == 0\n";

}  // namespace

int packfa_cli_plan(int argc, char** argv) {
  using namespace packfa;
  std::string model = "llama-3.1-8b", v = "q4_0";
  ModelShape custom;
  bool swa_full = false, list = false;
  long long context = 131072;
  int contexts = 1;
  // Ranges keep the byte count below 2^63: 2^31 tokens x 2^10 layers x 2^8 heads x 8 contexts
  // x 1024 bytes (an f16 row at D = 512) = 2^62.
  args::Parser ap("packfa-cli plan", kUsage);
  ap.text("--model", &model)
      .integer("--layers", &custom.n_layers, 1, 1024)
      .integer("--kv-heads", &custom.n_kv_heads, 1, 256)
      .integer("--head-dim", &custom.head_dim, 16, 512)
      .integer("--swa-layers", &custom.n_swa_layers, 0, 1024)
      .integer("--swa-window", &custom.swa_window, 1, INT32_MAX)
      .integer("--context", &context, 1, INT32_MAX)
      .integer("--contexts", &contexts, 1, 8)
      .choice("--v", &v, {"q4_0", "q8_0", "q8_0_planar", "f16", "bf16", "all"})
      .flag("--swa-full", &swa_full)
      .flag("--list", &list);
  int rc = 0;
  if (!ap.parse(argc, argv, 1, &rc)) return rc;

  if (list) {
    std::printf("%-20s %6s %8s %8s %10s  %s\n", "model", "layers", "kv_heads", "head_dim", "swa", "source");
    for (const auto& m : model_presets())
      std::printf("%-20s %6d %8d %8d %4d@%-5d  %s\n", m.name.c_str(), m.n_layers, m.n_kv_heads, m.head_dim,
                  m.n_swa_layers, m.swa_window, m.source.c_str());
    return 0;
  }
  const char* shape_opts[] = {"--layers", "--kv-heads", "--head-dim", "--swa-layers", "--swa-window"};
  bool use_custom = false;
  for (const char* o : shape_opts) use_custom = use_custom || ap.given(o);
  ModelShape m;
  if (use_custom) {
    if (ap.given("--model"))  // a preset fixes the shape: mixing would silently drop one of them
      return ap.fail("--model " + model + " cannot be combined with --layers/--kv-heads/--head-dim/--swa-*: "
                     "a preset fixes the shape; give --layers, --kv-heads and --head-dim for a custom one");
    if (ap.given("--layers") && custom.n_swa_layers > custom.n_layers)
      return ap.fail("--swa-layers: " + std::to_string(custom.n_swa_layers) + " is more than --layers " +
                     std::to_string(custom.n_layers));
    if (ap.given("--head-dim") && custom.head_dim % 16)
      return ap.fail("--head-dim: " + std::to_string(custom.head_dim) + " is not a multiple of 16");
    for (const char* o : {"--layers", "--kv-heads", "--head-dim"})
      if (!ap.given(o)) return ap.fail(std::string("a custom shape needs ") + o + " (with --layers, --kv-heads, --head-dim)");
    if (custom.n_swa_layers > 0 && !ap.given("--swa-window"))
      return ap.fail("--swa-layers " + std::to_string(custom.n_swa_layers) + " needs --swa-window");
    if (ap.given("--swa-window") && custom.n_swa_layers == 0)
      return ap.fail("--swa-window needs --swa-layers >= 1 (the layers that keep a window)");
    m = custom;
    m.name = "custom";
    m.source = "command line";
  } else {
    const ModelShape* p = find_model_preset(model);
    if (!p) {
      std::string names;
      for (const auto& x : model_presets()) names += (names.empty() ? "" : ", ") + x.name;
      return ap.fail("--model: unknown model '" + model + "' (one of " + names + "; or a custom shape)");
    }
    m = *p;
  }

  std::vector<VFormat> vfs;
  if (v == "all") vfs = {VFormat::f16, VFormat::q8_0, VFormat::q4_0};
  else if (v == "f16") vfs = {VFormat::f16};
  else if (v == "bf16") vfs = {VFormat::bf16};
  else if (v == "q8_0") vfs = {VFormat::q8_0};
  else if (v == "q8_0_planar") vfs = {VFormat::q8_0_planar};
  else vfs = {VFormat::q4_0};
  // ggml-blocked V formats need head_dim % 32 == 0: say so rather than print an empty table.
  std::vector<VFormat> shown;
  std::string omitted;
  for (VFormat vf : vfs) {
    if (v_is_blocked(vf) && m.head_dim % kGgmlBlock) omitted += (omitted.empty() ? "" : ", ") + std::string(vname(vf));
    else shown.push_back(vf);
  }
  if (shown.empty())  // nothing to show: say why instead of printing an empty table
    return ap.fail((ap.given("--v") ? "--v " + v + ": " : "the default V format (--v " + v + "): ") + omitted +
                   " V is stored in blocks of 32 values and needs head_dim % 32 == 0; head_dim " +
                   std::to_string(m.head_dim) + " is not (use --v f16 or --v bf16)");

  std::printf("model %s: %d layers (%d sliding-window, window %d%s), %d KV heads, head_dim %d\n", m.name.c_str(),
              m.n_layers, m.n_swa_layers, m.swa_window, swa_full ? ", counted at full context" : "", m.n_kv_heads,
              m.head_dim);
  std::printf("source: %s\ncontext %lld tokens x %d context%s (KV cache only)\n\n", m.source.c_str(), context,
              contexts, contexts > 1 ? "s (main + draft)" : "");
  std::printf("| K format      | V format | K GiB    | V GiB    | total GiB | vs f16 K  |\n");
  std::printf("|---------------|----------|----------|----------|-----------|-----------|\n");
  struct Row {
    const char* name;
    KFormat f;
    int block;
  };
  const Row rows[] = {{"f16", KFormat::f16, 32}, {"packed16 B=32", KFormat::packed16, 32},
                      {"packed16 B=16", KFormat::packed16, 16}};
  for (VFormat vf : shown) {
    const KvBytes base = kv_cache_bytes(m, context, KFormat::f16, 32, vf, contexts, swa_full);
    for (const Row& r : rows) {
      if (r.f == KFormat::packed16 && m.head_dim % r.block) continue;
      const KvBytes b = kv_cache_bytes(m, context, r.f, r.block, vf, contexts, swa_full);
      std::printf("| %-13s | %-8s | %8.3f | %8.3f | %9.3f | %+8.3f  |\n", r.name, vname(vf), b.k / kBytesPerGiB,
                  b.v / kBytesPerGiB, b.total() / kBytesPerGiB, (b.total() - base.total()) / kBytesPerGiB);
    }
  }
  if (m.head_dim % 32) std::printf("\npacked16 B=32 omitted: head_dim %d is not a multiple of 32 (B=16 shown)\n", m.head_dim);
  if (!omitted.empty()) std::printf("%s V omitted: ggml blocks need head_dim %% 32 == 0\n", omitted.c_str());
  return 0;
}
