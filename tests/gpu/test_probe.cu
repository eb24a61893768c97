// GPU probe: the portable 4-way int8 dot (arch::dot4_i8) and wave reductions (arch::group_sum)
// against a CPU computation, exact equality. Kernels: include/packfa/device/probe.hpp.
#include <cstdint>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "packfa/device/probe.hpp"
#include "packfa_catch.hpp"

namespace {

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { REQUIRE(cudaMalloc(&p, (n ? n : 1) * sizeof(T)) == cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <class T>
void upload(T* d, const std::vector<T>& h) {
  REQUIRE(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
}
template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

int32_t cpu_dot4(int32_t a, int32_t b, int32_t c) {
  int64_t acc = c;
  for (int k = 0; k < 4; ++k) {
    const auto ab = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * k));
    const auto bb = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * k));
    acc += static_cast<int64_t>(ab) * bb;
  }
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc)));  // wraps like the hardware
}

int32_t pack_bytes(int8_t b0, int8_t b1, int8_t b2, int8_t b3) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint8_t>(b0)) |
                              static_cast<uint32_t>(static_cast<uint8_t>(b1)) << 8 |
                              static_cast<uint32_t>(static_cast<uint8_t>(b2)) << 16 |
                              static_cast<uint32_t>(static_cast<uint8_t>(b3)) << 24);
}

void check_dot4(const std::vector<int>& a, const std::vector<int>& b, const std::vector<int>& c) {
  const int n = static_cast<int>(a.size());
  DeviceBuffer<int> da(n), db(n), dc(n), dout(n);
  upload(da.p, a);
  upload(db.p, b);
  upload(dc.p, c);
  const packfa::Status s = packfa::probe_dot4(da.p, db.p, dc.p, dout.p, n, nullptr);
  INFO(s.to_string());
  REQUIRE(s.ok());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<int> out = download(dout.p, n);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const int want = cpu_dot4(a[i], b[i], c[i]);
    if (out[i] != want && bad++ < 8) {
      INFO("i=" << i << " a=" << a[i] << " b=" << b[i] << " c=" << c[i] << " gpu=" << out[i] << " cpu=" << want);
      CHECK(out[i] == want);
    }
  }
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("probe: dot4_i8 on random signed bytes matches the CPU exactly", "[gpu][probe]") {
  std::mt19937 rng(20240601u);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_int_distribution<int> acc(-(1 << 30), 1 << 30);
  const int n = (1 << 16) + 37;  // not a multiple of the block size
  std::vector<int> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = pack_bytes(byte(rng), byte(rng), byte(rng), byte(rng));
    b[i] = pack_bytes(byte(rng), byte(rng), byte(rng), byte(rng));
    c[i] = acc(rng);
  }
  check_dot4(a, b, c);
}

TEST_CASE("probe: dot4_i8 edge bytes (-128, -1, 0, 1, 127) and accumulator wrap", "[gpu][probe]") {
  const int8_t edge[] = {-128, -127, -1, 0, 1, 127};
  std::vector<int> a, b, c;
  for (int8_t x : edge)
    for (int8_t y : edge) {
      a.push_back(pack_bytes(x, x, x, x));
      b.push_back(pack_bytes(y, y, y, y));
      c.push_back(0);
      a.push_back(pack_bytes(x, y, x, y));
      b.push_back(pack_bytes(y, x, -1, 1));
      c.push_back(-7);
    }
  // -128 * -128 * 4 = 65536 on top of INT32_MAX - 10: wraps (no clamp).
  a.push_back(pack_bytes(-128, -128, -128, -128));
  b.push_back(pack_bytes(-128, -128, -128, -128));
  c.push_back(INT32_MAX - 10);
  check_dot4(a, b, c);
}

TEST_CASE("probe: group_sum over 2..32 lanes matches the CPU exactly", "[gpu][probe]") {
  std::mt19937 rng(7u);
  std::uniform_int_distribution<int> small(-100, 100);  // integer-valued: float sums are exact
  const int n = 4096 + 19;                              // the last wave is partly past n
  std::vector<float> in(n);
  for (float& v : in) v = static_cast<float>(small(rng));
  DeviceBuffer<float> din(n), dout(n);
  upload(din.p, in);
  for (int width : {2, 4, 8, 16, 32}) {
    INFO("width " << width);
    REQUIRE(cudaMemset(dout.p, 0xff, n * sizeof(float)) == cudaSuccess);
    const packfa::Status s = packfa::probe_group_sum(din.p, dout.p, n, width, nullptr);
    INFO(s.to_string());
    REQUIRE(s.ok());
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const std::vector<float> out = download(dout.p, n);
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      float want = 0.0f;
      for (int j = i / width * width; j < i / width * width + width && j < n; ++j) want += in[j];
      if (out[i] != want && bad++ < 8) {
        INFO("i=" << i << " gpu=" << out[i] << " cpu=" << want);
        CHECK(out[i] == want);
      }
    }
    REQUIRE(bad == 0);
  }
}

TEST_CASE("probe: bad arguments are reported, not launched", "[gpu][probe]") {
  CHECK(packfa::probe_dot4(nullptr, nullptr, nullptr, nullptr, -1, nullptr).code() == packfa::Code::invalid_argument);
  CHECK(packfa::probe_dot4(nullptr, nullptr, nullptr, nullptr, 0, nullptr).ok());
  CHECK(packfa::probe_dot4(nullptr, nullptr, nullptr, nullptr, 4, nullptr).code() == packfa::Code::invalid_argument);
  DeviceBuffer<float> d(64);
  CHECK(packfa::probe_group_sum(d.p, d.p, 64, 3, nullptr).code() == packfa::Code::invalid_argument);
}
