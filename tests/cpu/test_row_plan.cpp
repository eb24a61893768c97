// The D = 256 row-group rule (src/row_plan.hpp, decision "d256-row-groups") on hand-computed
// cases: bytes a key from the formats' definitions, the cache against an L2 of 60 MiB (the
// H200's, as the peer bench reports it).
#include <cstdint>

#include "packfa_catch.hpp"
#include "row_plan.hpp"

using packfa::KFormat;
using packfa::VFormat;
using packfa::detail::d256_row_groups;
using packfa::detail::kv_bytes_per_key;

namespace {
constexpr int64_t kL2 = 60LL * 1024 * 1024;  // 62,914,560 bytes
}

TEST_CASE("row_plan: bytes a key of one KV head", "[row_plan]") {
  CHECK(kv_bytes_per_key(256, KFormat::packed16, 32, VFormat::q8_0) == 256 + 16 + 8 * 34);       // 544
  CHECK(kv_bytes_per_key(256, KFormat::packed16, 16, VFormat::q8_0) == 256 + 32 + 8 * 34);       // 560
  CHECK(kv_bytes_per_key(256, KFormat::packed16, 32, VFormat::q4_0) == 256 + 16 + 8 * 18);       // 416
  CHECK(kv_bytes_per_key(256, KFormat::packed16, 32, VFormat::q8_0_planar) == 256 + 16 + 256 + 16);
  CHECK(kv_bytes_per_key(256, KFormat::packed16, 32, VFormat::f16) == 256 + 16 + 512);
  CHECK(kv_bytes_per_key(256, KFormat::f16, 0, VFormat::f16) == 512 + 512);  // no K block scales
  CHECK(kv_bytes_per_key(128, KFormat::packed16, 32, VFormat::q8_0) == 128 + 8 + 4 * 34);
}

TEST_CASE("row_plan: D 256, 5-8 rows in 4-row groups while the cache fits L2", "[row_plan]") {
  const int64_t q8 = 544;
  // the measured shapes (bench/NOTES.md, session 18)
  CHECK(d256_row_groups(256, 8, 1, 2, 32768, q8, kL2));        // 16 / 2 heads, kv 32k: 35.7 MB
  CHECK(d256_row_groups(256, 8, 1, 2, 4096, q8, kL2));         // kv 4k
  CHECK(d256_row_groups(256, 8, 8, 2, 4096, q8, kL2));         // batch 8 x 4k: 35.7 MB
  CHECK_FALSE(d256_row_groups(256, 8, 1, 2, 131072, q8, kL2)); // kv 128k: 142.6 MB
  CHECK_FALSE(d256_row_groups(256, 8, 1, 4, 32768, q8, kL2));  // nq 2 x 16 / 4 heads: 71.3 MB
  // the row bounds: 4 rows are the 4-row class anyway; 9-16 keep the wide class
  CHECK(d256_row_groups(256, 5, 1, 2, 4096, q8, kL2));
  CHECK_FALSE(d256_row_groups(256, 4, 1, 2, 4096, q8, kL2));
  CHECK_FALSE(d256_row_groups(256, 9, 1, 2, 4096, q8, kL2));
  CHECK_FALSE(d256_row_groups(256, 16, 1, 2, 4096, q8, kL2));
  // other head dims: never
  CHECK_FALSE(d256_row_groups(128, 8, 1, 2, 4096, 272, kL2));
  // the L2 edge: 2 heads x 1088 bytes a key x 57,825 keys = 62,913,600 <= 62,914,560; one more key
  // is 62,914,688
  CHECK(d256_row_groups(256, 8, 1, 2, 57825, q8, kL2));
  CHECK_FALSE(d256_row_groups(256, 8, 1, 2, 57826, q8, kL2));
  // no L2 size from the device: no groups; the largest products do not overflow
  CHECK_FALSE(d256_row_groups(256, 8, 1, 2, 4096, q8, 0));
  CHECK_FALSE(d256_row_groups(256, 8, 4096, 1024, INT32_MAX, 1088, kL2));
}
