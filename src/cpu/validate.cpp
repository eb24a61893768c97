// packfa::validate(): every field the kernels rely on (api.hpp), before any device work.
// Pointers are never dereferenced (they are device pointers): each is checked for null where
// required, for alignment to what the kernels load or store through it, for the offsets a
// call can form (no 64-bit overflow, no wrap of the address space) and, for what a call
// writes, for overlap with itself and with everything it reads. The first bad field is named:
// "field: why (value)". Strings are built only on failure: a valid call allocates nothing.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "packfa/api.hpp"

namespace packfa {
namespace {

// ---- messages ----------------------------------------------------------------------------------
std::string hex(const void* ptr) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(ptr));
  return b;
}
std::string hex(uintptr_t v) { return hex(reinterpret_cast<const void*>(v)); }
std::string flt(float f) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(f));
  return b;
}
std::string num(int64_t v) { return std::to_string(v); }
// A check's result: null when fine, the Status when not. On the success path no Status (and
// no std::string) is made: validate() runs on every call.
using Check = std::unique_ptr<Status>;
Check fail(Status s) { return std::make_unique<Status>(std::move(s)); }
#define VTRY(expr)           \
  do {                       \
    Check vtry_c_ = (expr);  \
    if (vtry_c_) return vtry_c_; \
  } while (0)
Check bad(const std::string& field, const std::string& why, const std::string& value) {
  return fail(invalid(field, why + " (" + value + ")"));
}
std::string strides_str(const Strides& s) {
  return "seq " + num(s.seq) + ", slot " + num(s.slot) + ", head " + num(s.head);
}

// ---- checked arithmetic (all operands >= 0) -------------------------------------------------
bool mul_ok(int64_t a, int64_t b, int64_t* out) {
#if defined(__GNUC__) || defined(__clang__)
  return !__builtin_mul_overflow(a, b, out);
#else
  if (a != 0 && b > INT64_MAX / a) return false;
  *out = a * b;
  return true;
#endif
}
bool add_ok(int64_t a, int64_t b, int64_t* out) {
#if defined(__GNUC__) || defined(__clang__)
  return !__builtin_add_overflow(a, b, out);
#else
  if (a > INT64_MAX - b) return false;
  *out = a + b;
  return true;
#endif
}

// One axis of an access pattern: indices 0 .. count-1, `stride` apart.
struct Axis {
  int64_t count, stride;
};
// Offset one past the last unit (byte or element) a pattern touches: the largest index on
// every axis times its stride, plus `tail` units of the last row. False on 64-bit overflow.
template <size_t N>
bool span(const Axis (&axes)[N], int64_t tail, int64_t* out) {
  int64_t s = tail;
  for (const Axis& a : axes) {
    if (a.count <= 1) continue;
    int64_t t;
    if (!mul_ok(a.count - 1, a.stride, &t) || !add_ok(s, t, &s)) return false;
  }
  *out = s;
  return true;
}

// a is a power of two everywhere here (a mask, not a division: validate runs on every call)
bool aligned(const void* ptr, int64_t a) { return (reinterpret_cast<uintptr_t>(ptr) & static_cast<uintptr_t>(a - 1)) == 0; }
int dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool valid_head_dim(int d) { return d == 64 || d == 80 || d == 96 || d == 112 || d == 128 || d == 256; }
bool valid_page_size(int s) { return s == 0 || s == 16 || s == 32 || s == 64 || s == 128 || s == 256; }

Check check_strides(const char* name, const Strides& s, int64_t multiple) {
  const int64_t v[3] = {s.seq, s.slot, s.head};
  const char* n[3] = {".seq", ".slot", ".head"};
  for (int i = 0; i < 3; ++i) {
    if (v[i] < 0) return bad(std::string(name) + n[i], "must be >= 0", num(v[i]));
    if (v[i] & (multiple - 1))  // multiple: a power of two
      return bad(std::string(name) + n[i], "must be a multiple of " + num(multiple) + " bytes", num(v[i]));
  }
  return nullptr;
}
Check check_aligned(const char* name, const void* ptr, int64_t a) {
  if (ptr && !aligned(ptr, a)) return bad(name, "must be " + num(a) + "-byte aligned", hex(ptr));
  return nullptr;
}

// ---- byte ranges: what a call reads and writes --------------------------------------------
struct Region {
  const char* name;
  uintptr_t lo, hi;  // [lo, hi)
};
struct Regions {  // only the first n_in / n_out entries are set (no zeroing on every call)
  Region in[16];
  Region out[8];
  int n_in = 0, n_out = 0;
};

