// Host quantizers under FMA contraction: format.hpp's q8_0 / q4_0 blocks and quantize_v_host
// (src/cpu/pack.cpp), built with -mfma -mavx2 -ffp-contract=fast in fma_lib.cpp, must write
// exactly the bytes of ggml's reference rules (quantize_row_q8_0_ref / quantize_row_q4_0_ref:
// every product and sum rounded to float on its own), computed here by an independent
// implementation in a TU built with -ffp-contract=off and the baseline ISA. Non-finite inputs
// follow packfa's documented rule (docs/format.md): they count as 0.
//
// The test proves it can fail: the flagged TU must really fuse a·b + c, and the pre-fix q4_0
// expression compiled there must disagree with the reference on some blocks of the data.
// Exit 0: pass; 1: fail; 77: the CPU has no FMA/AVX2 (nothing flagged may run).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fma_iface.hpp"

namespace {

int failures = 0;
#define EXPECT(cond, ...)                                 \
  do {                                                    \
    if (!(cond)) {                                        \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                           \
      std::printf("\n");                                  \
      ++failures;                                         \
    }                                                     \
  } while (0)

// ---- reference (ggml's rules, written independently of packfa's code) ----------------------
// IEEE binary16 of f, round to nearest even, by exact double arithmetic.
uint16_t ref_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00u);  // halfway to 2^16 rounds to even: inf
  if (a == 0.0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int E = std::max(e - 1, -14);                       // subnormals share the quantum 2^-24
  const double quantum = std::ldexp(1.0, E - 10);
  const double v = std::nearbyint(a / quantum) * quantum;   // ties to even (default rounding mode)
  if (v == 0.0) return sign;
  std::frexp(v, &e);
  const int E2 = e - 1;
  if (E2 < -14) return static_cast<uint16_t>(sign | static_cast<uint16_t>(v / std::ldexp(1.0, -24)));
  const uint16_t mant = static_cast<uint16_t>((v / std::ldexp(1.0, E2) - 1.0) * 1024.0);
  return static_cast<uint16_t>(sign | ((E2 + 15) << 10) | mant);
}

void put_d(uint8_t* blk, float d) {
  const uint16_t h = ref_fp16(d);
  blk[0] = static_cast<uint8_t>(h & 0xff);
  blk[1] = static_cast<uint8_t>(h >> 8);
}

// quantize_row_q8_0_ref on one block of finite values.
void ref_q8_0(const float* x, uint8_t* blk) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_d(blk, d);
  for (int j = 0; j < 32; ++j) {
    const float x0 = x[j] * id;
    blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x0)));
  }
}

// quantize_row_q4_0_ref on one block of finite values.
void ref_q4_0(const float* x, uint8_t* blk) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_d(blk, d);
  for (int j = 0; j < 16; ++j) {
    const float x0 = x[j] * id, x1 = x[16 + j] * id;
    const float s0 = x0 + 8.5f, s1 = x1 + 8.5f;
    const int t0 = static_cast<int8_t>(s0), t1 = static_cast<int8_t>(s1);
    const uint8_t xi0 = static_cast<uint8_t>(t0 < 15 ? t0 : 15), xi1 = static_cast<uint8_t>(t1 < 15 ? t1 : 15);
    blk[2 + j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
  }
}

// The documented rule for non-finite inputs: the block as if they were 0.
void zero_nonfinite(const float* x, float* y) {
  for (int j = 0; j < 32; ++j) y[j] = std::isfinite(x[j]) ? x[j] : 0.0f;
}

