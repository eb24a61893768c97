// PDL host side: env switch, per-(device, kernel) capability cache, the launch body.
// Built for CUDA (src/pdl_host.cu) and HIP (src/pdl_host.hip includes this file).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "packfa/launch.hpp"
#include "packfa/pdl.hpp"
#include "gpu_cause.hpp"  // the real cause when no device answers

namespace packfa::pdl {
namespace detail = ::packfa::detail;

namespace {

std::atomic<int> g_env{-1};  // -1 = not parsed yet, else EnvMode
std::string g_env_raw;       // raw value for messages (guarded by g_env_mu)
std::mutex g_env_mu;

EnvMode parse_env(const char* v) {
  if (v == nullptr || *v == '\0') return EnvMode::automatic;
  std::string s(v);
  for (auto& c : s) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  if (s == "0" || s == "off" || s == "false" || s == "no") return EnvMode::off;
  if (s == "1" || s == "on" || s == "true" || s == "yes") return EnvMode::on;
  if (s == "auto") return EnvMode::automatic;
  return EnvMode::invalid;
}

void load_env_locked() {
  const char* v = std::getenv("PACKFA_PDL");
  g_env_raw = v ? v : "";
  g_env.store(static_cast<int>(parse_env(v)), std::memory_order_release);
}

std::string env_raw() {
  std::lock_guard<std::mutex> lk(g_env_mu);
  return g_env_raw;
}

}  // namespace

EnvMode env_mode() {
  int m = g_env.load(std::memory_order_acquire);
  if (m < 0) {
    std::lock_guard<std::mutex> lk(g_env_mu);
    if (g_env.load(std::memory_order_relaxed) < 0) load_env_locked();
    m = g_env.load(std::memory_order_relaxed);
  }
  return static_cast<EnvMode>(m);
}

void reload_env() {
  std::lock_guard<std::mutex> lk(g_env_mu);
  load_env_locked();
}

const char* env_mode_name(EnvMode m) {
  switch (m) {
    case EnvMode::off: return "0";
    case EnvMode::on: return "1";
    case EnvMode::automatic: return "auto";
    case EnvMode::invalid: return "invalid";
  }
  return "?";
}

#if defined(PACKFA_BACKEND_HIP)

Decision query(const void*, int, bool, int) { return Decision{false, "HIP backend", 0, 0, 0}; }
Decision query_current(const void*, bool, int) { return Decision{false, "HIP backend", 0, 0, 0}; }
void clear_cache() {}

#else  // CUDA

namespace {

// What is known about a (device, kernel) pair; never changes for a process.
struct Capability {
  bool ok = false;        // CC >= 9.0 and ptxVersion >= 90
  int cc_major = 0, cc_minor = 0, ptx = 0;
  std::string fail;       // first failing check when !ok
};

std::mutex g_cache_mu;
std::map<std::pair<int, const void*>, Capability> g_cache;
std::atomic<unsigned> g_cache_epoch{0};

Capability probe(const void* kernel, int device) {
  Capability c;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || device < 0 || device >= count) {
    (void)cudaGetLastError();
    c.fail = std::string("no device: ") + (e != cudaSuccess ? detail::gpu_cause(e) : "device ordinal out of range");
    return c;
  }
  e = cudaDeviceGetAttribute(&c.cc_major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&c.cc_minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    c.fail = std::string("cudaDeviceGetAttribute failed: ") + cudaGetErrorString(e);
    return c;
  }
  if (c.cc_major < 9) {
    c.fail = "compute capability " + std::to_string(c.cc_major) + "." + std::to_string(c.cc_minor) + " < 9.0";
    return c;
  }
  // cudaFuncGetAttributes reports for the current device: switch temporarily if needed.
  int cur = -1;
  e = cudaGetDevice(&cur);
  if (e == cudaSuccess && cur != device) e = cudaSetDevice(device);
  cudaFuncAttributes fa{};
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, kernel);
  if (cur >= 0 && cur != device) (void)cudaSetDevice(cur);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    c.fail = std::string("cudaFuncGetAttributes failed: ") + cudaGetErrorString(e);
    return c;
  }
  c.ptx = fa.ptxVersion;
  if (c.ptx < 90) {
    c.fail = "kernel PTX version " + std::to_string(c.ptx) + " < 90";
    return c;
  }
  c.ok = true;
  return c;
}

// Hot path: a per-thread memo of the last pair, validated by the cache epoch.
struct Memo {
  unsigned epoch = ~0u;
  int device = -1;
  const void* kernel = nullptr;
  bool ok = false;
};
thread_local Memo t_memo;

// Probed once per pair, under the lock (so concurrent first launches probe once).
Capability capability(const void* kernel, int device) {
  std::lock_guard<std::mutex> lk(g_cache_mu);
  auto key = std::make_pair(device, kernel);
  auto it = g_cache.find(key);
  if (it == g_cache.end()) it = g_cache.emplace(key, probe(kernel, device)).first;
  return it->second;
}

bool capability_ok(const void* kernel, int device) {
  const unsigned ep = g_cache_epoch.load(std::memory_order_acquire);
  Memo& m = t_memo;
  if (m.epoch == ep && m.device == device && m.kernel == kernel) return m.ok;
  const bool ok = capability(kernel, device).ok;
  m = Memo{ep, device, kernel, ok};
  return ok;
}

