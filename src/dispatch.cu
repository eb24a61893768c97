// src/dispatch.cu — the thin host dispatcher: validate, select, plan splits, launch.
// Compiled by nvcc for CUDA and (through dispatch.hip) by clang for HIP.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "packfa/api.hpp"
#include "packfa/device/chunk_source.hpp"
#include "packfa/device/combine_limits.hpp"
#include "packfa/device/fa_instances.hpp"
#include "packfa/device/fa/prefill_instances.hpp"
#include "packfa/device/fa/prefill_mma_instances.hpp"
#include "packfa/device/pack_params.hpp"
#include "packfa/device/trace.hpp"
#include "packfa/launch.hpp"
#include "row_plan.hpp"    // detail::d256_row_groups (row classes), cache_fits_l2
#include "split_plan.hpp"  // detail::one_round_splits (kv_len_host), trim_tail_round, wgmma_key_slices
#include "gpu_cause.hpp"  // device_info / gpu_error: the real cause of a failed probe

#if defined(PACKFA_BACKEND_HIP)
#define GPU(x) hip##x
using gpuStream = hipStream_t;
using gpuDeviceProp = hipDeviceProp_t;
#define GPU_SUCCESS hipSuccess
#define GPU_ATTR_SMEM hipFuncAttributeMaxDynamicSharedMemorySize
#define GPU_BACKEND_NAME "hip"
#else
#define GPU(x) cuda##x
using gpuStream = cudaStream_t;
using gpuDeviceProp = cudaDeviceProp;
#define GPU_SUCCESS cudaSuccess
#define GPU_ATTR_SMEM cudaFuncAttributeMaxDynamicSharedMemorySize
#define GPU_BACKEND_NAME "cuda"
#endif

