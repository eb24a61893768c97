// Dynamic PDL race detector helper (docs/pdl.md): run a producer -> consumer chain many times
// with PDL on and off and compare every written byte with a PDL-off reference.
//
//   std::vector<packfa::pdl_test::Region> written = {{mid, bytes}, {out, bytes}};
//   auto rep = packfa::pdl_test::compare_pdl_on_off(stream,
//       [&](cudaStream_t s, int pdl) -> packfa::Status {
//         PACKFA_TRY(packfa::launch(producer, g, b, 0, s, p1, {pdl}));
//         return packfa::launch(consumer, g, b, 0, s, p2, {pdl});
//       }, written);
//   REQUIRE(rep.clean());
//
// Every region the chain writes (intermediates too) is poisoned (cudaMemsetAsync on the same
// stream) before each run, so a consumer that reads before its wait picks up poison instead of
// the producer's data. Build the producers with PACKFA_PDL_STRESS=1 (they linger tens of µs
// after launch_dependents()) and keep grids small so producer and consumer blocks are
// co-resident. Header-only; include from test code (tests/gpu, tests/pdl).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "packfa/status.hpp"

namespace packfa::pdl_test {

struct Region {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct RaceOptions {
  int runs = 100;             // PDL-on runs compared with the reference
  int off_every = 10;         // every k-th run is a PDL-off rerun (checks the chain is deterministic)
  bool stop_at_first = false; // stop at the first mismatching PDL-on run (planted-bug tests)
  unsigned char poison = 0xA5;
};

struct RaceReport {
  int runs_on = 0, runs_off = 0;
  int mismatched_on = 0;   // PDL-on runs that differ from the PDL-off reference: a race
  int mismatched_off = 0;  // PDL-off reruns that differ: the chain itself is not deterministic
  size_t first_region = 0, first_offset = 0;  // first differing byte seen
  std::string error;       // a CUDA / packfa error stopped the comparison
  bool clean() const { return error.empty() && mismatched_on == 0 && mismatched_off == 0 && runs_on > 0; }
  bool flagged() const { return error.empty() && mismatched_on > 0; }
  std::string summary() const {
    std::string s = "runs on=" + std::to_string(runs_on) + " off=" + std::to_string(runs_off) +
                    ", mismatching on=" + std::to_string(mismatched_on) + " off=" + std::to_string(mismatched_off);
    if (mismatched_on || mismatched_off)
      s += ", first difference: region " + std::to_string(first_region) + " byte " + std::to_string(first_offset);
    if (!error.empty()) s += ", error: " + error;
    return s;
  }
};

namespace detail {
inline bool cuda_ok(cudaError_t e, RaceReport& r, const char* what) {
  if (e == cudaSuccess) return true;
  r.error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}
}  // namespace detail

// enqueue(stream, pdl) -> packfa::Status enqueues the whole chain; pdl is the per-call
// override to pass to every packfa::launch (0 = off, 1 = on).
template <class Enqueue>
RaceReport compare_pdl_on_off(cudaStream_t s, Enqueue&& enqueue, const std::vector<Region>& written,
                              RaceOptions o = {}) {
  RaceReport r;
  std::vector<std::vector<unsigned char>> ref(written.size()), got(written.size());
  for (size_t k = 0; k < written.size(); ++k) {
    ref[k].resize(written[k].bytes);
    got[k].resize(written[k].bytes);
  }
  auto run_once = [&](int pdl, std::vector<std::vector<unsigned char>>& dst) -> bool {
    for (const Region& g : written)
      if (!detail::cuda_ok(cudaMemsetAsync(g.ptr, o.poison, g.bytes, s), r, "cudaMemsetAsync")) return false;
    const Status st = enqueue(s, pdl);
    if (!st.ok()) {
      r.error = st.to_string();
      return false;
    }
    if (!detail::cuda_ok(cudaStreamSynchronize(s), r, "cudaStreamSynchronize")) return false;
    for (size_t k = 0; k < written.size(); ++k)
      if (!detail::cuda_ok(cudaMemcpy(dst[k].data(), written[k].ptr, written[k].bytes, cudaMemcpyDeviceToHost), r,
                           "cudaMemcpy"))
        return false;
    return true;
  };
  auto differs = [&]() -> bool {
    for (size_t k = 0; k < written.size(); ++k) {
      if (std::memcmp(ref[k].data(), got[k].data(), ref[k].size()) == 0) continue;
      if (r.mismatched_on + r.mismatched_off == 0) {
        size_t i = 0;
        while (i < ref[k].size() && ref[k][i] == got[k][i]) ++i;
        r.first_region = k;
        r.first_offset = i;
      }
      return true;
    }
    return false;
  };
  if (!run_once(0, ref)) return r;
  ++r.runs_off;
  for (int i = 0; i < o.runs + (o.off_every > 0 ? o.runs / o.off_every : 0); ++i) {
    const bool off = o.off_every > 0 && (i % (o.off_every + 1)) == o.off_every;
    if (!run_once(off ? 0 : 1, got)) return r;
    const bool bad = differs();
    if (off) {
      ++r.runs_off;
      r.mismatched_off += bad ? 1 : 0;
    } else {
      ++r.runs_on;
      r.mismatched_on += bad ? 1 : 0;
      if (bad && o.stop_at_first) break;
    }
  }
  return r;
}

}  // namespace packfa::pdl_test
