// libFuzzer target over validate() and the C ABI entry points, linked with the dispatcher of
// the build without a GPU backend (src/dispatch_none.cpp): every call validates and then
// returns not_compiled, so no input can reach a device. Pointers in the params are never
// dereferenced (they stand for device memory), so the fuzzer mutates them freely; the one host
// array, kv_len_host, is pointed at the fuzzer's own buffer or left null (host_lens below).
//
// Input: byte 0 = entry point, byte 1 = message capacity (0: no buffer), then the bytes of the
// C struct (packfa_attn_params / _pack_k_params / _quantize_v_params, zero-filled when short).
//   0 packfa_fa_forward    1 packfa_fa_workspace_bytes    2 packfa_pack_k    3 packfa_quantize_v
//   4 validate(AttnParams) 5 validate(PackKParams)        6 validate(QuantVParams)
// Besides the sanitizers (address, undefined; every report aborts), each input is checked
// against properties (abort on violation):
//   * return codes are packfa codes; a build without a backend never succeeds a forward;
//   * the message is NUL-terminated within its capacity and starts with the code's name;
//   * the C ABI agrees with validate() on the same params (code and message);
//   * params that validate() accepts form no offset that overflows 64 bits or wraps the
//     address space, never write an O element twice, and write nothing (O, LSE, error
//     counters, workspace; pack / quantize destinations) over what the call reads or over
//     each other: recomputed here in 128-bit arithmetic, independently of validate.cpp.
//
// PACKFA_FUZZ_WRITE_SEEDS=<dir>: write the seed corpus (valid params of each entry point)
// and exit.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/c_api.h"

