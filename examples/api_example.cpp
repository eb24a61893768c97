// examples/api_example.cpp: one decode step of a Llama-3.1-8B layer (32 q / 8 KV heads,
// D 128) over llama.cpp's caches as they are: K packed16, V ggml q8_0. ctest builds it with
// -Wall -Wextra -Werror and runs it (api_example); the README shows this file verbatim.
#include <cstdint>
#include <cstdio>
#include <string>

#include <packfa/api.hpp>

// Every pointer is a device pointer; kv_len is device int32[1]. Strides: Q/O in elements
// {seq, row, head}, K/V in bytes {seq, slot, head} (a slot holds the 8 KV heads side by side).
packfa::Status attend(const void* q, void* o, const void* k_payload, const void* k_scales, const void* v,
                      const int32_t* kv_len, int max_kv_len, void* stream) {
  packfa::AttnParams p;
  p.batch = 1; p.nq = 1; p.n_q_heads = 32; p.n_kv_heads = 8; p.head_dim = 128;
  p.max_kv_len = max_kv_len;                  // host bound of kv_len[] (plans the split)
  p.q = {packfa::DType::f16, q, /*seq*/ 32 * 128, /*row*/ 32 * 128, /*head*/ 128};
  p.o = {packfa::DType::f16, o, 32 * 128, 32 * 128, 128};
  p.k.format = packfa::KFormat::packed16;     // int8 payload plane + fp16 scale plane (per 32)
  p.k.data = k_payload;  p.k.data_strides = {/*seq*/ 0, /*slot*/ 8 * 128, /*head*/ 128};
  p.k.scales = k_scales; p.k.scale_strides = {0, 8 * 8, 8};
  p.v.format = packfa::VFormat::q8_0;         // ggml's 34-byte blocks (or q8_0_planar + p.v.scales)
  p.v.data = v;          p.v.strides = {0, 8 * 136, 136};
  p.kv_len = kv_len;                          // batches: also p.kv_len_host (docs/integration.md)
  return packfa::fa_packed16_forward(p, stream);  // never throws; a Status names a bad field
}

// New tokens: pack K / quantize V into the caches at slots base_slot.. (bit-identical to the
// host packer of pack.hpp). k_new, v_new: device fp16 [n_tokens][8][128].
packfa::Status append(const void* k_new, const void* v_new, int n_tokens, int64_t base_slot, void* k_payload,
                      void* k_scales, void* v, void* stream) {
  packfa::PackKParams pk;
  pk.n_tokens = n_tokens; pk.n_kv_heads = 8; pk.head_dim = 128;
  pk.src = k_new; pk.src_token_stride = 8 * 128; pk.src_head_stride = 128;
  pk.dst.data = k_payload; pk.dst.data_strides = {0, 8 * 128, 128};
  pk.dst.scales = k_scales; pk.dst.scale_strides = {0, 8 * 8, 8};
  pk.base_slot = base_slot;
  packfa::QuantVParams qv;
  qv.n_tokens = n_tokens; qv.n_kv_heads = 8; qv.head_dim = 128;
  qv.src = v_new; qv.src_token_stride = 8 * 128; qv.src_head_stride = 128;
  qv.dst.format = packfa::VFormat::q8_0; qv.dst.data = v; qv.dst.strides = {0, 8 * 136, 136};
  qv.base_slot = base_slot;
  const packfa::Status s = packfa::pack_k_packed16(pk, stream);
  return s.ok() ? packfa::quantize_v(qv, stream) : s;
}

int main() {
  // Without device buffers at hand, both calls show how errors come back: by field name.
  const packfa::Status a = attend(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 131072, nullptr);
  const packfa::Status b = append(nullptr, nullptr, 1, 0, nullptr, nullptr, nullptr, nullptr);
  std::printf("attend: %s\nappend: %s\n", a.to_string().c_str(), b.to_string().c_str());
  const bool named = a.code() == packfa::Code::invalid_argument && a.message().find("q.data") != std::string::npos &&
                     b.code() == packfa::Code::invalid_argument && b.message().find("src") != std::string::npos;
  return named ? 0 : 1;
}
