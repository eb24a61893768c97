// Bad input through the public entry points (fa_packed16_forward, select_kernel,
// fa_workspace_bytes, pack_k_packed16, quantize_v): each case gets invalid_argument, the
// message names the field and ends with the value, and nothing is written. Host buffers of
// the right sizes stand in for device memory; the calls validate before any device work,
// so this runs in every build, with or without a GPU (a valid call is never made through
// them here except in the build without a backend, where it returns not_compiled).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;

namespace {

constexpr int B = 2, NQ = 2, H = 8, G = 2, D = 128, KV = 64, PAGE = 16;
constexpr uint8_t kPoison = 0xab;

// Every buffer a forward call can touch, sized for the shape above, each its own allocation.
struct Buffers {
  aligned_vector<uint8_t> q, o, k, ks, v, vs, mask, ws, smooth;
  aligned_vector<float> lse, sinks;
  aligned_vector<int32_t> kv_len, q_pos, table, errors;
  Buffers()
      : q(B * NQ * H * D * 2), o(B * NQ * H * D * 2), k(B * KV * G * D), ks(B * KV * G * (D / 32) * 2),
        v(B * KV * G * 136), vs(B * KV * G * (D / 32) * 2), mask(B * NQ * KV * 2), ws(1 << 16), smooth(G * D * 4),
        lse(B * NQ * H), sinks(H), kv_len(B, KV), q_pos(B * NQ, 0), table(B * (KV / PAGE)), errors(kNumErrorCounters) {
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    poison();
  }
  void poison() {
    std::memset(o.data(), kPoison, o.size());
    std::memset(lse.data(), kPoison, lse.size() * 4);
    std::memset(errors.data(), kPoison, errors.size() * 4);
    std::memset(ws.data(), kPoison, ws.size());
  }
  bool untouched() const {
    auto all = [](const void* p, size_t n) {
      const uint8_t* b = static_cast<const uint8_t*>(p);
      for (size_t i = 0; i < n; ++i)
        if (b[i] != kPoison) return false;
      return true;
    };
    return all(o.data(), o.size()) && all(lse.data(), lse.size() * 4) && all(errors.data(), errors.size() * 4) &&
           all(ws.data(), ws.size());
  }
};

Buffers& bufs() {
  static Buffers b;
  return b;
}

char* at(aligned_vector<uint8_t>& v, size_t off = 0) { return reinterpret_cast<char*>(v.data()) + off; }

// Packed16 K + q8_0 V, f16 Q/O, every optional pointer set (valid).
AttnParams good() {
  Buffers& b = bufs();
  AttnParams p;
  p.batch = B; p.nq = NQ; p.n_q_heads = H; p.n_kv_heads = G; p.head_dim = D; p.max_kv_len = KV;
  p.q = {DType::f16, b.q.data(), NQ * H * D, H * D, D};
  p.o = {DType::f16, b.o.data(), NQ * H * D, H * D, D};
  p.k.format = KFormat::packed16;
  p.k.data = b.k.data(); p.k.data_strides = {KV * G * D, G * D, D};
  p.k.scales = b.ks.data(); p.k.scale_strides = {KV * G * 8, G * 8, 8};
  p.k.smooth_scale = reinterpret_cast<const float*>(b.smooth.data());
  p.v.format = VFormat::q8_0;
  p.v.data = b.v.data(); p.v.strides = {KV * G * 136, G * 136, 136};
  p.kv_len = b.kv_len.data();
  p.q_pos = b.q_pos.data();
  p.mask = reinterpret_cast<const uint16_t*>(b.mask.data());
  p.mask_seq_stride = NQ * KV; p.mask_row_stride = KV; p.mask_head_stride = 0;
  p.sinks = b.sinks.data();
  p.lse = b.lse.data();
  p.errors = b.errors.data();
  p.workspace = b.ws.data(); p.workspace_bytes = b.ws.size();
  return p;
}

// The same call on a paged view of the K/V buffers: 8 pages of 16 keys, table [2][4].
AttnParams good_paged() {
  AttnParams p = good();
  p.paged.block_table = bufs().table.data();
  p.paged.table_stride = KV / PAGE;
  p.paged.page_size = PAGE;
  p.paged.num_pages = B * KV / PAGE;
  p.k.data_strides.seq = PAGE * G * D;
  p.k.scale_strides.seq = PAGE * G * 8;
  p.v.strides.seq = PAGE * G * 136;
  return p;
}

// The message of a failing Status: "field: why (value)", or "field: is null ...".
void expect_bad(const Status& s, const std::string& field) {
  INFO("status: " << s.to_string());
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().rfind(field + ":", 0) == 0);
  const bool null_field = s.message().find(": is null") != std::string::npos;
  if (!null_field) {
    CHECK(s.message().back() == ')');
    CHECK(s.message().find(" (") != std::string::npos);
  }
}

