// fp64 CPU reference attention (include/packfa/reference.hpp, docs/format.md).
#include "packfa/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "packfa/pack.hpp"

namespace packfa {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Threads of reference_attention: PACKFA_REF_THREADS if set (>= 1), else the hardware's, at
// most 32.
int reference_threads() {
  static const int n = [] {
    const char* e = std::getenv("PACKFA_REF_THREADS");
    if (e && e[0]) return std::max(1, std::atoi(e));
    return static_cast<int>(std::min(32u, std::max(1u, std::thread::hardware_concurrency())));
  }();
  return n;
}

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Byte offset of key j of sequence b in a plane (api.hpp PagedKV): b·seq + j·slot, or through
// the block table, seq then being the page stride. The KV head's offset is added by the caller.
int64_t key_offset(const AttnParams& p, const Strides& s, int b, int j) {
  if (p.paged.page_size <= 0) return b * s.seq + j * s.slot;
  const int64_t page = p.paged.block_table[b * p.paged.table_stride + j / p.paged.page_size];
  return page * s.seq + static_cast<int64_t>(j % p.paged.page_size) * s.slot;
}

Status check(const AttnParams& p, RefMode mode) {
  if (mode != RefMode::exact && mode != RefMode::kernel_int8 && mode != RefMode::kernel_f16 &&
      mode != RefMode::kernel_int8_k16 && mode != RefMode::kernel_f16_k16)
    return invalid("mode", "unknown RefMode");
  if (p.batch < 1) return invalid("batch", "must be >= 1");
  if (p.nq < 1) return invalid("nq", "must be >= 1");
  if (p.n_kv_heads < 1) return invalid("n_kv_heads", "must be >= 1");
  if (p.n_q_heads < 1 || p.n_q_heads % p.n_kv_heads) return invalid("n_q_heads", "must be a multiple of n_kv_heads");
  if (p.head_dim < 1) return invalid("head_dim", "must be >= 1");
  if (!p.q.data) return invalid("q.data", "is null");
  if (!valid_dtype(p.q.type)) return invalid("q.type", "unknown dtype");
  if (!p.k.data) return invalid("k.data", "is null");
  if (!p.v.data) return invalid("v.data", "is null");
  if (!p.kv_len) return invalid("kv_len", "is null");
  if (p.paged.page_size > 0 && !p.paged.block_table) return invalid("paged.block_table", "is null");
  if (p.alibi_mode != AlibiMode::position && p.alibi_mode != AlibiMode::ggml) return invalid("alibi_mode", "unknown");
  if (p.k.format == KFormat::packed16) {
    if (!p.k.scales) return invalid("k.scales", "is null");
    if (p.k.block != 16 && p.k.block != 32) return invalid("k.block", "must be 16 or 32");
    if (p.head_dim % p.k.block) return invalid("head_dim", "must be a multiple of k.block");
  } else if (p.k.format != KFormat::f16) {
    return invalid("k.format", "unknown format");
  }
  switch (p.v.format) {
    case VFormat::f16:
    case VFormat::bf16: break;
    case VFormat::q8_0:
    case VFormat::q4_0:
    case VFormat::q8_0_planar:
      if (p.head_dim % kGgmlBlock) return invalid("head_dim", "q8_0/q4_0/q8_0_planar V needs a multiple of 32");
      if (p.v.format == VFormat::q8_0_planar && !p.v.scales) return invalid("v.scales", "is null");
      break;
    default: return invalid("v.format", "unknown format");
  }
  if (p.window < 0) return invalid("window", "must be >= 0");
  if (!(p.softcap >= 0.0f)) return invalid("softcap", "must be >= 0");
  if (!(p.scale >= 0.0f)) return invalid("scale", "must be >= 0");
  for (int b = 0; b < p.batch; ++b) {
    if (p.kv_len[b] < 0) return invalid("kv_len", "kv_len[" + std::to_string(b) + "] is negative");
    if (p.max_kv_len > 0 && p.kv_len[b] > p.max_kv_len)
      return invalid("kv_len", "kv_len[" + std::to_string(b) + "] exceeds max_kv_len");
  }
  return Status::Ok();
}

// Everything about one query row that does not depend on the key.
struct QRow {
  std::vector<double> qd;  // exact: q (times s) in double
  std::vector<float> qf;   // fp32 x (times s)
  std::vector<int8_t> qi;  // int8 Q
  std::vector<float> qscale;
  std::vector<double> qh;  // fp16-rounded Q (kernel_int8_k16: the rescaled int8 values)
  double qh_mul = 1.0;     // kernel_int8_k16: the row's largest block scale
};

void load_q(const AttnParams& p, RefMode mode, int b, int i, int h, QRow* r) {
  const int d = p.head_dim, g = h / (p.n_q_heads / p.n_kv_heads);
  const int64_t base = b * p.q.seq_stride + i * p.q.row_stride + h * p.q.head_stride;
  const float* s = p.k.smooth_scale ? p.k.smooth_scale + static_cast<int64_t>(g) * d : nullptr;
  r->qd.resize(d);
  r->qf.resize(d);
  for (int c = 0; c < d; ++c) {
    const float x = load_as_float(p.q.type, p.q.data, base + c);
    r->qd[c] = s ? static_cast<double>(x) * static_cast<double>(s[c]) : static_cast<double>(x);
    r->qf[c] = s ? x * s[c] : x;
  }
  if (mode == RefMode::exact) return;
  const bool int8 = mode == RefMode::kernel_int8 || mode == RefMode::kernel_int8_k16;
  if (int8 && p.k.format == KFormat::packed16) {
    r->qi.resize(d);
    r->qscale.resize((d + kQBlock - 1) / kQBlock);
    quantize_q_int8(r->qf.data(), d, r->qi.data(), r->qscale.data());
    if (mode == RefMode::kernel_int8_k16) {  // as the prefill kernel's load_q rescales its Q tile
      float qmax = 0.0f;
      for (float s : r->qscale) qmax = std::max(qmax, s);
      r->qh.resize(d);
      for (int c = 0; c < d; ++c) {
        const float ratio = qmax > 0.0f ? r->qscale[c / kQBlock] / qmax : 0.0f;
        r->qh[c] = fp16_to_float(fp16_from_float(static_cast<float>(r->qi[c]) * ratio));
      }
      r->qh_mul = qmax;
    }
  } else {
    r->qh.resize(d);
    for (int c = 0; c < d; ++c) r->qh[c] = fp16_to_float(fp16_from_float(r->qf[c]));
  }
}

double raw_score(const AttnParams& p, RefMode mode, const QRow& r, int b, int j, int g) {
  const int d = p.head_dim;
  const char* row = static_cast<const char*>(p.k.data) + key_offset(p, p.k.data_strides, b, j) +
                    g * p.k.data_strides.head;
  if (p.k.format == KFormat::f16) {
    const uint16_t* kh = reinterpret_cast<const uint16_t*>(row);
    const std::vector<double>& q = mode == RefMode::exact ? r.qd : r.qh;
    double acc = 0.0;
    for (int c = 0; c < d; ++c) acc += q[c] * static_cast<double>(fp16_to_float(kh[c]));
    return acc;
  }
  const int8_t* kq = reinterpret_cast<const int8_t*>(row);
  const uint16_t* ks = reinterpret_cast<const uint16_t*>(static_cast<const char*>(p.k.scales) +
                                                         key_offset(p, p.k.scale_strides, b, j) +
                                                         g * p.k.scale_strides.head);
  const int B = p.k.block;
  double acc = 0.0;
  for (int blk = 0; blk < d / B; ++blk) {
    const double kd = fp16_to_float(ks[blk]);
    const int c0 = blk * B;
    if (mode == RefMode::kernel_int8_k16 || mode == RefMode::kernel_f16_k16) {
      double part = 0.0;  // K rounded once to fp16, as the prefill kernel's producer writes it
      for (int c = c0; c < c0 + B; ++c)
        part += r.qh[c] * static_cast<double>(fp16_to_float(fp16_from_float(static_cast<float>(kq[c]) * static_cast<float>(kd))));
      acc += part * r.qh_mul;
    } else if (mode == RefMode::kernel_int8) {
      int64_t isum = 0;
      for (int c = c0; c < c0 + B; ++c) isum += static_cast<int64_t>(r.qi[c]) * kq[c];
      acc += static_cast<double>(isum) * static_cast<double>(r.qscale[c0 / kQBlock]) * kd;
    } else if (mode == RefMode::kernel_f16) {
      double part = 0.0;
      for (int c = c0; c < c0 + B; ++c) part += r.qh[c] * kq[c];
      acc += kd * part;
    } else {
      for (int c = c0; c < c0 + B; ++c) acc += r.qd[c] * (kq[c] * kd);
    }
  }
  return acc;
}

// Logits of one row into out (size kv_len[b]); returns the sink logit or -inf.
double row_logits(const AttnParams& p, RefMode mode, QRow* r, int b, int i, int h, std::vector<double>* out) {
  const int L = p.kv_len[b];
  const int g = h / (p.n_q_heads / p.n_kv_heads);
  load_q(p, mode, b, i, h, r);
  const int64_t pos = p.q_pos ? p.q_pos[static_cast<int64_t>(b) * p.nq + i] : static_cast<int64_t>(L) - p.nq + i;
  const double scale = p.scale > 0.0f ? static_cast<double>(p.scale) : 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  const double slope = p.alibi_max_bias > 0.0f ? alibi_slope(h, p.n_q_heads, p.alibi_max_bias) : 0.0;
  out->assign(L, kNegInf);
  for (int j = 0; j < L; ++j) {
    if (p.causal && j > pos) continue;
    if (p.window > 0 && j <= pos - p.window) continue;
    double m = 0.0;
    if (p.mask) {
      m = fp16_to_float(p.mask[b * p.mask_seq_stride + i * p.mask_row_stride + h * p.mask_head_stride + j]);
      if (std::isinf(m) && m < 0) continue;
    }
    double s = raw_score(p, mode, *r, b, j, g) * scale;
    if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
    if (p.alibi_max_bias > 0.0f && p.alibi_mode == AlibiMode::ggml) {
      s += slope * m;  // ggml_soft_max_ext / flash_attn_ext: the mask scaled by the head's slope
    } else {
      s += m;
      if (p.alibi_max_bias > 0.0f) s += slope * static_cast<double>(j - pos);
    }
    (*out)[j] = s;
  }
  return p.sinks ? static_cast<double>(p.sinks[h]) : kNegInf;
}

}  // namespace

