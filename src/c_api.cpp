// src/c_api.cpp — C ABI (include/packfa/c_api.h). Never lets an exception cross.
#include "packfa/c_api.h"

#include <cstring>
#include <exception>

#include "packfa/api.hpp"
#include "packfa/version.hpp"  // generated from CMake project(VERSION)

namespace {
int finish(const packfa::Status& s, char* msg, size_t cap) {
  if (msg && cap) {
    const std::string m = s.to_string();
    std::strncpy(msg, m.c_str(), cap - 1);
    msg[cap - 1] = '\0';
  }
  return static_cast<int>(s.code());
}
template <class F>
int guarded(F&& f, char* msg, size_t cap) {
  try {
    return finish(f(), msg, cap);
  } catch (const std::exception& e) {
    return finish({packfa::Code::device_error, std::string("internal error: ") + e.what()}, msg, cap);
  } catch (...) {
    return finish({packfa::Code::device_error, "internal error"}, msg, cap);
  }
}
// C params -> AttnParams; enum ranges are checked here (the C++ side receives enums).
packfa::Status to_cpp(const packfa_attn_params* cp, packfa::AttnParams* out) {
  if (!cp) return packfa::invalid("params", "null");
  if (cp->q_type < 0 || cp->q_type > 2) return packfa::invalid("q_type", "unknown dtype");
  if (cp->o_type < 0 || cp->o_type > 2) return packfa::invalid("o_type", "unknown dtype");
  if (cp->k_format < 0 || cp->k_format > 1) return packfa::invalid("k_format", "unknown K format");
  if (cp->v_format < 0 || cp->v_format >= packfa::kNumVFormats) return packfa::invalid("v_format", "unknown V format");
  if (cp->dot < 0 || cp->dot > 1) return packfa::invalid("dot", "unknown dot mode");
  if (cp->alibi_mode < 0 || cp->alibi_mode > 1) return packfa::invalid("alibi_mode", "must be 0 (position) or 1 (ggml)");
  packfa::AttnParams& p = *out;
  p.batch = cp->batch;
  p.nq = cp->nq;
  p.n_q_heads = cp->n_q_heads;
  p.n_kv_heads = cp->n_kv_heads;
  p.head_dim = cp->head_dim;
  p.max_kv_len = cp->max_kv_len;
  p.q = {static_cast<packfa::DType>(cp->q_type), cp->q, cp->q_strides[0], cp->q_strides[1], cp->q_strides[2]};
  p.k.format = static_cast<packfa::KFormat>(cp->k_format);
  p.k.data = cp->k;
  p.k.data_strides = {cp->k_strides[0], cp->k_strides[1], cp->k_strides[2]};
  p.k.scales = cp->k_scales;
  p.k.scale_strides = {cp->k_scale_strides[0], cp->k_scale_strides[1], cp->k_scale_strides[2]};
  p.k.block = cp->k_block;
  p.k.smooth_scale = cp->k_smooth_scale;
  p.v.format = static_cast<packfa::VFormat>(cp->v_format);
  p.v.data = cp->v;
  p.v.strides = {cp->v_strides[0], cp->v_strides[1], cp->v_strides[2]};
  p.v.scales = cp->v_scales;
  p.v.scale_strides = {cp->v_scale_strides[0], cp->v_scale_strides[1], cp->v_scale_strides[2]};
  p.o = {static_cast<packfa::DType>(cp->o_type), cp->o, cp->o_strides[0], cp->o_strides[1], cp->o_strides[2]};
  p.kv_len = cp->kv_len;
  p.q_pos = cp->q_pos;
  p.scale = cp->scale;
  p.causal = cp->causal != 0;
  p.window = cp->window;
  p.mask = cp->mask;
  p.mask_seq_stride = cp->mask_strides[0];
  p.mask_row_stride = cp->mask_strides[1];
  p.softcap = cp->softcap;
  p.sinks = cp->sinks;
  p.alibi_max_bias = cp->alibi_max_bias;
  p.lse = cp->lse;
  p.dot = static_cast<packfa::DotMode>(cp->dot);
  p.num_splits = cp->num_splits;
  p.workspace = cp->workspace;
  p.workspace_bytes = cp->workspace_bytes;
  p.pdl = cp->pdl;
  p.paged.block_table = cp->block_table;
  p.paged.table_stride = cp->block_table_stride;
  p.paged.page_size = cp->page_size;
  p.paged.num_pages = cp->num_pages;
  p.mask_head_stride = cp->mask_head_stride;
  p.alibi_mode = static_cast<packfa::AlibiMode>(cp->alibi_mode);
  p.errors = cp->errors;
  p.kv_len_host = cp->kv_len_host;
  return packfa::Status::Ok();
}

// The new rows both pack-on-write calls read (the C and C++ structs share these names).
template <class C, class P>
packfa::Status source_to_cpp(const C* cp, P* p) {
  if (!cp) return packfa::invalid("params", "null");
  if (cp->src_type < 0 || cp->src_type > 2) return packfa::invalid("src_type", "unknown dtype");
  p->n_tokens = cp->n_tokens;
  p->n_kv_heads = cp->n_kv_heads;
  p->head_dim = cp->head_dim;
  p->src_type = static_cast<packfa::DType>(cp->src_type);
  p->src = cp->src;
  p->src_token_stride = cp->src_token_stride;
  p->src_head_stride = cp->src_head_stride;
  return packfa::Status::Ok();
}
}  // namespace

