// The decode A/B switches (PACKFA_SPLIT_ROUNDS: default off; PACKFA_COMBINE_COLS: default on) as the library reads them (src/dispatch.cu, env_switch):
// unset or empty = the default, "0" = off, any other value = on. Tests assert the path that
// follows from the environment: the plain ctest entries check the defaults, the *_switches_on
// entries (tests/gpu/CMakeLists.txt) flip both and check the switched paths.
#pragma once

#include <cstdlib>

namespace packfa::testing {
inline bool switch_on(const char* name, bool dflt = false) {
  const char* e = std::getenv(name);
  if (!e || e[0] == '\0') return dflt;
  return e[0] != '0';
}
// The combine kernel for more than 64 splits
inline const char* wide_combine() { return switch_on("PACKFA_COMBINE_COLS", true) ? "col_block" : "block"; }
}  // namespace packfa::testing