using namespace packfa;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz property violated: %s: %s\n", what, detail.c_str());
  std::abort();
}
#define PROPERTY(cond, detail) \
  do {                         \
    if (!(cond)) fail(#cond, detail); \
  } while (0)

// ---- C struct -> C++ params, without the C ABI's enum range checks (validate sees them all) --
AttnParams attn_from_c(const packfa_attn_params& c) {
  AttnParams p;
  p.batch = c.batch; p.nq = c.nq; p.n_q_heads = c.n_q_heads; p.n_kv_heads = c.n_kv_heads;
  p.head_dim = c.head_dim; p.max_kv_len = c.max_kv_len;
  p.q = {static_cast<DType>(c.q_type), c.q, c.q_strides[0], c.q_strides[1], c.q_strides[2]};
  p.k.format = static_cast<KFormat>(c.k_format);
  p.k.data = c.k; p.k.data_strides = {c.k_strides[0], c.k_strides[1], c.k_strides[2]};
  p.k.scales = c.k_scales; p.k.scale_strides = {c.k_scale_strides[0], c.k_scale_strides[1], c.k_scale_strides[2]};
  p.k.block = c.k_block; p.k.smooth_scale = c.k_smooth_scale;
  p.v.format = static_cast<VFormat>(c.v_format);
  p.v.data = c.v; p.v.strides = {c.v_strides[0], c.v_strides[1], c.v_strides[2]};
  p.v.scales = c.v_scales; p.v.scale_strides = {c.v_scale_strides[0], c.v_scale_strides[1], c.v_scale_strides[2]};
  p.o = {static_cast<DType>(c.o_type), c.o, c.o_strides[0], c.o_strides[1], c.o_strides[2]};
  p.kv_len = c.kv_len; p.q_pos = c.q_pos; p.scale = c.scale; p.causal = c.causal != 0; p.window = c.window;
  p.mask = c.mask; p.mask_seq_stride = c.mask_strides[0]; p.mask_row_stride = c.mask_strides[1];
  p.softcap = c.softcap; p.sinks = c.sinks; p.alibi_max_bias = c.alibi_max_bias; p.lse = c.lse;
  p.dot = static_cast<DotMode>(c.dot); p.num_splits = c.num_splits;
  p.workspace = c.workspace; p.workspace_bytes = c.workspace_bytes; p.pdl = c.pdl;
  p.paged.block_table = c.block_table; p.paged.table_stride = c.block_table_stride;
  p.paged.page_size = c.page_size; p.paged.num_pages = c.num_pages;
  p.mask_head_stride = c.mask_head_stride; p.alibi_mode = static_cast<AlibiMode>(c.alibi_mode);
  p.errors = c.errors;
  p.kv_len_host = c.kv_len_host;
  return p;
}
bool c_enums_in_range(const packfa_attn_params& c) {
  return c.q_type >= 0 && c.q_type <= 2 && c.o_type >= 0 && c.o_type <= 2 && c.k_format >= 0 && c.k_format <= 1 &&
         c.v_format >= 0 && c.v_format < kNumVFormats && c.dot >= 0 && c.dot <= 1 && c.alibi_mode >= 0 &&
         c.alibi_mode <= 1;
}
PackKParams packk_from_c(const packfa_pack_k_params& c) {
  PackKParams p;
  p.n_tokens = c.n_tokens; p.n_kv_heads = c.n_kv_heads; p.head_dim = c.head_dim;
  p.src_type = static_cast<DType>(c.src_type); p.src = c.src;
  p.src_token_stride = c.src_token_stride; p.src_head_stride = c.src_head_stride;
  p.dst.format = KFormat::packed16; p.dst.data = c.dst_payload;
  p.dst.data_strides = {c.dst_payload_strides[0], c.dst_payload_strides[1], c.dst_payload_strides[2]};
  p.dst.scales = c.dst_scales;
  p.dst.scale_strides = {c.dst_scale_strides[0], c.dst_scale_strides[1], c.dst_scale_strides[2]};
  p.dst.block = c.block; p.dst.smooth_scale = c.smooth_scale;
  p.slots = c.slots; p.base_slot = c.base_slot; p.smooth_shift = c.smooth_shift; p.counters = c.counters;
  p.pdl = c.pdl; p.page_size = c.page_size; p.n_slots = c.n_slots;
  return p;
}
QuantVParams quantv_from_c(const packfa_quantize_v_params& c) {
  QuantVParams p;
  p.n_tokens = c.n_tokens; p.n_kv_heads = c.n_kv_heads; p.head_dim = c.head_dim;
  p.src_type = static_cast<DType>(c.src_type); p.src = c.src;
  p.src_token_stride = c.src_token_stride; p.src_head_stride = c.src_head_stride;
  p.dst.format = static_cast<VFormat>(c.v_format); p.dst.data = c.dst;
  p.dst.strides = {c.dst_strides[0], c.dst_strides[1], c.dst_strides[2]};
  p.dst.scales = c.dst_scales;
  p.dst.scale_strides = {c.dst_scale_strides[0], c.dst_scale_strides[1], c.dst_scale_strides[2]};
  p.slots = c.slots; p.base_slot = c.base_slot; p.pdl = c.pdl; p.page_size = c.page_size; p.n_slots = c.n_slots;
  return p;
}

// ---- the independent oracle for accepted params (128-bit arithmetic) --------------------------
using i128 = __int128;
constexpr i128 kI64Max = static_cast<i128>(INT64_MAX);
struct Range {
  const char* name;
  i128 lo, hi;
};
std::string str128(i128 v) {
  if (v == 0) return "0";
  std::string s;
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  while (u) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  return neg ? "-" + s : s;
}
// One past the last unit of sum_k (n_k - 1) * s_k + tail; every partial offset fits in int64.
i128 extent(std::initializer_list<std::pair<i128, i128>> axes, i128 tail, const char* what) {
  i128 e = tail;
  for (auto a : axes)
    if (a.first > 1) e += (a.first - 1) * a.second;
  PROPERTY(e <= kI64Max, std::string(what) + " extent " + str128(e) + " exceeds int64");
  return e;
}
Range range(const char* name, const void* base, i128 bytes) {
  const i128 lo = static_cast<i128>(reinterpret_cast<uintptr_t>(base));
  PROPERTY(lo + bytes <= (static_cast<i128>(1) << 64), std::string(name) + " wraps the address space");
  return {name, lo, lo + bytes};
}
int esize(DType t) { return t == DType::f32 ? 4 : 2; }

void check_accepted(const AttnParams& p) {
  const i128 B = p.batch, NQ = p.nq, H = p.n_q_heads, G = p.n_kv_heads, D = p.head_dim, KV = p.max_kv_len;
  const bool paged = p.paged.page_size > 0;
  std::vector<Range> in, out;
  auto plane = [&](const char* name, const void* base, const Strides& s, i128 row_bytes) {
    PROPERTY(s.seq >= 0 && s.slot >= 0 && s.head >= 0, name);
    const i128 n0 = paged ? p.paged.num_pages : B, n1 = paged ? std::min<i128>(p.paged.page_size, KV) : KV;
    in.push_back(range(name, base, extent({{n0, s.seq}, {n1, s.slot}, {G, s.head}}, row_bytes, name)));
  };
  PROPERTY(p.q.data && p.o.data && p.k.data && p.v.data && p.kv_len, "required pointer null");
  PROPERTY(reinterpret_cast<uintptr_t>(p.q.data) % esize(p.q.type) == 0, "q.data misaligned");
  PROPERTY(reinterpret_cast<uintptr_t>(p.o.data) % esize(p.o.type) == 0, "o.data misaligned");
  in.push_back(range("q", p.q.data,
                     extent({{B, p.q.seq_stride}, {NQ, p.q.row_stride}, {H, p.q.head_stride}}, D, "q") * esize(p.q.type)));
  if (p.k.format == KFormat::packed16) {
    plane("k.data", p.k.data, p.k.data_strides, D);
    plane("k.scales", p.k.scales, p.k.scale_strides, 2 * (D / p.k.block));
    if (p.k.smooth_scale) in.push_back(range("k.smooth_scale", p.k.smooth_scale, 4 * G * D));
  } else {
    plane("k.data", p.k.data, p.k.data_strides, 2 * D);
  }
  plane("v.data", p.v.data, p.v.strides, v_row_bytes(p.v.format, p.head_dim));
  if (p.v.format == VFormat::q8_0_planar) plane("v.scales", p.v.scales, p.v.scale_strides, 2 * (D / 32));
  if (paged) {
    const i128 per_seq = (KV + p.paged.page_size - 1) / p.paged.page_size;
    PROPERTY(p.paged.table_stride >= per_seq, "table_stride");
    in.push_back(range("block_table", p.paged.block_table, 4 * extent({{B, p.paged.table_stride}}, per_seq, "table")));
  }
  in.push_back(range("kv_len", p.kv_len, 4 * B));
  if (p.q_pos) in.push_back(range("q_pos", p.q_pos, 4 * B * NQ));
  if (p.mask)
    in.push_back(range("mask", p.mask,
                       2 * extent({{B, p.mask_seq_stride}, {NQ, p.mask_row_stride}, {H, p.mask_head_stride}}, KV, "mask")));
  if (p.sinks) in.push_back(range("sinks", p.sinks, 4 * H));

  const i128 o_el = extent({{B, p.o.seq_stride}, {NQ, p.o.row_stride}, {H, p.o.head_stride}}, D, "o");
  out.push_back(range("o", p.o.data, o_el * esize(p.o.type)));
  if (p.lse) out.push_back(range("lse", p.lse, 4 * B * NQ * H));
  if (p.errors) out.push_back(range("errors", p.errors, 4 * kNumErrorCounters));
  if (p.workspace && p.workspace_bytes) out.push_back(range("workspace", p.workspace, p.workspace_bytes));
  for (size_t i = 0; i < out.size(); ++i) {
    for (const Range& r : in)
      PROPERTY(!(out[i].lo < r.hi && r.lo < out[i].hi), std::string(out[i].name) + " overlaps " + r.name);
    for (size_t j = 0; j < i; ++j)
      PROPERTY(!(out[i].lo < out[j].hi && out[j].lo < out[i].hi), std::string(out[i].name) + " overlaps " + out[j].name);
  }
  // O rows [off, off + D) pairwise disjoint: brute force while small, by sorting otherwise
  const i128 rows = B * NQ * H;
  if (rows <= 4096) {
    std::vector<std::pair<i128, i128>> r;
    r.reserve(static_cast<size_t>(rows));
    for (i128 b = 0; b < B; ++b)
      for (i128 i = 0; i < NQ; ++i)
        for (i128 h = 0; h < H; ++h) {
          const i128 off = b * p.o.seq_stride + i * p.o.row_stride + h * p.o.head_stride;
          r.push_back({off, off + D});
        }
    std::sort(r.begin(), r.end());
    for (size_t k = 1; k < r.size(); ++k)
      PROPERTY(r[k].first >= r[k - 1].second, "two O rows share elements at " + str128(r[k].first));
  }
}

// Accepted pack / quantize params: the source's and the destination planes' offsets fit (the
// destination's where the largest slot is bounded: no slot array, or n_slots set), and the
// destination planes do not overlap the source or the slot array.
void check_accepted_write(int n_tokens, int G, int D, DType st, const void* src, int64_t tok, int64_t head,
                          const int32_t* slots, int64_t base_slot, int page_size, int64_t n_slots,
                          std::initializer_list<std::tuple<const char*, const void*, Strides, i128>> planes) {
  if (n_tokens == 0) return;
  std::vector<Range> in;
  in.push_back(range("src", src, esize(st) * extent({{n_tokens, tok}, {G, head}}, D, "src")));
  if (slots) in.push_back(range("slots", slots, 4 * static_cast<i128>(n_tokens)));
  i128 ms = slots ? -1 : static_cast<i128>(base_slot) + n_tokens - 1;
  if (n_slots > 0) ms = ms < 0 ? n_slots - 1 : std::min<i128>(ms, n_slots - 1);
  if (ms < 0 && slots) return;  // unbounded: a device slot array without n_slots
  for (const auto& pl : planes) {
    const char* name = std::get<0>(pl);
    const Strides& sd = std::get<2>(pl);
    i128 e;
    if (page_size > 0) {
      const i128 pages = ms / page_size + 1, offs = pages > 1 ? page_size : ms + 1;
      e = extent({{pages, sd.seq}, {offs, sd.slot}, {G, sd.head}}, std::get<3>(pl), name);
    } else {
      e = extent({{ms + 1, sd.slot}, {G, sd.head}}, std::get<3>(pl), name);
    }
    const Range r = range(name, std::get<1>(pl), e);
    for (const Range& x : in) PROPERTY(!(r.lo < x.hi && x.lo < r.hi), std::string(name) + " overlaps " + x.name);
  }
}
void check_accepted(const PackKParams& p) {
  check_accepted_write(p.n_tokens, p.n_kv_heads, p.head_dim, p.src_type, p.src, p.src_token_stride,
                       p.src_head_stride, p.slots, p.base_slot, p.page_size, p.n_slots,
                       {{"dst.data", p.dst.data, p.dst.data_strides, p.head_dim},
                        {"dst.scales", p.dst.scales, p.dst.scale_strides, 2 * (p.head_dim / p.dst.block)}});
}
void check_accepted(const QuantVParams& p) {
  if (p.dst.format == VFormat::q8_0_planar)
    check_accepted_write(p.n_tokens, p.n_kv_heads, p.head_dim, p.src_type, p.src, p.src_token_stride,
                         p.src_head_stride, p.slots, p.base_slot, p.page_size, p.n_slots,
                         {{"dst.data", p.dst.data, p.dst.strides, p.head_dim},
                          {"dst.scales", p.dst.scales, p.dst.scale_strides, 2 * (p.head_dim / 32)}});
  else
    check_accepted_write(p.n_tokens, p.n_kv_heads, p.head_dim, p.src_type, p.src, p.src_token_stride,
                         p.src_head_stride, p.slots, p.base_slot, p.page_size, p.n_slots,
                         {{"dst.data", p.dst.data, p.dst.strides, v_row_bytes(p.dst.format, p.head_dim)}});
}

void check_message(int rc, const char* msg, size_t cap) {
  PROPERTY(rc >= 0 && rc <= 5, "return code " + std::to_string(rc));
  if (!msg || cap == 0) return;
  const size_t n = strnlen(msg, cap);
  PROPERTY(n < cap, "message not NUL-terminated within its capacity");
  const std::string want = code_name(static_cast<Code>(rc));
  if (cap > want.size() + 1) PROPERTY(std::strncmp(msg, want.c_str(), want.size()) == 0, std::string("message '") + msg + "'");
}

// The C ABI's message is "code: <Status message>", cut to cap - 1 characters.
void check_same_message(const char* msg, size_t cap, const Status& s) {
  if (!msg || cap == 0) return;
  const std::string full = s.to_string();
  PROPERTY(full.compare(0, cap - 1, msg) == 0 && std::strlen(msg) == std::min(full.size(), cap - 1),
           std::string("C ABI '") + msg + "' vs validate '" + full + "'");
}

// ---- seeds ---------------------------------------------------------------------------------------
const void* addr(uint64_t a) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(a)); }

