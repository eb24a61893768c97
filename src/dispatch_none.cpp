// src/dispatch_none.cpp — the dispatcher of a build without a GPU backend: validation and
// selection still answer; launches report that no backend is compiled.
#include "packfa/api.hpp"

namespace packfa {

static Status no_backend() { return {Code::not_compiled, "packfa was built without a GPU backend (CUDA/HIP)"}; }

Status select_kernel(const AttnParams& p, int, KernelChoice* out) {
  PACKFA_TRY(validate(p));
  if (out) {
    out->compiled = false;
    out->why_not = "no GPU backend in this build";
  }
  return no_backend();
}
Status fa_workspace_bytes(const AttnParams& p, int, size_t*) {
  PACKFA_TRY(validate(p));
  return no_backend();
}
Status fa_packed16_forward(const AttnParams& p, void*) {
  PACKFA_TRY(validate(p));
  return no_backend();
}
Status pack_k_packed16(const PackKParams& p, void*) {
  PACKFA_TRY(validate(p));
  return p.n_tokens == 0 ? Status::Ok() : no_backend();
}
Status quantize_v(const QuantVParams& p, void*) {
  PACKFA_TRY(validate(p));
  return p.n_tokens == 0 ? Status::Ok() : no_backend();
}
DeviceInfo device_info(int) {
  DeviceInfo d;
  d.backend = "none";
  d.why_absent = "built without CUDA or HIP";
  return d;
}

}  // namespace packfa