// [base, base + bytes) as a region; fails when it wraps the address space.
Check make_region(const char* name, const void* base, int64_t bytes, Region* r) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  if (static_cast<uint64_t>(bytes) > static_cast<uint64_t>(UINTPTR_MAX - lo))
    return bad(name, "the last byte a call touches lies past the end of the address space",
               hex(base) + " + " + num(bytes) + " bytes");
  r->name = name;
  r->lo = lo;
  r->hi = lo + static_cast<uintptr_t>(bytes);
  return nullptr;
}
Check add_in(Regions* rs, const char* name, const void* base, int64_t bytes) {
  if (!base || bytes <= 0) return nullptr;
  return make_region(name, base, bytes, &rs->in[rs->n_in++]);
}
Check add_out(Regions* rs, const char* name, const void* base, int64_t bytes) {
  if (!base || bytes <= 0) return nullptr;
  return make_region(name, base, bytes, &rs->out[rs->n_out++]);
}
// n1 * n2 * n3 elements of esize bytes; false on overflow.
bool count_bytes(int64_t n1, int64_t n2, int64_t n3, int64_t esize, int64_t* out) {
  int64_t a = 0, b = 0;
  return mul_ok(n1, n2, &a) && mul_ok(a, n3, &b) && mul_ok(b, esize, out);
}
std::string range_str(const Region& r) { return std::string(r.name) + " bytes [" + hex(r.lo) + ", " + hex(r.hi) + ")"; }
bool overlap(const Region& a, const Region& b) { return a.lo < b.hi && b.lo < a.hi; }

// Every written range must be disjoint from everything read and from every other written one.
// Ranges are bounding intervals: an output interleaved inside an input's strided view is
// refused too (conservative).
Check check_overlaps(const Regions& rs) {
  for (int i = 0; i < rs.n_out; ++i) {
    const Region& o = rs.out[i];
    for (int j = 0; j < rs.n_in; ++j)
      if (overlap(o, rs.in[j]))
        return bad(o.name, std::string("overlaps ") + rs.in[j].name + ", which the call reads",
                   range_str(o) + ", " + range_str(rs.in[j]));
    for (int j = 0; j < i; ++j)
      if (overlap(o, rs.out[j]))
        return bad(o.name, std::string("overlaps ") + rs.out[j].name + ", which the call also writes",
                   range_str(o) + ", " + range_str(rs.out[j]));
  }
  return nullptr;
}

// Elements [b][i][h][0..D) of a Q/O-style tensor (or keys [b][i][h][0..kv) of the mask): span in bytes (element offsets times size).
// On overflow the axis of the largest stride is named.
Check tensor_span(const char* const names[3], const Axis (&ax)[3], int64_t d, int esize, int64_t* bytes) {
  int64_t elems = 0;
  if (!span(ax, d, &elems) || !mul_ok(elems, esize, bytes)) {
    int k = 0;
    for (int i = 1; i < 3; ++i)
      if (ax[i].stride > ax[k].stride) k = i;
    return bad(names[k], "element offsets overflow 64 bits", num(ax[k].stride));
  }
  return nullptr;
}

// The written rows of a [count][count][count] x D tensor never share an element: sorted by
// stride, each axis that has more than one index steps past everything the inner axes span
// (sufficient for disjointness; it accepts every dense and strided row-major layout).
Check check_rows_disjoint(const char* const names[3], const Axis (&axes)[3], int64_t d) {
  int idx[3] = {0, 1, 2};
  // equal strides: the outer axis (lower index) sorts last, so it is the one named
  std::sort(idx, idx + 3, [&](int a, int b) {
    return axes[a].stride < axes[b].stride || (axes[a].stride == axes[b].stride && a > b);
  });
  int64_t extent = d;
  for (int k = 0; k < 3; ++k) {
    const Axis& a = axes[idx[k]];
    if (a.count <= 1) continue;
    if (a.stride < extent)
      return bad(names[idx[k]], "output rows overlap: the stride is smaller than the " + num(extent) +
                                    " elements the inner axes span",
                 num(a.stride));
    extent += (a.count - 1) * a.stride;  // fits: the span of the same axes was checked
  }
  return nullptr;
}