struct Case {
  const char* field;
  std::function<void(AttnParams&)> edit;
  bool paged = false;
};

const void* plus(const void* p, int64_t n) { return static_cast<const char*>(p) + n; }
constexpr int64_t kHuge = int64_t{1} << 62;

std::vector<Case> forward_cases() {
  Buffers& b = bufs();
  return {
      {"batch", [](AttnParams& p) { p.batch = 0; }},
      {"nq", [](AttnParams& p) { p.nq = -3; }},
      {"head_dim", [](AttnParams& p) { p.head_dim = 100; }},
      {"n_kv_heads", [](AttnParams& p) { p.n_kv_heads = 0; }},
      {"n_q_heads", [](AttnParams& p) { p.n_q_heads = 7; }},
      {"max_kv_len", [](AttnParams& p) { p.max_kv_len = 0; }},
      // upper bounds (api.hpp): grid dimensions, 32-bit rows and keys
      {"batch", [](AttnParams& p) { p.batch = kMaxGridYZ + 1; }},
      {"n_kv_heads", [](AttnParams& p) { p.n_kv_heads = p.n_q_heads = 70000; }},
      {"n_q_heads", [](AttnParams& p) { p.n_kv_heads = 1; p.n_q_heads = 1 << 30; p.alibi_max_bias = 8.0f; }},
      {"nq", [](AttnParams& p) { p.nq = kMaxRows; }},
      {"max_kv_len", [](AttnParams& p) { p.max_kv_len = 2147483647; }},
      // Q
      {"q.data", [](AttnParams& p) { p.q.data = nullptr; }},
      {"q.type", [](AttnParams& p) { p.q.type = static_cast<DType>(7); }},
      {"q.data", [](AttnParams& p) { p.q.data = plus(p.q.data, 1); }},
      {"q.data", [](AttnParams& p) { p.q.type = DType::f32; p.q.data = plus(p.q.data, 2); }},
      {"q.seq_stride", [](AttnParams& p) { p.q.seq_stride = -1; }},
      {"q.head_stride", [](AttnParams& p) { p.q.head_stride = -128; }},
      {"q.seq_stride", [](AttnParams& p) { p.q.seq_stride = kHuge; }},  // (B-1)·2^62 elements · 2 bytes
      // O: alignment, strides, rows written over each other, overlap with what is read
      {"o.data", [](AttnParams& p) { p.o.data = nullptr; }},
      {"o.type", [](AttnParams& p) { p.o.type = static_cast<DType>(9); }},
      {"o.data", [](AttnParams& p) { p.o.data = const_cast<void*>(plus(p.o.data, 1)); }},
      {"o.data", [](AttnParams& p) { p.o.type = DType::f32; p.o.data = const_cast<void*>(plus(p.o.data, 2)); }},
      {"o.row_stride", [](AttnParams& p) { p.o.row_stride = -1; }},
      {"o.head_stride", [](AttnParams& p) { p.o.head_stride = D / 2; }},
      {"o.head_stride", [](AttnParams& p) { p.o.head_stride = 0; }},
      {"o.row_stride", [](AttnParams& p) { p.o.row_stride = 0; }},
      {"o.seq_stride", [](AttnParams& p) { p.o.seq_stride = H * D; }},  // sequences over each other's rows
      {"o.seq_stride", [](AttnParams& p) { p.o.seq_stride = kHuge; }},
      {"o.data", [](AttnParams& p) { p.o.data = const_cast<void*>(p.q.data); }},              // in place over Q
      {"o.data", [&b](AttnParams& p) { p.o.data = at(b.k, 4096); }},                          // inside the K plane
      {"o.data", [&b](AttnParams& p) { p.o.data = at(b.v, b.v.size() - 64); }},               // tail of the V plane
      {"o.data", [&b](AttnParams& p) { p.o.data = b.mask.data(); }},
      {"o.data", [&b](AttnParams& p) { p.o.data = b.kv_len.data(); }},
      {"o.data", [&b](AttnParams& p) { p.o.data = b.sinks.data(); }},
      // K
      {"k.data", [](AttnParams& p) { p.k.data = nullptr; }},
      {"k.format", [](AttnParams& p) { p.k.format = static_cast<KFormat>(9); }},
      {"k.data", [](AttnParams& p) { p.k.data = plus(p.k.data, 8); }},
      {"k.scales", [](AttnParams& p) { p.k.scales = nullptr; }},
      {"k.scales", [](AttnParams& p) { p.k.scales = plus(p.k.scales, 1); }},
      {"k.block", [](AttnParams& p) { p.k.block = 24; }},
      {"k.data_strides.slot", [](AttnParams& p) { p.k.data_strides.slot = 136; }},
      {"k.data_strides", [](AttnParams& p) { p.k.data_strides.slot = kHuge; }},  // 63 · 2^62
      {"k.scale_strides.head", [](AttnParams& p) { p.k.scale_strides.head = -2; }},
      {"k.scale_strides", [](AttnParams& p) { p.k.scale_strides.seq = INT64_MAX - 1; }},
      {"k.smooth_scale", [](AttnParams& p) { p.k.smooth_scale = static_cast<const float*>(plus(p.k.smooth_scale, 2)); }},
      {"k.smooth_scale", [](AttnParams& p) { p.k.format = KFormat::f16; p.k.data_strides = {KV * G * 256, G * 256, 256}; }},
      {"k.data", [](AttnParams& p) {  // the plane's last row would pass the end of the address space
         p.k.data = reinterpret_cast<const void*>(~uintptr_t{0} - 4095);
       }},
      {"dot", [](AttnParams& p) { p.dot = static_cast<DotMode>(5); }},
      // V
      {"v.data", [](AttnParams& p) { p.v.data = nullptr; }},
      {"v.format", [](AttnParams& p) { p.v.format = static_cast<VFormat>(9); }},
      {"v.data", [](AttnParams& p) { p.v.data = plus(p.v.data, 1); }},
      {"v.data", [](AttnParams& p) { p.v.format = VFormat::f16; p.v.data = plus(p.v.data, 2); }},
      {"v.strides.slot", [](AttnParams& p) { p.v.strides.slot = 271; }},
      {"v.strides", [](AttnParams& p) { p.v.strides.slot = kHuge; }},
      {"v.scales", [](AttnParams& p) { p.v.format = VFormat::q8_0_planar; p.v.strides = {KV * G * D, G * D, D}; }},
      {"v.scales", [&b](AttnParams& p) {
         p.v.format = VFormat::q8_0_planar; p.v.strides = {KV * G * D, G * D, D}; p.v.scales = at(b.vs, 1);
       }},
      // small device arrays
      {"kv_len", [](AttnParams& p) { p.kv_len = nullptr; }},
      {"kv_len", [](AttnParams& p) { p.kv_len = static_cast<const int32_t*>(plus(p.kv_len, 2)); }},
      {"q_pos", [](AttnParams& p) { p.q_pos = static_cast<const int32_t*>(plus(p.q_pos, 1)); }},
      {"mask", [](AttnParams& p) { p.mask = static_cast<const uint16_t*>(plus(p.mask, 1)); }},
      {"mask_seq_stride", [](AttnParams& p) { p.mask_seq_stride = -1; }},
      {"mask_row_stride", [](AttnParams& p) { p.mask_row_stride = -64; }},
      {"mask_head_stride", [](AttnParams& p) { p.mask_head_stride = -1; }},
      {"mask_row_stride", [](AttnParams& p) { p.mask_row_stride = kHuge; }},
      {"sinks", [](AttnParams& p) { p.sinks = static_cast<const float*>(plus(p.sinks, 2)); }},
      // LSE, error counters, workspace: aligned, and apart from everything else
      {"lse", [](AttnParams& p) { p.lse = const_cast<float*>(static_cast<const float*>(plus(p.lse, 2))); }},
      {"lse", [&b](AttnParams& p) { p.lse = reinterpret_cast<float*>(at(b.o, 64)); }},
      {"lse", [&b](AttnParams& p) { p.lse = reinterpret_cast<float*>(b.q.data()); }},
      {"errors", [](AttnParams& p) { p.errors = const_cast<int*>(static_cast<const int*>(plus(p.errors, 1))); }},
      {"errors", [&b](AttnParams& p) { p.errors = reinterpret_cast<int*>(at(b.o, 16)); }},
      {"errors", [&b](AttnParams& p) { p.errors = b.kv_len.data(); }},
      {"workspace", [](AttnParams& p) { p.workspace = const_cast<void*>(plus(p.workspace, 8)); }},
      {"workspace", [](AttnParams& p) { p.workspace = nullptr; }},  // workspace_bytes > 0
      {"workspace", [&b](AttnParams& p) { p.workspace = b.v.data(); p.workspace_bytes = 256; }},
      {"workspace", [&b](AttnParams& p) { p.workspace = at(b.o, b.o.size() - 16); p.workspace_bytes = 256; }},
      // options
      {"window", [](AttnParams& p) { p.window = -1; }},
      {"softcap", [](AttnParams& p) { p.softcap = NAN; }},
      {"scale", [](AttnParams& p) { p.scale = -0.125f; }},
      {"scale", [](AttnParams& p) { p.scale = INFINITY; }},
      {"alibi_max_bias", [](AttnParams& p) { p.alibi_max_bias = INFINITY; }},
      {"alibi_mode", [](AttnParams& p) { p.alibi_mode = static_cast<AlibiMode>(7); }},
      {"num_splits", [](AttnParams& p) { p.num_splits = -1; }},
      {"pdl", [](AttnParams& p) { p.pdl = 3; }},
      // paged KV
      {"paged.page_size", [](AttnParams& p) { p.paged.page_size = 48; }, true},
      {"paged.page_size", [](AttnParams& p) { p.paged.page_size = -16; }, true},
      {"paged.block_table", [](AttnParams& p) { p.paged.block_table = nullptr; }, true},
      {"paged.block_table", [](AttnParams& p) {
         p.paged.block_table = static_cast<const int32_t*>(plus(p.paged.block_table, 2));
       }, true},
      {"paged.block_table", [](AttnParams& p) { p.paged.page_size = 0; }, true},  // a table without pages
      {"paged.table_stride", [](AttnParams& p) { p.paged.table_stride = KV / PAGE - 1; }, true},
      {"paged.table_stride", [](AttnParams& p) { p.paged.table_stride = kHuge; }, true},
      {"paged.num_pages", [](AttnParams& p) { p.paged.num_pages = 0; }, true},
      {"k.data_strides", [](AttnParams& p) { p.k.data_strides.seq = kHuge; }, true},  // 7 pages · 2^62
      {"v.strides", [](AttnParams& p) { p.paged.num_pages = 1 << 30; p.v.strides.seq = int64_t{1} << 40; }, true},
      {"o.data", [&b](AttnParams& p) { p.o.data = b.table.data(); }, true},
  };
}

}  // namespace