// ---- data ---------------------------------------------------------------------------------
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double normal() {
    const double u = uniform() + 0x1.0p-54, v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

// Blocks of 32 values: magnitudes spread over six decades; a quarter of the blocks hold
// fp16-representable values (a V cache fed from f16 activations); 1 block in 32 carries
// NaN / ±inf at random places; some blocks are all zero or have ties for the largest |x|;
// about a third are small integer multiples of one step.
std::vector<float> make_blocks(int64_t n, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> x(static_cast<size_t>(n) * 32);
  const float specials[3] = {NAN, INFINITY, -INFINITY};
  for (int64_t b = 0; b < n; ++b) {
    float* v = x.data() + 32 * b;
    const double mag = std::pow(10.0, 6.0 * rng.uniform() - 3.0);
    const int kind = static_cast<int>(rng.next() % 64);
    for (int j = 0; j < 32; ++j) v[j] = static_cast<float>(mag * rng.normal());
    if (kind < 16) {
      for (int j = 0; j < 32; ++j) {  // round to fp16 (kept finite and normal-range)
        uint16_t h = ref_fp16(v[j]);
        if ((h & 0x7c00u) == 0x7c00u) h = static_cast<uint16_t>((h & 0x8000u) | 0x7bffu);
        const int ex = (h >> 10) & 0x1f, mt = h & 0x3ff;
        const double val = ex == 0 ? std::ldexp(mt, -24) : std::ldexp(1024 + mt, ex - 25);
        v[j] = static_cast<float>((h & 0x8000u) ? -val : val);
      }
    } else if (kind == 16) {
      for (int j = 0; j < 32; ++j) v[j] = 0.0f;
    } else if (kind == 17) {
      v[3] = static_cast<float>(mag * 4);
      v[20] = -v[3];  // a tie for amax: q4_0 takes the first
    } else if (kind < 20) {
      const int k = 1 + static_cast<int>(rng.next() % 3);
      for (int i = 0; i < k; ++i) v[rng.next() % 32] = specials[rng.next() % 3];
    } else if (kind < 40) {
      // small integer multiples of one step (quantized activations): x/max is then often a
      // half-integer over 8, where a fused x·id + 8.5 and two roundings part ways
      const float step = static_cast<float>(mag) / 64;
      for (int j = 0; j < 32; ++j) v[j] = step * static_cast<float>(static_cast<int>(rng.next() % 129) - 64);
    }
  }
  return x;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx2")) {
    std::printf("SKIP: this CPU has no FMA/AVX2; the -mfma build cannot run here\n");
    return 77;
  }
  // 1. The flags are in effect: the flagged TU fuses a·b + c (one rounding), this one does not.
  volatile float a = 1.0f + 0x1.0p-12f, c = -(1.0f + 0x1.0p-11f);
  const float fused = fmatest::madd(a, a, c);
  const float plain = a * a + c;
  EXPECT(fused == 0x1.0p-24f, "madd = %a (fused gives 0x1p-24)", fused);
  EXPECT(plain == 0.0f, "reference TU a*b + c = %a (two roundings give 0)", plain);

  // 2. Blocks through format.hpp's functions.
  const int64_t n = int64_t{1} << 18;
  const std::vector<float> x = make_blocks(n, 20261201);
  std::vector<uint8_t> ref8(n * 34), ref4(n * 18), got8(n * 34), got4(n * 18), naive4(n * 18);
  float tmp[32];
  int64_t nonfinite_blocks = 0;
  for (int64_t b = 0; b < n; ++b) {
    zero_nonfinite(x.data() + 32 * b, tmp);
    ref_q8_0(tmp, ref8.data() + 34 * b);
    ref_q4_0(tmp, ref4.data() + 18 * b);
  }
  for (int64_t b = 0; b < n; ++b)
    for (int j = 0; j < 32; ++j)
      if (!std::isfinite(x[32 * b + j])) {
        ++nonfinite_blocks;
        break;
      }
  fmatest::lib_q8_0_blocks(x.data(), n, got8.data());
  fmatest::lib_q4_0_blocks(x.data(), n, got4.data());
  int64_t bad8 = 0, bad4 = 0;
  for (int64_t b = 0; b < n; ++b) {
    bad8 += std::memcmp(got8.data() + 34 * b, ref8.data() + 34 * b, 34) != 0;
    bad4 += std::memcmp(got4.data() + 18 * b, ref4.data() + 18 * b, 18) != 0;
  }
  EXPECT(bad8 == 0, "q8_0: %lld of %lld blocks differ from ggml's rule", static_cast<long long>(bad8),
         static_cast<long long>(n));
  EXPECT(bad4 == 0, "q4_0: %lld of %lld blocks differ from ggml's rule", static_cast<long long>(bad4),
         static_cast<long long>(n));

  // 3. The data reach the rounding boundaries where fusing matters: the pre-fix expression,
  // compiled with the same flags, disagrees on some finite blocks.
  std::vector<float> finite(x);
  for (auto& v : finite)
    if (!std::isfinite(v)) v = 0.0f;
  fmatest::naive_q4_0_blocks(finite.data(), n, naive4.data());
  int64_t naive_bad = 0;
  for (int64_t b = 0; b < n; ++b) naive_bad += std::memcmp(naive4.data() + 18 * b, ref4.data() + 18 * b, 18) != 0;
  EXPECT(naive_bad > 0, "the fused pre-fix q4_0 agrees on every block: the test would not see the bug");

  // 4. quantize_v_host (src/cpu/pack.cpp, flagged): rows of 128 values = 4 blocks each.
  const int d = 128, rows = static_cast<int>(n / 4);
  std::vector<uint8_t> rows8(n * 34), rows4(n * 18), planar(n * 32);
  std::vector<uint16_t> planar_d(n);
  EXPECT(fmatest::lib_quantize_rows(2, x.data(), rows, d, rows8.data(), nullptr), "quantize_v_host q8_0 failed");
  EXPECT(fmatest::lib_quantize_rows(3, x.data(), rows, d, rows4.data(), nullptr), "quantize_v_host q4_0 failed");
  EXPECT(fmatest::lib_quantize_rows(4, x.data(), rows, d, planar.data(), planar_d.data()),
         "quantize_v_host q8_0_planar failed");
  int64_t bad_rows8 = 0, bad_rows4 = 0, bad_planar = 0;
  for (int64_t b = 0; b < n; ++b) {
    bad_rows8 += std::memcmp(rows8.data() + 34 * b, ref8.data() + 34 * b, 34) != 0;
    bad_rows4 += std::memcmp(rows4.data() + 18 * b, ref4.data() + 18 * b, 18) != 0;
    const uint16_t dref = static_cast<uint16_t>(ref8[34 * b] | (ref8[34 * b + 1] << 8));
    bad_planar += planar_d[b] != dref || std::memcmp(planar.data() + 32 * b, ref8.data() + 34 * b + 2, 32) != 0;
  }
  EXPECT(bad_rows8 == 0, "quantize_v_host q8_0: %lld blocks differ", static_cast<long long>(bad_rows8));
  EXPECT(bad_rows4 == 0, "quantize_v_host q4_0: %lld blocks differ", static_cast<long long>(bad_rows4));
  EXPECT(bad_planar == 0, "quantize_v_host q8_0_planar: %lld blocks differ", static_cast<long long>(bad_planar));

  std::printf("%lld blocks (%lld with NaN/inf): q8_0 %lld, q4_0 %lld differ from ggml's rule "
              "(quantize_v_host: %lld, %lld, planar %lld); the pre-fix fused q4_0 differs on %lld; madd %a\n",
              static_cast<long long>(n), static_cast<long long>(nonfinite_blocks), static_cast<long long>(bad8),
              static_cast<long long>(bad4), static_cast<long long>(bad_rows8), static_cast<long long>(bad_rows4),
              static_cast<long long>(bad_planar), static_cast<long long>(naive_bad), fused);
  if (failures) {
    std::printf("%d failure(s)\n", failures);
    return 1;
  }
  std::printf("quant_fma: all checks passed\n");
  return 0;
}