namespace packfa {
namespace detail {  // kernels/pack.*, kernels/combine.*
Status launch_pack_k(const device::PackKKernelParams& kp, int64_t items, void* stream, int pdl);
Status launch_quantize_v(const device::QuantVKernelParams& kp, int64_t items, void* stream, int pdl);
Status launch_combine(const CombineParams& cp, int64_t rows, void* stream, int pdl, bool cols);
#if defined(PACKFA_TRACE)
// Device buffer of kTraceKernels x kTraceBlocks x kTracePoints x {clock, globaltimer}, set
// by the tool that reads it (packfa-bench --trace); null: no recording.
unsigned long long* g_trace = nullptr;
#endif
}  // namespace detail
namespace {

Status gpu_error(const char* what, decltype(GPU(Success)) e) {
  (void)GPU(GetLastError)();  // a failed probe must not surface again at the next call
  return {Code::device_error, std::string(what) + ": " + detail::gpu_cause(e)};
}

const PrefillRegistry& prefill_registry() {
  static PrefillRegistry* reg = [] {
    auto* r = new PrefillRegistry();
#if defined(PACKFA_HAS_PREFILL)
    register_prefill_all(*r);  // kernels/fa_prefill_d<D>.cu (sm_90a)
#endif
    return r;
  }();
  return *reg;
}

// The warp-MMA prefill kernels (kernels/fa_prefill_mma_d<D>.cu / .hip): every build has them.
const PrefillRegistry& prefill_mma_registry() {
  static PrefillRegistry* reg = [] {
    auto* r = new PrefillRegistry();
    register_prefill_mma_all(*r);
    return r;
  }();
  return *reg;
}

// PACKFA_PREFILL_KERNEL=mma (read once): a cc 9.0 device runs the warp-MMA prefill kernel
// (device/fa/prefill_mma.hpp, the sm_80-89 / RDNA kernel) instead of the wgmma one, so an H200
// tests its logic.
bool prefill_force_mma() {
  static const bool v = [] {
    const char* e = std::getenv("PACKFA_PREFILL_KERNEL");
    return e && std::string(e) == "mma";
  }();
  return v;
}

// When a cc 9.0 device runs the prefill kernel instead of the decode kernel's row groups: at
// least kPrefillMinRows query rows (GQA rows included) and blocks (128 rows each, one per KV
// head and sequence) for half the multiprocessors — the prefill kernel has no split-KV, so
// with fewer blocks the decode kernel's splits fill the GPU better (H200, 2026-12-01: 2048
// rows at kv 4k, 256 blocks: prefill 185 us, decode path 323 us). PACKFA_PREFILL_MIN_ROWS
// (read once) replaces both bounds by a row count alone (tests); PACKFA_PREFILL=0 turns it off.
constexpr int kPrefillMinRows = 512;
bool prefill_rows_from_env() {
  static const bool set = std::getenv("PACKFA_PREFILL_MIN_ROWS") != nullptr;
  return set;
}
int prefill_min_rows() {
  static const int rows = [] {
    const char* off = std::getenv("PACKFA_PREFILL");
    if (off && off[0] == '0') return -1;
    const char* env = std::getenv("PACKFA_PREFILL_MIN_ROWS");
    return env ? std::max(1, std::atoi(env)) : kPrefillMinRows;
  }();
  return rows;
}

const FaRegistry& registry() {
  static FaRegistry* reg = [] {
    auto* r = new FaRegistry();
    register_fa_all(*r);  // every instance unit of the table (device/fa_instances.hpp)
    return r;
  }();
  return *reg;
}

struct DeviceFacts {
  int sms = 0;
  int cc_major = 0, cc_minor = 0;
  size_t smem_optin = 0;
  size_t l2_bytes = 0;
};
Status device_facts(int dev, DeviceFacts* out) {
  static std::mutex mu;
  static std::vector<DeviceFacts> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (dev >= 0 && dev < static_cast<int>(cache.size()) && cache[dev].sms > 0) {
    *out = cache[dev];
    return Status::Ok();
  }
  gpuDeviceProp prop;
  auto e = GPU(GetDeviceProperties)(&prop, dev);
  if (e != GPU_SUCCESS) return gpu_error("GetDeviceProperties", e);
  DeviceFacts f;
  f.sms = prop.multiProcessorCount;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.l2_bytes = prop.l2CacheSize > 0 ? static_cast<size_t>(prop.l2CacheSize) : 0;
#if defined(PACKFA_BACKEND_HIP)
  f.smem_optin = prop.sharedMemPerBlock;  // RDNA: 64 KB per workgroup
#else
  f.smem_optin = prop.sharedMemPerBlockOptin;
#endif
  if (static_cast<int>(cache.size()) <= dev) cache.resize(dev + 1);
  cache[dev] = f;
  *out = f;
  return Status::Ok();
}

QKMode qk_mode(const AttnParams& p) {
  if (p.k.format == KFormat::f16) return QKMode::f16;
  return p.dot == DotMode::int8 ? QKMode::packed16_int8 : QKMode::packed16_f16;
}

const char* qk_name(QKMode m) {
  switch (m) {
    case QKMode::packed16_int8: return "packed16_int8";
    case QKMode::packed16_f16: return "packed16_f16";
    case QKMode::f16: return "f16k";
  }
  return "?";
}
const char* vf_name(VFormat f) {
  switch (f) {
    case VFormat::f16: return "f16";
    case VFormat::bf16: return "bf16";
    case VFormat::q8_0: return "q8_0";
    case VFormat::q4_0: return "q4_0";
    case VFormat::q8_0_planar: return "q8_0_planar";
  }
  return "?";
}

// Largest copy width (16/8/4/2) every row start of a plane is aligned to.
int copy_width(const void* base, const Strides& s, int64_t row_bytes) {
  int64_t g = reinterpret_cast<uintptr_t>(base) | s.seq | s.slot | s.head | row_bytes;
  for (int w : {16, 8, 4}) {
    if ((g & (w - 1)) == 0) return w;
  }
  return 2;
}

// Q rows 16-byte aligned (the pointer and every stride): the split kernel's Q set-up loads 8
// dims a lane in one 16-byte load (decision "q-vec", device/fa/q_setup.hpp), else 8 scalar loads.
bool q_rows_aligned(const QTensor& q) {
  const int64_t esz = q.type == DType::f32 ? 4 : 2;  // element strides as bytes
  return copy_width(q.data, Strides{q.seq_stride * esz, q.row_stride * esz, q.head_stride * esz}, 16) == 16;
}

Status resident_blocks(const FaInstance* inst, int device, int* out);

struct Plan {
  const FaInstance* inst = nullptr;
  bool prefill = false;  // a prefill kernel (device/fa/prefill_sm90.hpp or prefill_mma.hpp): grid (row tiles x splits, KV heads, batch); splits > 1 only in key splits (wgmma split, rows split)
  int rclass = 0, rows = 0, row_groups = 0, splits = 1, split_len = 0;
  bool dual = false;   // the wgmma kernel in key splits with <= 64 rows: 2 partials a block (splits counts partials)
  int64_t claims = 0;  // claim counters (unsigned, kClaimStride apart); 0: static splits
  int pool0 = 0;       // static chunks per split when claims > 0
  bool split_rounds = false;  // the split count came from the whole-rounds rule (PACKFA_SPLIT_ROUNDS)
  bool one_round = false;     // the split count came from kv_len_host's one-round rule (split_plan.hpp)
  std::string name;
};

// Claim counters (device/chunk_source.hpp) for this plan; none when its splits stay static.
// Work moves between splits only in instances built for it (FaTraits::kClaims) and for long
// splits: each wave needs several chunks of its own (A/B on the H200, bench/NOTES.md: with 8
// chunks per wave, kv = 32k, and with 6, a batch at kv = 4k, the counters cost more than the
// tail they close). PACKFA_STEAL=0 turns it off; PACKFA_STEAL_STATIC sets the static share
// in % (tests, A/B).
constexpr int kStaticPercent = 25;  // of each split's chunks stay with its block (A/B: 25 < 50 < 75)
void plan_claims(const AttnParams& p, Plan* pl) {
  pl->claims = 0;
  if (pl->splits <= 1 || !pl->inst->claims) return;
  const char* env = std::getenv("PACKFA_STEAL");
  if (env && env[0] == '0') return;
  const int waves = pl->inst->threads / arch::kWaveSize;
  const int per_wave = pl->split_len / kFaChunk / waves;
  if (per_wave < 16) return;
  pl->claims = static_cast<int64_t>(p.batch) * pl->row_groups * p.n_kv_heads * pl->splits * device::kClaimStride;
  const char* pct_env = std::getenv("PACKFA_STEAL_STATIC");
  const int pct = pct_env ? std::max(0, std::min(100, std::atoi(pct_env))) : kStaticPercent;
  pl->pool0 = waves * std::max(2, per_wave * pct / 100);
}

// The prefill kernel for this call (fa == null: none). Which kernel: cc 9.0 the wgmma kernel
// (prefill_sm90.hpp), or the warp-MMA kernel with PACKFA_PREFILL_KERNEL=mma; cc 8.x and HIP
// gfx11 / gfx12 the warp-MMA kernel (prefill_mma.hpp). Then at least prefill_min_rows() rows, an
// instance in the build that fits the device's shared memory, and cache rows that allow its
// copy widths.
struct PrefillPick {
  const FaInstance* fa = nullptr;
  bool mma = false;  // the warp-MMA kernel
};
template <class E>
bool prefill_rows_fit(const AttnParams& p, const DeviceFacts& f, const E& e) {
  if (!e.fa.kernel || static_cast<size_t>(e.fa.smem_bytes) > f.smem_optin) return false;
  if (copy_width(p.v.data, p.v.strides, v_row_bytes(p.v.format, p.head_dim)) < e.v_width) return false;
  if (p.v.format == VFormat::q8_0_planar &&
      copy_width(p.v.scales, p.v.scale_strides, v_scale_row_bytes(p.v.format, p.head_dim)) < e.vs_width)
    return false;
  if (p.k.format == KFormat::packed16 &&
      copy_width(p.k.scales, p.k.scale_strides, 2 * p.head_dim / p.k.block) < (p.k.block == 32 ? e.ks_width32 : e.ks_width16))
    return false;
  return true;
}
PrefillPick prefill_for(const AttnParams& p, const DeviceFacts& f, QKMode qk, int rows) {
  const int min_rows = prefill_min_rows();
  // up to 16 rows a sequence are decode / MTP rows: the decode kernel's row classes
  if (min_rows < 0 || p.nq <= 16 || rows < min_rows) return {};
#if defined(PACKFA_BACKEND_HIP)
  const bool wgmma = false, mma = f.cc_major == 11 || f.cc_major == 12;
#else
  const bool hopper = f.cc_major == 9 && f.cc_minor == 0;
  const bool wgmma = hopper && !prefill_force_mma(), mma = f.cc_major == 8 || (hopper && prefill_force_mma());
#endif
  if (!wgmma && !mma) return {};
  const int rows_per_block = wgmma ? 128 : device::prefill_mma::MmaLayout<128, VFormat::f16, QKMode::f16>::kM;
  const int64_t blocks = static_cast<int64_t>(p.batch) * p.n_kv_heads * ((rows + rows_per_block - 1) / rows_per_block);
  if (!prefill_rows_from_env() && blocks * 2 < f.sms) return {};
  const bool paged = p.paged.page_size > 0;
  const int d = head_dim_index(p.head_dim), v = static_cast<int>(p.v.format), m = static_cast<int>(qk);
  PrefillPick pick;
  if (wgmma) {
    const PrefillInstance& e = prefill_registry().table[paged ? 1 : 0][m][d][v];
    if (prefill_rows_fit(p, f, e)) pick.fa = &e.fa;
  } else {
    const PrefillInstance& e = prefill_mma_registry().table[paged ? 1 : 0][m][d][v];
    if (prefill_rows_fit(p, f, e)) pick.fa = &e.fa, pick.mma = true;
  }
  return pick;
}

// A prefill registry's instance for a call in key splits (rows split, wgmma split): cc 9.0, V
// not bf16 (the prefill kernels widen V to fp16, whose range is narrower; decode keeps bf16 V
// scalar), built, and the call's cache rows allow its copy widths; else null.
[[maybe_unused]] const PrefillInstance* split_instance(const PrefillRegistry& reg, const AttnParams& p, const DeviceFacts& f, QKMode qk) {
  if (!(f.cc_major == 9 && f.cc_minor == 0) || p.v.format == VFormat::bf16) return nullptr;
  const PrefillInstance& e =
      reg.table[p.paged.page_size > 0 ? 1 : 0][static_cast<int>(qk)][head_dim_index(p.head_dim)][static_cast<int>(p.v.format)];
  return prefill_rows_fit(p, f, e) ? &e : nullptr;
}

// Rows split (decision "rows-split", docs/prefill.md): more query rows a KV head than one block
// of the decode kernel holds (MTP / speculative rows, short chunks), below the wgmma prefill
// kernel's rule. The decode kernel runs such rows as groups of 16 and each group reads the
// whole cache again; the warp-MMA prefill kernel takes 64 rows a block (16 a warp, one staged
// tile shared by the four warps) and its blocks split the keys as decode's do, merged by the
// same combine. The rule is where it measured faster (H200, bench/NOTES.md session 14, full
// build, against the decode kernel in one run): D 128, int8 dot, q8_0 / q4_0 / f16 V, at least
// 64 rows a KV head, kv >= 32k, at least 8 (sequence, KV head, row tile) blocks — nq 16 x
// 32/8 heads: 32k 1.08x, 128k 1.18x, q4_0 at 128k 1.12x, f16 V 1.44x; nq 64 at 32k 1.18x.
// Left to decode: equal or slower there (D 64 1.00x, kv 16k 1.00x, the fp16-Q dot 0.99x,
// nq 8 0.67x, kv 4k 0.82x, 16/2 heads 0.97x) or not measured (other head dims, V formats,
// f16 K). cc 9.0 only: cc 8.x and RDNA keep the decode kernel until measured. Where the wgmma
// kernel's split runs (wgmma_split_for, checked first) it wins over this path; this one stays for
// builds without that instance and for PACKFA_WGMMA_SPLIT=0.
// PACKFA_ROWS_SPLIT (read once): 0 off, 1 every call with more than 16 rows a KV head (tests),
// unset the rule.
int rows_split_mode() {
  static const int mode = [] {
    const char* e = std::getenv("PACKFA_ROWS_SPLIT");
    return !e || !e[0] ? 0 : e[0] == '0' ? -1 : 1;
  }();
  return mode;
}
const FaInstance* rows_split_for(const AttnParams& p, const DeviceFacts& f, QKMode qk, int rows) {
#if defined(PACKFA_BACKEND_HIP)
  (void)p, (void)f, (void)qk, (void)rows;
  return nullptr;
#else
  const int mode = rows_split_mode();
  const PrefillInstance* ep = mode < 0 ? nullptr : split_instance(prefill_mma_registry(), p, f, qk);
  if (!ep) return nullptr;
  const PrefillInstance& e = *ep;
  if (mode == 0) {
    const int64_t tiles = static_cast<int64_t>(p.batch) * p.n_kv_heads * ((rows + e.fa.rows_per_block - 1) / e.fa.rows_per_block);
    const bool measured = p.head_dim == 128 && qk == QKMode::packed16_int8 &&
                          (p.v.format == VFormat::q8_0 || p.v.format == VFormat::q4_0 || p.v.format == VFormat::f16);
    if (!measured || rows < 64 || p.max_kv_len < 32768 || tiles < 8) return nullptr;
  }
  return &e.fa;
#endif
}
// the most rows a KV head that one decode block holds (its widest row class); more run in row
// groups, each reading every key, unless a key split on a prefill kernel takes them
constexpr int kDecodeMaxRows = kRowClasses[kNumRowClasses - 1];
// Splits as decode plans them (plan() below): one sequence, one round of the resident blocks;
// batches ~4 blocks a multiprocessor; each split at least kRowsSplitMinKeys keys, a multiple of
// 64 (every tile size of the kernel divides it, so no tile crosses a split).
constexpr int kRowsSplitMinKeys = 256;
Status plan_rows_split(const AttnParams& p, int device, const DeviceFacts& f, const FaInstance* e, int rows, Plan* out) {
  out->inst = e;
  out->prefill = true;
  out->rows = rows;
  out->row_groups = (rows + e->rows_per_block - 1) / e->rows_per_block;
  out->rclass = 0;
  const int64_t base = static_cast<int64_t>(p.batch) * p.n_kv_heads * out->row_groups;
  int splits = std::min(p.num_splits, device::kMaxSplits);
  if (splits <= 0) {
    int64_t want = (4LL * f.sms + base - 1) / base;
    if (p.batch == 1) {
      int per_sm = 0;
      PACKFA_TRY(resident_blocks(e, device, &per_sm));
      want = std::max<int64_t>(1, static_cast<int64_t>(std::max(per_sm, 1)) * f.sms / base);
    }
    const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(device::kMaxSplits, p.max_kv_len / kRowsSplitMinKeys));
    splits = static_cast<int>(std::max<int64_t>(1, std::min(want, cap)));
  }
  const int64_t len = (int64_t{p.max_kv_len} + splits - 1) / splits;
  out->split_len = static_cast<int>(std::max<int64_t>(64, (len + 63) / 64 * 64));
  out->splits = std::max(1, static_cast<int>((int64_t{p.max_kv_len} + out->split_len - 1) / out->split_len));
  return Status::Ok();
}

// Key splits on the wgmma kernel (decision "wgmma-split", docs/prefill.md): on cc 9.0 the
// prefill kernel's blocks take a split of the keys each and write decode's partials, merged by
// the decode combine; with at most 64 rows a KV head both consumer warpgroups take the same
// rows and alternate tiles ("dual", two partials a block split). By its rule it serves MTP rows
// (17-63 a KV head where measured, from 64 on below the prefill rule). PACKFA_WGMMA_SPLIT (read
// once): 0 off (the rows split on the warp-MMA kernel as before), 1 every call below the prefill
// rule, decode rows too (tests, A/B), unset the rule (wgmma_split_rule).
// PACKFA_PREFILL_KERNEL=mma turns it off.
int wgmma_split_mode() {
  static const int mode = [] {
    const char* e = std::getenv("PACKFA_WGMMA_SPLIT");
    return !e || !e[0] ? 0 : e[0] == '0' ? -1 : 1;
  }();
  return mode;
}
// The rule: where it measured faster than both the decode kernel's row groups and the warp-MMA
// rows split (H200, one binary, bench/wgmma_split.sh; bench/results/h200-2026-12-03-session15.txt;
// us decode / rows split / here, 32 / 8 heads, q8_0 V unless stated): at least 64 rows a KV head
// (nq 16, kv 32k: 88.1 / 81.2 / 64.4; 128k: 303.5 / 257.6 / 208.5; q4_0 128k 266.9 / 238.7 / 197.7;
// f16 V 95.3 / 66.0 / 53.0; q8_0_planar 78.6 / 70.8 / 53.9; fp16-Q dot 87.4 / 87.8 / 60.6; D 64
// 54.5 / 54.2 / 40.6; 4 x 32k 257.8 / 266.8 / 203.2; nq 8 at 64 / 8 heads 87.3 / 81.4 / 64.0;
// nq 32 162.0 / 142.0 / 82.2; nq 64 304.0 / 258.2 / 142.8; D 256 nq 16 at 16 / 2 heads
// 100.8 / 104.0 / 69.6), kv >= 8192 (8k: 32.6 / 35.7 / 28.1; 16k 50.9 / 51.0 / 40.8; 4k equal:
// 22.9 / 28.4 / 22.2), the head dims and Q·K modes measured (D 64, 128, 256; not f16 K). Fewer
// rows stay with the decode kernel unless the mid-rows or D 256 rules below take them (then,
// H200 session 15: 32 rows 51.7 / 76.6 / 62.5; 16 rows 35.6 / - / 60.8; one row 27.2 / - / 58.4; D 256 at
// 16 / 2 heads, 8 rows: 42.5 / - / 48.3).
// Many rows (decision "wgmma-split-many-rows"): a chunk of at least 512 rows a KV head that the
// prefill rule leaves only because its blocks fill fewer than half the multiprocessors (few KV
// heads) is split from kv 4096 on: D 256 at 16 / 2 heads, nq 512 x kv 4k, q8_0 V (H100, session
// 27, bench/results/h100-2026-12-06-session27.txt): decode row groups 338.7 us, the prefill kernel
// in one split (64 blocks) 274.5 us, here 157.7 us.
// Mid rows (decision "wgmma-split-mid-rows"): 17-63 rows a KV head are more than the decode
// kernel's largest row class (16) holds, so its row groups read every key twice; the split reads
// them once. Where it measured faster (H100, session 32, bench/results/h100-2026-12-06-session32.txt;
// us decode / here, 32 / 8 heads, batch 1): q8_0 V nq 5-8 (20-32 rows) kv 8k 22.0-23.3 / 18.2-19.3,
// 32k 49.5-51.8 / 43.5-44.5, 128k 161.0-163.2 / 142.8-144.7; f16 V kv 8k 25.1-26.5 / 18.3-18.8, 32k
// 61.2 / 46.7; with the two-round planner below, batches too (nq 6, 32k: batch 2 98.2 / 86.4,
// batch 4 226.8 / 153.1; f16 V batch 2 162.8 / 91.5). Session 33 (H100, full build, medians of 3,
// bench/results/h100-2026-12-07-session33.txt) added D 64 (nq 5 / 8 kv 8k 15.8 / 13.3, nq 8 32k
// 33.4 / 30.8, 128k 102.6 / 98.5, f16 V 33.0 / 31.7, nq 6 batch 2 72.5 / 58.8) and the fp16-Q dot
// (nq 5 kv 8k 20.3 / 16.7, nq 6 / 8 32k 49.3 / 42.1 and 49.5 / 42.9, 128k 164.0 / 143.2, f16 V
// 56.2 / 45.6, nq 6 batch 2 94.9 / 81.5). Not: q4_0 V (slower at batch 1: D 128 1.03-1.25x, D 64
// 1.11x, fp16-Q dot 1.11x), q8_0_planar (equal, 46.0 / 46.3), 16 rows or fewer (one decode block:
// nq 4, 32k 39.9 / 44.1; fp16-Q dot 38.4 / 41.5). D 256: the rule below.
// Short caches (decision "wgmma-split-short"): the 8192-key floor is session 15's (H200: equal
// at 4k); the prefill kernel has since come down to ~0.55x its time. H100, session 35
// (bench/results/h100-2026-12-07-session35.txt), D 128, int8 dot, 32 / 8 heads, us decode / here:
// 64 rows (nq 16) kv 1k 15.0 / 13.2, 2k 17.8 / 14.2, 4k 23.0 / 15.7, f16 V 4k 24.2 / 15.7;
// 32 rows (nq 8) kv 2k 15.1 / 12.8, 4k 17.7 / 14.1, f16 V 4k 19.1 / 13.6. So at D 128 with the
// int8 dot and q8_0 / f16 V the floor is 1024 keys from 64 rows, 2048 from 32 rows; 17-31 rows,
// the other head dims, dots and V formats keep 8192 (not measured below it). Timed with
// prefill-q-regs on (its tiles 2-6% faster at q8_0 V); batches at these lengths not timed.
constexpr int kWgmmaSplitMinRows = 64, kWgmmaSplitMinKeys = 8192;
constexpr int kWgmmaSplitManyRows = 512, kWgmmaSplitManyRowsMinKeys = 4096;
int wgmma_split_min_keys(const AttnParams& p, QKMode qk, int rows) {
  const bool short_ok = p.head_dim == 128 && qk == QKMode::packed16_int8 &&
                        (p.v.format == VFormat::q8_0 || p.v.format == VFormat::f16);
  if (short_ok && rows >= kWgmmaSplitMinRows) return 1024;
  if (short_ok && rows >= 32) return 2048;
  return kWgmmaSplitMinKeys;
}
bool wgmma_split_mid_rows(const AttnParams& p, QKMode qk, int rows) {
  return rows > kDecodeMaxRows && (p.head_dim == 64 || p.head_dim == 128) && qk != QKMode::f16 &&
         (p.v.format == VFormat::q8_0 || p.v.format == VFormat::f16);
}
// D 256 (decision "wgmma-split-d256"; H100, session 33, 16 / 2 heads unless stated, medians of 3,
// us decode / here). (a) The fp16-Q dot at 5-8 rows a KV head, which the decode kernel serves with
// its 8-row fp16-Q class: kv 8k 36.8 / 21.5, 32k 64.3 / 39.0, 128k 161.8 / 128.8, batch 4 x 32k
// 160.1 / 135.8, 24 / 4 heads (6 rows) 91.6 / 68.6, f16 V 75.8 / 33.4, q4_0 V 50.3 / 34.3 (the int8
// dot's 37.5 at 32k: the fp16-Q mode was 1.7x it, now 1.04x). Not: 4 rows (32 / 8 heads: 88.3 /
// 126.0); bf16 and planar V not measured. (b) The int8 dot at 9-63 rows while the cache the call
// reads fits L2 (the decode kernel's 16-row class; row groups past 16): nq 2 (16 rows) kv 8k 29.8 /
// 23.9, 32k 48.1 / 42.8, f16 V 49.0 / 39.2; nq 4 (32 rows) 32k 54.8 / 43.0. Past L2 the decode
// kernel wins (nq 2 kv 128k 89.5 / 134.7; 32 / 8 heads nq 4 kv 32k, 143 MB, 90.4 / 134.3), and at 8
// rows or fewer on the int8 dot everywhere (kv 32k 37.5 / 41.6, 128k 88.7 / 132.7). q4_0 V with the
// int8 dot: 41.9 / 39.6 at 16 rows, left to decode like the other head dims' q4_0 (not measured
// past 16 rows).
bool wgmma_split_d256(const AttnParams& p, const DeviceFacts& f, QKMode qk, int rows) {
  if (p.head_dim != 256) return false;
  const bool q8_f16 = p.v.format == VFormat::q8_0 || p.v.format == VFormat::f16;
  if (qk == QKMode::packed16_f16) return rows >= 5 && rows <= 8 && (q8_f16 || p.v.format == VFormat::q4_0);
  if (qk != QKMode::packed16_int8 || rows <= 8 || !q8_f16) return false;
  return detail::cache_fits_l2(p.batch, p.n_kv_heads, p.max_kv_len,
                               detail::kv_bytes_per_key(p.head_dim, p.k.format, p.k.block, p.v.format),
                               static_cast<int64_t>(f.l2_bytes));
}
bool wgmma_split_rule(const AttnParams& p, const DeviceFacts& f, QKMode qk, int rows) {
  const bool measured = (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256) && qk != QKMode::f16;
  const bool keys = p.max_kv_len >= wgmma_split_min_keys(p, qk, rows) ||
                    (rows >= kWgmmaSplitManyRows && p.max_kv_len >= kWgmmaSplitManyRowsMinKeys);
  return measured && keys &&
         (rows >= kWgmmaSplitMinRows || wgmma_split_mid_rows(p, qk, rows) || wgmma_split_d256(p, f, qk, rows));
}
const FaInstance* wgmma_split_for(const AttnParams& p, const DeviceFacts& f, QKMode qk, int rows) {
#if defined(PACKFA_BACKEND_HIP)
  (void)p, (void)f, (void)qk, (void)rows;
  return nullptr;
#else
  const int mode = wgmma_split_mode();
  if (mode < 0 || prefill_force_mma() || (mode == 0 && !wgmma_split_rule(p, f, qk, rows))) return nullptr;
  const PrefillInstance* e = split_instance(prefill_registry(), p, f, qk);
  return e ? &e->fa : nullptr;
#endif
}
// Splits (detail::wgmma_key_slices): one block a multiprocessor resides (384 threads, 100-200 KB
// of shared memory), so one sequence takes one round of blocks, batches at most two; each split
// at least kRowsSplitMinKeys keys. AttnParams::num_splits counts partials: dual rounds it up to
// an even count.
Status plan_wgmma_split(const AttnParams& p, const DeviceFacts& f, const FaInstance* e, int rows, Plan* out) {
  out->inst = e;
  out->prefill = true;
  out->rows = rows;
  out->row_groups = (rows + e->rows_per_block - 1) / e->rows_per_block;
  out->rclass = 0;
  out->dual = rows <= e->rows_per_block / 2;
  const int64_t base = static_cast<int64_t>(p.batch) * p.n_kv_heads * out->row_groups;
  // at most two rounds (decision "wgmma-split-two-rounds", split_plan.hpp). H100, session 32,
  // 32 / 8 heads, kv 32k, q8_0 V, us with a rounded-up count / now: nq 16 batch 2 115.8 / 92.3,
  // batch 4 216.1 / 160.5, batch 8 348.0 / 285.9; q4_0 batch 4 246.4 / 181.7; nq 6 batch 2 110.0 / 86.4
  const detail::KeySlices ks = detail::wgmma_key_slices(p.max_kv_len, base, out->dual ? 2 : 1, p.batch, f.sms,
                                                        p.num_splits, device::kMaxSplits, kRowsSplitMinKeys);
  out->split_len = static_cast<int>(ks.split_len);
  out->splits = static_cast<int>(ks.partials);
  return Status::Ok();
}

// The decode-gap switches (decision "decode-switch-defaults", bench/NOTES.md), each read once
// per process: unset (or empty) gives the default, "0" turns it off, any other value on. Bisected
// on the H200 (session 12, bench/decode_gaps.sh): whole split rounds help uniform batches and
// slow varied ones, so they default off; the column combine speeds up > 64 splits (D 256 16/2
// 32k 697 -> 830 GB/s), so it defaults on. Kept for A/B and tested flipped
// (tests/gpu/CMakeLists.txt, *_switches_on). The third switch, an L2 prefetch before the PDL
// wait, slowed one-row decode (kv 4k 8.9 -> 11.8 us) and its code alone, switched off, cost
// kv 4k decode 1-2% (session 13): removed (decision "decode-prefetch-removed").
bool env_switch(const char* name, bool dflt = false) {
  const char* e = std::getenv(name);
  if (!e || e[0] == '\0') return dflt;
  return e[0] != '0';
}
// PACKFA_SPLIT_ROUNDS: batches take the split count that fills whole rounds of resident
// blocks (plan() below); off: ceil(4 x SMs / blocks per split).
bool split_rounds() {
  static const bool on = env_switch("PACKFA_SPLIT_ROUNDS");
  return on;
}
// Decision "d256-row-groups" (src/row_plan.hpp): at D = 256, 5-8 rows run as groups of the
// 4-row class while the cache fits L2. PACKFA_D256_ROW_GROUPS=0 (read once) keeps the wide
// class, for A/B.
bool d256_row_groups(const AttnParams& p, const DeviceFacts& f, int rows) {
  static const bool on = env_switch("PACKFA_D256_ROW_GROUPS", true);
  return on && detail::d256_row_groups(p.head_dim, rows, p.batch, p.n_kv_heads, p.max_kv_len,
                                       detail::kv_bytes_per_key(p.head_dim, p.k.format, p.k.block, p.v.format),
                                       static_cast<int64_t>(f.l2_bytes));
}
// PACKFA_TAIL_TRIM (default on): decision "batch-tail-trim" (split_plan.hpp) for batches
// planned by the blind rule; =0 keeps that rule's count, for A/B.
bool tail_trim() {
  static const bool on = env_switch("PACKFA_TAIL_TRIM", true);
  return on;
}
// Decision "splits-share-short-lengths" (fa/rows.hpp): decode plans in splits made without host
// lengths. PACKFA_SHARE_LEN=0 keeps split_len for every group, for tests and A/B.
bool shares_len(const Plan& pl) {
  static const bool on = env_switch("PACKFA_SHARE_LEN", true);
  return on && !pl.prefill && !pl.one_round && pl.splits > 1;
}
// PACKFA_COMBINE_COLS (default on): more than kWarpCombineMaxSplits splits merge in
// fa_combine_col_kernel (a block per row and 64 dims); =0: fa_combine_kernel (one block per
// row). Chosen here and passed to launch_combine, so KernelChoice::combine names the kernel.
bool combine_cols() {
  static const bool on = env_switch("PACKFA_COMBINE_COLS", true);
  return on;
}

// A prefill kernel's name in KernelChoice (one split or key splits): fa_prefill<d128,q8_0,
// packed16_int8,m128[,paged]>, or fa_prefill_mma<…,m64> for the warp-MMA kernel.
std::string prefill_name(const AttnParams& p, QKMode qk, bool mma, const FaInstance& e) {
  return std::string(mma ? "fa_prefill_mma<d" : "fa_prefill<d") + std::to_string(p.head_dim) + "," +
         vf_name(p.v.format) + "," + qk_name(qk) + ",m" + std::to_string(e.rows_per_block) +
         (p.paged.page_size > 0 ? ",paged" : "") + ">";
}

Status check_host_pointer(const void* ptr, const char* field);

Status plan(const AttnParams& p, int device, Plan* out, bool want_name = false) {
  PACKFA_TRY(check_host_pointer(p.kv_len_host, "kv_len_host"));  // validate() reads its entries
  PACKFA_TRY(validate(p));
  const QKMode qk = qk_mode(p);
  const int gqa = p.n_q_heads / p.n_kv_heads;
  const int rows = gqa * p.nq;
  DeviceFacts f;  // one lookup for every path below
  PACKFA_TRY(device_facts(device, &f));
  if (prefill_min_rows() > 0 && rows >= prefill_min_rows()) {
    const PrefillPick pick = prefill_for(p, f, qk, rows);
    if (const FaInstance* e = pick.fa) {
      out->inst = e;
      out->prefill = true;
      out->rows = rows;
      out->row_groups = (rows + e->rows_per_block - 1) / e->rows_per_block;
      out->splits = 1;
      out->split_len = std::max(32, p.max_kv_len);
      out->rclass = 0;
      if (want_name)
        out->name = prefill_name(p, qk, pick.mma, *e);
      return Status::Ok();
    }
  }
  // key splits on a prefill kernel where its rules take the rows (wgmma_split_rule: MTP rows, D 256
  // rows; every call with PACKFA_WGMMA_SPLIT=1), then the warp-MMA rows split past the decode
  // kernel's widest row class
  if (const FaInstance* e = wgmma_split_for(p, f, qk, rows)) {
    PACKFA_TRY(plan_wgmma_split(p, f, e, rows, out));
    if (want_name)
      out->name = prefill_name(p, qk, false, *e);
    return Status::Ok();
  }
  if (rows > kDecodeMaxRows) {
    if (const FaInstance* e = rows_split_for(p, f, qk, rows)) {
      PACKFA_TRY(plan_rows_split(p, device, f, e, rows, out));
      if (want_name)
        out->name = prefill_name(p, qk, true, *e);
      return Status::Ok();
    }
  }
  // Smallest row class that holds all rows in one block; otherwise the largest, in groups.
  const int layout = p.paged.page_size > 0 ? 1 : 0;
  const auto& row_table =
      registry().table[layout][static_cast<int>(qk)][head_dim_index(p.head_dim)][static_cast<int>(p.v.format)];
  int rclass = kNumRowClasses - 1;
  for (int i = 0; i < kNumRowClasses; ++i) {
    if (rows <= kRowClasses[i] && row_table[i].kernel) {
      rclass = i;
      break;
    }
  }
  if (rclass > 0 && row_table[rclass].rows_per_block == 16 && row_table[0].kernel && d256_row_groups(p, f, rows))
    rclass = 0;
  const FaInstance* inst = &row_table[rclass];
  if (!inst->kernel) {  // fall back to any compiled row class
    for (int i = 0; i < kNumRowClasses && !inst->kernel; ++i) inst = &row_table[i];
  }
  auto name = [&] {
    return std::string("fa<d") + std::to_string(p.head_dim) + "," + vf_name(p.v.format) + "," + qk_name(qk) + ",r" +
           std::to_string(inst->rows_per_block ? inst->rows_per_block : kRowClasses[rclass]) +
           (layout ? ",paged" : "") + ">";
  };
  if (want_name) out->name = name();  // built only when asked: the launch path stays allocation-free
  if (!inst->kernel) return {Code::not_compiled, name() + " is not compiled in this build (PACKFA_INSTANCES)"};
  out->inst = inst;
  out->rows = rows;
  out->row_groups = (rows + inst->rows_per_block - 1) / inst->rows_per_block;
  if (static_cast<int64_t>(p.batch) * out->row_groups > kMaxGridYZ)  // the decode grid's z
    return invalid("nq", "batch x ceil(nq x n_q_heads / n_kv_heads / " + std::to_string(inst->rows_per_block) +
                             ") row groups = " + std::to_string(static_cast<int64_t>(p.batch) * out->row_groups) +
                             " blocks must be <= " + std::to_string(kMaxGridYZ) + " for " + name());

  if (static_cast<size_t>(inst->smem_bytes) > f.smem_optin)
    return {Code::unsupported, name() + " needs " + std::to_string(inst->smem_bytes) +
                                   " bytes of shared memory; the device allows " + std::to_string(f.smem_optin)};
  // Split-KV, each split at least 128 keys. One sequence: fill the blocks the GPU holds at
  // once, once (fewer partial states and prologues: on the H200, D 128, kv 128k, one wave of
  // blocks beat two by 5% with one row and 10% with 16, four waves lost 11%). Batches: the
  // per-sequence lengths live on the device and shorter sequences leave splits idle, so aim
  // for ~4 blocks per multiprocessor (one wave of blocks made a 16-sequence batch of mixed
  // lengths 25% slower). With the lengths on the host (AttnParams::kv_len_host) a batch takes
  // one balanced round instead (below).
  //
  // Batches, whole rounds (2026-12-02; PACKFA_SPLIT_ROUNDS=1, off by default: see
  // split_rounds()): ceil(4 x SMs / base) splits leave a part-filled last round of blocks
  // (batch 8 x kv 4k, 8 KV heads: 9 splits = 576 blocks on 264 slots, the third round 18%
  // full); the switch takes the most splits whose blocks fill at most max(1, 4 / resident)
  // whole rounds of the resident slots (8 splits: 512 blocks).
  const int64_t per_split = static_cast<int64_t>(p.n_kv_heads) * out->row_groups;  // blocks of one split
  const int64_t base_blocks = p.batch * per_split;
  int splits = std::min(p.num_splits, device::kMaxSplits);
  if (splits <= 0) {
    int64_t want = (4LL * f.sms + base_blocks - 1) / base_blocks;
    out->split_rounds = p.batch > 1 && split_rounds();
    const bool host_lens = p.batch > 1 && p.kv_len_host && !out->split_rounds;
    int per_sm = 0;  // resident blocks a multiprocessor: asked only by the rules that use it
    const bool trim = p.batch > 1 && !out->split_rounds && tail_trim();
    if (p.batch == 1 || out->split_rounds || host_lens || trim) PACKFA_TRY(resident_blocks(inst, device, &per_sm));
    const int64_t slots = static_cast<int64_t>(std::max(per_sm, 1)) * f.sms;
    if (p.batch == 1 || out->split_rounds) {
      const int64_t rounds = p.batch == 1 ? 1 : std::max(1, 4 / std::max(per_sm, 1));  // ~4 blocks per SM
      want = std::max<int64_t>(1, rounds * slots / base_blocks);
    }
    const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(device::kMaxSplits, (int64_t{p.max_kv_len} + 127) / 128));
    splits = static_cast<int>(std::max<int64_t>(1, std::min(want, cap)));
    if (trim) splits = static_cast<int>(detail::trim_tail_round(splits, base_blocks, slots));  // split_plan.hpp
    // Host lengths (decision "batch-one-round", split_plan.hpp): the most splits whose working
    // blocks fill one round, when that round is balanced; never more splits than the rule above,
    // so fa_workspace_bytes without kv_len_host bounds the workspace with it.
    if (host_lens) {
      const int s1 = detail::one_round_splits(p.kv_len_host, p.batch, p.max_kv_len, per_split, slots, splits);
      if (s1 > 0) {
        splits = s1;
        out->one_round = true;
      }
    }
  }
  out->split_len = static_cast<int>(detail::split_len_of(p.max_kv_len, splits));
  out->splits = static_cast<int>((int64_t{p.max_kv_len} + out->split_len - 1) / out->split_len);  // <= kMaxSplits
  out->splits = std::max(1, out->splits);
  out->rclass = rclass;
  plan_claims(p, out);
  return Status::Ok();
}

