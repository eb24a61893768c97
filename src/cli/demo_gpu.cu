// demo_gpu: packed16 K + q8_0 V attention on the GPU for a Llama-3.1-8B-like layer
// (32 q / 8 KV heads, D 128), one decode row at `kv` keys; error vs the fp64 reference of
// fp16 K + fp16 V attention; time vs the in-house f16 K + f16 V path of the same library.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
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
  cudaError_t e = cudaSuccess;
  Dev(const void* host, size_t n) {
    e = cudaMalloc(&p, n);
    if (e == cudaSuccess) e = cudaMemcpy(p, host, n, cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
};
template <class V>
size_t nbytes(const V& v) { return v.size() * sizeof(v[0]); }

// Median event time of `runs` calls after 5 warm-ups; -1 when a call fails (*s says why).
double time_us(const AttnParams& p, int runs, Status* s) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < runs + 5; ++i) {
    cudaEventRecord(a);
    if (!(*s = fa_packed16_forward(p, nullptr)).ok()) break;
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 5) t.push_back(ms * 1000);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!s->ok() || t.empty()) return -1;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

int demo_gpu(int kv, int runs, GpuDemoResult* r) {
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
    r->error = s.to_string();
    return 1;
  }
  std::vector<double> truth;
  const AttnParams fp16_host = hp.make_params(KFormat::f16, VFormat::f16);
  if (!(s = reference_attention(fp16_host, RefMode::exact, &truth, nullptr)).ok()) {
    r->error = s.to_string();
    return 1;
  }

  Dev q(hp.q.data(), nbytes(hp.q)), o(hp.o.data(), nbytes(hp.o)), pay(hp.k_payload.data(), nbytes(hp.k_payload)),
      sc(hp.k_scales.data(), nbytes(hp.k_scales)), kf(hp.k_f16.data(), nbytes(hp.k_f16)),
      v8(hp.v_planes[2].data(), nbytes(hp.v_planes[2])), v16(hp.v_planes[0].data(), nbytes(hp.v_planes[0])),
      len(hp.kv_len.data(), nbytes(hp.kv_len));
  for (const Dev* d : {&q, &o, &pay, &sc, &kf, &v8, &v16, &len}) {
    if (d->e != cudaSuccess) {
      r->error = std::string("device buffers: ") + cudaGetErrorString(d->e);
      return 1;
    }
  }
  AttnParams p = hp.params;
  p.q.data = q.p;
  p.o.data = o.p;
  p.lse = nullptr;
  p.k.data = pay.p;
  p.k.scales = sc.p;
  p.v.data = v8.p;
  p.kv_len = static_cast<const int32_t*>(len.p);
  KernelChoice choice;
  if (select_kernel(p, 0, &choice).ok())
    r->kernel = choice.name + ", " + std::to_string(choice.num_splits) + " split(s)" +
                (choice.combine != "none" ? " + " + choice.combine + " combine" : "");
  if (!(s = fa_packed16_forward(p, nullptr)).ok()) {
    r->error = s.to_string();
    return 1;
  }
  std::vector<float> out(truth.size());
  cudaError_t e = cudaMemcpy(out.data(), o.p, out.size() * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    r->error = std::string("kernel / copy back: ") + cudaGetErrorString(e);
    return 1;
  }
  double n = 0, d = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    n += (out[i] - truth[i]) * (out[i] - truth[i]);
    d += truth[i] * truth[i];
  }
  r->rel_err = std::sqrt(n / d);
  if ((r->us_packed = time_us(p, runs, &s)) < 0) {
    r->error = s.to_string();
    return 1;
  }
  AttnParams pf = hp.make_params(KFormat::f16, VFormat::f16);
  pf.q.data = q.p;
  pf.o.data = o.p;
  pf.lse = nullptr;
  pf.k.data = kf.p;
  pf.v.data = v16.p;
  pf.kv_len = p.kv_len;
  r->us_f16 = time_us(pf, runs, &s);
  if (r->us_f16 < 0) r->f16_note = s.to_string();  // e.g. not compiled in a lean build
  return 0;
}

}  // namespace packfa::cli
