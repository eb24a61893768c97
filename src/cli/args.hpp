// src/cli/args.hpp — strict command-line parsing for packfa's tools (packfa-cli and bench/).
//
// Why not atoi: "1e6" read as 1, "abc" as 0 and 99999999999999999999 as INT64_MAX, silently.
// Here a number is the whole argument in base 10, range-checked; every error names the
// option, goes to stderr and makes the tool exit 2; unknown options and surplus arguments
// are errors too; --help prints the usage to stdout and exits 0. Header-only, host C++17
// (nvcc-compiled benches include it as well).
//
//   packfa::args::Parser ap("packfa-cli plan", kUsage);
//   ap.integer("--context", &context, 1, INT32_MAX).flag("--swa-full", &swa_full)
//     .choice("--v", &v, {"f16", "q8_0"});
//   int rc;
//   if (!ap.parse(argc, argv, 1, &rc)) return rc;   // 0 after --help, 2 after an error
//   if (ap.given("--layers") && ...) return ap.fail("--layers: ...");
#pragma once

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace packfa::args {

// A whole-string base-10 integer ("-12", "4096"; not "1e6", " 5", "0x10", "") in [lo, hi].
// On failure *why says what is wrong with `s` (without the option name).
inline bool parse_integer(const std::string& s, long long lo, long long hi, long long* out, std::string* why) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  bool digits = i < s.size();
  for (size_t j = i; j < s.size(); ++j) digits = digits && s[j] >= '0' && s[j] <= '9';
  if (!digits) {
    *why = "'" + s + "' is not a whole number";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || v < lo || v > hi) {
    *why = s + " is out of range (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")";
    return false;
  }
  *out = v;
  return true;
}

class Parser {
 public:
  Parser(std::string prog, std::string usage) : prog_(std::move(prog)), usage_(std::move(usage)) {}

  Parser& flag(const std::string& name, bool* out) {
    opts_.push_back({name, false, [out](const std::string&, std::string*) { return *out = true; }});
    return *this;
  }
  template <class T>
  Parser& integer(const std::string& name, T* out, long long lo, long long hi) {
    opts_.push_back({name, true, [out, lo, hi](const std::string& v, std::string* why) {
                       long long x = 0;
                       if (!parse_integer(v, lo, hi, &x, why)) return false;
                       *out = static_cast<T>(x);
                       return true;
                     }});
    return *this;
  }
  Parser& text(const std::string& name, std::string* out) {
    opts_.push_back({name, true, [out](const std::string& v, std::string* why) {
                       if (v.empty()) {
                         *why = "needs a non-empty value";
                         return false;
                       }
                       *out = v;
                       return true;
                     }});
    return *this;
  }
  Parser& choice(const std::string& name, std::string* out, std::vector<std::string> allowed) {
    opts_.push_back({name, true, [out, allowed](const std::string& v, std::string* why) {
                       for (const auto& a : allowed)
                         if (v == a) return (*out = v, true);
                       *why = "unknown value '" + v + "' (one of " + join(allowed) + ")";
                       return false;
                     }});
    return *this;
  }

  // Parses argv[first..argc). True: go on. False: return *rc (0 after --help, 2 on error).
  bool parse(int argc, char** argv, int first, int* rc) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i], value;
      bool inline_value = false;
      if (a == "--help" || a == "-h") {
        std::fputs(usage_.c_str(), stdout);
        if (!usage_.empty() && usage_.back() != '\n') std::fputc('\n', stdout);
        *rc = 0;
        return false;
      }
      if (a.size() < 2 || a[0] != '-') {
        *rc = fail("unexpected argument '" + a + "'");
        return false;
      }
      const size_t eq = a.find('=');
      if (a.compare(0, 2, "--") == 0 && eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        inline_value = true;
      }
      const Opt* o = find(a);
      if (!o) {
        *rc = fail("unknown option '" + a + "'" + suggest(a));
        return false;
      }
      std::string why;
      if (!o->takes_value) {
        if (inline_value) {
          *rc = fail(a + ": takes no value");
          return false;
        }
      } else if (!inline_value) {
        if (i + 1 >= argc) {
          *rc = fail(a + ": needs a value");
          return false;
        }
        value = argv[++i];
      }
      if (!o->set(value, &why)) {
        *rc = fail(a + ": " + why);
        return false;
      }
      given_.push_back(a);
    }
    return true;
  }

  bool given(const std::string& name) const {
    for (const auto& g : given_)
      if (g == name) return true;
    return false;
  }
  // "<prog>: <msg>" and a pointer to --help on stderr; returns 2 (the bad-usage exit code).
  int fail(const std::string& msg) const {
    std::fprintf(stderr, "%s: %s\n(see %s --help)\n", prog_.c_str(), msg.c_str(), prog_.c_str());
    return 2;
  }
  const std::string& prog() const { return prog_; }

 private:
  struct Opt {
    std::string name;
    bool takes_value;
    std::function<bool(const std::string&, std::string*)> set;
  };
  const Opt* find(const std::string& name) const {
    for (const auto& o : opts_)
      if (o.name == name) return &o;
    return nullptr;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  static size_t distance(const std::string& a, const std::string& b) {  // Levenshtein
    std::vector<size_t> d(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t prev = d[0];
      d[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t cur = d[j];
        d[j] = std::min(std::min(d[j] + 1, d[j - 1] + 1), prev + (a[i - 1] == b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return d[b.size()];
  }
  std::string suggest(const std::string& a) const {
    const Opt* best = nullptr;
    size_t bd = 3;  // only near misses
    for (const auto& o : opts_) {
      const size_t dd = distance(a, o.name);
      if (dd < bd) bd = dd, best = &o;
    }
    return best ? " (did you mean " + best->name + "?)" : "";
  }

  std::string prog_, usage_;
  std::vector<Opt> opts_;
  std::vector<std::string> given_;
};

}  // namespace packfa::args
