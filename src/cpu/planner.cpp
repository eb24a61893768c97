// KV memory planner (include/packfa/planner.hpp).
#include "packfa/planner.hpp"

#include <algorithm>
#include <cctype>

namespace packfa {

int64_t k_row_bytes(KFormat f, int k_block, int head_dim) {
  if (f == KFormat::f16) return 2 * static_cast<int64_t>(head_dim);
  return static_cast<int64_t>(head_dim) + 2 * static_cast<int64_t>(head_dim / k_block);
}

KvBytes kv_cache_bytes(const ModelShape& m, int64_t context, KFormat k_format, int k_block, VFormat v_format,
                       int contexts, bool swa_full) {
  const int swa = std::min(std::max(m.n_swa_layers, 0), m.n_layers);
  const int64_t swa_tokens = (swa_full || m.swa_window <= 0) ? context : std::min<int64_t>(context, m.swa_window);
  const int64_t token_layers = static_cast<int64_t>(m.n_layers - swa) * context + static_cast<int64_t>(swa) * swa_tokens;
  const int64_t rows = token_layers * m.n_kv_heads * contexts;
  KvBytes b;
  b.k = rows * k_row_bytes(k_format, k_block, m.head_dim);
  b.v = rows * (v_row_bytes(v_format, m.head_dim) + v_scale_row_bytes(v_format, m.head_dim));  // + q8_0_planar scales
  return b;
}

const std::vector<ModelShape>& model_presets() {
  // num_hidden_layers, num_key_value_heads, head_dim (or hidden_size / num_attention_heads),
  // sliding_window(+pattern) from each repository's config.json.
  static const std::vector<ModelShape> presets = {
      {"llama-3.1-8b", 32, 8, 128, 0, 0, "meta-llama/Llama-3.1-8B config.json (hidden 4096 / 32 heads)"},
      {"llama-3.1-70b", 80, 8, 128, 0, 0, "meta-llama/Llama-3.1-70B config.json (hidden 8192 / 64 heads)"},
      {"qwen2.5-7b", 28, 4, 128, 0, 0, "Qwen/Qwen2.5-7B config.json (hidden 3584 / 28 heads)"},
      {"qwen2.5-32b", 64, 8, 128, 0, 0, "Qwen/Qwen2.5-32B config.json (hidden 5120 / 40 heads)"},
      {"qwen3-32b", 64, 8, 128, 0, 0, "Qwen/Qwen3-32B config.json (head_dim 128)"},
      {"mistral-small-24b", 40, 8, 128, 0, 0, "mistralai/Mistral-Small-24B-Base-2501 config.json (head_dim 128)"},
      {"gemma-3-27b", 62, 16, 128, 52, 1024,
       "google/gemma-3-27b-it config.json text_config (62 layers, sliding_window 1024, every 6th layer global)"},
  };
  return presets;
}

const ModelShape* find_model_preset(const std::string& name) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  const std::string n = lower(name);
  for (const auto& m : model_presets())
    if (lower(m.name) == n) return &m;
  return nullptr;
}

}  // namespace packfa
