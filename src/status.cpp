#include "packfa/status.hpp"

namespace packfa {

const char* code_name(Code c) {
  switch (c) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::not_compiled: return "not_compiled";
    case Code::unsupported: return "unsupported";
    case Code::device_error: return "device_error";
    case Code::out_of_memory: return "out_of_memory";
  }
  return "unknown";
}

}  // namespace packfa
