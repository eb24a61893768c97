// packfa/testing.hpp — dense host test problems for the reference and the GPU tests.
//
// make_problem(cfg, &hp) generates Q, K, V (synth.hpp data or plain Gaussian), stores K in
// every K format and V in every V format, fills kv_len / q_pos / mask / sinks / smoothing,
// and builds hp.params pointing at hp's HOST buffers. GPU tests copy the byte buffers to the
// device and re-point a copy of the params (same strides: every stride below is relative to
// the buffer start, so the layout is unchanged by the copy):
//
//   params field        buffer                 layout / strides
//   q.data              q        (cfg.q_type)  [batch][nq][n_q_heads][D], element strides
//                                              seq = nq*H*D, row = H*D, head = D
//   o.data              o        (cfg.o_type)  same layout as q (o_type elements)
//   lse                 lse      (float)       [batch][nq][n_q_heads]
//   k.data (packed16)   k_payload (int8)       [batch][capacity][n_kv_heads] rows of D bytes,
//   k.scales            k_scales  (fp16)       rows of D/B fp16; strides k_payload_strides /
//                                              k_scale_strides (bytes; slot = G*row + pad)
//   k.data (f16)        k_f16     (fp16)       rows of 2*D bytes, k_f16_strides
//   k.smooth_scale      smooth_scale (float)   [n_kv_heads][D] (packed16 only; null if off)
//   v.data              v_planes[int(fmt)]     rows of v_row_bytes(fmt, D), v_strides[int(fmt)]
//   v.scales            v_scale_plane (fp16)   q8_0_planar: rows of D/32 fp16, v_scale_strides
//   kv_len              kv_len   (int32)       [batch]
//   q_pos               q_pos    (int32)       [batch][nq] (null unless cfg.explicit_q_pos)
//   mask                mask     (fp16)        [batch][nq][capacity]: row stride capacity,
//                                              seq stride nq*capacity (null unless cfg.mask)
//   sinks               sinks    (float)       [n_q_heads] (null unless cfg.sinks)
//
// Slot j of sequence b holds that sequence's token j (j < kv_len[b]); slots kv_len[b] ..
// capacity-1 hold valid random rows (or NaN scales/values with cfg.poison_unused, to catch
// kernels that read past kv_len without zeroing). Every buffer start is 64-byte aligned.
// HostProblem is movable (buffers keep their addresses) but not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/status.hpp"

namespace packfa {

template <class T, std::size_t Align = 64>
struct AlignedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, Align>;
  };
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, Align>&) {}
  T* allocate(std::size_t n) {
    void* p = ::operator new(n * sizeof(T), std::align_val_t(Align));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(Align)); }
  template <class U>
  bool operator==(const AlignedAllocator<U, Align>&) const { return true; }
  template <class U>
  bool operator!=(const AlignedAllocator<U, Align>&) const { return false; }
};
template <class T>
using aligned_vector = std::vector<T, AlignedAllocator<T>>;

struct ProblemConfig {
  int batch = 1;
  int nq = 1;                  // query rows per sequence
  int n_q_heads = 8;
  int n_kv_heads = 2;
  int head_dim = 128;
  int kv_len = 256;            // every sequence's length, unless kv_lens is given
  std::vector<int> kv_lens;    // per-sequence lengths (varlen); size batch
  int capacity = 0;            // slots per sequence; 0 = the largest kv_len (at least 1)
  DType q_type = DType::f16;
  DType o_type = DType::f16;
  KFormat k_format = KFormat::packed16;  // which K plane params uses
  int k_block = 32;
  VFormat v_format = VFormat::f16;       // which V plane params uses
  DotMode dot = DotMode::int8;
  float scale = 0.0f;
  bool causal = true;
  int window = 0;
  bool mask = false;           // random fp16 additive mask in [-4, 0], about 1 in 8 entries -inf
  float softcap = 0.0f;
  bool sinks = false;          // sinks[h] uniform in [-1, 3]
  float alibi_max_bias = 0.0f;
  bool explicit_q_pos = false; // q_pos[b][i] random in [0, kv_len[b] - 1]
  bool smooth_shift = false;   // packed16 stores (k - m) / s with m, s from compute_smoothing
  bool smooth_scale = false;   //   over all generated keys and queries
  double smooth_alpha = 0.5;
  bool realistic = true;       // synth.hpp keys with outliers/offsets; false: all N(0, 1)
  int64_t slot_pad_bytes = 0;  // extra bytes after each slot in every K/V plane (multiple of 16)
  bool poison_unused = false;  // NaN scales / values in slots >= kv_len[b]
  bool want_lse = true;        // params.lse points at the lse buffer
  uint64_t seed = 1;
};

struct HostProblem {
  ProblemConfig cfg;
  int capacity = 0, max_kv_len = 0;

  aligned_vector<uint8_t> q;      // cfg.q_type
  std::vector<float> q_values;    // the stored Q as float, [batch][nq][H][D]
  aligned_vector<uint8_t> o;      // cfg.o_type, zero-filled
  aligned_vector<float> lse;

  std::vector<float> k_values;    // the true K (fp16-representable), [batch][capacity][G][D]
  aligned_vector<uint8_t> k_f16;  Strides k_f16_strides;
  aligned_vector<uint8_t> k_payload;  Strides k_payload_strides;
  aligned_vector<uint8_t> k_scales;   Strides k_scale_strides;
  aligned_vector<float> smooth_shift;  // [G][D] or empty
  aligned_vector<float> smooth_scale;  // [G][D] or empty
  int64_t pack_nonfinite = 0, pack_overflow = 0;

  std::vector<float> v_values;    // the true V (fp16-representable), [batch][capacity][G][D]
  aligned_vector<uint8_t> v_planes[kNumVFormats];  // indexed by int(VFormat): f16, bf16, q8_0, q4_0, q8_0_planar
  Strides v_strides[kNumVFormats];
  aligned_vector<uint8_t> v_scale_plane;  Strides v_scale_strides;  // q8_0_planar's scales

  aligned_vector<int32_t> kv_len;
  aligned_vector<int32_t> q_pos;
  aligned_vector<uint16_t> mask;
  int64_t mask_seq_stride = 0, mask_row_stride = 0;
  aligned_vector<float> sinks;

  AttnParams params;  // cfg.k_format / cfg.v_format, pointing at the buffers above

  HostProblem() = default;
  HostProblem(HostProblem&&) = default;
  HostProblem& operator=(HostProblem&&) = default;
  HostProblem(const HostProblem&) = delete;
  HostProblem& operator=(const HostProblem&) = delete;

  // Params for any K / V format held here (f16 K is the unsmoothed true K; packed16 K
  // carries smooth_scale when smoothing is on). Host pointers.
  AttnParams make_params(KFormat kf, VFormat vf) const;
  void repoint() { params = make_params(cfg.k_format, cfg.v_format); }
};

Status make_problem(const ProblemConfig& cfg, HostProblem* out);

// Decode n elements of type t (f32/f16/bf16) to double (e.g. the O buffer after a kernel).
void decode_to_double(DType t, const void* data, int64_t n, std::vector<double>* out);

}  // namespace packfa