// The counters open the workspace; the split partials follow at a 256-byte boundary.
size_t claim_bytes(const Plan& pl) { return (static_cast<size_t>(pl.claims) * sizeof(unsigned) + 255) / 256 * 256; }

size_t workspace_for(const AttnParams& p, const Plan& pl) {
  if (pl.splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(p.batch) * p.nq * p.n_q_heads * pl.splits;
  return claim_bytes(pl) + rows * (static_cast<size_t>(p.head_dim) + 2) * sizeof(float) + 256;
}

// Grow-only per-device scratch used when the caller passes no workspace; freed at exit (a
// leak checker then sees every allocation returned; errors there are ignored: the runtime
// may already be unloading).
struct WorkspaceCache {
  std::mutex mu;
  std::vector<std::pair<void*, size_t>> bufs;
  ~WorkspaceCache() {
    for (auto& b : bufs)
      if (b.first) (void)GPU(Free)(b.first);
  }
};
Status internal_workspace(int device, size_t bytes, void* stream, void** out) {
  static WorkspaceCache cache;
  auto& mu = cache.mu;
  auto& bufs = cache.bufs;
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(bufs.size()) <= device) bufs.resize(device + 1, {nullptr, 0});
  auto& b = bufs[device];
  if (b.second < bytes) {
#if defined(PACKFA_BACKEND_CUDA)
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(static_cast<gpuStream>(stream), &cs);
    if (cs != cudaStreamCaptureStatusNone)
      return invalid("workspace", "needed while the stream is being captured: pass a workspace of " +
                                      std::to_string(bytes) + " bytes (fa_workspace_bytes)");
#else
    (void)stream;
#endif
    if (b.first) GPU(Free)(b.first);
    b = {nullptr, 0};
    auto e = GPU(Malloc)(&b.first, bytes);
    if (e != GPU_SUCCESS) return {Code::out_of_memory, "workspace: cannot allocate " + std::to_string(bytes) + " bytes"};
    b.second = bytes;
  }
  *out = b.first;
  return Status::Ok();
}

