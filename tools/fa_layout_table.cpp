// tools/fa_layout_table.cpp — prints the attention kernel's shared-memory layout for every
// instance shape and both backends as JSON (docs/rdna.md's LDS column comes from here).
#include <cstdio>
#include <initializer_list>

#include "packfa/device/fa_layout.hpp"

int main() {
  using namespace packfa;
  const char* vnames[] = {"f16", "bf16", "q8_0", "q4_0", "q8_0_planar"};
  const char* qnames[] = {"packed16_int8", "packed16_f16", "f16k"};
  std::printf("[\n");
  bool first = true;
  for (const char* backend : {"cuda", "hip"}) {
    const FaBudget budget = backend[0] == 'c' ? kFaCudaBudget : kFaHipBudget;
    for (int d : {64, 80, 96, 112, 128, 256})
      for (int v = 0; v < kNumVFormats; ++v)
        for (int q = 0; q < 3; ++q)
          for (int r : {4, 16}) {
            if (d % 32 && v_is_blocked(static_cast<VFormat>(v))) continue;
            const FaLayout l = fa_layout(d, static_cast<VFormat>(v), static_cast<QKMode>(q), r, budget);
            std::printf("%s {\"backend\":\"%s\",\"head_dim\":%d,\"v\":\"%s\",\"qk\":\"%s\",\"rows\":%d,"
                        "\"waves\":%d,\"smem_bytes\":%d,\"fits\":%s}",
                        first ? "" : ",\n", backend, d, vnames[v], qnames[q], r, l.waves, l.smem_bytes,
                        l.fits ? "true" : "false");
            first = false;
          }
  }
  std::printf("\n]\n");
  return 0;
}