TEST_CASE("bad-input fixture: the good calls validate", "[bad_input]") {
  for (const AttnParams& p : {good(), good_paged()}) {
    const Status s = validate(p);
    INFO(s.to_string());
    REQUIRE(s.ok());
    KernelChoice c;
    if (device_info().backend == "none") {  // no backend: validation passes, then not_compiled
      CHECK(fa_packed16_forward(p, nullptr).code() == Code::not_compiled);
      CHECK(select_kernel(p, 0, &c).code() == Code::not_compiled);
    }
  }
  CHECK(bufs().untouched());
}

TEST_CASE("fa_packed16_forward: >= 40 bad inputs, each named, nothing written", "[bad_input]") {
  const std::vector<Case> cases = forward_cases();
  CHECK(cases.size() >= 40);
  int n = 0;
  for (const Case& c : cases) {
    AttnParams p = c.paged ? good_paged() : good();
    c.edit(p);
    INFO("case " << n << ": " << c.field);
    bufs().poison();
    expect_bad(fa_packed16_forward(p, nullptr), c.field);
    CHECK(bufs().untouched());
    // the planner entry points run the same checks
    KernelChoice choice;
    expect_bad(select_kernel(p, 0, &choice), c.field);
    size_t ws = 0;
    expect_bad(fa_workspace_bytes(p, 0, &ws), c.field);
    CHECK(bufs().untouched());
    ++n;
  }
  INFO(n << " cases");
}