// Function attributes and occupancy queries act on the calling thread's current device, while
// select_kernel and fa_workspace_bytes take the device as an argument: those calls run with
// `device` current and the caller's device restored after (else the cached "done" below would
// mark a device whose kernel never got its shared-memory opt-in).
struct DeviceScope {
  int prev = -1;
  explicit DeviceScope(int device) {
    int cur = 0;
    if (GPU(GetDevice)(&cur) == GPU_SUCCESS && cur != device && GPU(SetDevice)(device) == GPU_SUCCESS) prev = cur;
  }
  ~DeviceScope() {
    if (prev >= 0) (void)GPU(SetDevice)(prev);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

Status set_smem_attr(const FaInstance* inst, int device) {
  static std::mutex mu;
  static std::vector<std::pair<int, const void*>> done;
  std::lock_guard<std::mutex> lock(mu);
  for (auto& d : done)
    if (d.first == device && d.second == reinterpret_cast<const void*>(inst->kernel)) return Status::Ok();
  const DeviceScope scope(device);
  auto e = GPU(FuncSetAttribute)(reinterpret_cast<const void*>(inst->kernel), GPU_ATTR_SMEM, inst->smem_bytes);
  if (e != GPU_SUCCESS) return gpu_error("FuncSetAttribute(max dynamic shared memory)", e);
  done.emplace_back(device, reinterpret_cast<const void*>(inst->kernel));
  return Status::Ok();
}

// Blocks of this instance one multiprocessor holds at once (occupancy API), cached.
Status resident_blocks(const FaInstance* inst, int device, int* out) {
  PACKFA_TRY(set_smem_attr(inst, device));  // the occupancy query honours the opt-in size
  static std::mutex mu;
  static std::vector<std::pair<std::pair<int, const void*>, int>> done;
  const void* fn = reinterpret_cast<const void*>(inst->kernel);
  std::lock_guard<std::mutex> lock(mu);
  for (auto& d : done)
    if (d.first.first == device && d.first.second == fn) return *out = d.second, Status::Ok();
  int n = 0;
  const DeviceScope scope(device);
  auto e = GPU(OccupancyMaxActiveBlocksPerMultiprocessor)(&n, fn, inst->threads, inst->smem_bytes);
  if (e != GPU_SUCCESS) return gpu_error("OccupancyMaxActiveBlocksPerMultiprocessor", e);
  done.push_back({{device, fn}, n});
  *out = n;
  return Status::Ok();
}

// ---- device-accessible pointers ----------------------------------------------------------------
// A pageable host pointer (or one that is no allocation at all) handed to a kernel kills the
// caller's CUDA context; the runtime can tell such pointers apart (cudaPointerGetAttributes),
// at ~0.1-0.3 us a query. Answers are cached per thread and 2 MiB region: device allocations
// are carved from 2 MiB-aligned ranges of the unified address space that host allocations do
// not share, and an engine passes the same few regions on every call. PACKFA_CHECK_POINTERS=0
// turns the check off (read once).
#if defined(PACKFA_BACKEND_CUDA)
bool pointer_check_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("PACKFA_CHECK_POINTERS");
    return !(e && e[0] == '0');
  }();
  return on;
}
bool pageable_access(int device) {
  static std::mutex mu;
  static std::vector<int> cache;  // -1 unknown, 0, 1
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(cache.size()) <= device) cache.resize(device + 1, -1);
  if (cache[device] < 0) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, device) != cudaSuccess) v = 0;
    cache[device] = v ? 1 : 0;
  }
  return cache[device] == 1;
}
// The runtime's answer for ptr's 2 MiB region, judged by judge(query error, attributes); an
// accepted answer the runtime gave is cached in `known` (per thread, per check).
template <class Judge>
Status check_region(std::vector<uintptr_t>& known, const void* ptr, Judge&& judge) {
  if (!ptr || !pointer_check_enabled()) return Status::Ok();
  const uintptr_t region = reinterpret_cast<uintptr_t>(ptr) >> 21;
  for (uintptr_t r : known)
    if (r == region) return Status::Ok();
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, ptr);
  if (e != cudaSuccess) cudaGetLastError();  // not sticky: clear it
  PACKFA_TRY(judge(e, a));
  if (e == cudaSuccess && known.size() < 4096) known.push_back(region);
  return Status::Ok();
}
Status check_device_pointer(const void* ptr, const char* field, int device) {
  thread_local std::vector<uintptr_t> known;  // 2 MiB regions seen to be device-accessible
  return check_region(known, ptr, [&](cudaError_t e, const cudaPointerAttributes& a) {
    if (e != cudaSuccess) return invalid(field, "cannot query the pointer (" + std::string(cudaGetErrorString(e)) + ")");
    const bool ok = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
                    (a.type == cudaMemoryTypeHost && a.devicePointer != nullptr) || pageable_access(device);
    if (ok) return Status::Ok();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", ptr);
    return invalid(field, std::string("is not device-accessible memory (") + buf +
                              ": pageable host memory or no allocation; pass cudaMalloc'd or pinned memory)");
  });
}
// The reverse for the one input the host reads (kv_len_host: validate() and the planner read
// its entries): a device allocation there would fault on the host. A pointer the runtime does
// not know is plain host memory (accepted, not cached).
Status check_host_pointer(const void* ptr, const char* field) {
  thread_local std::vector<uintptr_t> known;  // 2 MiB regions seen to be host-readable
  return check_region(known, ptr, [&](cudaError_t e, const cudaPointerAttributes& a) {
    if (e == cudaSuccess && a.type == cudaMemoryTypeDevice)
      return invalid(field, "is device memory; the planner reads it on the host (pass a host array)");
    return Status::Ok();
  });
}
#else
Status check_device_pointer(const void*, const char*, int) { return Status::Ok(); }  // HIP: not checked yet
Status check_host_pointer(const void*, const char*) { return Status::Ok(); }
#endif

