// tests/gpu/device_problem.hpp — a HostProblem (packfa/testing.hpp) mirrored on the device.
// Each host buffer is copied to its own device allocation; params are re-pointed by offset,
// so every stride stays valid. Optionally a "seq stride" can be inflated for the K/V planes
// (64-bit addressing tests): sequence b then starts at b * big_seq_stride bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "packfa/reference.hpp"
#include "packfa/testing.hpp"

#define CUDA_CHECK(x)                                                                               \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)

namespace packfa::testing {

// The GPU suites' common problem: head dim D, V format, nq query rows, H query and G KV heads,
// kv keys; f32 output and the widest K block D allows (32 when D % 32 == 0, else 16).
inline ProblemConfig decode_config(int D, VFormat vf, int nq, int H, int G, int kv, uint64_t seed) {
  ProblemConfig c;
  c.head_dim = D;
  c.v_format = vf;
  c.nq = nq;
  c.n_q_heads = H;
  c.n_kv_heads = G;
  c.kv_len = kv;
  c.o_type = DType::f32;
  c.k_block = D % 32 == 0 ? 32 : 16;
  c.seed = seed;
  return c;
}

// The reference mode computing Q·K as the kernel for this config does (f16 or int8 products;
// k_rounded: KernelChoice::k_rounded, packed16 K rounded to fp16 tiles, decision "prefill-k-rounded").
inline RefMode reference_mode(const ProblemConfig& c, bool k_rounded = false) {
  if (c.k_format == KFormat::f16) return RefMode::kernel_f16;
  if (c.dot == DotMode::f16) return k_rounded ? RefMode::kernel_f16_k16 : RefMode::kernel_f16;
  return k_rounded ? RefMode::kernel_int8_k16 : RefMode::kernel_int8;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { CUDA_CHECK(cudaMalloc(&ptr, n ? n : 16)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

struct DeviceProblem {
  std::vector<DeviceBuffer> bufs;
  std::vector<std::pair<const void*, std::pair<size_t, void*>>> map;  // host start -> (bytes, device)
  AttnParams params;

  template <class V>
  void* mirror(const V& host) {
    if (host.empty()) return nullptr;
    const size_t n = host.size() * sizeof(host[0]);
    bufs.emplace_back(n);
    CUDA_CHECK(cudaMemcpy(bufs.back().ptr, host.data(), n, cudaMemcpyHostToDevice));
    map.push_back({host.data(), {n, bufs.back().ptr}});
    return bufs.back().ptr;
  }
  // Device address of a host pointer inside one of the mirrored buffers.
  template <class T>
  T* dev(T* host) const {
    if (!host) return nullptr;
    const char* h = reinterpret_cast<const char*>(host);
    for (const auto& m : map) {
      const char* s = static_cast<const char*>(m.first);
      if (h >= s && h < s + m.second.first)
        return reinterpret_cast<T*>(static_cast<char*>(m.second.second) + (h - s));
    }
    throw std::runtime_error("pointer not mirrored");
  }

  // Copies the problem; the output buffer is poisoned (0xFF bytes: NaN in every float type).
  explicit DeviceProblem(const HostProblem& hp, KFormat kf, VFormat vf) {
    mirror(hp.q);
    mirror(hp.o);
    mirror(hp.lse);
    mirror(hp.k_f16);
    mirror(hp.k_payload);
    mirror(hp.k_scales);
    mirror(hp.smooth_scale);
    mirror(hp.v_planes[static_cast<int>(vf)]);
    if (vf == VFormat::q8_0_planar) mirror(hp.v_scale_plane);
    mirror(hp.kv_len);
    mirror(hp.q_pos);
    mirror(hp.mask);
    mirror(hp.sinks);
    const AttnParams hpar = hp.make_params(kf, vf);
    params = hpar;
    params.q.data = dev(hpar.q.data);
    params.o.data = dev(hpar.o.data);
    params.lse = dev(hpar.lse);
    params.k.data = dev(hpar.k.data);
    params.k.scales = dev(hpar.k.scales);
    params.k.smooth_scale = dev(hpar.k.smooth_scale);
    params.v.data = dev(hpar.v.data);
    params.v.scales = dev(hpar.v.scales);
    params.kv_len = dev(hpar.kv_len);
    params.q_pos = dev(hpar.q_pos);
    params.mask = dev(hpar.mask);
    params.sinks = dev(hpar.sinks);
    poison_output(hp);
  }

  void poison_output(const HostProblem& hp) {
    CUDA_CHECK(cudaMemset(params.o.data, 0xff, hp.o.size()));
    if (params.lse) CUDA_CHECK(cudaMemset(params.lse, 0xff, hp.lse.size() * sizeof(float)));
  }

  // Q moved `shift` bytes past a 16-byte boundary (element-aligned, the same strides): the
  // decode kernel's Q set-up then takes its scalar loads (KernelChoice::q_vec false).
  void shift_q(const HostProblem& hp, int shift) {
    DeviceBuffer moved(hp.q.size() + 16);
    CUDA_CHECK(cudaMemcpy(moved.as<char>() + shift, hp.q.data(), hp.q.size(), cudaMemcpyHostToDevice));
    params.q.data = moved.as<char>() + shift;
    bufs.push_back(std::move(moved));
  }

  // Move one K/V plane so that sequence b starts at b * big_stride bytes (>= 2^31 for b >= 1).
  void inflate_seq_stride(const aligned_vector<uint8_t>& host, int64_t host_seq_stride, int batch,
                          int64_t big_stride, const void** field, Strides* strides) {
    DeviceBuffer big(static_cast<size_t>(big_stride) * (batch - 1) + host_seq_stride);
    for (int b = 0; b < batch; ++b)
      CUDA_CHECK(cudaMemcpy(big.as<char>() + b * big_stride, host.data() + b * host_seq_stride, host_seq_stride,
                            cudaMemcpyHostToDevice));
    *field = big.ptr;
    strides->seq = big_stride;
    bufs.push_back(std::move(big));
  }
};

inline std::vector<double> download(DType t, const void* dptr, int64_t n) {
  const size_t esize = t == DType::f32 ? 4 : 2;
  std::vector<uint8_t> raw(n * esize);
  CUDA_CHECK(cudaMemcpy(raw.data(), dptr, raw.size(), cudaMemcpyDeviceToHost));
  std::vector<double> out;
  decode_to_double(t, raw.data(), n, &out);
  return out;
}

inline double rel_err(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (!(num == num)) return 1e30;  // NaN anywhere fails
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace packfa::testing
