// packfa-cli: demo | quality | plan | info
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "demo.hpp"
#include "packfa/api.hpp"

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "demo";
  if (cmd == "demo") return packfa::cli::demo(argc, argv);
  if (cmd == "quality") return packfa_cli_quality(argc - 1, argv + 1);
  if (cmd == "plan") return packfa_cli_plan(argc - 1, argv + 1);
  if (cmd == "info") {
    const packfa::DeviceInfo d = packfa::device_info(0);
    std::printf("backend %s, device %s\n", d.backend.c_str(), d.present ? d.name.c_str() : d.why_absent.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: packfa-cli demo [--kv N] | quality [...] | plan [...] | info\n");
  return 2;
}