Status check_pointers(const AttnParams& p, int device) {
  const std::pair<const void*, const char*> ptrs[] = {
      {p.q.data, "q.data"},       {p.o.data, "o.data"},         {p.k.data, "k.data"},
      // the scale planes only where the format has them (a stale pointer elsewhere is ignored)
      {p.k.format == KFormat::packed16 ? p.k.scales : nullptr, "k.scales"},
      {p.v.data, "v.data"},
      {p.v.format == VFormat::q8_0_planar ? p.v.scales : nullptr, "v.scales"},
      {p.kv_len, "kv_len"},       {p.q_pos, "q_pos"},           {p.mask, "mask"},
      {p.sinks, "sinks"},         {p.lse, "lse"},               {p.k.smooth_scale, "k.smooth_scale"},
      {p.errors, "errors"},       {p.workspace, "workspace"},   {p.paged.block_table, "paged.block_table"}};
  for (const auto& x : ptrs) PACKFA_TRY(check_device_pointer(x.first, x.second, device));
  return Status::Ok();
}

int current_device() {
  int d = 0;
  GPU(GetDevice)(&d);
  return d;
}

}  // namespace

Status select_kernel(const AttnParams& p, int device, KernelChoice* out) {
  if (!out) return invalid("out", "null");
  Plan pl;
  Status s = plan(p, device, &pl, true);
  out->name = pl.name;
  out->compiled = pl.inst != nullptr;
  if (!s.ok()) {
    out->why_not = s.message();
    return s;
  }
  out->rows_per_block = pl.inst->rows_per_block;
  out->row_groups = pl.row_groups;
  out->num_splits = pl.splits;
  out->layout = p.paged.page_size > 0 ? "paged" + std::to_string(p.paged.page_size) : "contiguous";
  out->claims = pl.claims > 0;
  DeviceFacts f;
  PACKFA_TRY(device_facts(device, &f));
  out->mma_qk = pl.inst->mma_qk && f.cc_major >= 8;
  out->k_rounded = pl.inst->k_rounded && p.k.format == KFormat::packed16;
  out->q_vec = !pl.prefill && q_rows_aligned(p.q);
  out->combine = pl.splits <= 1                                     ? "none"
                 : pl.splits >= device::kRowCombineMinSplits &&
                         pl.splits <= device::kWarpCombineMaxSplits ? "row_block"
                 : pl.splits <= device::kWarpCombineMaxSplits       ? "wave"
                 : combine_cols()                                   ? "col_block"  // a block per (row, 64 dims)
                                                                    : "block";
  out->split_rounds = pl.split_rounds;
  out->one_round = pl.one_round;
  out->share_len = shares_len(pl);
  if (!pl.prefill) {
    int per_sm = 0;
    PACKFA_TRY(resident_blocks(pl.inst, device, &per_sm));
    out->resident_slots = static_cast<int64_t>(per_sm) * f.sms;
  }
  return Status::Ok();
}