const char* ref_mode_name(RefMode m) {
  switch (m) {
    case RefMode::exact: return "exact";
    case RefMode::kernel_int8: return "kernel_int8";
    case RefMode::kernel_f16: return "kernel_f16";
    case RefMode::kernel_int8_k16: return "kernel_int8_k16";
    case RefMode::kernel_f16_k16: return "kernel_f16_k16";
  }
  return "unknown";
}

double alibi_slope(int h, int n_q_heads, float max_bias) {
  const int n2 = 1 << static_cast<int>(std::floor(std::log2(static_cast<double>(n_q_heads))));
  const double m0 = std::pow(2.0, -static_cast<double>(max_bias) / n2);
  const double m1 = std::pow(2.0, -static_cast<double>(max_bias) / 2.0 / n2);
  return h < n2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n2) + 1);
}

void quantize_q_int8(const float* x, int n, int8_t* q, float* qd) {
  for (int b0 = 0, blk = 0; b0 < n; b0 += kQBlock, ++blk) {
    const int e = b0 + kQBlock < n ? b0 + kQBlock : n;
    float amax = 0.0f;
    for (int c = b0; c < e; ++c) amax = std::fmax(amax, std::fabs(x[c]));
    if (amax == 0.0f) {
      qd[blk] = 0.0f;
      for (int c = b0; c < e; ++c) q[c] = 0;
      continue;
    }
    qd[blk] = amax / 127.0f;
    const float inv = 127.0f / amax;
    for (int c = b0; c < e; ++c) {
      int v = static_cast<int>(std::roundf(x[c] * inv));
      v = v < -127 ? -127 : (v > 127 ? 127 : v);
      q[c] = static_cast<int8_t>(v);
    }
  }
}

