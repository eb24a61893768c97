// Host test problems (include/packfa/testing.hpp).
#include "packfa/testing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "packfa/pack.hpp"
#include "packfa/smoothing.hpp"
#include "packfa/synth.hpp"

namespace packfa {
namespace {

int dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

void store(DType t, void* base, int64_t i, float x) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = x; break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = fp16_from_float(x); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = bf16_from_float(x); break;
  }
}

Strides plane_strides(int64_t row_bytes, int G, int capacity, int64_t pad) {
  Strides s;
  s.head = row_bytes;
  s.slot = row_bytes * G + pad;
  s.seq = s.slot * capacity;
  return s;
}

}  // namespace

void decode_to_double(DType t, const void* data, int64_t n, std::vector<double>* out) {
  out->resize(n);
  for (int64_t i = 0; i < n; ++i) (*out)[i] = load_as_float(t, data, i);
}

AttnParams HostProblem::make_params(KFormat kf, VFormat vf) const {
  AttnParams p;
  const int H = cfg.n_q_heads, D = cfg.head_dim;
  p.batch = cfg.batch;
  p.nq = cfg.nq;
  p.n_q_heads = H;
  p.n_kv_heads = cfg.n_kv_heads;
  p.head_dim = D;
  p.max_kv_len = max_kv_len;
  p.q.type = cfg.q_type;
  p.q.data = q.data();
  p.q.head_stride = D;
  p.q.row_stride = static_cast<int64_t>(H) * D;
  p.q.seq_stride = static_cast<int64_t>(cfg.nq) * H * D;
  p.o.type = cfg.o_type;
  p.o.data = const_cast<uint8_t*>(o.data());
  p.o.head_stride = p.q.head_stride;
  p.o.row_stride = p.q.row_stride;
  p.o.seq_stride = p.q.seq_stride;
  p.k.format = kf;
  p.k.block = cfg.k_block;
  if (kf == KFormat::packed16) {
    p.k.data = k_payload.data();
    p.k.data_strides = k_payload_strides;
    p.k.scales = k_scales.data();
    p.k.scale_strides = k_scale_strides;
    p.k.smooth_scale = smooth_scale.empty() ? nullptr : smooth_scale.data();
  } else {
    p.k.data = k_f16.data();
    p.k.data_strides = k_f16_strides;
  }
  p.v.format = vf;
  p.v.data = v_planes[static_cast<int>(vf)].data();
  p.v.strides = v_strides[static_cast<int>(vf)];
  if (vf == VFormat::q8_0_planar) {
    p.v.scales = v_scale_plane.data();
    p.v.scale_strides = v_scale_strides;
  }
  p.kv_len = kv_len.data();
  p.q_pos = q_pos.empty() ? nullptr : q_pos.data();
  p.scale = cfg.scale;
  p.causal = cfg.causal;
  p.window = cfg.window;
  if (!mask.empty()) {
    p.mask = mask.data();
    p.mask_seq_stride = mask_seq_stride;
    p.mask_row_stride = mask_row_stride;
  }
  p.softcap = cfg.softcap;
  p.sinks = sinks.empty() ? nullptr : sinks.data();
  p.alibi_max_bias = cfg.alibi_max_bias;
  p.lse = cfg.want_lse ? const_cast<float*>(lse.data()) : nullptr;
  p.dot = cfg.dot;
  return p;
}