Status fa_workspace_bytes(const AttnParams& p, int device, size_t* bytes) {
  if (!bytes) return invalid("bytes", "null");
  Plan pl;
  PACKFA_TRY(plan(p, device, &pl));
  *bytes = workspace_for(p, pl);
  return Status::Ok();
}

Status fa_packed16_forward(const AttnParams& p, void* stream) {
  const int device = current_device();
  Plan pl;
  PACKFA_TRY(plan(p, device, &pl));
  PACKFA_TRY(check_pointers(p, device));

  FaKernelParams kp{};
  kp.batch = p.batch;
  kp.nq = p.nq;
  kp.n_q_heads = p.n_q_heads;
  kp.n_kv_heads = p.n_kv_heads;
  kp.head_dim = p.head_dim;
  kp.gqa = p.n_q_heads / p.n_kv_heads;
  kp.rows = pl.rows;
  kp.row_groups = pl.row_groups;
  kp.num_splits = pl.splits;
  kp.split_len = pl.split_len;
  kp.share_len = shares_len(pl) ? 1 : 0;
  kp.q = p.q.data;
  kp.q_type = static_cast<int>(p.q.type);
  kp.q_seq = p.q.seq_stride;
  kp.q_row = p.q.row_stride;
  kp.q_head = p.q.head_stride;
  kp.q_vec = q_rows_aligned(p.q) ? 1 : 0;
  kp.k = static_cast<const char*>(p.k.data);
  kp.k_seq = p.k.data_strides.seq;
  kp.k_slot = p.k.data_strides.slot;
  kp.k_head = p.k.data_strides.head;
  const bool packed = p.k.format == KFormat::packed16;
  kp.ks = packed ? static_cast<const char*>(p.k.scales) : kp.k;
  kp.ks_seq = p.k.scale_strides.seq;
  kp.ks_slot = p.k.scale_strides.slot;
  kp.ks_head = p.k.scale_strides.head;
  kp.k_block = packed ? p.k.block : 32;
  kp.ks_width = packed ? copy_width(p.k.scales, p.k.scale_strides, 2 * p.head_dim / p.k.block) : 16;
  kp.smooth = packed ? p.k.smooth_scale : nullptr;
  kp.v = static_cast<const char*>(p.v.data);
  kp.v_seq = p.v.strides.seq;
  kp.v_slot = p.v.strides.slot;
  kp.v_head = p.v.strides.head;
  kp.v_width = copy_width(p.v.data, p.v.strides, v_row_bytes(p.v.format, p.head_dim));
  const bool v_planar = p.v.format == VFormat::q8_0_planar;
  kp.vs = v_planar ? static_cast<const char*>(p.v.scales) : kp.v;
  kp.vs_seq = p.v.scale_strides.seq;
  kp.vs_slot = p.v.scale_strides.slot;
  kp.vs_head = p.v.scale_strides.head;
  kp.vs_width = v_planar ? copy_width(p.v.scales, p.v.scale_strides, v_scale_row_bytes(p.v.format, p.head_dim)) : 16;
  kp.o = p.o.data;
  kp.o_type = static_cast<int>(p.o.type);
  kp.o_seq = p.o.seq_stride;
  kp.o_row = p.o.row_stride;
  kp.o_head = p.o.head_stride;
  kp.lse = p.lse;
  kp.kv_len = p.kv_len;
  kp.q_pos = p.q_pos;
  kp.scale = p.scale > 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  kp.softcap = p.softcap;
  kp.causal = p.causal ? 1 : 0;
  kp.window = p.window;
  kp.mask = p.mask;
  kp.mask_seq = p.mask_seq_stride;
  kp.mask_row = p.mask_row_stride;
  kp.sinks = p.sinks;
  kp.max_kv_len = p.max_kv_len;
  kp.errors = p.errors;
  kp.block_table = p.paged.page_size > 0 ? p.paged.block_table : nullptr;
  kp.table_stride = p.paged.table_stride;
  kp.page_size = p.paged.page_size;
  kp.num_pages = p.paged.num_pages;
  kp.mask_head = p.mask_head_stride;
  kp.alibi_pos = p.alibi_max_bias > 0.0f && p.alibi_mode == AlibiMode::position ? 1 : 0;
  if (p.alibi_max_bias > 0.0f) {
    int n2 = 1;  // the largest power of two <= n_q_heads (<= kMaxGridYZ: validate())
    while (n2 <= p.n_q_heads / 2) n2 *= 2;
    kp.alibi_n2 = n2;
    kp.alibi_m0 = std::pow(2.0f, -p.alibi_max_bias / static_cast<float>(n2));
    kp.alibi_m1 = std::pow(2.0f, -p.alibi_max_bias / 2.0f / static_cast<float>(n2));
  }

  const size_t ws = workspace_for(p, pl);
  if (ws > 0) {
    void* buf = p.workspace;
    if (buf) {
      if (reinterpret_cast<uintptr_t>(buf) & 15) return invalid("workspace", "must be 16-byte aligned");
      if (p.workspace_bytes < ws)
        return invalid("workspace_bytes", std::to_string(p.workspace_bytes) + " < " + std::to_string(ws) + " needed");
    } else {
      PACKFA_TRY(internal_workspace(device, ws, stream, &buf));
    }
    const size_t rows = static_cast<size_t>(p.batch) * p.nq * p.n_q_heads * pl.splits;
    kp.part_o = reinterpret_cast<float*>(static_cast<char*>(buf) + claim_bytes(pl));
    kp.part_ml = kp.part_o + rows * p.head_dim;
    if (pl.claims > 0) {  // zeroed in the stream: any workspace, any previous use of it
      kp.claims = static_cast<unsigned*>(buf);
      kp.pool0 = pl.pool0;
      auto e = GPU(MemsetAsync)(buf, 0, static_cast<size_t>(pl.claims) * sizeof(unsigned), static_cast<gpuStream>(stream));
      if (e != GPU_SUCCESS) return gpu_error("MemsetAsync(claim counters)", e);
    }
  }

#if defined(PACKFA_TRACE)
  kp.trace = detail::g_trace;
#endif
  PACKFA_TRY(set_smem_attr(pl.inst, device));
  LaunchOptions opt;
  opt.pdl = p.pdl;
  const dim3 grid = pl.prefill ? dim3(pl.row_groups * (pl.dual ? pl.splits / 2 : pl.splits), p.n_kv_heads, p.batch)  // prefill: blockIdx.x = row tile x split
                               : dim3(p.n_kv_heads, pl.splits, p.batch * pl.row_groups);  // decode: KV head
  PACKFA_TRY(launch(pl.inst->kernel, grid, dim3(pl.inst->threads), pl.inst->smem_bytes, stream, kp, opt));
  if (pl.splits > 1) {
    CombineParams cp{};
    cp.batch = p.batch;
    cp.nq = p.nq;
    cp.n_q_heads = p.n_q_heads;
    cp.head_dim = p.head_dim;
    cp.num_splits = pl.splits;
    cp.part_o = kp.part_o;
    cp.part_ml = kp.part_ml;
    cp.sinks = p.sinks;
    cp.o = p.o.data;
    cp.o_type = kp.o_type;
    cp.o_seq = p.o.seq_stride;
    cp.o_row = p.o.row_stride;
    cp.o_head = p.o.head_stride;
    cp.lse = p.lse;
#if defined(PACKFA_TRACE)
    if (detail::g_trace) cp.trace = detail::g_trace + device::kTraceBlocks * device::kTracePoints * 2;
#endif
    PACKFA_TRY(detail::launch_combine(cp, static_cast<int64_t>(p.batch) * p.nq * p.n_q_heads, stream, p.pdl,
                                         combine_cols()));
  }
  return Status::Ok();
}