// Layouts that write disjoint rows are accepted: head-major O ([H][batch][nq] rows),
// a batch of one with seq stride 0, one row per sequence with row stride 0, a padded O.
TEST_CASE("validate accepts disjoint strided outputs", "[bad_input]") {
  Buffers& b = bufs();
  AttnParams p = good();
  p.o.head_stride = B * NQ * D; p.o.seq_stride = NQ * D; p.o.row_stride = D;
  CHECK(validate(p).ok());
  p = good(); p.batch = 1; p.o.seq_stride = 0; p.q.seq_stride = 0;
  CHECK(validate(p).ok());
  p = good(); p.nq = 1; p.o.row_stride = 0; p.o.seq_stride = H * D; p.q_pos = nullptr;
  CHECK(validate(p).ok());
  p = good(); p.o.head_stride = D + 8; p.o.row_stride = H * (D + 8); p.o.seq_stride = NQ * H * (D + 8);
  p.o.data = at(b.ws);  // big enough, and not the workspace anymore
  p.workspace = nullptr; p.workspace_bytes = 0;
  CHECK(validate(p).ok());
  p = good(); p.q.head_stride = 0; p.q.row_stride = 0;  // inputs may be broadcast
  CHECK(validate(p).ok());
}

// ---- pack-on-write / quantize-on-write -------------------------------------------------------
namespace {

constexpr int T = 4, SLOTS = 16;

struct PackBuffers {
  aligned_vector<uint8_t> src, pay, sc, v, vs, shift, scale;
  aligned_vector<int32_t> slots, counters;
  PackBuffers()
      : src(T * G * D * 2), pay(SLOTS * G * D), sc(SLOTS * G * 8), v(SLOTS * G * 136), vs(SLOTS * G * 8),
        shift(G * D * 4), scale(G * D * 4), slots(T), counters(2) {
    for (int t = 0; t < T; ++t) slots[t] = 3 * t;
    poison();
  }
  void poison() {
    for (auto* x : {&pay, &sc, &v, &vs}) std::memset(x->data(), kPoison, x->size());
    std::memset(counters.data(), kPoison, 8);
  }
  bool untouched() const {
    for (const auto* x : {&pay, &sc, &v, &vs})
      for (uint8_t c : *x)
        if (c != kPoison) return false;
    const uint8_t* c = reinterpret_cast<const uint8_t*>(counters.data());
    for (int i = 0; i < 8; ++i)
      if (c[i] != kPoison) return false;
    return true;
  }
};
PackBuffers& pbufs() {
  static PackBuffers b;
  return b;
}

PackKParams good_k() {
  PackBuffers& b = pbufs();
  PackKParams p;
  p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f16; p.src = b.src.data();
  p.src_token_stride = G * D; p.src_head_stride = D;
  p.dst.data = b.pay.data(); p.dst.data_strides = {0, G * D, D};
  p.dst.scales = b.sc.data(); p.dst.scale_strides = {0, G * 8, 8};
  p.dst.smooth_scale = reinterpret_cast<const float*>(b.scale.data());
  p.smooth_shift = reinterpret_cast<const float*>(b.shift.data());
  p.slots = b.slots.data(); p.counters = b.counters.data(); p.n_slots = SLOTS;
  return p;
}
QuantVParams good_v() {
  PackBuffers& b = pbufs();
  QuantVParams p;
  p.n_tokens = T; p.n_kv_heads = G; p.head_dim = D; p.src_type = DType::f16; p.src = b.src.data();
  p.src_token_stride = G * D; p.src_head_stride = D;
  p.dst.format = VFormat::q8_0; p.dst.data = b.v.data(); p.dst.strides = {0, G * 136, 136};
  p.slots = b.slots.data(); p.n_slots = SLOTS;
  return p;
}

template <class P>
struct PCase {
  const char* field;
  std::function<void(P&)> edit;
};

}  // namespace