std::vector<std::vector<uint8_t>> seeds() {
  std::vector<std::vector<uint8_t>> out;
  auto add = [&](uint8_t op, const void* s, size_t n) {
    std::vector<uint8_t> v = {op, 200};
    v.insert(v.end(), static_cast<const uint8_t*>(s), static_cast<const uint8_t*>(s) + n);
    out.push_back(v);
  };
  // decode, packed16 K + q8_0 V, every optional pointer set; planes 16 GiB apart
  packfa_attn_params a;
  std::memset(&a, 0, sizeof a);
  a.batch = 2; a.nq = 2; a.n_q_heads = 8; a.n_kv_heads = 2; a.head_dim = 128; a.max_kv_len = 4096;
  a.q_type = 1; a.q = addr(0x100000000ull); a.q_strides[0] = 2048; a.q_strides[1] = 1024; a.q_strides[2] = 128;
  a.o_type = 1; a.o = const_cast<void*>(addr(0x200000000ull)); a.o_strides[0] = 2048; a.o_strides[1] = 1024; a.o_strides[2] = 128;
  a.k_format = 0; a.k = addr(0x300000000ull); a.k_strides[0] = 4096 * 256; a.k_strides[1] = 256; a.k_strides[2] = 128;
  a.k_scales = addr(0x400000000ull); a.k_scale_strides[0] = 4096 * 16; a.k_scale_strides[1] = 16; a.k_scale_strides[2] = 8;
  a.k_block = 32; a.k_smooth_scale = static_cast<const float*>(addr(0x500000000ull));
  a.v_format = 2; a.v = addr(0x600000000ull); a.v_strides[0] = 4096 * 272; a.v_strides[1] = 272; a.v_strides[2] = 136;
  a.kv_len = static_cast<const int32_t*>(addr(0x700000000ull)); a.q_pos = static_cast<const int32_t*>(addr(0x700001000ull));
  a.causal = 1; a.window = 0; a.mask = static_cast<const uint16_t*>(addr(0x800000000ull));
  a.mask_strides[0] = 2 * 4096; a.mask_strides[1] = 4096; a.sinks = static_cast<const float*>(addr(0x900000000ull));
  a.lse = const_cast<float*>(static_cast<const float*>(addr(0xa00000000ull))); a.pdl = -1;
  a.workspace = const_cast<void*>(addr(0xb00000000ull)); a.workspace_bytes = 1 << 20;
  a.errors = const_cast<int*>(static_cast<const int*>(addr(0xc00000000ull)));
  for (uint8_t op : {0, 1, 4}) add(op, &a, sizeof a);
  // q8_0_planar V, f16 K, softcap / ALiBi (ggml mode), block 16, D = 80 with f16 V
  packfa_attn_params b = a;
  b.v_format = 4; b.v_strides[0] = 4096 * 256; b.v_strides[1] = 256; b.v_strides[2] = 128;
  b.v_scales = addr(0xd00000000ull); b.v_scale_strides[0] = 4096 * 16; b.v_scale_strides[1] = 16; b.v_scale_strides[2] = 8;
  b.softcap = 30.0f; b.alibi_max_bias = 8.0f; b.alibi_mode = 1; b.mask_head_stride = 2 * 2 * 4096;
  for (uint8_t op : {0, 4}) add(op, &b, sizeof b);
  packfa_attn_params c = a;
  c.k_format = 1; c.k_scales = nullptr; c.k_smooth_scale = nullptr; c.k_strides[0] = 4096 * 512; c.k_strides[1] = 512;
  c.k_strides[2] = 256; c.head_dim = 80; c.k_block = 16; c.v_format = 0; c.v_strides[0] = 4096 * 320;
  c.v_strides[1] = 320; c.v_strides[2] = 160; c.dot = 1; c.num_splits = 7;
  for (uint8_t op : {0, 4}) add(op, &c, sizeof c);
  // paged: 64 pages of 64 keys, table [2][64]
  packfa_attn_params d = a;
  d.page_size = 64; d.num_pages = 64; d.block_table = static_cast<const int32_t*>(addr(0xe00000000ull));
  d.block_table_stride = 64; d.k_strides[0] = 64 * 256; d.k_scale_strides[0] = 64 * 16; d.v_strides[0] = 64 * 272;
  for (uint8_t op : {0, 1, 4}) add(op, &d, sizeof d);
  // pack K / quantize V
  packfa_pack_k_params k;
  std::memset(&k, 0, sizeof k);
  k.n_tokens = 4; k.n_kv_heads = 2; k.head_dim = 128; k.src_type = 1; k.src = addr(0x100000000ull);
  k.src_token_stride = 256; k.src_head_stride = 128; k.dst_payload = const_cast<void*>(addr(0x200000000ull));
  k.dst_payload_strides[1] = 256; k.dst_payload_strides[2] = 128; k.dst_scales = const_cast<void*>(addr(0x300000000ull));
  k.dst_scale_strides[1] = 16; k.dst_scale_strides[2] = 8; k.block = 32; k.pdl = -1; k.base_slot = 100;
  k.counters = const_cast<int*>(static_cast<const int*>(addr(0x400000000ull)));
  for (uint8_t op : {2, 5}) add(op, &k, sizeof k);
  k.slots = static_cast<const int32_t*>(addr(0x500000000ull)); k.n_slots = 4096; k.page_size = 16;
  k.dst_payload_strides[0] = 16 * 256; k.dst_scale_strides[0] = 16 * 16;
  for (uint8_t op : {2, 5}) add(op, &k, sizeof k);
  packfa_quantize_v_params v;
  std::memset(&v, 0, sizeof v);
  v.n_tokens = 4; v.n_kv_heads = 2; v.head_dim = 128; v.src_type = 1; v.src = addr(0x100000000ull);
  v.src_token_stride = 256; v.src_head_stride = 128; v.v_format = 2; v.dst = const_cast<void*>(addr(0x200000000ull));
  v.dst_strides[1] = 272; v.dst_strides[2] = 136; v.pdl = -1;
  for (uint8_t op : {3, 6}) add(op, &v, sizeof v);
  v.v_format = 4; v.dst_strides[1] = 256; v.dst_strides[2] = 128; v.dst_scales = const_cast<void*>(addr(0x300000000ull));
  v.dst_scale_strides[1] = 16; v.dst_scale_strides[2] = 8; v.slots = static_cast<const int32_t*>(addr(0x400000000ull));
  v.n_slots = 1000;
  for (uint8_t op : {3, 6}) add(op, &v, sizeof v);
  return out;
}