// A K/V plane of rows of row_bytes: contiguous (seq over batch sequences, slot over
// max_kv_len keys) or paged (seq over num_pages pages, slot over page_size keys).
Check plane(Regions* rs, const char* name, const char* strides_field, const void* base, const Strides& s,
             int64_t row_bytes, const AttnParams& p) {
  const bool paged = p.paged.page_size > 0;
  const Axis ax[3] = {{paged ? p.paged.num_pages : p.batch, s.seq},
                      {paged ? std::min<int64_t>(p.paged.page_size, p.max_kv_len) : p.max_kv_len, s.slot},
                      {p.n_kv_heads, s.head}};
  int64_t bytes = 0;
  if (!span(ax, row_bytes, &bytes)) return bad(strides_field, "byte offsets overflow 64 bits", strides_str(s));
  return add_in(rs, name, base, bytes);
}

}  // namespace

static Check validate_impl(const AttnParams& p) {
  if (p.batch < 1) return bad("batch", "must be >= 1", num(p.batch));
  if (p.nq < 1) return bad("nq", "must be >= 1", num(p.nq));
  const int d = p.head_dim;
  if (!valid_head_dim(d)) return bad("head_dim", "must be one of 64, 80, 96, 112, 128, 256", num(d));
  if (p.n_kv_heads < 1) return bad("n_kv_heads", "must be >= 1", num(p.n_kv_heads));
  if (p.n_q_heads < 1) return bad("n_q_heads", "must be >= 1", num(p.n_q_heads));
  if (p.n_q_heads % p.n_kv_heads)
    return bad("n_q_heads", "must be a multiple of n_kv_heads = " + num(p.n_kv_heads), num(p.n_q_heads));
  if (p.max_kv_len < 1) return bad("max_kv_len", "must be >= 1", num(p.max_kv_len));
  // Upper bounds: the launch grid's y / z dimensions (batch, KV heads), 32-bit row and key
  // arithmetic in the planner and the kernels (query rows of a KV head, keys).
  if (p.batch > kMaxGridYZ) return bad("batch", "must be <= " + num(kMaxGridYZ) + " (a launch grid dimension)", num(p.batch));
  if (p.n_kv_heads > kMaxGridYZ)
    return bad("n_kv_heads", "must be <= " + num(kMaxGridYZ) + " (a launch grid dimension)", num(p.n_kv_heads));
  if (p.n_q_heads > kMaxGridYZ) return bad("n_q_heads", "must be <= " + num(kMaxGridYZ), num(p.n_q_heads));
  if (static_cast<int64_t>(p.nq) * (p.n_q_heads / p.n_kv_heads) > kMaxRows)
    return bad("nq", "nq x (n_q_heads / n_kv_heads) query rows of a KV head must be <= " + num(kMaxRows), num(p.nq));
  if (p.max_kv_len > kMaxKeys) return bad("max_kv_len", "must be <= " + num(kMaxKeys), num(p.max_kv_len));

  // Q / O: element loads and stores of their dtype
  if (!p.q.data) return fail(invalid("q.data", "is null"));
  if (!valid_dtype(p.q.type)) return bad("q.type", "unknown dtype", num(static_cast<int>(p.q.type)));
  VTRY(check_aligned("q.data", p.q.data, dtype_size(p.q.type)));
  if (p.q.seq_stride < 0) return bad("q.seq_stride", "must be >= 0", num(p.q.seq_stride));
  if (p.q.row_stride < 0) return bad("q.row_stride", "must be >= 0", num(p.q.row_stride));
  if (p.q.head_stride < 0) return bad("q.head_stride", "must be >= 0", num(p.q.head_stride));
  if (!p.o.data) return fail(invalid("o.data", "is null"));
  if (!valid_dtype(p.o.type)) return bad("o.type", "unknown dtype", num(static_cast<int>(p.o.type)));
  VTRY(check_aligned("o.data", p.o.data, dtype_size(p.o.type)));
  if (p.o.seq_stride < 0) return bad("o.seq_stride", "must be >= 0", num(p.o.seq_stride));
  if (p.o.row_stride < 0) return bad("o.row_stride", "must be >= 0", num(p.o.row_stride));
  if (p.o.head_stride < 0) return bad("o.head_stride", "must be >= 0", num(p.o.head_stride));

  // K
  if (!p.k.data) return fail(invalid("k.data", "is null"));
  if (p.k.format == KFormat::packed16) {
    if (!p.k.scales) return fail(invalid("k.scales", "is null"));
    if (p.k.block != 16 && p.k.block != 32) return bad("k.block", "must be 16 or 32", num(p.k.block));
    if (d % p.k.block)
      return bad("k.block", "head_dim " + num(d) + " must be a multiple of k.block (use 16 for D = 80, 112)",
                 num(p.k.block));
    VTRY(check_aligned("k.data", p.k.data, kPacked16Align));
    VTRY(check_strides("k.data_strides", p.k.data_strides, kPacked16Align));
    VTRY(check_aligned("k.scales", p.k.scales, 2));
    VTRY(check_strides("k.scale_strides", p.k.scale_strides, 2));
    VTRY(check_aligned("k.smooth_scale", p.k.smooth_scale, 4));
  } else if (p.k.format == KFormat::f16) {
    // The dot mode is ignored for f16 K: it always runs the fp16 dot.
    if (p.k.smooth_scale) return bad("k.smooth_scale", "smoothing applies to packed16 K only", hex(p.k.smooth_scale));
    VTRY(check_aligned("k.data", p.k.data, 16));
    VTRY(check_strides("k.data_strides", p.k.data_strides, 16));
  } else {
    return bad("k.format", "unknown format", num(static_cast<int>(p.k.format)));
  }
  if (p.dot != DotMode::int8 && p.dot != DotMode::f16) return bad("dot", "unknown dot mode", num(static_cast<int>(p.dot)));

  // V
  if (!p.v.data) return fail(invalid("v.data", "is null"));
  switch (p.v.format) {
    case VFormat::q8_0:
    case VFormat::q4_0:
      if (d % kGgmlBlock) return bad("v.format", "q8_0/q4_0 need head_dim % 32 == 0", "head_dim " + num(d));
      VTRY(check_aligned("v.data", p.v.data, 2));
      VTRY(check_strides("v.strides", p.v.strides, 2));
      break;
    case VFormat::f16:
    case VFormat::bf16:
      VTRY(check_aligned("v.data", p.v.data, 16));
      VTRY(check_strides("v.strides", p.v.strides, 16));
      break;
    case VFormat::q8_0_planar:
      if (d % kGgmlBlock) return bad("v.format", "q8_0_planar needs head_dim % 32 == 0", "head_dim " + num(d));
      VTRY(check_aligned("v.data", p.v.data, 16));
      VTRY(check_strides("v.strides", p.v.strides, 16));
      if (!p.v.scales) return fail(invalid("v.scales", "is null (q8_0_planar keeps its block scales there)"));
      VTRY(check_aligned("v.scales", p.v.scales, 2));
      VTRY(check_strides("v.scale_strides", p.v.scale_strides, 2));
      break;
    default: return bad("v.format", "unknown format", num(static_cast<int>(p.v.format)));
  }

  // Paged KV
  const PagedKV& pg = p.paged;
  if (!valid_page_size(pg.page_size))
    return bad("paged.page_size", "must be 0 (not paged), 16, 32, 64, 128 or 256", num(pg.page_size));
  int64_t pages_per_seq = 0;
  if (pg.page_size > 0) {
    if (!pg.block_table) return fail(invalid("paged.block_table", "is null (page_size " + num(pg.page_size) + ")"));
    VTRY(check_aligned("paged.block_table", pg.block_table, 4));
    pages_per_seq = (static_cast<int64_t>(p.max_kv_len) + pg.page_size - 1) / pg.page_size;
    if (pg.table_stride < pages_per_seq)
      return bad("paged.table_stride",
                 "must be >= ceil(max_kv_len / page_size) = " + num(pages_per_seq) + " entries", num(pg.table_stride));
    if (pg.num_pages < 1) return bad("paged.num_pages", "must be >= 1 with a block table", num(pg.num_pages));
  } else if (pg.block_table) {
    return bad("paged.block_table", "is set but paged.page_size is 0 (not paged)", hex(pg.block_table));
  }

  // Options and small device arrays
  if (!p.kv_len) return fail(invalid("kv_len", "is null"));
  VTRY(check_aligned("kv_len", p.kv_len, 4));
  VTRY(check_aligned("q_pos", p.q_pos, 4));
  if (p.mask) {
    VTRY(check_aligned("mask", p.mask, 2));
    if (p.mask_seq_stride < 0) return bad("mask_seq_stride", "must be >= 0", num(p.mask_seq_stride));
    if (p.mask_row_stride < 0) return bad("mask_row_stride", "must be >= 0", num(p.mask_row_stride));
    if (p.mask_head_stride < 0) return bad("mask_head_stride", "must be >= 0", num(p.mask_head_stride));
  }
  VTRY(check_aligned("sinks", p.sinks, 4));
  VTRY(check_aligned("lse", p.lse, 4));
  VTRY(check_aligned("errors", p.errors, 4));
  if (p.kv_len_host) {  // a host array: its values are checked here, the device's are clamped
    VTRY(check_aligned("kv_len_host", p.kv_len_host, 4));
    for (int b = 0; b < p.batch; ++b)
      if (p.kv_len_host[b] < 0 || p.kv_len_host[b] > p.max_kv_len)
        return bad("kv_len_host", "entry " + num(b) + " must be in [0, max_kv_len = " + num(p.max_kv_len) + "]",
                   num(p.kv_len_host[b]));
  }
  if (p.window < 0) return bad("window", "must be >= 0", num(p.window));
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) return bad("softcap", "must be finite and >= 0", flt(p.softcap));
  if (!(p.scale >= 0.0f) || !std::isfinite(p.scale)) return bad("scale", "must be finite and >= 0", flt(p.scale));
  if (!(p.alibi_max_bias >= 0.0f) || !std::isfinite(p.alibi_max_bias))
    return bad("alibi_max_bias", "must be finite and >= 0", flt(p.alibi_max_bias));
  if (p.alibi_mode != AlibiMode::position && p.alibi_mode != AlibiMode::ggml)
    return bad("alibi_mode", "must be 0 (position) or 1 (ggml)", num(static_cast<int>(p.alibi_mode)));
  if (p.num_splits < 0) return bad("num_splits", "must be >= 0", num(p.num_splits));
  if (p.workspace_bytes > 0 && !p.workspace)
    return bad("workspace", "is null but workspace_bytes > 0", std::to_string(p.workspace_bytes));
  VTRY(check_aligned("workspace", p.workspace, 16));
  if (p.workspace_bytes > static_cast<size_t>(INT64_MAX))
    return bad("workspace_bytes", "too large", std::to_string(p.workspace_bytes));
  if (p.pdl < -1 || p.pdl > 1) return bad("pdl", "must be -1, 0 or 1", num(p.pdl));

  // ---- offsets the kernels form, and the byte ranges they touch --------------------------------
  Regions rs;
  const int64_t H = p.n_q_heads, G = p.n_kv_heads;
  int64_t bytes = 0;
  {
    static const char* const names[3] = {"q.seq_stride", "q.row_stride", "q.head_stride"};
    const Axis ax[3] = {{p.batch, p.q.seq_stride}, {p.nq, p.q.row_stride}, {H, p.q.head_stride}};
    VTRY(tensor_span(names, ax, d, dtype_size(p.q.type), &bytes));
    VTRY(add_in(&rs, "q.data", p.q.data, bytes));
  }
  if (p.k.format == KFormat::packed16) {
    VTRY(plane(&rs, "k.data", "k.data_strides", p.k.data, p.k.data_strides, d, p));
    VTRY(plane(&rs, "k.scales", "k.scale_strides", p.k.scales, p.k.scale_strides, 2 * (d / p.k.block), p));
    VTRY(add_in(&rs, "k.smooth_scale", p.k.smooth_scale, 4 * G * d));
  } else {
    VTRY(plane(&rs, "k.data", "k.data_strides", p.k.data, p.k.data_strides, 2 * d, p));
  }
  VTRY(plane(&rs, "v.data", "v.strides", p.v.data, p.v.strides, v_row_bytes(p.v.format, d), p));
  if (p.v.format == VFormat::q8_0_planar)
    VTRY(plane(&rs, "v.scales", "v.scale_strides", p.v.scales, p.v.scale_strides,
                     v_scale_row_bytes(p.v.format, d), p));
  if (pg.page_size > 0) {
    // rows of the table: [batch][table_stride], the first pages_per_seq entries of each read
    const Axis ax[1] = {{p.batch, pg.table_stride}};
    int64_t entries = 0;
    if (!span(ax, pages_per_seq, &entries) || !mul_ok(entries, 4, &bytes))
      return bad("paged.table_stride", "offsets overflow 64 bits", num(pg.table_stride));
    VTRY(add_in(&rs, "paged.block_table", pg.block_table, bytes));
  }
  VTRY(add_in(&rs, "kv_len", p.kv_len, 4 * static_cast<int64_t>(p.batch)));
  if (!count_bytes(p.batch, p.nq, 1, 4, &bytes)) return bad("nq", "batch * nq overflows 64 bits", num(p.nq));
  VTRY(add_in(&rs, "q_pos", p.q_pos, bytes));
  if (p.mask) {
    static const char* const names[3] = {"mask_seq_stride", "mask_row_stride", "mask_head_stride"};
    const Axis ax[3] = {{p.batch, p.mask_seq_stride}, {p.nq, p.mask_row_stride}, {H, p.mask_head_stride}};
    const int64_t kv = p.max_kv_len;
    VTRY(tensor_span(names, ax, kv, 2, &bytes));
    VTRY(add_in(&rs, "mask", p.mask, bytes));
  }
  VTRY(add_in(&rs, "sinks", p.sinks, 4 * H));

  // What the call writes: O rows, LSE, the error counters and the caller's workspace.
  {
    static const char* const names[3] = {"o.seq_stride", "o.row_stride", "o.head_stride"};
    const Axis ax[3] = {{p.batch, p.o.seq_stride}, {p.nq, p.o.row_stride}, {H, p.o.head_stride}};
    VTRY(tensor_span(names, ax, d, dtype_size(p.o.type), &bytes));
    VTRY(check_rows_disjoint(names, ax, d));
    VTRY(add_out(&rs, "o.data", p.o.data, bytes));
  }
  if (!count_bytes(p.batch, p.nq, H, 4, &bytes)) return bad("lse", "batch * nq * n_q_heads overflows 64 bits", hex(p.lse));
  VTRY(add_out(&rs, "lse", p.lse, bytes));
  VTRY(add_out(&rs, "errors", p.errors, 4 * static_cast<int64_t>(kNumErrorCounters)));
  VTRY(add_out(&rs, "workspace", p.workspace, static_cast<int64_t>(p.workspace_bytes)));
  return check_overlaps(rs);
}

