// demo_gpu: packed16 K + q8_0 V attention on the GPU for a Llama-3.1-8B-like layer
// (32 q / 8 KV heads, D 128), one decode row at `kv` keys; error vs the fp64 reference of
// fp16 K + fp16 V attention; time vs the same kernel over plain fp16 K.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "demo.hpp"
#include "packfa/api.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"

namespace packfa::cli {

namespace {
struct Dev {
  void* p = nullptr;
  Dev(const void* host, size_t n) {
    if (cudaMalloc(&p, n) == cudaSuccess) cudaMemcpy(p, host, n, cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
};
template <class V>
size_t nbytes(const V& v) { return v.size() * sizeof(v[0]); }

double time_us(const AttnParams& p, int runs) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < runs + 5; ++i) {
    cudaEventRecord(a);
    if (!fa_packed16_forward(p, nullptr).ok()) return -1;
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 5) t.push_back(ms * 1000);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int demo_gpu(int kv, int runs) {
  ProblemConfig c;
  c.n_q_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.kv_len = kv;
  c.v_format = VFormat::q8_0;
  c.o_type = DType::f32;
  HostProblem hp;
  Status s = make_problem(c, &hp);
  if (!s.ok()) {
    std::printf("error: %s\n", s.to_string().c_str());
    return 1;
  }
  std::vector<double> truth;
  const AttnParams fp16_host = hp.make_params(KFormat::f16, VFormat::f16);
  reference_attention(fp16_host, RefMode::exact, &truth, nullptr);

  Dev q(hp.q.data(), nbytes(hp.q)), o(hp.o.data(), nbytes(hp.o)), pay(hp.k_payload.data(), nbytes(hp.k_payload)),
      sc(hp.k_scales.data(), nbytes(hp.k_scales)), kf(hp.k_f16.data(), nbytes(hp.k_f16)),
      v8(hp.v_planes[2].data(), nbytes(hp.v_planes[2])), v16(hp.v_planes[0].data(), nbytes(hp.v_planes[0])),
      len(hp.kv_len.data(), nbytes(hp.kv_len));
  AttnParams p = hp.params;
  p.q.data = q.p;
  p.o.data = o.p;
  p.lse = nullptr;
  p.k.data = pay.p;
  p.k.scales = sc.p;
  p.v.data = v8.p;
  p.kv_len = static_cast<const int32_t*>(len.p);
  s = fa_packed16_forward(p, nullptr);
  if (!s.ok()) {
    std::printf("error: %s\n", s.to_string().c_str());
    return 1;
  }
  std::vector<float> out(truth.size());
  cudaMemcpy(out.data(), o.p, out.size() * 4, cudaMemcpyDeviceToHost);
  double n = 0, d = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    n += (out[i] - truth[i]) * (out[i] - truth[i]);
    d += truth[i] * truth[i];
  }
  const double t_packed = time_us(p, runs);
  AttnParams pf = hp.make_params(KFormat::f16, VFormat::f16);
  pf.q.data = q.p;
  pf.o.data = o.p;
  pf.lse = nullptr;
  pf.k.data = kf.p;
  pf.v.data = v16.p;
  pf.kv_len = p.kv_len;
  const double t_f16 = time_us(pf, runs);
  const double kbytes_f16 = 2.0 * 128, kbytes_p16 = 128 + 8;
  std::printf("  layer: 32 q / 8 KV heads, D 128, kv %d, one decode row\n", kv);
  std::printf("  K cache per layer: fp16 %.1f MiB -> packed16 %.1f MiB (%.1f%% saved)\n",
              kv * 8 * kbytes_f16 / 1048576.0, kv * 8 * kbytes_p16 / 1048576.0, 100.0 * (1 - kbytes_p16 / kbytes_f16));
  std::printf("  packed16 K + q8_0 V, int8 Q: rel. error vs fp16 K + fp16 V reference %.2e\n", std::sqrt(n / d));
  std::printf("  time: packed16 K + q8_0 V %.1f us | fp16 K + fp16 V (same kernel family) %.1f us\n", t_packed, t_f16);
  return 0;
}

}  // namespace packfa::cli