extern "C" {

const char* packfa_version(void) { return PACKFA_VERSION_STRING; }

int packfa_fa_forward(const packfa_attn_params* cp, void* stream, char* msg, size_t msg_cap) {
  return guarded(
      [&]() -> packfa::Status {
        packfa::AttnParams p;
        PACKFA_TRY(to_cpp(cp, &p));
        return packfa::fa_packed16_forward(p, stream);
      },
      msg, msg_cap);
}

int packfa_fa_workspace_bytes(const packfa_attn_params* cp, int device, size_t* bytes, char* msg, size_t msg_cap) {
  return guarded(
      [&]() -> packfa::Status {
        if (!bytes) return packfa::invalid("bytes", "null");
        packfa::AttnParams p;
        PACKFA_TRY(to_cpp(cp, &p));
        return packfa::fa_workspace_bytes(p, device, bytes);
      },
      msg, msg_cap);
}

int packfa_fa_select_kernel(const packfa_attn_params* cp, int device, char* name, size_t name_cap, int* num_splits,
                            char* msg, size_t msg_cap) {
  if (name && name_cap) name[0] = '\0';
  if (num_splits) *num_splits = 0;
  return guarded(
      [&]() -> packfa::Status {
        packfa::AttnParams p;
        PACKFA_TRY(to_cpp(cp, &p));
        packfa::KernelChoice kc;
        const packfa::Status s = packfa::select_kernel(p, device, &kc);
        if (name && name_cap) {
          std::strncpy(name, kc.name.c_str(), name_cap - 1);
          name[name_cap - 1] = '\0';
        }
        if (num_splits && s.ok()) *num_splits = kc.num_splits;
        return s;
      },
      msg, msg_cap);
}

int packfa_pack_k(const packfa_pack_k_params* cp, void* stream, char* msg, size_t msg_cap) {
  return guarded(
      [&]() -> packfa::Status {
        packfa::PackKParams p;
        PACKFA_TRY(source_to_cpp(cp, &p));
        p.dst.format = packfa::KFormat::packed16;
        p.dst.data = cp->dst_payload;
        p.dst.data_strides = {cp->dst_payload_strides[0], cp->dst_payload_strides[1], cp->dst_payload_strides[2]};
        p.dst.scales = cp->dst_scales;
        p.dst.scale_strides = {cp->dst_scale_strides[0], cp->dst_scale_strides[1], cp->dst_scale_strides[2]};
        p.dst.block = cp->block;
        p.dst.smooth_scale = cp->smooth_scale;
        p.slots = cp->slots;
        p.base_slot = cp->base_slot;
        p.smooth_shift = cp->smooth_shift;
        p.counters = cp->counters;
        p.pdl = cp->pdl;
        p.page_size = cp->page_size;
        p.n_slots = cp->n_slots;
        return packfa::pack_k_packed16(p, stream);
      },
      msg, msg_cap);
}

int packfa_quantize_v(const packfa_quantize_v_params* cp, void* stream, char* msg, size_t msg_cap) {
  return guarded(
      [&]() -> packfa::Status {
        packfa::QuantVParams p;
        PACKFA_TRY(source_to_cpp(cp, &p));
        if (cp->v_format < 0 || cp->v_format >= packfa::kNumVFormats)
          return packfa::invalid("v_format", "unknown V format");
        p.dst.format = static_cast<packfa::VFormat>(cp->v_format);
        p.dst.data = cp->dst;
        p.dst.strides = {cp->dst_strides[0], cp->dst_strides[1], cp->dst_strides[2]};
        p.dst.scales = cp->dst_scales;
        p.dst.scale_strides = {cp->dst_scale_strides[0], cp->dst_scale_strides[1], cp->dst_scale_strides[2]};
        p.slots = cp->slots;
        p.base_slot = cp->base_slot;
        p.pdl = cp->pdl;
        p.page_size = cp->page_size;
        p.n_slots = cp->n_slots;
        return packfa::quantize_v(p, stream);
      },
      msg, msg_cap);
}

}  // extern "C"