// ---- pack-on-write (arguments checked by validate(), src/cpu/validate.cpp) -------------------
Status pack_k_packed16(const PackKParams& p, void* stream) {
  PACKFA_TRY(validate(p));
  if (p.n_tokens == 0) return Status::Ok();
  {
    const int dev = current_device();
    PACKFA_TRY(check_device_pointer(p.src, "src", dev));
    PACKFA_TRY(check_device_pointer(p.dst.data, "dst.data", dev));
    PACKFA_TRY(check_device_pointer(p.dst.scales, "dst.scales", dev));
    PACKFA_TRY(check_device_pointer(p.slots, "slots", dev));
    PACKFA_TRY(check_device_pointer(p.smooth_shift, "smooth_shift", dev));
    PACKFA_TRY(check_device_pointer(p.dst.smooth_scale, "dst.smooth_scale", dev));
    PACKFA_TRY(check_device_pointer(p.counters, "counters", dev));
  }
  device::PackKKernelParams kp{};
  kp.n_tokens = p.n_tokens;
  kp.n_kv_heads = p.n_kv_heads;
  kp.head_dim = p.head_dim;
  kp.block = p.dst.block;
  kp.src_type = static_cast<int>(p.src_type);
  kp.src = p.src;
  kp.src_token = p.src_token_stride;
  kp.src_head = p.src_head_stride;
  kp.payload = static_cast<char*>(const_cast<void*>(p.dst.data));
  kp.pay_slot = p.dst.data_strides.slot;
  kp.pay_head = p.dst.data_strides.head;
  kp.scales = static_cast<char*>(const_cast<void*>(p.dst.scales));
  kp.sc_slot = p.dst.scale_strides.slot;
  kp.sc_head = p.dst.scale_strides.head;
  kp.slots = p.slots;
  kp.base_slot = p.base_slot;
  kp.shift = p.smooth_shift;
  kp.chan_scale = p.dst.smooth_scale;
  kp.counters = p.counters;
  kp.page_size = p.page_size;
  kp.pay_page = p.dst.data_strides.seq;
  kp.sc_page = p.dst.scale_strides.seq;
  kp.n_slots = p.n_slots;
  return detail::launch_pack_k(kp, static_cast<int64_t>(p.n_tokens) * p.n_kv_heads * (p.head_dim / p.dst.block),
                               stream, p.pdl);
}

