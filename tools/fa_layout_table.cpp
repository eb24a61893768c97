// tools/fa_layout_table.cpp — prints the attention kernel's shared-memory layout for every
// instance of the full table (device/fa_instances.hpp) on both backends as JSON (docs/rdna.md's
// LDS column comes from here). "rows" is the instance's rows per block, "row_class" its class.
#include <cstdio>

#include "packfa/device/fa_instances.hpp"
#include "packfa/device/fa_layout.hpp"

int main() {
  using namespace packfa;
  const char* vnames[] = {"f16", "bf16", "q8_0", "q4_0", "q8_0_planar"};
  const char* qnames[] = {"packed16_int8", "packed16_f16", "f16k"};
  std::printf("[\n");
  bool first = true;
  for (const FaBackend be : {FaBackend::cuda, FaBackend::hip}) {
    const FaBudget budget = be == FaBackend::cuda ? kFaCudaBudget : kFaHipBudget;
    for (const int d : kHeadDims)
      for (const VFormat vf : kFaVFormats)
        for (const QKMode qk : kFaQKModes)
          for (int rc = 0; rc < kNumRowClasses; ++rc) {
            if (!fa_built(be, d, vf, qk, rc, false, FaSet::all)) continue;
            const int r = fa_rows_per_block(be, d, vf, qk, rc);
            const FaLayout l = fa_layout(d, vf, qk, r, budget);
            std::printf("%s {\"backend\":\"%s\",\"head_dim\":%d,\"v\":\"%s\",\"qk\":\"%s\",\"row_class\":%d,"
                        "\"rows\":%d,\"lean\":%s,\"waves\":%d,\"smem_bytes\":%d,\"fits\":%s}",
                        first ? "" : ",\n", be == FaBackend::cuda ? "cuda" : "hip", d,
                        vnames[static_cast<int>(vf)], qnames[static_cast<int>(qk)], kRowClasses[rc], r,
                        fa_in_lean_set(d, vf, qk, rc, false) ? "true" : "false", l.waves, l.smem_bytes,
                        l.fits ? "true" : "false");
            first = false;
          }
  }
  std::printf("\n]\n");
  return 0;
}