// Switch part of the decision (no device calls); fills *why when it refuses.
bool switch_allows(bool aware, int override_, std::string* why) {
  if (!aware) {
    if (why) *why = "kernel not declared PDL-aware";
    return false;
  }
  if (override_ == 0) {
    if (why) *why = "per-call override pdl=0";
    return false;
  }
  if (override_ < 0) {
    const EnvMode m = env_mode();
    if (m == EnvMode::off) {
      if (why) *why = "env PACKFA_PDL=0";
      return false;
    }
    if (m == EnvMode::invalid) {
      if (why) *why = "env PACKFA_PDL='" + env_raw() + "' not understood (0|1|auto)";
      return false;
    }
  }
  return true;
}

}  // namespace

Decision query(const void* kernel, int device, bool aware, int override_) {
  Decision d;
  if (kernel == nullptr) {
    d.why = "null kernel";
    return d;
  }
  if (!switch_allows(aware, override_, &d.why)) return d;
  const Capability c = capability(kernel, device);
  d.cc_major = c.cc_major;
  d.cc_minor = c.cc_minor;
  d.ptx_version = c.ptx;
  if (!c.ok) {
    d.why = c.fail;
    return d;
  }
  d.active = true;
  const char* src = override_ == 1 ? "per-call override pdl=1" : (env_mode() == EnvMode::on ? "env PACKFA_PDL=1" : "auto");
  d.why = std::string("active (") + src + ", CC " + std::to_string(c.cc_major) + "." + std::to_string(c.cc_minor) +
          ", kernel PTX " + std::to_string(c.ptx) + ")";
  return d;
}

Decision query_current(const void* kernel, bool aware, int override_) {
  int dev = 0;
  const cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    Decision d;
    d.why = std::string("no device: ") + detail::gpu_cause(e);
    return d;
  }
  return query(kernel, dev, aware, override_);
}

void clear_cache() {
  std::lock_guard<std::mutex> lk(g_cache_mu);
  g_cache.clear();
  g_cache_epoch.fetch_add(1, std::memory_order_acq_rel);
}

#endif  // backend

}  // namespace packfa::pdl

namespace packfa::detail {

namespace {
std::string dims(dim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}
}  // namespace

Status launch_raw(const void* kernel, dim3 grid, dim3 block, size_t smem_bytes, void* stream, void** args, bool aware,
                  const LaunchOptions& opt) {
#if defined(PACKFA_BACKEND_HIP)
  (void)aware;
  if (opt.decision) *opt.decision = pdl::Decision{false, "HIP backend", 0, 0, 0};
  hipError_t e = hipLaunchKernel(kernel, grid, block, args, smem_bytes, static_cast<hipStream_t>(stream));
  if (e == hipSuccess) e = hipGetLastError();
  else (void)hipGetLastError();
  if (e != hipSuccess)
    return Status(Code::device_error, "launch(grid " + dims(grid) + ", block " + dims(block) + ", smem " +
                                          std::to_string(smem_bytes) + "): " + hipGetErrorString(e));
  return Status::Ok();
#else
  bool active = false;
  if (opt.decision) {
    *opt.decision = pdl::query_current(kernel, aware, opt.pdl);
    active = opt.decision->active;
  } else if (pdl::switch_allows(aware, opt.pdl, nullptr)) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) active = pdl::capability_ok(kernel, dev);
    else (void)cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  std::memset(attr, 0, sizeof(attr));
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem_bytes;
  cfg.stream = static_cast<cudaStream_t>(stream);
  cfg.attrs = active ? attr : nullptr;
  cfg.numAttrs = active ? 1u : 0u;
  cudaError_t e = cudaLaunchKernelExC(&cfg, kernel, args);
  if (e == cudaSuccess) e = cudaGetLastError();
  else (void)cudaGetLastError();
  if (e != cudaSuccess && active) {
    // Fail closed: if the runtime rejects the attribute in this context (some stream kind or
    // driver), a plain launch is always correct. A genuine configuration error fails again.
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(cfg.stream, &cs) != cudaSuccess) (void)cudaGetLastError();
    if (cs != cudaStreamCaptureStatusInvalidated) {
      cfg.attrs = nullptr;
      cfg.numAttrs = 0;
      const cudaError_t e2 = cudaLaunchKernelExC(&cfg, kernel, args);
      const cudaError_t e3 = e2 == cudaSuccess ? cudaGetLastError() : (static_cast<void>(cudaGetLastError()), e2);
      if (e3 == cudaSuccess) {
        if (opt.decision) {
          opt.decision->active = false;
          opt.decision->why = std::string("launch with the PDL attribute failed (") + cudaGetErrorName(e) +
                              "), launched plain";
        }
        return Status::Ok();
      }
      active = false;
      e = e3;
    }
  }
  if (e != cudaSuccess)
    return Status(Code::device_error, "launch(grid " + dims(grid) + ", block " + dims(block) + ", smem " +
                                          std::to_string(smem_bytes) + (active ? ", pdl" : "") + "): " +
                                          cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  return Status::Ok();
#endif
}

}  // namespace packfa::detail