TEST_CASE("pack_k_packed16: bad inputs named, nothing written", "[bad_input][pack]") {
  PackBuffers& b = pbufs();
  REQUIRE(validate(good_k()).ok());
  {  // payload and scales interleaved in one row (136 bytes used of 144) are accepted
    PackKParams p = good_k();
    p.slots = nullptr; p.n_slots = 0;
    p.dst.data_strides = {0, 2 * 144, 144}; p.dst.scales = at(b.pay, D); p.dst.scale_strides = {0, 2 * 144, 144};
    p.n_tokens = 3;  // 3 slots of 288 bytes fit the 4096-byte payload buffer
    CHECK(validate(p).ok());
  }
  {  // an empty write: an empty tensor's data pointer is null; nothing to read or write
    PackKParams p = good_k();
    p.n_tokens = 0;
    p.src = nullptr;
    b.poison();
    CHECK(validate(p).ok());
    CHECK(pack_k_packed16(p, nullptr).ok());
    CHECK(b.untouched());
    QuantVParams v = good_v();
    v.n_tokens = 0;
    v.src = nullptr;
    CHECK(validate(v).ok());
    CHECK(quantize_v(v, nullptr).ok());
    CHECK(b.untouched());
  }
  const std::vector<PCase<PackKParams>> cases = {
      {"n_tokens", [](PackKParams& p) { p.n_tokens = -1; }},
      {"n_kv_heads", [](PackKParams& p) { p.n_kv_heads = 0; }},
      {"n_kv_heads", [](PackKParams& p) { p.n_kv_heads = kMaxGridYZ + 1; }},
      {"n_tokens", [](PackKParams& p) { p.n_tokens = 1 << 30; p.n_kv_heads = 1024; }},  // 2^44 items: more than one launch
      {"head_dim", [](PackKParams& p) { p.head_dim = 48; }},
      {"src", [](PackKParams& p) { p.src = nullptr; }},
      {"src_type", [](PackKParams& p) { p.src_type = static_cast<DType>(4); }},
      {"src", [](PackKParams& p) { p.src = plus(p.src, 1); }},
      {"src", [](PackKParams& p) { p.src_type = DType::f32; p.src = plus(p.src, 2); }},
      {"src_token_stride", [](PackKParams& p) { p.src_token_stride = -1; }},
      {"src_head_stride", [](PackKParams& p) { p.src_head_stride = -1; }},
      {"src_token_stride", [](PackKParams& p) { p.src_token_stride = kHuge; }},
      {"dst.format", [](PackKParams& p) { p.dst.format = KFormat::f16; }},
      {"dst.block", [](PackKParams& p) { p.dst.block = 8; }},
      {"dst.data", [](PackKParams& p) { p.dst.data = nullptr; }},
      {"dst.scales", [](PackKParams& p) { p.dst.scales = nullptr; }},
      {"dst.data", [](PackKParams& p) { p.dst.data = plus(p.dst.data, 8); }},
      {"dst.data_strides.slot", [](PackKParams& p) { p.dst.data_strides.slot = 264; }},
      {"dst.data_strides.head", [](PackKParams& p) { p.dst.data_strides.head = -16; }},
      {"dst.scales", [](PackKParams& p) { p.dst.scales = plus(p.dst.scales, 1); }},
      {"dst.scale_strides.slot", [](PackKParams& p) { p.dst.scale_strides.slot = 17; }},
      {"dst.data_strides.seq", [](PackKParams& p) { p.page_size = 16; p.dst.data_strides.seq = 8; }},
      {"dst.data_strides", [](PackKParams& p) { p.dst.data_strides.slot = kHuge; }},
      {"dst.smooth_scale", [](PackKParams& p) { p.dst.smooth_scale = static_cast<const float*>(plus(p.dst.smooth_scale, 1)); }},
      {"smooth_shift", [](PackKParams& p) { p.smooth_shift = static_cast<const float*>(plus(p.smooth_shift, 2)); }},
      {"counters", [](PackKParams& p) { p.counters = const_cast<int*>(static_cast<const int*>(plus(p.counters, 2))); }},
      {"slots", [](PackKParams& p) { p.slots = static_cast<const int32_t*>(plus(p.slots, 1)); }},
      {"base_slot", [](PackKParams& p) { p.base_slot = -1; }},
      {"base_slot", [](PackKParams& p) { p.slots = nullptr; p.n_slots = 0; p.base_slot = INT64_MAX - 1; }},
      {"page_size", [](PackKParams& p) { p.page_size = 24; }},
      {"n_slots", [](PackKParams& p) { p.n_slots = -1; }},
      {"pdl", [](PackKParams& p) { p.pdl = 7; }},
      {"dst.data", [&b](PackKParams& p) { p.dst.data = b.src.data(); }},            // writes over its source
      {"dst.scales", [&b](PackKParams& p) { p.dst.scales = b.slots.data(); }},      // over the slot array
      {"dst.data", [&b](PackKParams& p) { p.dst.data = b.shift.data(); }},
      {"counters", [&b](PackKParams& p) { p.counters = reinterpret_cast<int*>(at(b.pay, 64)); }},
  };
  for (const auto& c : cases) {
    PackKParams p = good_k();
    c.edit(p);
    INFO("pack case " << c.field);
    b.poison();
    const Status s = validate(p);
    expect_bad(s, c.field);
    expect_bad(pack_k_packed16(p, nullptr), c.field);
    CHECK(b.untouched());
  }
}