// ---- pack-on-write ---------------------------------------------------------------------
namespace {

Check check_source(const char* field, DType t, const void* src, int64_t token_stride, int64_t head_stride) {
  if (!src) return fail(invalid(field, "is null"));
  if (!valid_dtype(t)) return bad("src_type", "unknown dtype", num(static_cast<int>(t)));
  VTRY(check_aligned(field, src, dtype_size(t)));
  if (token_stride < 0) return bad("src_token_stride", "must be >= 0", num(token_stride));
  if (head_stride < 0) return bad("src_head_stride", "must be >= 0", num(head_stride));
  return nullptr;
}

// Row starts (pointer, slot and head strides; the seq stride too when it is the page stride)
// are multiples of a.
Check check_rows(const char* base_field, const char* strides_field, const void* base, const Strides& s, int64_t a,
                  bool paged) {
  VTRY(check_aligned(base_field, base, a));
  const int64_t v[3] = {s.seq, s.slot, s.head};
  const char* n[3] = {".seq", ".slot", ".head"};
  for (int i = 0; i < 3; ++i) {
    if (v[i] < 0) return bad(std::string(strides_field) + n[i], "must be >= 0", num(v[i]));
    if ((i > 0 || paged) && (v[i] & (a - 1)))
      return bad(std::string(strides_field) + n[i], "rows must start " + num(a) + "-byte aligned", num(v[i]));
  }
  return nullptr;
}

Check check_slots_fields(const int32_t* slots, int64_t base_slot, int page_size, int64_t n_slots, int n_tokens) {
  VTRY(check_aligned("slots", slots, 4));
  if (base_slot < 0) return bad("base_slot", "must be >= 0", num(base_slot));
  if (!valid_page_size(page_size)) return bad("page_size", "must be 0 (flat slots), 16, 32, 64, 128 or 256", num(page_size));
  if (n_slots < 0) return bad("n_slots", "must be >= 0 (0 = unchecked)", num(n_slots));
  int64_t last = 0;
  if (!slots && n_tokens > 0 && !add_ok(base_slot, n_tokens - 1, &last))
    return bad("base_slot", "base_slot + n_tokens overflows 64 bits", num(base_slot));
  return nullptr;
}

// Largest slot a call can write, when it is bounded: base_slot + n_tokens - 1 without a slot
// array, n_slots - 1 when n_slots is set (larger slots are skipped). -1: nothing is written;
// false: unbounded (a device slot array and n_slots = 0).
bool max_slot(const int32_t* slots, int64_t base_slot, int n_tokens, int64_t n_slots, int64_t* out) {
  int64_t m = INT64_MAX;
  if (!slots) m = base_slot + n_tokens - 1;  // checked by check_slots_fields
  if (n_slots > 0) m = std::min(m, n_slots - 1);
  if (m == INT64_MAX) return false;
  *out = m;
  return true;
}

// Bytes of a destination plane up to the end of the last row a call can write (slot <= ms).
Check dst_plane(Regions* rs, const char* name, const char* strides_field, const void* base, const Strides& s,
                 int64_t row_bytes, int64_t ms, int page_size, int n_kv_heads) {
  if (ms < 0) return nullptr;
  if (ms == INT64_MAX) return bad(strides_field, "byte offsets overflow 64 bits", "largest slot " + num(ms));
  int64_t bytes = 0;
  bool ok;
  if (page_size > 0) {
    const int64_t pages = ms / page_size + 1;
    const int64_t offs = pages > 1 ? page_size : ms + 1;
    const Axis ax[3] = {{pages, s.seq}, {offs, s.slot}, {n_kv_heads, s.head}};
    ok = span(ax, row_bytes, &bytes);
  } else {
    const Axis ax[2] = {{ms + 1, s.slot}, {n_kv_heads, s.head}};
    ok = span(ax, row_bytes, &bytes);
  }
  if (!ok) return bad(strides_field, "byte offsets overflow 64 bits", strides_str(s) + ", largest slot " + num(ms));
  return add_out(rs, name, base, bytes);
}

Check source_region(Regions* rs, DType t, const void* src, int n_tokens, int64_t tok, int n_kv_heads, int64_t head,
                     int head_dim) {
  if (n_tokens == 0) return nullptr;
  const Axis ax[2] = {{n_tokens, tok}, {n_kv_heads, head}};
  int64_t elems = 0, bytes = 0;
  if (!span(ax, head_dim, &elems) || !mul_ok(elems, dtype_size(t), &bytes))
    return bad("src_token_stride", "element offsets overflow 64 bits",
               "token " + num(tok) + ", head " + num(head));
  return add_in(rs, "src", src, bytes);
}

// The checks both pack-on-write calls run first: token and head counts, head_dim and the source.
Check check_write_source(const CacheWriteParams& p) {
  if (p.n_tokens < 0) return bad("n_tokens", "must be >= 0", num(p.n_tokens));
  if (p.n_kv_heads < 1) return bad("n_kv_heads", "must be >= 1", num(p.n_kv_heads));
  if (p.n_kv_heads > kMaxGridYZ) return bad("n_kv_heads", "must be <= " + num(kMaxGridYZ), num(p.n_kv_heads));
  if (!valid_head_dim(p.head_dim)) return bad("head_dim", "must be one of 64, 80, 96, 112, 128, 256", num(p.head_dim));
  // one thread a (token, head, 16-value block): the launch's x dimension holds 2^31 - 1 blocks of threads
  if (static_cast<int64_t>(p.n_tokens) * p.n_kv_heads * (p.head_dim / 16) > kMaxWriteItems)
    return bad("n_tokens", "n_tokens x n_kv_heads x head_dim / 16 must be <= " + num(kMaxWriteItems) + " (split the write)",
               num(p.n_tokens));
  if (p.n_tokens == 0 && !p.src) return nullptr;  // an empty write (an empty tensor's data pointer is null)
  return check_source("src", p.src_type, p.src, p.src_token_stride, p.src_head_stride);
}

// The checks both run after their dst fields: slot fields and pdl. Then adds what both calls
// read (src, slots) to rs.
Check check_write_slots(const CacheWriteParams& p, Regions* rs) {
  VTRY(check_slots_fields(p.slots, p.base_slot, p.page_size, p.n_slots, p.n_tokens));
  if (p.pdl < -1 || p.pdl > 1) return bad("pdl", "must be -1, 0 or 1", num(p.pdl));
  VTRY(source_region(rs, p.src_type, p.src, p.n_tokens, p.src_token_stride, p.n_kv_heads, p.src_head_stride,
                     p.head_dim));
  if (p.n_tokens > 0) VTRY(add_in(rs, "slots", p.slots, 4 * static_cast<int64_t>(p.n_tokens)));
  return nullptr;
}

}  // namespace

