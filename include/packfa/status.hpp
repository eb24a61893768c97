// packfa/status.hpp — every fallible packfa call returns a Status; nothing throws across it.
#pragma once

#include <string>
#include <utility>

namespace packfa {

enum class Code : int {
  ok = 0,
  invalid_argument = 1,  // a field of the call is wrong; message names it
  not_compiled = 2,      // this combination has no kernel instance in this build
  unsupported = 3,       // the device or backend cannot run it
  device_error = 4,      // the CUDA/HIP runtime reported an error
  out_of_memory = 5,
};

const char* code_name(Code c);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const { return ok() ? "ok" : std::string(code_name(code_)) + ": " + message_; }

 private:
  Code code_ = Code::ok;
  std::string message_;
};

inline Status invalid(const std::string& field, const std::string& why) {
  return {Code::invalid_argument, field + ": " + why};
}

}  // namespace packfa

#define PACKFA_TRY(expr)                      \
  do {                                        \
    ::packfa::Status packfa_s_ = (expr);      \
    if (!packfa_s_.ok()) return packfa_s_;    \
  } while (0)