TEST_CASE("quantize_v: bad inputs named, nothing written", "[bad_input][pack]") {
  PackBuffers& b = pbufs();
  REQUIRE(validate(good_v()).ok());
  const std::vector<PCase<QuantVParams>> cases = {
      {"n_tokens", [](QuantVParams& p) { p.n_tokens = -2; }},
      {"n_kv_heads", [](QuantVParams& p) { p.n_kv_heads = -1; }},
      {"n_tokens", [](QuantVParams& p) { p.n_tokens = 1 << 30; p.n_kv_heads = 1024; }},
      {"head_dim", [](QuantVParams& p) { p.head_dim = 100; }},
      {"head_dim", [](QuantVParams& p) { p.head_dim = 80; }},  // q8_0 blocks of 32
      {"src", [](QuantVParams& p) { p.src = nullptr; }},
      {"src", [](QuantVParams& p) { p.src = plus(p.src, 1); }},
      {"src_head_stride", [](QuantVParams& p) { p.src_head_stride = -128; }},
      {"src_token_stride", [](QuantVParams& p) { p.src_token_stride = kHuge; }},
      {"dst.data", [](QuantVParams& p) { p.dst.data = nullptr; }},
      {"dst.format", [](QuantVParams& p) { p.dst.format = static_cast<VFormat>(6); }},
      {"dst.data", [](QuantVParams& p) { p.dst.data = plus(p.dst.data, 1); }},
      {"dst.strides.slot", [](QuantVParams& p) { p.dst.strides.slot = 271; }},
      {"dst.strides.head", [](QuantVParams& p) { p.dst.format = VFormat::q8_0_planar; p.dst.strides.head = 136; }},
      {"dst.scales", [](QuantVParams& p) { p.dst.format = VFormat::q8_0_planar; p.dst.strides = {0, G * D, D}; }},
      {"dst.scale_strides.head", [&b](QuantVParams& p) {
         p.dst.format = VFormat::q8_0_planar; p.dst.strides = {0, G * D, D}; p.dst.scales = b.vs.data();
         p.dst.scale_strides = {0, 16, 7};
       }},
      {"dst.strides", [](QuantVParams& p) { p.dst.strides.slot = kHuge; }},
      {"slots", [](QuantVParams& p) { p.slots = static_cast<const int32_t*>(plus(p.slots, 2)); }},
      {"base_slot", [](QuantVParams& p) { p.base_slot = -5; }},
      {"page_size", [](QuantVParams& p) { p.page_size = 512; }},
      {"n_slots", [](QuantVParams& p) { p.n_slots = -16; }},
      {"pdl", [](QuantVParams& p) { p.pdl = -2; }},
      {"dst.data", [&b](QuantVParams& p) { p.dst.data = at(b.src, 32); }},
      {"dst.data", [&b](QuantVParams& p) { p.dst.data = b.slots.data(); }},
  };
  for (const auto& c : cases) {
    QuantVParams p = good_v();
    c.edit(p);
    INFO("quantize case " << c.field);
    b.poison();
    expect_bad(validate(p), c.field);
    expect_bad(quantize_v(p, nullptr), c.field);
    CHECK(b.untouched());
  }
}