static Check validate_impl(const PackKParams& p) {
  VTRY(check_write_source(p));
  if (p.dst.format != KFormat::packed16) return bad("dst.format", "must be packed16", num(static_cast<int>(p.dst.format)));
  if (p.dst.block != 16 && p.dst.block != 32) return bad("dst.block", "must be 16 or 32", num(p.dst.block));
  if (p.head_dim % p.dst.block) return bad("dst.block", "must divide head_dim " + num(p.head_dim), num(p.dst.block));
  if (!p.dst.data) return fail(invalid("dst.data", "is null"));
  if (!p.dst.scales) return fail(invalid("dst.scales", "is null"));
  const bool paged = p.page_size > 0;
  VTRY(check_rows("dst.data", "dst.data_strides", p.dst.data, p.dst.data_strides, 16, paged));
  VTRY(check_rows("dst.scales", "dst.scale_strides", p.dst.scales, p.dst.scale_strides, 2, paged));
  VTRY(check_aligned("dst.smooth_scale", p.dst.smooth_scale, 4));
  VTRY(check_aligned("smooth_shift", p.smooth_shift, 4));
  VTRY(check_aligned("counters", p.counters, 4));
  Regions rs;
  VTRY(check_write_slots(p, &rs));

  const int64_t GD = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  if (p.n_tokens > 0) {
    VTRY(add_in(&rs, "smooth_shift", p.smooth_shift, 4 * GD));
    VTRY(add_in(&rs, "dst.smooth_scale", p.dst.smooth_scale, 4 * GD));
    int64_t ms = 0;
    // The scale plane may interleave with the payload plane (one row holding both), so the
    // two are not checked against each other; each is against what the call reads and the
    // counters.
    Regions scales = rs;
    if (max_slot(p.slots, p.base_slot, p.n_tokens, p.n_slots, &ms)) {
      VTRY(dst_plane(&rs, "dst.data", "dst.data_strides", p.dst.data, p.dst.data_strides, p.head_dim, ms,
                           p.page_size, p.n_kv_heads));
      VTRY(dst_plane(&scales, "dst.scales", "dst.scale_strides", p.dst.scales, p.dst.scale_strides,
                           2 * (p.head_dim / p.dst.block), ms, p.page_size, p.n_kv_heads));
    }
    VTRY(add_out(&rs, "counters", p.counters, 8));
    VTRY(add_out(&scales, "counters", p.counters, 8));
    VTRY(check_overlaps(scales));
  }
  return check_overlaps(rs);
}

