// A consumer of packfa::packfa (dispatcher + kernels) from an install prefix: links and calls
// fa_packed16_forward. Without a usable GPU the call must fail with a Status that names the
// cause (no backend in this build / no driver or GPU visible) and this program exits 0; with
// a GPU it runs the kernel on a small problem and compares with the CPU reference.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <dirent.h>

#include <packfa/api.hpp>
#include <packfa/reference.hpp>
#include <packfa/testing.hpp>
#include <packfa/version.hpp>
#if defined(PACKFA_HAS_CUDA)
#include <cuda_runtime.h>
#endif

#define EXPECT(cond)                                                               \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "consumer_forward: FAILED %s (line %d)\n", #cond, __LINE__); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

namespace {
bool nvidia_device_nodes() {
  DIR* d = opendir("/dev");
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    found = found || (n.size() > 6 && n.compare(0, 6, "nvidia") == 0 && n[6] >= '0' && n[6] <= '9');
  }
  closedir(d);
  return found;
}

#if defined(PACKFA_HAS_CUDA)
void* upload(const void* host, size_t n) {
  void* p = nullptr;
  if (cudaMalloc(&p, n) != cudaSuccess) return nullptr;
  if (cudaMemcpy(p, host, n, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
  return p;
}
#endif
}  // namespace

int main() {
  EXPECT(std::string(PACKFA_VERSION_STRING) == PACKFA_CONSUMER_VERSION);  // header = the package's version
  packfa::ProblemConfig c;  // 8 q / 2 KV heads, D 128, packed16 K, q8_0 V, 300 keys
  c.kv_len = 300;
  c.v_format = packfa::VFormat::q8_0;
  c.o_type = packfa::DType::f32;
  packfa::HostProblem hp;
  EXPECT(packfa::make_problem(c, &hp).ok());
  const packfa::DeviceInfo dev = packfa::device_info(0);
  std::printf("backend %s, device: %s\n", dev.backend.c_str(), dev.present ? dev.name.c_str() : dev.why_absent.c_str());

  if (!dev.present) {
    // Host pointers are fine here: without a device nothing is dereferenced.
    const packfa::Status s = packfa::fa_packed16_forward(hp.params, nullptr);
    std::printf("fa_packed16_forward without a GPU: %s\n", s.to_string().c_str());
    EXPECT(!s.ok());
    EXPECT(!s.message().empty());
    if (dev.backend == "none") {
      EXPECT(s.code() == packfa::Code::not_compiled);
      EXPECT(s.message().find("without a GPU backend") != std::string::npos);
    } else {
      EXPECT(s.code() == packfa::Code::device_error);
      if (!nvidia_device_nodes()) {  // no driver / GPU: the message must say so, not "driver insufficient"
        EXPECT(s.message().find("no NVIDIA driver / no GPU visible") != std::string::npos);
        EXPECT(dev.why_absent.find("no NVIDIA driver / no GPU visible") != std::string::npos);
      }
    }
    std::printf("packfa consumer_forward OK (no GPU: the expected non-ok Status)\n");
    return 0;
  }

#if defined(PACKFA_HAS_CUDA)
  packfa::AttnParams p = hp.params;
  p.q.data = upload(hp.q.data(), hp.q.size());
  p.o.data = upload(hp.o.data(), hp.o.size());
  p.k.data = upload(hp.k_payload.data(), hp.k_payload.size());
  p.k.scales = upload(hp.k_scales.data(), hp.k_scales.size());
  p.v.data = upload(hp.v_planes[2].data(), hp.v_planes[2].size());
  p.kv_len = static_cast<const int32_t*>(upload(hp.kv_len.data(), hp.kv_len.size() * sizeof(int32_t)));
  p.lse = nullptr;
  EXPECT(p.q.data && p.o.data && p.k.data && p.k.scales && p.v.data && p.kv_len);
  const packfa::Status s = packfa::fa_packed16_forward(p, nullptr);
  std::printf("fa_packed16_forward on %s: %s\n", dev.name.c_str(), s.to_string().c_str());
  EXPECT(s.ok());
  std::vector<float> out(hp.o.size() / sizeof(float));
  EXPECT(cudaMemcpy(out.data(), p.o.data, hp.o.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  std::vector<double> ref;
  EXPECT(packfa::reference_attention(hp.params, packfa::RefMode::kernel_int8, &ref, nullptr).ok());
  EXPECT(ref.size() == out.size());
  double n = 0, d = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    n += (out[i] - ref[i]) * (out[i] - ref[i]);
    d += ref[i] * ref[i];
  }
  std::printf("rel. error vs the CPU reference of the kernel's math: %.2e\n", std::sqrt(n / d));
  EXPECT(std::sqrt(n / d) < 1e-3);  // same math: only fp32 summation order differs
  std::printf("packfa consumer_forward OK (GPU)\n");
  return 0;
#else
  std::fprintf(stderr, "consumer_forward: a device is present but the backend is '%s'\n", dev.backend.c_str());
  return 1;
#endif
}
