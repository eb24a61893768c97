// packfa/planner.hpp — KV cache memory for a model shape, context length and cache formats.
//
// bytes = contexts × Σ_layers tokens(layer) × n_kv_heads × (K row bytes + V row bytes)
//   tokens(layer) = context, or min(context, swa_window) for a sliding-window layer
//   K row bytes:  f16: 2·D;  packed16: D + 2·D/B   (int8 payload + one fp16 scale per B)
//   V row bytes:  v_row_bytes(format, D) of format.hpp (f16/bf16 2·D, q8_0 34·D/32, q4_0 18·D/32)
// "contexts" counts full copies of the context: 2 = main model + an MTP/draft context of the
// same shape (the published RDNA3 packed-K scenario). Only the KV cache is counted: no
// weights, compute buffers or allocator padding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "packfa/format.hpp"

namespace packfa {

struct ModelShape {
  std::string name;
  int n_layers = 0;      // layers that hold a KV cache
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_swa_layers = 0;  // of n_layers, those with a sliding window
  int swa_window = 0;    // tokens a sliding-window layer keeps
  std::string source;    // where the numbers come from
};

struct KvBytes {
  int64_t k = 0;
  int64_t v = 0;
  int64_t total() const { return k + v; }
};

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// Bytes of one K row (one token, one kv head) of head_dim values.
int64_t k_row_bytes(KFormat f, int k_block, int head_dim);

// swa_full: count sliding-window layers at the full context (llama.cpp --swa-full).
KvBytes kv_cache_bytes(const ModelShape& m, int64_t context, KFormat k_format, int k_block, VFormat v_format,
                       int contexts = 1, bool swa_full = false);

// Presets from the models' config.json on Hugging Face (source field names the repo).
const std::vector<ModelShape>& model_presets();
// Case-insensitive name lookup; null when unknown.
const ModelShape* find_model_preset(const std::string& name);

}  // namespace packfa
