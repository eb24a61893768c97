// validate(const AttnParams&): every rule names its field.
#include <cstdint>
#include <string>

#include "packfa/api.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

namespace {

const void* fake(uintptr_t addr) { return reinterpret_cast<const void*>(addr); }

// Inputs may share bytes (they are only read); what a call writes (O, LSE, workspace) lies
// 4 GiB away from every input. Q/O strides fit every head_dim up to 256.
AttnParams good() {
  AttnParams p;
  p.batch = 2; p.nq = 4; p.n_q_heads = 8; p.n_kv_heads = 2; p.head_dim = 128; p.max_kv_len = 1000;
  p.q.data = fake(0x10000); p.q.seq_stride = 8192; p.q.row_stride = 2048; p.q.head_stride = 256;
  p.o.data = const_cast<void*>(fake(0x100000000ull)); p.o.seq_stride = 8192; p.o.row_stride = 2048; p.o.head_stride = 256;
  p.k.data = fake(0x30000); p.k.data_strides = {1 << 20, 256, 128};
  p.k.scales = fake(0x40002); p.k.scale_strides = {1 << 16, 16, 8};
  p.v.format = VFormat::q4_0; p.v.data = fake(0x50002); p.v.strides = {1 << 20, 144, 72};
  p.kv_len = static_cast<const int32_t*>(fake(0x60000));
  return p;
}

// good() with a q8_0_planar V: 128 int8 per row (16-aligned rows), 4 fp16 scales per row.
AttnParams good_planar() {
  AttnParams p = good();
  p.v.format = VFormat::q8_0_planar;
  p.v.data = fake(0x50000); p.v.strides = {1 << 20, 256, 128};
  p.v.scales = fake(0x58002); p.v.scale_strides = {1 << 16, 18, 8};
  return p;
}

// The first bad field is named and the message ends with the offending value in parentheses
// (a pointer, a number or, for overlaps, the two byte ranges).
void expect_field(const AttnParams& p, const std::string& field) {
  const Status s = validate(p);
  INFO("status: " << s.to_string());
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().rfind(field + ":", 0) == 0);
  const bool null_field = s.message().find("is null") != std::string::npos;
  if (!null_field) CHECK(s.message().back() == ')');
}

}  // namespace

TEST_CASE("validate accepts good params (packed16 and f16 K, every V format)", "[validate]") {
  CHECK(validate(good()).ok());
  AttnParams p = good();
  p.k.block = 16;
  p.head_dim = 80;
  p.v.format = VFormat::f16;
  p.v.data = fake(0x50000);
  p.v.strides = {1 << 20, 320, 160};
  CHECK(validate(p).ok());
  p = good();
  p.k.format = KFormat::f16;
  p.k.scales = nullptr;
  p.dot = DotMode::int8;  // accepted: f16 K always runs the fp16 dot
  CHECK(validate(p).ok());
  p = good();
  p.v.format = VFormat::q8_0;
  p.v.strides = {1 << 20, 272, 136};
  CHECK(validate(p).ok());
  CHECK(validate(good_planar()).ok());
  p.workspace = const_cast<void*>(fake(0x200000000ull));
  p.workspace_bytes = 4096;
  p.pdl = 1;
  p.mask = static_cast<const uint16_t*>(fake(0x80000));
  CHECK(validate(p).ok());
}

TEST_CASE("validate: shape fields", "[validate]") {
  AttnParams p;
  p = good(); p.batch = 0; expect_field(p, "batch");
  p = good(); p.nq = 0; expect_field(p, "nq");
  for (int d : {0, 32, 48, 100, 192, 512}) { p = good(); p.head_dim = d; expect_field(p, "head_dim"); }
  for (int d : {64, 96, 256}) { p = good(); p.head_dim = d; CHECK(validate(p).ok()); }
  p = good(); p.n_kv_heads = 0; expect_field(p, "n_kv_heads");
  p = good(); p.n_q_heads = 0; expect_field(p, "n_q_heads");
  p = good(); p.n_q_heads = 7; expect_field(p, "n_q_heads");
  p = good(); p.max_kv_len = 0; expect_field(p, "max_kv_len");
}