double log_sum_exp(const double* x, int n) {
  double mx = kNegInf;
  for (int i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  if (std::isinf(mx) && mx < 0) return kNegInf;
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  return mx + std::log(s);
}

void softmax(const double* x, int n, double* p) {
  const double l = log_sum_exp(x, n);
  for (int i = 0; i < n; ++i) p[i] = (std::isinf(l) && l < 0) ? 0.0 : std::exp(x[i] - l);
}

Status reference_logits(const AttnParams& p, RefMode mode, int b, int i, int h, std::vector<double>* logits,
                        double* sink) {
  PACKFA_TRY(check(p, mode));
  if (b < 0 || b >= p.batch) return invalid("b", "out of range");
  if (i < 0 || i >= p.nq) return invalid("i", "out of range");
  if (h < 0 || h >= p.n_q_heads) return invalid("h", "out of range");
  if (!logits) return invalid("logits", "is null");
  QRow r;
  const double s = row_logits(p, mode, &r, b, i, h, logits);
  if (sink) *sink = s;
  return Status::Ok();
}

// Rows (sequence, query, head) are independent and each writes only its own O row and LSE,
// so they run on several threads; every row's arithmetic is the same on any thread count (the
// results are bitwise identical). Why: the GPU tests check every call against this reference,
// and one thread made the attention suite outlast a 10-minute device call.
Status reference_attention(const AttnParams& p, RefMode mode, std::vector<double>* o, std::vector<double>* lse,
                           int threads) {
  PACKFA_TRY(check(p, mode));
  const int d = p.head_dim, H = p.n_q_heads, group = p.n_q_heads / p.n_kv_heads;
  if (o) o->assign(static_cast<size_t>(p.batch) * p.nq * H * d, 0.0);
  if (lse) lse->assign(static_cast<size_t>(p.batch) * p.nq * H, kNegInf);
  auto rows = [&](int64_t r0, int64_t r1) {
    QRow r;
    std::vector<double> logits, vrow(d);
    for (int64_t row = r0; row < r1; ++row) {
      const int h = static_cast<int>(row % H), i = static_cast<int>(row / H % p.nq);
      const int b = static_cast<int>(row / H / p.nq);
      const double sink = row_logits(p, mode, &r, b, i, h, &logits);
      const int L = static_cast<int>(logits.size());
      double mx = sink;
      for (double s : logits) mx = std::fmax(mx, s);
      if (std::isinf(mx) && mx < 0) continue;  // nothing visible, no sink: O = 0, LSE = -inf
      double denom = std::exp(sink - mx);
      for (double s : logits) denom += std::exp(s - mx);
      const double l = mx + std::log(denom);
      if (lse) (*lse)[row] = l;
      if (!o) continue;
      double* out = o->data() + row * d;
      const int g = h / group;
      for (int j = 0; j < L; ++j) {
        if (std::isinf(logits[j]) && logits[j] < 0) continue;
        const double pj = std::exp(logits[j] - l);
        const char* vr = static_cast<const char*>(p.v.data) + key_offset(p, p.v.strides, b, j) + g * p.v.strides.head;
        const char* vsr = p.v.scales ? static_cast<const char*>(p.v.scales) + key_offset(p, p.v.scale_strides, b, j) +
                                           g * p.v.scale_strides.head
                                     : nullptr;
        dequantize_v_row(p.v.format, vr, vsr, d, vrow.data());
        for (int c = 0; c < d; ++c) out[c] += pj * vrow[c];
      }
    }
  };
  const int64_t n_rows = static_cast<int64_t>(p.batch) * p.nq * H;
  // Automatic: about a million key visits a thread at least (below that, starting threads
  // costs more than it saves).
  const int64_t work = n_rows * std::max(1, p.max_kv_len);
  const int64_t want = threads > 0 ? std::min<int64_t>(threads, n_rows)
                                   : std::min<int64_t>({reference_threads(), n_rows, std::max<int64_t>(1, work >> 20)});
  if (want <= 1) {
    rows(0, n_rows);
    return Status::Ok();
  }
  std::vector<std::thread> pool;
  try {
    for (int64_t t = 1; t < want; ++t) pool.emplace_back(rows, n_rows * t / want, n_rows * (t + 1) / want);
  } catch (const std::system_error&) {  // no threads to be had: the rows left run on this one
  }
  const int64_t started = static_cast<int64_t>(pool.size()) + 1;
  rows(0, n_rows / want);
  for (int64_t t = started; t < want; ++t) rows(n_rows * t / want, n_rows * (t + 1) / want);
  for (std::thread& th : pool) th.join();
  return Status::Ok();
}

void naive_attention(int nq, int nk, int d, int dv, const double* q, const double* k, const double* v, double scale,
                     double* o, double* lse, double* probs) {
  std::vector<double> s(nk), pr(nk);
  for (int i = 0; i < nq; ++i) {
    for (int j = 0; j < nk; ++j) {
      double acc = 0.0;
      for (int c = 0; c < d; ++c) acc += q[i * d + c] * k[j * d + c];
      s[j] = acc * scale;
    }
    double mx = kNegInf;
    for (int j = 0; j < nk; ++j) mx = std::fmax(mx, s[j]);
    double sum = 0.0;
    for (int j = 0; j < nk; ++j) sum += std::exp(s[j] - mx);
    for (int j = 0; j < nk; ++j) pr[j] = std::exp(s[j] - mx) / sum;
    if (lse) lse[i] = mx + std::log(sum);
    if (probs)
      for (int j = 0; j < nk; ++j) probs[i * nk + j] = pr[j];
    if (o)
      for (int c = 0; c < dv; ++c) {
        double acc = 0.0;
        for (int j = 0; j < nk; ++j) acc += pr[j] * v[j * dv + c];
        o[i * dv + c] = acc;
      }
  }
}

}  // namespace packfa
