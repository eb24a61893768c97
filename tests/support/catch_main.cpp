// One main for every Catch2 test binary (v2 and v3).
#define CATCH_CONFIG_RUNNER
#include "packfa_catch.hpp"

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