// The upper bounds (api.hpp): a launch grid's y / z dimension, 32-bit row and key arithmetic.
// Each bound's edge is accepted (strides 0 keep every region inside the address space) and one
// past it is refused naming the field. Without them a max_kv_len near INT_MAX planned one split
// of 2^31 keys (a negative split length in the kernel: O all zeros, status ok) and an
// n_q_heads >= 2^30 with ALiBi never left the slope loop.
TEST_CASE("validate: upper bounds of the shape fields", "[validate]") {
  // inputs with zero strides (they may alias), O dense for the shape (its rows may not)
  auto edge = [](AttnParams p) {
    p.q.seq_stride = p.q.row_stride = p.q.head_stride = 0;
    p.k.data_strides = {0, 0, 0};
    p.k.scale_strides = {0, 0, 0};
    p.v.strides = {0, 0, 0};
    p.o.head_stride = p.head_dim;
    p.o.row_stride = static_cast<int64_t>(p.n_q_heads) * p.head_dim;
    p.o.seq_stride = static_cast<int64_t>(p.nq) * p.o.row_stride;
    const Status s = validate(p);
    INFO(s.to_string());
    return s;
  };
  auto ok_at = [&](auto&& set) {
    AttnParams p = good();
    set(p);
    CHECK(edge(p).ok());
  };
  auto bad_at = [&](auto&& set, const char* field) {
    AttnParams p = good();
    set(p);
    const Status s = edge(p);
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().rfind(std::string(field) + ":", 0) == 0);
  };
  ok_at([](AttnParams& p) { p.batch = kMaxGridYZ; });
  bad_at([](AttnParams& p) { p.batch = kMaxGridYZ + 1; }, "batch");
  ok_at([](AttnParams& p) { p.n_kv_heads = p.n_q_heads = kMaxGridYZ; });
  bad_at([](AttnParams& p) { p.n_kv_heads = p.n_q_heads = kMaxGridYZ + 1; }, "n_kv_heads");
  bad_at([](AttnParams& p) { p.n_kv_heads = 1; p.n_q_heads = kMaxGridYZ + 1; }, "n_q_heads");
  bad_at([](AttnParams& p) { p.n_kv_heads = 1; p.n_q_heads = 1 << 30; p.alibi_max_bias = 8.0f; }, "n_q_heads");
  ok_at([](AttnParams& p) { p.nq = kMaxRows / 4; });  // gqa 4
  bad_at([](AttnParams& p) { p.nq = kMaxRows / 4 + 1; }, "nq");
  bad_at([](AttnParams& p) { p.nq = 1 << 30; }, "nq");
  ok_at([](AttnParams& p) { p.max_kv_len = kMaxKeys; });
  bad_at([](AttnParams& p) { p.max_kv_len = kMaxKeys + 1; }, "max_kv_len");
  bad_at([](AttnParams& p) { p.max_kv_len = 2147483647; }, "max_kv_len");
}

TEST_CASE("validate: Q and O", "[validate]") {
  AttnParams p;
  p = good(); p.q.data = nullptr; expect_field(p, "q.data");
  p = good(); p.o.data = nullptr; expect_field(p, "o.data");
  p = good(); p.q.type = static_cast<DType>(7); expect_field(p, "q.type");
  p = good(); p.o.type = static_cast<DType>(7); expect_field(p, "o.type");
  p = good(); p.q.seq_stride = -1; expect_field(p, "q.seq_stride");
  p = good(); p.q.row_stride = -1; expect_field(p, "q.row_stride");
  p = good(); p.q.head_stride = -1; expect_field(p, "q.head_stride");
  p = good(); p.o.seq_stride = -1; expect_field(p, "o.seq_stride");
  p = good(); p.o.row_stride = -1; expect_field(p, "o.row_stride");
  p = good(); p.o.head_stride = -1; expect_field(p, "o.head_stride");
}

TEST_CASE("validate: K cache", "[validate]") {
  AttnParams p;
  p = good(); p.k.data = nullptr; expect_field(p, "k.data");
  p = good(); p.k.format = static_cast<KFormat>(9); expect_field(p, "k.format");
  p = good(); p.k.scales = nullptr; expect_field(p, "k.scales");
  p = good(); p.k.block = 64; expect_field(p, "k.block");
  p = good(); p.head_dim = 80; expect_field(p, "k.block");  // B = 32 does not divide 80
  p = good(); p.k.data = fake(0x30008); expect_field(p, "k.data");
  p = good(); p.k.data_strides.seq = 8; expect_field(p, "k.data_strides.seq");
  p = good(); p.k.data_strides.slot = 136; expect_field(p, "k.data_strides.slot");
  p = good(); p.k.data_strides.head = -16; expect_field(p, "k.data_strides.head");
  p = good(); p.k.scales = fake(0x40001); expect_field(p, "k.scales");
  p = good(); p.k.scale_strides.seq = 3; expect_field(p, "k.scale_strides.seq");
  p = good(); p.k.scale_strides.slot = 9; expect_field(p, "k.scale_strides.slot");
  p = good(); p.k.scale_strides.head = -2; expect_field(p, "k.scale_strides.head");
  p = good(); p.k.format = KFormat::f16; p.k.data = fake(0x30004); expect_field(p, "k.data");
  p = good(); p.k.format = KFormat::f16; p.k.data_strides.head = 8; expect_field(p, "k.data_strides.head");
  p = good(); p.dot = static_cast<DotMode>(5); expect_field(p, "dot");
}