Status quantize_v(const QuantVParams& p, void* stream) {
  PACKFA_TRY(validate(p));
  if (p.n_tokens == 0) return Status::Ok();
  {
    const int dev = current_device();
    PACKFA_TRY(check_device_pointer(p.src, "src", dev));
    PACKFA_TRY(check_device_pointer(p.dst.data, "dst.data", dev));
    PACKFA_TRY(check_device_pointer(p.dst.scales, "dst.scales", dev));
    PACKFA_TRY(check_device_pointer(p.slots, "slots", dev));
  }
  device::QuantVKernelParams kp{};
  kp.n_tokens = p.n_tokens;
  kp.n_kv_heads = p.n_kv_heads;
  kp.head_dim = p.head_dim;
  kp.src_type = static_cast<int>(p.src_type);
  kp.src = p.src;
  kp.src_token = p.src_token_stride;
  kp.src_head = p.src_head_stride;
  kp.dst_format = static_cast<int>(p.dst.format);
  kp.dst = static_cast<char*>(const_cast<void*>(p.dst.data));
  kp.dst_slot = p.dst.strides.slot;
  kp.dst_head = p.dst.strides.head;
  kp.dst_scales = static_cast<char*>(const_cast<void*>(p.dst.scales));
  kp.dscale_slot = p.dst.scale_strides.slot;
  kp.dscale_head = p.dst.scale_strides.head;
  kp.slots = p.slots;
  kp.base_slot = p.base_slot;
  kp.page_size = p.page_size;
  kp.dst_page = p.dst.strides.seq;
  kp.dscale_page = p.dst.scale_strides.seq;
  kp.n_slots = p.n_slots;
  return detail::launch_quantize_v(kp, static_cast<int64_t>(p.n_tokens) * p.n_kv_heads * ((p.head_dim + 31) / 32),
                                   stream, p.pdl);
}

DeviceInfo device_info(int device) {
  DeviceInfo info;
  info.backend = GPU_BACKEND_NAME;
  int n = 0;
  auto e = GPU(GetDeviceCount)(&n);
  if (e != GPU_SUCCESS) {
    (void)GPU(GetLastError)();
    info.why_absent = detail::gpu_cause(e);  // e.g. "no NVIDIA driver / no GPU visible (...)"
    return info;
  }
  if (n == 0 || device < 0 || device >= n) {
    info.why_absent = n == 0 ? std::string("no ") + GPU_BACKEND_NAME + " device visible"
                             : "device " + std::to_string(device) + " does not exist (" + std::to_string(n) +
                                   " visible: 0.." + std::to_string(n - 1) + ")";
    return info;
  }
  gpuDeviceProp prop;
  if ((e = GPU(GetDeviceProperties)(&prop, device)) != GPU_SUCCESS) {
    (void)GPU(GetLastError)();
    info.why_absent = "cannot read the properties of device " + std::to_string(device) + ": " + detail::gpu_cause(e);
    return info;
  }
  info.present = true;
  info.name = prop.name;
  info.multiprocessors = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  return info;
}

}  // namespace packfa
