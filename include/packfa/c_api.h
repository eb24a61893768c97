/* packfa/c_api.h — C ABI over packfa::fa_packed16_forward, fa_workspace_bytes,
 * pack_k_packed16 and quantize_v (see api.hpp for field meaning).
 * Returns 0 on success, else a packfa::Code; msg (optional) receives "code: field: why", the
 * field spelled as in api.hpp (k.block for k_block; dst.data for dst_payload / dst).
 * No exception crosses this boundary. Enums are ints with the C++ enum values:
 * dtype f32=0 f16=1 bf16=2; k_format packed16=0 f16=1; v_format f16=0 bf16=1 q8_0=2 q4_0=3
 * q8_0_planar=4; dot int8=0 f16=1. Strides: q/o in elements {seq,row,head}; k/v in bytes
 * {seq,slot,head}. Fields added later are appended at the end of a struct, so the offsets of
 * the older fields never move. */
#ifndef PACKFA_C_API_H
#define PACKFA_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct packfa_attn_params {
  int batch, nq, n_q_heads, n_kv_heads, head_dim, max_kv_len;
  int q_type;
  const void* q;
  int64_t q_strides[3];
  int k_format;
  const void* k;
  int64_t k_strides[3];
  const void* k_scales;
  int64_t k_scale_strides[3];
  int k_block;
  const float* k_smooth_scale;
  int v_format;
  const void* v;
  int64_t v_strides[3];
  int o_type;
  void* o;
  int64_t o_strides[3];
  const int32_t* kv_len;
  const int32_t* q_pos;
  float scale;
  int causal;
  int window;
  const uint16_t* mask;
  int64_t mask_strides[2];
  float softcap;
  const float* sinks;
  float alibi_max_bias;
  float* lse;
  int dot;
  int num_splits;
  void* workspace;
  size_t workspace_bytes;
  int pdl;
  /* v_format q8_0_planar: fp16 block scales (head_dim / 32 per row), byte strides */
  const void* v_scales;
  int64_t v_scale_strides[3];
  /* paged KV (api.hpp PagedKV): page_size 0 = off; with pages each plane's strides[0] is
   * the byte stride between pages */
  const int32_t* block_table;
  int64_t block_table_stride;
  int page_size;
  int num_pages;
  int64_t mask_head_stride; /* elements; 0 = one mask for all heads */
  int alibi_mode;           /* 0 = position (s += mask + slope*(j - pos)), 1 = ggml (s += slope*mask) */
  int* errors;              /* optional device int32[3]: kv_len, q_pos, page id out of contract */
  const int32_t* kv_len_host; /* optional host copy of kv_len[batch], for the split planner */
} packfa_attn_params;

/* Pack-on-write of new K rows into packed16 planes. src: [token][kv_head][head_dim] in
 * elements; dst strides in bytes {unused, slot, head}; slots (device int32[n_tokens]) or
 * base_slot; smooth_shift / smooth_scale optional (f32 [n_kv_heads][head_dim]); counters
 * optional device int[2] (non-finite, overflow; added to). */
typedef struct packfa_pack_k_params {
  int n_tokens, n_kv_heads, head_dim;
  int src_type;
  const void* src;
  int64_t src_token_stride, src_head_stride;
  void* dst_payload;
  int64_t dst_payload_strides[3];
  void* dst_scales;
  int64_t dst_scale_strides[3];
  int block;
  const int32_t* slots;
  int64_t base_slot;
  const float* smooth_shift;
  const float* smooth_scale;
  int* counters;
  int pdl;
  int page_size;   /* paged: slot = page * page_size + offset; dst strides[0] = page stride */
  int64_t n_slots; /* cache capacity in slots (0 = unchecked); slots < 0 or >= n_slots are skipped */
} packfa_pack_k_params;

/* Quantize-on-write of new V rows (v_format q8_0 / q4_0 / q8_0_planar, or an f16 / bf16
 * copy). q8_0_planar writes int8 rows to dst and their fp16 scales to dst_scales. */
typedef struct packfa_quantize_v_params {
  int n_tokens, n_kv_heads, head_dim;
  int src_type;
  const void* src;
  int64_t src_token_stride, src_head_stride;
  int v_format;
  void* dst;
  int64_t dst_strides[3];
  const int32_t* slots;
  int64_t base_slot;
  int pdl;
  void* dst_scales;  /* q8_0_planar only */
  int64_t dst_scale_strides[3];
  int page_size;     /* as packfa_pack_k_params */
  int64_t n_slots;
} packfa_quantize_v_params;

/* "MAJOR.MINOR.PATCH": PACKFA_VERSION_STRING of the generated packfa/version.hpp (CMake project version). */
const char* packfa_version(void);
int packfa_fa_forward(const packfa_attn_params* p, void* stream, char* msg, size_t msg_cap);
/* Workspace a forward call with these params needs on `device` (0 when none). */
int packfa_fa_workspace_bytes(const packfa_attn_params* p, int device, size_t* bytes, char* msg, size_t msg_cap);
/* Which kernel a forward call with these params would run on `device`, without launching it (what
   packfa::select_kernel answers): the instance name, e.g. "fa_prefill<d128,q8_0,packed16_int8,m128>",
   NUL-terminated and cut to name_cap bytes, and the number of key splits (1: one pass, no combine).
   Returns what packfa_fa_forward would return for the same params when no kernel can run (msg says
   why; name then holds the instance that would have been chosen, or ""). name, num_splits: may be NULL. */
int packfa_fa_select_kernel(const packfa_attn_params* p, int device, char* name, size_t name_cap, int* num_splits,
                            char* msg, size_t msg_cap);
int packfa_pack_k(const packfa_pack_k_params* p, void* stream, char* msg, size_t msg_cap);
int packfa_quantize_v(const packfa_quantize_v_params* p, void* stream, char* msg, size_t msg_cap);

#ifdef __cplusplus
}
#endif
#endif