// kv_len_host is read by validate() (a host array): an odd raw value points it at this buffer of
// `batch` entries spread over [-1, max_kv_len + 1] (valid and invalid), anything else nulls it.
constexpr int kMaxHostBatch = 4096;
void host_lens(packfa_attn_params* c) {
  static int32_t buf[kMaxHostBatch];
  const uint64_t raw = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(c->kv_len_host));
  if (!(raw & 1) || c->batch < 1 || c->batch > kMaxHostBatch) {
    c->kv_len_host = nullptr;
    return;
  }
  const uint64_t span = static_cast<uint64_t>(std::max(c->max_kv_len, 0)) + 3;
  for (int b = 0; b < c->batch; ++b)
    buf[b] = static_cast<int32_t>(static_cast<int64_t>(((raw >> 1) * 2654435761ull + b * 40503ull) % span) - 1);
  c->kv_len_host = buf;
}

template <class T>
T load(const uint8_t* data, size_t size) {
  T t;
  std::memset(&t, 0, sizeof t);
  std::memcpy(&t, data, size < sizeof t ? size : sizeof t);
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("PACKFA_FUZZ_WRITE_SEEDS");
  if (!dir) return 0;
  int n = 0;
  for (const auto& s : seeds()) {
    const std::string path = std::string(dir) + "/seed" + std::to_string(n++);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(s.data(), 1, s.size(), f) != s.size()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
    std::fclose(f);
  }
  // every seed is a valid call of its entry point (what the fuzzer starts from)
  for (const auto& s : seeds()) {
    const uint8_t* body = s.data() + 2;
    const size_t n_body = s.size() - 2;
    Status st;
    if (s[0] == 0 || s[0] == 1 || s[0] == 4) st = validate(attn_from_c(load<packfa_attn_params>(body, n_body)));
    if (s[0] == 2 || s[0] == 5) st = validate(packk_from_c(load<packfa_pack_k_params>(body, n_body)));
    if (s[0] == 3 || s[0] == 6) st = validate(quantv_from_c(load<packfa_quantize_v_params>(body, n_body)));
    if (!st.ok()) {
      std::fprintf(stderr, "seed for entry %d is not valid: %s\n", s[0], st.to_string().c_str());
      std::exit(1);
    }
  }
  std::printf("wrote %d seeds to %s\n", n, dir);
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int op = data[0] % 7;
  const size_t cap = data[1];
  char buf[256];
  char* msg = cap ? buf : nullptr;
  data += 2;
  size -= 2;
  switch (op) {
    case 0:
    case 1:
    case 4: {
      packfa_attn_params c = load<packfa_attn_params>(data, size);
      host_lens(&c);
      const AttnParams p = attn_from_c(c);
      const Status s = validate(p);
      PROPERTY(validate(p).to_string() == s.to_string(), "validate is not a function of its input");
      if (s.ok()) check_accepted(p);
      if (op == 4) return 0;
      int rc;
      if (op == 0) {
        rc = packfa_fa_forward(&c, nullptr, msg, cap);
      } else {
        size_t bytes = 0;
        rc = packfa_fa_workspace_bytes(&c, 0, &bytes, msg, cap);
      }
      check_message(rc, msg, cap);
      PROPERTY(rc == 1 || rc == 2, "a build without a backend returned " + std::to_string(rc));
      if (c_enums_in_range(c)) {
        PROPERTY(rc == (s.ok() ? 2 : 1), "C ABI " + std::to_string(rc) + " vs validate " + s.to_string());
        if (!s.ok()) check_same_message(msg, cap, s);
      }
      return 0;
    }
    case 2:
    case 5: {
      const packfa_pack_k_params c = load<packfa_pack_k_params>(data, size);
      const PackKParams p = packk_from_c(c);
      const Status s = validate(p);
      if (s.ok()) check_accepted(p);
      if (op == 5) return 0;
      const int rc = packfa_pack_k(&c, nullptr, msg, cap);
      check_message(rc, msg, cap);
      const bool type_ok = c.src_type >= 0 && c.src_type <= 2;
      if (type_ok) {
        PROPERTY(rc == (s.ok() ? (p.n_tokens == 0 ? 0 : 2) : 1), "pack_k " + std::to_string(rc) + " vs " + s.to_string());
        if (!s.ok()) check_same_message(msg, cap, s);
      }
      return 0;
    }
    default: {
      const packfa_quantize_v_params c = load<packfa_quantize_v_params>(data, size);
      const QuantVParams p = quantv_from_c(c);
      const Status s = validate(p);
      if (s.ok()) check_accepted(p);
      if (op == 6) return 0;
      const int rc = packfa_quantize_v(&c, nullptr, msg, cap);
      check_message(rc, msg, cap);
      const bool enums_ok = c.src_type >= 0 && c.src_type <= 2 && c.v_format >= 0 && c.v_format < kNumVFormats;
      if (enums_ok) {
        PROPERTY(rc == (s.ok() ? (p.n_tokens == 0 ? 0 : 2) : 1), "quantize_v " + std::to_string(rc) + " vs " + s.to_string());
        if (!s.ok()) check_same_message(msg, cap, s);
      }
      return 0;
    }
  }
}
