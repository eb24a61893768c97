// The decode A/B switches (PACKFA_PREFETCH, PACKFA_SPLIT_ROUNDS, PACKFA_COMBINE_COLS) as the
// library reads them (src/dispatch.cu, env_switch): on when set to a value other than "" and
// "0", off otherwise (the default). Tests assert the path that follows from the environment:
// the plain ctest entries check the defaults (off), the *_switches_on entries
// (tests/gpu/CMakeLists.txt) set all three to 1 and check the switched paths.
#pragma once

#include <cstdlib>

namespace packfa::testing {
inline bool switch_on(const char* name) {
  const char* e = std::getenv(name);
  return e && e[0] != '\0' && e[0] != '0';
}
// The combine kernel for more than 64 splits
inline const char* wide_combine() { return switch_on("PACKFA_COMBINE_COLS") ? "col_block" : "block"; }
}  // namespace packfa::testing
