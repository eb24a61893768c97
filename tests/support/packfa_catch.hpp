// Catch2 v2 (Debian 12) / v3 shim: tests include this, never Catch2 directly.
#pragma once
#if PACKFA_CATCH_V3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