static Check validate_impl(const QuantVParams& p) {
  VTRY(check_write_source(p));
  if (!p.dst.data) return fail(invalid("dst.data", "is null"));
  if (static_cast<int>(p.dst.format) >= kNumVFormats)
    return bad("dst.format", "unknown V format", num(static_cast<int>(p.dst.format)));
  if (v_is_blocked(p.dst.format) && p.head_dim % 32)
    return bad("head_dim", "q8_0/q4_0/q8_0_planar need a multiple of 32", num(p.head_dim));
  const bool planar = p.dst.format == VFormat::q8_0_planar;
  const bool paged = p.page_size > 0;
  VTRY(check_rows("dst.data", "dst.strides", p.dst.data, p.dst.strides, planar ? 16 : 2, paged));
  if (planar) {
    if (!p.dst.scales) return fail(invalid("dst.scales", "is null (q8_0_planar keeps its block scales there)"));
    VTRY(check_rows("dst.scales", "dst.scale_strides", p.dst.scales, p.dst.scale_strides, 2, paged));
  }
  Regions rs;
  VTRY(check_write_slots(p, &rs));

  if (p.n_tokens > 0) {
    int64_t ms = 0;
    if (max_slot(p.slots, p.base_slot, p.n_tokens, p.n_slots, &ms)) {
      if (planar) {  // as for packed16 K: the two planes may interleave
        Regions scales = rs;
        VTRY(dst_plane(&scales, "dst.scales", "dst.scale_strides", p.dst.scales, p.dst.scale_strides,
                             v_scale_row_bytes(p.dst.format, p.head_dim), ms, p.page_size, p.n_kv_heads));
        VTRY(check_overlaps(scales));
      }
      VTRY(dst_plane(&rs, "dst.data", "dst.strides", p.dst.data, p.dst.strides,
                           v_row_bytes(p.dst.format, p.head_dim), ms, p.page_size, p.n_kv_heads));
    }
  }
  return check_overlaps(rs);
}

Status validate(const AttnParams& p) {
  Check c = validate_impl(p);
  return c ? std::move(*c) : Status::Ok();
}
Status validate(const PackKParams& p) {
  Check c = validate_impl(p);
  return c ? std::move(*c) : Status::Ok();
}
Status validate(const QuantVParams& p) {
  Check c = validate_impl(p);
  return c ? std::move(*c) : Status::Ok();
}

}  // namespace packfa
