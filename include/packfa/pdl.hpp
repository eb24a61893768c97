// packfa/pdl.hpp — Programmatic Dependent Launch (PDL): device primitives, the
// enrollment trait and the host-side decision query. Rules: docs/pdl.md.
//
// Device side (any kernel):
//   packfa::pdl::wait()              griddepcontrol.wait: blocks until the grid this one
//                                    programmatically depends on has completed and its
//                                    memory is visible. Covers the DIRECT predecessor only.
//   packfa::pdl::launch_dependents() griddepcontrol.launch_dependents: lets the next grid be
//                                    scheduled early. No memory guarantee: performance only.
// Both are the PTX instructions on sm_90+ and nothing on older NVIDIA archs and on HIP.
// Launched without the PDL attribute, a wait returns at once.
//
// Host side: a kernel is PDL-aware iff its (only) parameter type declares
//   static constexpr bool pdl_aware = true;
// packfa::launch() (launch.hpp) then sets the attribute when pdl::query() says so.
#pragma once

#include <string>
#include <type_traits>

#include "packfa/device/arch.hpp"

// Stress build (dynamic race detector): every launch_dependents() is followed by a spin of
// this many nanoseconds in the calling thread, so producers linger after triggering and a
// consumer that reads before its wait sees stale / poisoned data.
#ifndef PACKFA_PDL_STRESS_NS
#define PACKFA_PDL_STRESS_NS 30000
#endif

namespace packfa::pdl {

// ---- device primitives ---------------------------------------------------------------------
#if defined(PACKFA_BACKEND_CUDA) || defined(PACKFA_BACKEND_HIP)

// Busy-wait about `ns` nanoseconds (globaltimer), bounded by a clock64 budget in case the
// global timer ticks coarsely or not at all. Only used by the stress build and tests.
PACKFA_DEV void spin_ns(unsigned long long ns) {
#if defined(__CUDA_ARCH__)
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  const long long cycle_cap = static_cast<long long>(ns) * 4;  // ~2x at 2 GHz
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
    if (clock64() - c0 >= cycle_cap) break;
  }
#else
  (void)ns;
#endif
}

PACKFA_DEV void wait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

PACKFA_DEV void launch_dependents() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#if defined(PACKFA_PDL_STRESS) && PACKFA_PDL_STRESS
  spin_ns(PACKFA_PDL_STRESS_NS);
#endif
#endif
}

// True when this translation unit's device code contains the real instructions (sm_90+).
PACKFA_HD constexpr bool device_has_pdl() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  return true;
#else
  return false;
#endif
}

#endif  // backend

// ---- enrollment trait ------------------------------------------------------------------------
// is_aware<Params>::value is Params::pdl_aware when that member exists (and converts to
// true), false otherwise. Absent member = not enrolled = never launched with the attribute.
template <class P, class = void>
struct is_aware : std::false_type {};
template <class P>
struct is_aware<P, std::void_t<decltype(P::pdl_aware)>>
    : std::bool_constant<static_cast<bool>(P::pdl_aware)> {};
template <class P>
inline constexpr bool is_aware_v = is_aware<std::remove_cv_t<std::remove_reference_t<P>>>::value;

// ---- host decision ---------------------------------------------------------------------------
// Env switch PACKFA_PDL: 0|off|false -> off; 1|on|true -> on; auto|unset|"" -> auto.
// "on" and "auto" both remain fail-closed (CC and per-kernel PTX checks). Any other value
// is treated as off (fail closed) and reported by query().
enum class EnvMode : int { off = 0, on = 1, automatic = 2, invalid = 3 };

// Reads PACKFA_PDL (parsed once, lazily; reload_env() re-reads it, e.g. after setenv in tests).
EnvMode env_mode();
void reload_env();
const char* env_mode_name(EnvMode m);

struct Decision {
  bool active = false;   // the launch gets cudaLaunchAttributeProgrammaticStreamSerialization
  std::string why;       // when active: "on: ..." summary; when not: the first failing reason
  int cc_major = 0, cc_minor = 0;
  int ptx_version = 0;   // cudaFuncGetAttributes(kernel).ptxVersion, 0 if unknown
};

// Would a launch of `kernel` on `device` get the PDL attribute?
//   aware:     is_aware_v<Params> of the kernel's parameter type
//   override_: the per-call LaunchOptions::pdl (-1 = env switch, 0 = off, 1 = on)
// Reasons (first failing, in this order): "HIP backend", "kernel not declared PDL-aware",
// "per-call override pdl=0", "env PACKFA_PDL=0", "env PACKFA_PDL='x' not understood (0|1|auto)",
// "no device: ...", "compute capability 8.9 < 9.0", "cudaFuncGetAttributes failed: ...",
// "kernel PTX version 80 < 90".
// Per (device, kernel) results are cached; thread-safe.
Decision query(const void* kernel, int device, bool aware, int override_ = -1);

// Same, on the calling thread's current device.
Decision query_current(const void* kernel, bool aware, int override_ = -1);

// Typed form: awareness taken from the kernel's parameter type.
template <class Params>
Decision query(void (*kernel)(Params), int override_ = -1) {
  return query_current(reinterpret_cast<const void*>(kernel), is_aware_v<Params>, override_);
}

// Drops the per-(device, kernel) cache (tests; never needed in normal use).
void clear_cache();

}  // namespace packfa::pdl
