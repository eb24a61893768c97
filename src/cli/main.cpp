// packfa-cli: demo | quality | plan | info | version
#include <cstdio>
#include <string>

#include "args.hpp"
#include "commands.hpp"
#include "demo.hpp"
#include "packfa/api.hpp"
#include "packfa/version.hpp"

namespace {
const char* kUsage =
    "usage: packfa-cli <command> [options]   (no command: demo)\n"
    "  demo [--kv N] [--runs R]   packed16 attention on a default shape (GPU if present, else CPU reference)\n"
    "  plan [...]                 KV cache memory of a model: f16 K vs packed16 K\n"
    "  quality [...]              attention-level accuracy of packed16 K (CPU)\n"
    "  info                       backend and device\n"
    "  version                    packfa version\n"
    "`packfa-cli <command> --help` for a command's options.\n";
}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "demo";
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "demo") return packfa::cli::demo(argc, argv);
  if (cmd == "quality") return packfa_cli_quality(argc - 1, argv + 1);
  if (cmd == "plan") return packfa_cli_plan(argc - 1, argv + 1);
  if (cmd == "info" || cmd == "version" || cmd == "--version") {
    packfa::args::Parser ap("packfa-cli " + cmd, "usage: packfa-cli " + cmd + "\n");
    int rc = 0;
    if (!ap.parse(argc, argv, 2, &rc)) return rc;
    if (cmd != "info") {
      std::printf("packfa %s\n", PACKFA_VERSION_STRING);
      return 0;
    }
    const packfa::DeviceInfo d = packfa::device_info(0);
    if (d.present)
      std::printf("packfa %s, backend %s, device 0: %s (%d multiprocessors, cc %d.%d)\n", PACKFA_VERSION_STRING,
                  d.backend.c_str(), d.name.c_str(), d.multiprocessors, d.cc_major, d.cc_minor);
    else
      std::printf("packfa %s, backend %s, no device: %s\n", PACKFA_VERSION_STRING, d.backend.c_str(),
                  d.why_absent.c_str());
    return 0;
  }
  std::fprintf(stderr, "packfa-cli: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return 2;
}
