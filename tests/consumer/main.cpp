// Uses the installed headers (format.hpp) and the CPU library (Status -> code_name).
#include <cstdint>
#include <cstdio>

#include <packfa/format.hpp>
#include <packfa/status.hpp>

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "consumer: FAILED %s (line %d)\n", #cond, __LINE__); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main() {
  // Every finite, non-NaN fp16 survives fp16 -> float -> fp16 exactly.
  int checked = 0;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) continue;  // NaN
    const auto bits = static_cast<uint16_t>(h);
    EXPECT(packfa::fp16_from_float(packfa::fp16_to_float(bits)) == bits);
    ++checked;
  }
  EXPECT(packfa::fp16_to_float(0x3c00u) == 1.0f);
  EXPECT(packfa::fp16_from_float(65520.0f) == 0x7c00u);  // rounds past 65504 -> inf

  EXPECT(packfa::k_bits_per_value(packfa::KFormat::packed16, 32) == 8.5);
  EXPECT(packfa::k_bits_per_value(packfa::KFormat::packed16, 16) == 9.0);
  EXPECT(packfa::k_bits_per_value(packfa::KFormat::f16, 32) == 16.0);

  const packfa::Status s = packfa::invalid("head_dim", "must be a multiple of 16");
  EXPECT(!s.ok() && s.code() == packfa::Code::invalid_argument);
  EXPECT(s.to_string() == "invalid_argument: head_dim: must be a multiple of 16");

  std::printf("packfa consumer OK: %d fp16 round trips, packed16 K = %.1f bits/value (backend %s)\n", checked,
              packfa::k_bits_per_value(packfa::KFormat::packed16, 32), PACKFA_CONSUMER_BACKEND);
  return 0;
}