TEST_CASE("validate: V cache", "[validate]") {
  AttnParams p;
  p = good(); p.v.data = nullptr; expect_field(p, "v.data");
  p = good(); p.v.format = static_cast<VFormat>(9); expect_field(p, "v.format");
  p = good(); p.head_dim = 80; p.k.block = 16; expect_field(p, "v.format");  // q4_0 needs D % 32
  p = good(); p.head_dim = 112; p.k.block = 16; p.v.format = VFormat::q8_0; expect_field(p, "v.format");
  p = good(); p.v.data = fake(0x50001); expect_field(p, "v.data");
  p = good(); p.v.strides.slot = 145; expect_field(p, "v.strides.slot");
  p = good(); p.v.format = VFormat::f16; expect_field(p, "v.data");  // 0x50002 not 16-aligned
  p = good(); p.v.format = VFormat::bf16; p.v.data = fake(0x50000); p.v.strides.head = 72;
  expect_field(p, "v.strides.head");
}

TEST_CASE("validate: q8_0_planar V (16-aligned int8 rows, fp16 scale plane)", "[validate]") {
  AttnParams p;
  p = good_planar(); REQUIRE(validate(p).ok());
  p = good_planar(); p.v.scales = nullptr; expect_field(p, "v.scales");
  p = good_planar(); p.v.scales = fake(0x58001); expect_field(p, "v.scales");
  p = good_planar(); p.v.data = fake(0x50008); expect_field(p, "v.data");  // 8-aligned is not enough
  p = good_planar(); p.v.strides.slot = 264; expect_field(p, "v.strides.slot");
  p = good_planar(); p.v.strides.head = 136; expect_field(p, "v.strides.head");
  p = good_planar(); p.v.scale_strides.slot = 17; expect_field(p, "v.scale_strides.slot");
  p = good_planar(); p.v.scale_strides.head = 9; expect_field(p, "v.scale_strides.head");
  p = good_planar(); p.v.scale_strides.seq = -2; expect_field(p, "v.scale_strides.seq");
  p = good_planar(); p.head_dim = 80; p.k.block = 16; expect_field(p, "v.format");  // blocks of 32
  p = good_planar(); p.head_dim = 112; p.k.block = 16; expect_field(p, "v.format");
  for (int d : {64, 96, 256}) { p = good_planar(); p.head_dim = d; CHECK(validate(p).ok()); }
  // the scale plane belongs to q8_0_planar: the other formats ignore v.scales
  p = good(); p.v.scales = fake(0x58001); p.v.scale_strides = {1, 1, 1}; CHECK(validate(p).ok());
}

TEST_CASE("validate: options", "[validate]") {
  AttnParams p;
  p = good(); p.kv_len = nullptr; expect_field(p, "kv_len");
  p = good(); p.mask = static_cast<const uint16_t*>(fake(0x80000)); p.mask_seq_stride = -1; expect_field(p, "mask_seq_stride");
  p = good(); p.mask = static_cast<const uint16_t*>(fake(0x80000)); p.mask_row_stride = -1; expect_field(p, "mask_row_stride");
  p = good(); p.mask_row_stride = -1; CHECK(validate(p).ok());  // ignored without a mask
  p = good(); p.window = -1; expect_field(p, "window");
  p = good(); p.softcap = -1.0f; expect_field(p, "softcap");
  p = good(); p.softcap = INFINITY; expect_field(p, "softcap");
  p = good(); p.softcap = NAN; expect_field(p, "softcap");
  p = good(); p.scale = -0.5f; expect_field(p, "scale");
  p = good(); p.scale = INFINITY; expect_field(p, "scale");
  p = good(); p.alibi_max_bias = -1.0f; expect_field(p, "alibi_max_bias");
  p = good(); p.num_splits = -1; expect_field(p, "num_splits");
  p = good(); p.workspace_bytes = 16; expect_field(p, "workspace");
  p = good(); p.pdl = 2; expect_field(p, "pdl");
  p = good(); p.pdl = -2; expect_field(p, "pdl");
  for (int v : {-1, 0, 1}) { p = good(); p.pdl = v; CHECK(validate(p).ok()); }
}

TEST_CASE("validate: kv_len_host (host lengths for the planner)", "[validate]") {
  AttnParams p = good();  // batch 2, max_kv_len 1000
  const int32_t ok[2] = {0, 1000}, neg[2] = {5, -1}, over[2] = {1001, 5};
  p.kv_len_host = ok;
  CHECK(validate(p).ok());
  p.kv_len_host = neg;
  expect_field(p, "kv_len_host");
  CHECK(validate(p).message().find("entry 1 must be in [0, max_kv_len = 1000]") != std::string::npos);
  p.kv_len_host = over;
  expect_field(p, "kv_len_host");
  CHECK(validate(p).message().find("(1001)") != std::string::npos);
}

TEST_CASE("validate: smoothing needs packed16 K", "[validate]") {
  AttnParams p = good();
  p.k.format = KFormat::f16;
  p.k.data_strides = {1 << 20, 256, 256};
  REQUIRE(validate(p).ok());
  p.k.smooth_scale = static_cast<const float*>(fake(0x70000));
  expect_field(p, "k.smooth_scale");
}