Status make_problem(const ProblemConfig& cfg, HostProblem* out) {
  if (!out) return invalid("out", "is null");
  if (cfg.batch < 1) return invalid("batch", "must be >= 1");
  if (cfg.nq < 1) return invalid("nq", "must be >= 1");
  if (cfg.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (cfg.n_q_heads < 1 || cfg.n_q_heads % cfg.n_kv_heads) return invalid("n_q_heads", "must be a multiple of n_kv_heads");
  if (cfg.head_dim < 16 || cfg.head_dim % 16) return invalid("head_dim", "must be a positive multiple of 16");
  if (cfg.k_block != 16 && cfg.k_block != 32) return invalid("k_block", "must be 16 or 32");
  if (cfg.head_dim % cfg.k_block) return invalid("k_block", "head_dim must be a multiple of k_block");
  if (cfg.slot_pad_bytes < 0 || cfg.slot_pad_bytes % 16) return invalid("slot_pad_bytes", "must be a multiple of 16");
  if (!cfg.kv_lens.empty() && static_cast<int>(cfg.kv_lens.size()) != cfg.batch)
    return invalid("kv_lens", "must have batch entries");
  const bool ggml_v_ok = cfg.head_dim % 32 == 0;
  if (!ggml_v_ok && v_is_blocked(cfg.v_format)) return invalid("v_format", "q8_0/q4_0/q8_0_planar need head_dim % 32 == 0");

  HostProblem& hp = *out;
  hp = HostProblem();
  hp.cfg = cfg;
  const int B = cfg.batch, NQ = cfg.nq, H = cfg.n_q_heads, G = cfg.n_kv_heads, D = cfg.head_dim;
  hp.kv_len.resize(B);
  int maxlen = 0;
  for (int b = 0; b < B; ++b) {
    const int L = cfg.kv_lens.empty() ? cfg.kv_len : cfg.kv_lens[b];
    if (L < 0) return invalid("kv_lens", "must be >= 0");
    hp.kv_len[b] = L;
    maxlen = std::max(maxlen, L);
  }
  hp.max_kv_len = std::max(maxlen, 1);
  hp.capacity = cfg.capacity > 0 ? cfg.capacity : hp.max_kv_len;
  if (hp.capacity < maxlen) return invalid("capacity", "smaller than a kv_len");
  const int C = hp.capacity;

  // ---- data --------------------------------------------------------------------------
  SynthOptions so;
  if (!cfg.realistic) {
    so.n_outlier_channels = 0;
    so.offset_sigma = 0.0;
    so.q_focus = 0.0;
    so.q_noise = 1.0;
  }
  const SynthData sd = synth_attention_data(so, cfg.seed, B * C, B * NQ, G, H, D);
  SynthRng rng(cfg.seed ^ 0x5eedf00dull);

  // Q, stored in q_type; q_values = what is stored.
  const int64_t nqv = static_cast<int64_t>(B) * NQ * H * D;
  hp.q.assign(nqv * dtype_bytes(cfg.q_type), 0);
  hp.q_values.resize(nqv);
  for (int64_t i = 0; i < nqv; ++i) {
    store(cfg.q_type, hp.q.data(), i, sd.q[i]);
    hp.q_values[i] = load_as_float(cfg.q_type, hp.q.data(), i);
  }
  hp.o.assign(nqv * dtype_bytes(cfg.o_type), 0);
  hp.lse.assign(static_cast<size_t>(B) * NQ * H, 0.0f);

  // True K and V: fp16-rounded generated values.
  const int64_t nkv = static_cast<int64_t>(B) * C * G * D;
  hp.k_values.resize(nkv);
  hp.v_values.resize(nkv);
  std::vector<uint16_t> kh(nkv), vh(nkv);
  for (int64_t i = 0; i < nkv; ++i) {
    kh[i] = fp16_from_float(sd.k[i]);
    vh[i] = fp16_from_float(sd.v[i]);
    hp.k_values[i] = fp16_to_float(kh[i]);
    hp.v_values[i] = fp16_to_float(vh[i]);
  }

  // Smoothing from all valid keys and all queries.
  if (cfg.smooth_shift || cfg.smooth_scale) {
    std::vector<float> ks, qs;
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < hp.kv_len[b]; ++j) {
        const float* row = hp.k_values.data() + (static_cast<int64_t>(b) * C + j) * G * D;
        ks.insert(ks.end(), row, row + static_cast<int64_t>(G) * D);
      }
    if (ks.empty()) ks.assign(hp.k_values.begin(), hp.k_values.begin() + static_cast<int64_t>(G) * D);
    SmoothingOptions opt;
    opt.shift = cfg.smooth_shift;
    opt.scale = cfg.smooth_scale;
    opt.alpha = cfg.smooth_alpha;
    std::vector<float> m, s;
    PACKFA_TRY(compute_smoothing(G, H, D, ks.data(), static_cast<int64_t>(ks.size()) / (static_cast<int64_t>(G) * D),
                                 hp.q_values.data(), static_cast<int64_t>(B) * NQ, opt, &m, &s));
    if (cfg.smooth_shift) hp.smooth_shift.assign(m.begin(), m.end());
    if (cfg.smooth_scale) hp.smooth_scale.assign(s.begin(), s.end());
  }

  // ---- K planes ----------------------------------------------------------------------
  hp.k_f16_strides = plane_strides(2 * D, G, C, cfg.slot_pad_bytes);
  hp.k_f16.assign(hp.k_f16_strides.seq * B, 0);
  hp.k_payload_strides = plane_strides(D, G, C, cfg.slot_pad_bytes);
  hp.k_payload.assign(hp.k_payload_strides.seq * B, 0);
  hp.k_scale_strides = plane_strides(2 * (D / cfg.k_block), G, C, cfg.slot_pad_bytes);
  hp.k_scales.assign(hp.k_scale_strides.seq * B, 0);
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < C; ++j)
      for (int g = 0; g < G; ++g)
        std::memcpy(hp.k_f16.data() + b * hp.k_f16_strides.seq + j * hp.k_f16_strides.slot + g * hp.k_f16_strides.head,
                    kh.data() + ((static_cast<int64_t>(b) * C + j) * G + g) * D, 2 * static_cast<size_t>(D));
    PackKParams pk;
    pk.n_tokens = C;
    pk.n_kv_heads = G;
    pk.head_dim = D;
    pk.src_type = DType::f16;
    pk.src = kh.data() + static_cast<int64_t>(b) * C * G * D;
    pk.src_token_stride = static_cast<int64_t>(G) * D;
    pk.src_head_stride = D;
    pk.dst.format = KFormat::packed16;
    pk.dst.block = cfg.k_block;
    pk.dst.data = hp.k_payload.data() + b * hp.k_payload_strides.seq;
    pk.dst.data_strides = hp.k_payload_strides;
    pk.dst.scales = hp.k_scales.data() + b * hp.k_scale_strides.seq;
    pk.dst.scale_strides = hp.k_scale_strides;
    pk.dst.smooth_scale = hp.smooth_scale.empty() ? nullptr : hp.smooth_scale.data();
    pk.smooth_shift = hp.smooth_shift.empty() ? nullptr : hp.smooth_shift.data();
    PackStats st;
    PACKFA_TRY(pack_k_host(pk, &st));
    hp.pack_nonfinite += st.nonfinite;
    hp.pack_overflow += st.overflow;
  }

  // ---- V planes ----------------------------------------------------------------------
  for (int f = 0; f < kNumVFormats; ++f) {
    const VFormat vf = static_cast<VFormat>(f);
    if (!ggml_v_ok && v_is_blocked(vf)) continue;
    hp.v_strides[f] = plane_strides(v_row_bytes(vf, D), G, C, cfg.slot_pad_bytes);
    hp.v_planes[f].assign(hp.v_strides[f].seq * B, 0);
    const bool planar = vf == VFormat::q8_0_planar;
    if (planar) {
      hp.v_scale_strides = plane_strides(v_scale_row_bytes(vf, D), G, C, cfg.slot_pad_bytes);
      hp.v_scale_plane.assign(hp.v_scale_strides.seq * B, 0);
    }
    for (int b = 0; b < B; ++b) {
      QuantVParams qv;
      qv.n_tokens = C;
      qv.n_kv_heads = G;
      qv.head_dim = D;
      qv.src_type = DType::f16;
      qv.src = vh.data() + static_cast<int64_t>(b) * C * G * D;
      qv.src_token_stride = static_cast<int64_t>(G) * D;
      qv.src_head_stride = D;
      qv.dst.format = vf;
      qv.dst.data = hp.v_planes[f].data() + b * hp.v_strides[f].seq;
      qv.dst.strides = hp.v_strides[f];
      if (planar) {
        qv.dst.scales = hp.v_scale_plane.data() + b * hp.v_scale_strides.seq;
        qv.dst.scale_strides = hp.v_scale_strides;
      }
      PACKFA_TRY(quantize_v_host(qv));
    }
  }

  // ---- poison unused slots -------------------------------------------------------------
  if (cfg.poison_unused) {
    const uint16_t nan16 = 0x7e00u;
    auto fill16 = [&](aligned_vector<uint8_t>& buf, const Strides& s, int b, int j, int g, int64_t n16) {
      uint8_t* row = buf.data() + b * s.seq + j * s.slot + g * s.head;
      for (int64_t i = 0; i < n16; ++i) std::memcpy(row + 2 * i, &nan16, 2);
    };
    for (int b = 0; b < B; ++b)
      for (int j = hp.kv_len[b]; j < C; ++j)
        for (int g = 0; g < G; ++g) {
          fill16(hp.k_f16, hp.k_f16_strides, b, j, g, D);
          fill16(hp.k_scales, hp.k_scale_strides, b, j, g, D / cfg.k_block);
          fill16(hp.v_planes[0], hp.v_strides[0], b, j, g, D);
          const uint16_t bfnan = 0x7fc0u;
          uint8_t* brow = hp.v_planes[1].data() + b * hp.v_strides[1].seq + j * hp.v_strides[1].slot + g * hp.v_strides[1].head;
          for (int c = 0; c < D; ++c) std::memcpy(brow + 2 * c, &bfnan, 2);
          if (ggml_v_ok) {
            for (int f = 2; f < 4; ++f) {
              const int bb = f == 2 ? kQ8_0BlockBytes : kQ4_0BlockBytes;
              uint8_t* row = hp.v_planes[f].data() + b * hp.v_strides[f].seq + j * hp.v_strides[f].slot + g * hp.v_strides[f].head;
              for (int blk = 0; blk < D / 32; ++blk) std::memcpy(row + blk * bb, &nan16, 2);
            }
            fill16(hp.v_scale_plane, hp.v_scale_strides, b, j, g, D / 32);
          }
        }
  }

  // ---- positions, mask, sinks ------------------------------------------------------------
  if (cfg.explicit_q_pos) {
    hp.q_pos.resize(static_cast<size_t>(B) * NQ);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < NQ; ++i) hp.q_pos[static_cast<size_t>(b) * NQ + i] = hp.kv_len[b] > 0 ? rng.below(hp.kv_len[b]) : 0;
  }
  if (cfg.mask) {
    hp.mask_row_stride = C;
    hp.mask_seq_stride = static_cast<int64_t>(NQ) * C;
    hp.mask.resize(static_cast<size_t>(B) * NQ * C);
    for (auto& m : hp.mask) m = rng.below(8) == 0 ? 0xfc00u : fp16_from_float(static_cast<float>(-4.0 * rng.uniform()));
  }
  if (cfg.sinks) {
    hp.sinks.resize(H);
    for (auto& s : hp.sinks) s = static_cast<float>(-1.0 + 4.0 * rng.uniform());
  }
  hp.repoint();
  return Status::Ok();
}

}  // namespace packfa
