// src/c_api.cpp — C ABI (include/packfa/c_api.h). Never lets an exception cross.
#include "packfa/c_api.h"

#include <cstring>
#include <exception>

#include "packfa/api.hpp"

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
}  // namespace

extern "C" {

const char* packfa_version(void) { return "0.1.0"; }

int packfa_fa_forward(const packfa_attn_params* cp, void* stream, char* msg, size_t msg_cap) {
  return guarded(
      [&]() -> packfa::Status {
        if (!cp) return packfa::invalid("params", "null");
        packfa::AttnParams p;
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
        if (cp->q_type < 0 || cp->q_type > 2) return packfa::invalid("q_type", "unknown dtype");
        if (cp->o_type < 0 || cp->o_type > 2) return packfa::invalid("o_type", "unknown dtype");
        if (cp->k_format < 0 || cp->k_format > 1) return packfa::invalid("k_format", "unknown K format");
        if (cp->v_format < 0 || cp->v_format > 3) return packfa::invalid("v_format", "unknown V format");
        if (cp->dot < 0 || cp->dot > 1) return packfa::invalid("dot", "unknown dot mode");
        return packfa::fa_packed16_forward(p, stream);
      },
      msg, msg_cap);
}

}  // extern "C"
