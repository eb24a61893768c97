// Prefill / chunked prefill (issue 17) through the public fa_packed16_forward: a chunk of nq
// new rows attends causally to itself and to a cached prefix of kv_len - nq keys.
//
// Every case compares O and LSE with the fp64 CPU reference in the kernel's math mode
// (int8 dot: RefMode::kernel_int8 — the prefill kernel quantizes Q per 32-block exactly so and
// multiplies the int8 values on f16 tensor cores; fp16-Q dot and f16 K: kernel_f16):
// ‖O − ref‖/‖ref‖ ≤ 2e-3 (bf16 output 5e-3), |LSE − ref| ≤ 1e-3, -inf where the reference has
// it. O and LSE are poisoned (NaN) before the call, slots past kv_len hold NaN (K scales and
// V), so an unwritten row or a tile tail that is read without being masked fails. Each case
// also asserts which kernel ran (select_kernel): the prefill kernel ("fa_prefill…", one
// split) wherever the dispatch rule says so (prefill_expected below), the decode kernel
// otherwise, and that the error counters stayed 0.
//
// The fp64 reference runs on all host cores (rows split across threads, ref_parallel): keep
// nq·heads·visible keys·D per case around 1e9 or less.
//
// Dispatch rule (the contract with the kernel): prefill on compute capability 9.0 when
// nq > 16 and nq · (n_q_heads / n_kv_heads) >= PACKFA_PREFILL_MIN_ROWS (read once by the
// library); PACKFA_PREFILL=0 sends everything to decode. This binary sets
// PACKFA_PREFILL_MIN_ROWS=64 before main unless the environment gives one, so the threshold
// edge is tested at a known value; run it with PACKFA_PREFILL=0 to test the decode path on the
// same large-nq cases (every choice assertion then expects decode).
// Which prefill kernel: cc 9.0 runs the wgmma kernel (prefill_sm90.hpp), cc 8.x the warp-MMA
// kernel (prefill_mma.hpp); PACKFA_PREFILL_KERNEL=mma sends cc 9.0 to the warp-MMA kernel too,
// so run this binary twice on an H200 (plain, and with PACKFA_PREFILL_KERNEL=mma): every case
// then runs through both kernels, and the choice assertions check the kernel's name.
// Rows split (decision "rows-split", src/dispatch.cu): on cc 9.0, calls below the prefill rule
// with more than 16 rows a KV head (MTP rows, short chunks; V not bf16) run the warp-MMA
// kernel in key splits merged by the combine kernel. This binary sets PACKFA_ROWS_SPLIT=1
// before main unless the environment gives it (every such call, not only the shapes of the
// speed rule, which test_attention asserts), so the small cases here cover the path;
// PACKFA_ROWS_SPLIT=0 sends them to the decode kernel's row groups (rows_split_expected).
// Key splits on the wgmma kernel (decision "wgmma-split"): this binary sets PACKFA_WGMMA_SPLIT=0
// unless the environment gives it; ctest runs it a second time with PACKFA_WGMMA_SPLIT=1, where
// every rows-split call and every decode call (up to 16 rows a KV head) of a cc 9.0 device runs
// the wgmma kernel in key splits (wgmma_split_expected), against the same references.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/format.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

namespace {

// Before main, before any packfa call: the threshold the library reads once (lazily).
const bool g_threshold_set = [] {
  setenv("PACKFA_PREFILL_MIN_ROWS", "64", 0);
  setenv("PACKFA_ROWS_SPLIT", "1", 0);
  setenv("PACKFA_WGMMA_SPLIT", "0", 0);
  return true;
}();

int min_rows() {
  const char* e = std::getenv("PACKFA_PREFILL_MIN_ROWS");
  return e && std::atoi(e) > 0 ? std::atoi(e) : 64;
}

// The warp-MMA prefill kernel (device/fa/prefill_mma.hpp) runs instead of the wgmma one: always
// on cc 8.x, on cc 9.0 when PACKFA_PREFILL_KERNEL=mma (read once by the library, here too).
bool mma_kernel() {
  static const bool v = [] {
    const DeviceInfo d = device_info(0);
    const char* e = std::getenv("PACKFA_PREFILL_KERNEL");
    return d.present && (d.cc_major == 8 || (e && std::strcmp(e, "mma") == 0));
  }();
  return v;
}

bool prefill_device() {
  static const bool v = [] {
    const DeviceInfo d = device_info(0);
    const char* off = std::getenv("PACKFA_PREFILL");
    return d.present && d.backend == "cuda" && (d.cc_major == 8 || (d.cc_major == 9 && d.cc_minor == 0)) &&
           !(off && std::strcmp(off, "0") == 0);
  }();
  return v;
}

// The dispatch rule for a call whose options the prefill kernel supports (all cases here).
// Not built (fa_prefill_built, shared memory): D 256 with f16 K and f16 / bf16 V. The warp-MMA
// kernel (fa_prefill_mma_built) has every combination on NVIDIA.
bool prefill_built(int d, KFormat kf, VFormat vf, DotMode dot) {
  (void)dot;
  if (mma_kernel()) return true;
  return !(d == 256 && kf == KFormat::f16 && (vf == VFormat::f16 || vf == VFormat::bf16));
}
bool prefill_expected(const AttnParams& p) {
  const bool built = prefill_built(p.head_dim, p.k.format, p.v.format, p.dot);
  return prefill_device() && built && p.nq > 16 &&
         static_cast<int64_t>(p.nq) * (p.n_q_heads / p.n_kv_heads) >= min_rows();
}

// The rows-split rule (src/dispatch.cu, rows_split_for) for a call the prefill rule leaves to
// the decode kernel, with PACKFA_ROWS_SPLIT=1 (this binary's default): cc 9.0, more rows a KV
// head than the decode kernel's widest class (16), V not bf16 (the kernel widens V to fp16).
// Another value: 0 none; unset is not this binary's case (g_threshold_set).
bool rows_split_device() {
  static const bool v = [] {
    const DeviceInfo d = device_info(0);
    const char* e = std::getenv("PACKFA_ROWS_SPLIT");
    return d.present && d.backend == "cuda" && d.cc_major == 9 && d.cc_minor == 0 && e && std::strcmp(e, "0") != 0;
  }();
  return v;
}
bool rows_split_expected(const AttnParams& p) {
  return rows_split_device() && !prefill_expected(p) && p.nq * (p.n_q_heads / p.n_kv_heads) > 16 &&
         p.v.format != VFormat::bf16;
}

// PACKFA_WGMMA_SPLIT=1 (src/dispatch.cu, wgmma_split_for): cc 9.0 without
// PACKFA_PREFILL_KERNEL=mma, V not bf16, a wgmma instance built: every call below the prefill
// rule runs the wgmma kernel in key splits.
bool wgmma_split_device() {
  static const bool v = [] {
    const DeviceInfo d = device_info(0);
    const char* e = std::getenv("PACKFA_WGMMA_SPLIT");
    return d.present && d.backend == "cuda" && d.cc_major == 9 && d.cc_minor == 0 && !mma_kernel() && e &&
           std::strcmp(e, "1") == 0;
  }();
  return v;
}
bool wgmma_split_expected(const AttnParams& p) {
  return wgmma_split_device() && !prefill_expected(p) && p.v.format != VFormat::bf16 &&
         !(p.head_dim == 256 && p.k.format == KFormat::f16 && p.v.format == VFormat::f16);
}

bool is_prefill(const KernelChoice& c) { return c.name.rfind("fa_prefill", 0) == 0; }
bool is_decode(const KernelChoice& c) { return c.name.rfind("fa<", 0) == 0; }

// What a call gets: the prefill kernel in one split, the wgmma kernel in key splits, the
// warp-MMA kernel in key splits (rows split), or the decode kernel.
enum class Path { decode, prefill, rows_split, wgmma_split };
Path expected_path(const AttnParams& p) {
  return prefill_expected(p)        ? Path::prefill
         : wgmma_split_expected(p) ? Path::wgmma_split
         : rows_split_expected(p)  ? Path::rows_split
                                   : Path::decode;
}
const char* path_name(Path w) {
  return w == Path::prefill ? "prefill" : w == Path::rows_split ? "rows split" : w == Path::wgmma_split ? "wgmma split" : "decode";
}

// Asserts the kernel the call gets (splits: the split count asked for, 0 = the planner's).
void check_choice(const KernelChoice& c, Path want, int splits = 0, int rows = 0) {
  INFO("kernel " << c.name << " splits=" << c.num_splits << " layout=" << c.layout << " why_not=" << c.why_not
                 << " (expected: " << path_name(want) << ", PACKFA_PREFILL_MIN_ROWS=" << min_rows() << ")");
  CHECK(c.compiled);
  if (want == Path::prefill) {
    // which prefill kernel: the name says it (src/dispatch.cu)
    CHECK(c.name.rfind(mma_kernel() ? "fa_prefill_mma<" : "fa_prefill<", 0) == 0);
    CHECK(c.num_splits == 1);
  } else if (want == Path::rows_split) {
    CHECK(c.name.rfind("fa_prefill_mma<", 0) == 0);
    CHECK(c.rows_per_block == 64);
    if (splits > 0) CHECK(c.num_splits == splits);
  } else if (want == Path::wgmma_split) {
    // up to 64 rows a KV head: two partials a block split (the consumer warpgroups' tiles)
    CHECK(c.name.rfind("fa_prefill<", 0) == 0);
    CHECK(c.rows_per_block == 128);
    const bool dual = rows > 0 && rows <= 64;
    if (splits > 0) CHECK(c.num_splits == (dual ? (splits + 1) / 2 * 2 : splits));
    if (dual) CHECK(c.num_splits % 2 == 0);
  } else {
    CHECK(is_decode(c));
  }
}

const char* vname(VFormat f) {
  const char* n[] = {"f16", "bf16", "q8_0", "q4_0", "q8_0_planar"};
  return n[static_cast<int>(f)];
}

int esize(DType t) { return t == DType::f32 ? 4 : 2; }

std::string describe(const ProblemConfig& c) {
  std::string lens;
  for (int l : c.kv_lens) lens += std::to_string(l) + ",";
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "D=%d V=%s K=%s block=%d dot=%s nq=%d H=%d G=%d batch=%d kv=%d lens=%s cap=%d causal=%d window=%d "
                "mask=%d softcap=%g sinks=%d alibi=%g qpos=%d smooth=%d/%d q=%d o=%d seed=%llu",
                c.head_dim, vname(c.v_format), c.k_format == KFormat::f16 ? "f16" : "packed16", c.k_block,
                c.dot == DotMode::int8 ? "int8" : "f16", c.nq, c.n_q_heads, c.n_kv_heads, c.batch, c.kv_len,
                lens.c_str(), c.capacity, c.causal, c.window, c.mask, c.softcap, c.sinks, c.alibi_max_bias,
                c.explicit_q_pos, c.smooth_shift, c.smooth_scale, static_cast<int>(c.q_type),
                static_cast<int>(c.o_type), static_cast<unsigned long long>(c.seed));
  return buf;
}

// reference_attention over all host cores: each thread takes a slice of query rows with
// their positions made explicit (q_pos), its Q and mask rows offset; same result as one call.
void ref_parallel(const AttnParams& p, RefMode mode, std::vector<double>* o, std::vector<double>* lse) {
  const int B = p.batch, NQ = p.nq, H = p.n_q_heads, D = p.head_dim;
  std::vector<int32_t> pos(static_cast<size_t>(B) * NQ);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < NQ; ++i)
      pos[static_cast<size_t>(b) * NQ + i] = p.q_pos ? p.q_pos[static_cast<size_t>(b) * NQ + i] : p.kv_len[b] - NQ + i;
  o->assign(static_cast<size_t>(B) * NQ * H * D, 0.0);
  lse->assign(static_cast<size_t>(B) * NQ * H, 0.0);
  const int T = std::max(1, std::min({static_cast<int>(std::thread::hardware_concurrency()), 32, NQ}));
  std::vector<std::string> errs(T);
  std::vector<std::thread> th;
  for (int t = 0; t < T; ++t)
    th.emplace_back([&, t] {
      const int i0 = static_cast<int>(static_cast<int64_t>(NQ) * t / T);
      const int i1 = static_cast<int>(static_cast<int64_t>(NQ) * (t + 1) / T);
      const int n = i1 - i0;
      if (n <= 0) return;
      AttnParams s = p;
      s.nq = n;
      s.q.data = static_cast<const char*>(p.q.data) + static_cast<int64_t>(i0) * p.q.row_stride * esize(p.q.type);
      if (p.mask) s.mask = p.mask + static_cast<int64_t>(i0) * p.mask_row_stride;
      std::vector<int32_t> sp(static_cast<size_t>(B) * n);
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < n; ++i) sp[static_cast<size_t>(b) * n + i] = pos[static_cast<size_t>(b) * NQ + i0 + i];
      s.q_pos = sp.data();
      std::vector<double> so, sl;
      const Status st = reference_attention(s, mode, &so, &sl);
      if (!st.ok()) {
        errs[t] = st.to_string();
        return;
      }
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < n; ++i) {
          const size_t src = (static_cast<size_t>(b) * n + i) * H, dst = (static_cast<size_t>(b) * NQ + i0 + i) * H;
          std::copy(so.begin() + src * D, so.begin() + (src + H) * D, o->begin() + dst * D);
          std::copy(sl.begin() + src, sl.begin() + src + H, lse->begin() + dst);
        }
    });
  for (auto& x : th) x.join();
  for (const auto& e : errs) {
    INFO(e);
    REQUIRE(e.empty());
  }
}

double lse_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (!(std::isinf(got[i]) && got[i] < 0)) e = 1e30;
    } else {
      const double d = std::fabs(got[i] - ref[i]);
      e = std::max(e, d == d ? d : 1e30);
    }
  }
  return e;
}

// Beyond ProblemConfig.
struct Extra {
  bool head_masks = false;  // per-head masks [b][h][i][j] (mask_head_stride) instead of cfg.mask's shared one
  bool ggml_alibi = false;  // with head_masks: AlibiMode::ggml and llama.cpp's -|pos - j| masks
  int page_size = 0;        // > 0: K/V through a scrambled NHD block table of such pages
  bool graph = false;       // captured in a CUDA graph (PDL on), launched 3 times
  bool want_prefill = true; // the case is meant for the prefill kernel (asserted against the rule)
  int num_splits = 0;       // AttnParams::num_splits (0: the planner's)
  bool o_odd = false;       // O one element past an allocation's start, strides D + 1 a head (odd)
};

// NHD page pool of one plane: the flat plane's rows of sequence b, key j at page
// table[b][j / ps], slot j % ps; every other byte 0x7f (NaN as fp16, 127 as int8).
struct PoolPlane {
  std::vector<uint8_t> host;
  Strides s;
};
PoolPlane page_plane(const aligned_vector<uint8_t>& flat, const Strides& fs, int64_t row, const std::vector<int>& lens,
                     int G, int ps, int pages, const std::vector<int32_t>& table, int64_t tstride) {
  PoolPlane pl;
  const int64_t r16 = (row + 15) / 16 * 16;
  pl.s = {ps * G * r16, G * r16, r16};
  pl.host.assign(static_cast<size_t>(pages) * ps * G * r16, 0x7f);
  for (size_t b = 0; b < lens.size(); ++b)
    for (int j = 0; j < lens[b]; ++j)
      for (int g = 0; g < G; ++g) {
        const int64_t page = table[b * tstride + j / ps];
        std::memcpy(pl.host.data() + page * pl.s.seq + (j % ps) * pl.s.slot + g * pl.s.head,
                    flat.data() + b * fs.seq + j * fs.slot + g * fs.head, row);
      }
  return pl;
}

struct Result {
  double err = 0, lse_err = 0;
  KernelChoice choice;
  Path path = Path::decode;    // what the dispatch rule says (run_case asserts the choice follows it)
  std::vector<double> o, lse;  // what the GPU wrote (dense, as the reference)
};

// keep: where the host problem goes (for a caller that reuses it); null: a local one.
Result run_case(const ProblemConfig& cfg, const Extra& x = {}, HostProblem* keep = nullptr) {
  HostProblem local;
  HostProblem& hp = keep ? *keep : local;
  {
    const Status s = make_problem(cfg, &hp);
    INFO(s.to_string());
    REQUIRE(s.ok());
  }
  const int B = cfg.batch, NQ = cfg.nq, H = cfg.n_q_heads, C = hp.capacity;
  AttnParams hpar = hp.params;

  // per-head masks: random in [-4, 0] with ~1/8 -inf, or llama.cpp's ALiBi mask -|pos - j|
  // scaled per head (1 + h % 3) / 8 for visible keys
  std::vector<uint16_t> hmask;
  if (x.head_masks) {
    hmask.resize(static_cast<size_t>(B) * H * NQ * C);
    std::mt19937 rng(static_cast<unsigned>(cfg.seed * 7 + 1));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < NQ; ++i) {
          const int pos = hp.q_pos.empty() ? hp.kv_len[b] - NQ + i : hp.q_pos[static_cast<size_t>(b) * NQ + i];
          for (int j = 0; j < C; ++j) {
            uint16_t& m = hmask[((static_cast<size_t>(b) * H + h) * NQ + i) * C + j];
            if (x.ggml_alibi)
              m = fp16_from_float(-static_cast<float>(std::abs(pos - j)) * (1 + h % 3) / 8.0f);
            else
              m = rng() % 8 == 0 ? 0xfc00u : fp16_from_float(-4.0f * static_cast<float>(rng() % 4096) / 4096.0f);
          }
        }
    hpar.mask = hmask.data();
    hpar.mask_row_stride = C;
    hpar.mask_head_stride = static_cast<int64_t>(NQ) * C;
    hpar.mask_seq_stride = static_cast<int64_t>(H) * NQ * C;
  }
  if (x.ggml_alibi) hpar.alibi_mode = AlibiMode::ggml;

  DeviceProblem dp(hp, cfg.k_format, cfg.v_format);
  AttnParams p = dp.params;
  std::vector<DeviceBuffer> bufs;
  auto up = [&](const void* host, size_t bytes) {
    bufs.emplace_back(bytes);
    CUDA_CHECK(cudaMemcpy(bufs.back().ptr, host, bytes, cudaMemcpyHostToDevice));
    return bufs.back().ptr;
  };
  if (x.head_masks) {
    p.mask = static_cast<const uint16_t*>(up(hmask.data(), hmask.size() * 2));
    p.mask_row_stride = hpar.mask_row_stride;
    p.mask_head_stride = hpar.mask_head_stride;
    p.mask_seq_stride = hpar.mask_seq_stride;
  }
  p.alibi_mode = hpar.alibi_mode;
  if (x.page_size > 0) {
    const int ps = x.page_size, G = cfg.n_kv_heads;
    std::vector<int> lens(hp.kv_len.begin(), hp.kv_len.end());
    int max_pages = 0, total = 0;
    for (int L : lens) {
      max_pages = std::max(max_pages, (L + ps - 1) / ps);
      total += (L + ps - 1) / ps;
    }
    const int pool = total + 3;
    std::vector<int32_t> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(static_cast<unsigned>(cfg.seed));
    std::shuffle(perm.begin(), perm.end(), rng);
    const int64_t tstride = max_pages + 1;
    std::vector<int32_t> table(static_cast<size_t>(B) * tstride, -7);  // entries past a sequence's pages: never read
    int next = 0;
    for (int b = 0; b < B; ++b)
      for (int pg = 0; pg < (lens[b] + ps - 1) / ps; ++pg) table[b * tstride + pg] = perm[next++];
    const bool packed = cfg.k_format == KFormat::packed16;
    const int D = cfg.head_dim, vi = static_cast<int>(cfg.v_format);
    const PoolPlane kp = page_plane(packed ? hp.k_payload : hp.k_f16, packed ? hp.k_payload_strides : hp.k_f16_strides,
                                    packed ? D : 2 * D, lens, G, ps, pool, table, tstride);
    p.k.data = up(kp.host.data(), kp.host.size());
    p.k.data_strides = kp.s;
    if (packed) {
      const PoolPlane ks = page_plane(hp.k_scales, hp.k_scale_strides, 2 * D / cfg.k_block, lens, G, ps, pool, table, tstride);
      p.k.scales = up(ks.host.data(), ks.host.size());
      p.k.scale_strides = ks.s;
    }
    const PoolPlane vp = page_plane(hp.v_planes[vi], hp.v_strides[vi], v_row_bytes(cfg.v_format, D), lens, G, ps, pool,
                                    table, tstride);
    p.v.data = up(vp.host.data(), vp.host.size());
    p.v.strides = vp.s;
    if (cfg.v_format == VFormat::q8_0_planar) {
      const PoolPlane vs = page_plane(hp.v_scale_plane, hp.v_scale_strides, v_scale_row_bytes(cfg.v_format, D), lens, G,
                                      ps, pool, table, tstride);
      p.v.scales = up(vs.host.data(), vs.host.size());
      p.v.scale_strides = vs.s;
    }
    p.paged.block_table = static_cast<const int32_t*>(up(table.data(), table.size() * 4));
    p.paged.table_stride = tstride;
    p.paged.page_size = ps;
    p.paged.num_pages = pool;
  }
  DeviceBuffer errs(4 * kNumErrorCounters);
  CUDA_CHECK(cudaMemset(errs.ptr, 0, 4 * kNumErrorCounters));
  p.errors = errs.as<int>();
  p.num_splits = x.num_splits;
  // o_odd: element alignment only (what validate() asks for), so the prefill epilogue may not
  // store element pairs; the padding elements (the first one and each row's last) stay NaN
  const int64_t Dp = cfg.head_dim + 1, odd_n = static_cast<int64_t>(B) * NQ * H * Dp + 1;
  void* odd_base = nullptr;
  if (x.o_odd) {
    bufs.emplace_back(static_cast<size_t>(odd_n) * esize(cfg.o_type));
    odd_base = bufs.back().ptr;
    CUDA_CHECK(cudaMemset(odd_base, 0xff, bufs.back().bytes));
    p.o.data = static_cast<char*>(odd_base) + esize(cfg.o_type);
    p.o.head_stride = Dp;
    p.o.row_stride = H * Dp;
    p.o.seq_stride = NQ * H * Dp;
  }

  Result r;
  {
    const Status sel = select_kernel(p, 0, &r.choice);
    INFO(sel.to_string());
    REQUIRE(sel.ok());
  }
  const bool want = prefill_expected(p);
  if (x.want_prefill && prefill_device() && min_rows() <= 64) {  // a larger threshold from the environment: the rule decides
    INFO("the case itself is below the prefill rule: nq=" << p.nq << " rows=" << p.nq * (p.n_q_heads / p.n_kv_heads));
    REQUIRE(want);
  }
  INFO(describe(cfg));
  r.path = expected_path(p);
  check_choice(r.choice, r.path, x.num_splits, p.nq * (p.n_q_heads / p.n_kv_heads));
  if (x.page_size > 0) CHECK(r.choice.layout == "paged" + std::to_string(x.page_size));
  // K as fp16 tiles only in the Hopper prefill kernel (one split or key splits), packed16 K
  if (r.choice.name.rfind("fa_prefill<", 0) != 0 || cfg.k_format != KFormat::packed16) CHECK_FALSE(r.choice.k_rounded);
  std::vector<double> ref_o, ref_lse;
  ref_parallel(hpar, reference_mode(cfg, r.choice.k_rounded), &ref_o, &ref_lse);

  if (x.graph) {
    size_t ws = 0;
    REQUIRE(fa_workspace_bytes(p, 0, &ws).ok());
    DeviceBuffer dws(ws);
    CUDA_CHECK(cudaMemset(dws.ptr, 0xff, dws.bytes ? dws.bytes : 16));
    p.workspace = ws ? dws.ptr : nullptr;
    p.workspace_bytes = ws;
    p.pdl = 1;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const Status st = fa_packed16_forward(p, s);
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    INFO(st.to_string());
    REQUIRE(st.ok());
    cudaGraphExec_t ex = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&ex, g, 0));
    for (int call = 0; call < 3; ++call) CUDA_CHECK(cudaGraphLaunch(ex, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaGraphExecDestroy(ex));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
  } else {
    const Status st = fa_packed16_forward(p, nullptr);
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  if (x.o_odd) {
    const std::vector<double> all = download(cfg.o_type, odd_base, odd_n);
    const int D = cfg.head_dim;
    int64_t pads_written = std::isnan(all[0]) ? 0 : 1;
    r.o.resize(ref_o.size());
    for (int64_t row = 0; row < static_cast<int64_t>(B) * NQ * H; ++row) {
      for (int d = 0; d < D; ++d) r.o[row * D + d] = all[1 + row * Dp + d];
      if (!std::isnan(all[1 + row * Dp + D])) ++pads_written;
    }
    CHECK(pads_written == 0);
  } else {
    r.o = download(cfg.o_type, p.o.data, static_cast<int64_t>(ref_o.size()));
  }
  r.lse = download(DType::f32, p.lse, static_cast<int64_t>(ref_lse.size()));
  r.err = rel_err(r.o, ref_o);
  r.lse_err = lse_error(r.lse, ref_lse);
  int e[kNumErrorCounters];
  CUDA_CHECK(cudaMemcpy(e, errs.ptr, sizeof e, cudaMemcpyDeviceToHost));
  INFO("error counters kv_len=" << e[kErrKvLen] << " q_pos=" << e[kErrQPos] << " page=" << e[kErrPageId]);
  CHECK(e[kErrKvLen] == 0);
  CHECK(e[kErrQPos] == 0);
  CHECK(e[kErrPageId] == 0);
  return r;
}

double tol(const ProblemConfig& c) { return c.o_type == DType::bf16 ? 5e-3 : 2e-3; }

Result check(const ProblemConfig& cfg, const Extra& x = {}, HostProblem* keep = nullptr) {
  Result r = run_case(cfg, x, keep);
  INFO(describe(cfg) << " head_masks=" << x.head_masks << " ggml_alibi=" << x.ggml_alibi << " page=" << x.page_size
                     << " graph=" << x.graph << " kernel=" << r.choice.name << " err=" << r.err
                     << " lse_err=" << r.lse_err);
  CHECK(r.err <= tol(cfg));
  CHECK(r.lse_err <= 1e-3);
  return r;
}

uint64_t g_seed = 17000;

// nq new rows after a cached prefix of `prefix` keys (kv = prefix + nq); 48 unused slots
// after the last key hold NaN.
ProblemConfig pcfg(int D, VFormat vf, int nq, int H, int G, int prefix) {
  ProblemConfig c;
  c.head_dim = D;
  c.v_format = vf;
  c.nq = nq;
  c.n_q_heads = H;
  c.n_kv_heads = G;
  c.kv_len = prefix + nq;
  c.capacity = c.kv_len + 48;
  c.poison_unused = true;
  c.causal = true;
  c.o_type = DType::f32;
  c.k_block = D % 32 == 0 ? 32 : 16;
  c.seed = ++g_seed;
  return c;
}

const VFormat kAllV[] = {VFormat::f16, VFormat::bf16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar};

}  // namespace

TEST_CASE("prefill: every head dim x V format x dot mode", "[prefill]") {
  for (int D : {64, 80, 96, 112, 128, 256})
    for (VFormat vf : kAllV) {
      if (D % 32 && v_is_blocked(vf)) continue;
      for (int mode = 0; mode < 3; ++mode) {  // int8 dot, fp16-Q dot, f16 K
        ProblemConfig c = pcfg(D, vf, D == 256 ? 333 : 200, 4, 1, 37);
        if (mode >= 1) c.dot = DotMode::f16;
        if (mode == 2) c.k_format = KFormat::f16;
        if (!prefill_built(D, c.k_format, vf, c.dot)) continue;  // decode's case (tests/gpu/test_attention.cu)
        check(c);
      }
    }
}

// Row tiles (m128 and whatever the lead picks) and key tiles (n64, n128) left part-filled at
// both ends: nq below, at and above powers of two, cached prefixes of 0 (plain prefill), 1,
// odd and longer than a tile; non-causal too.
TEST_CASE("prefill: tile edges in nq and in the cached prefix", "[prefill]") {
  for (int nq : {17, 63, 64, 65, 127, 129, 200, 333})
    for (int prefix : {0, 1, 63, 129, 1001}) {
      ProblemConfig c = pcfg(128, VFormat::q8_0, nq, 4, 1, prefix);  // 4 heads a KV head: >= 68 rows
      check(c);
    }
  for (int nq : {1000, 1031}) {
    check(pcfg(128, VFormat::q8_0, nq, 2, 2, 0));
    check(pcfg(64, VFormat::f16, nq, 2, 2, 3));
  }
  for (int nq : {65, 333})
    for (int prefix : {0, 129}) {
      ProblemConfig c = pcfg(128, VFormat::q8_0, nq, 4, 1, prefix);
      c.causal = false;
      check(c);
      c.k_format = KFormat::f16;
      c.v_format = VFormat::f16;
      c.seed = ++g_seed;
      check(c);
    }
}

TEST_CASE("prefill: GQA 1, 4 and 8", "[prefill]") {
  struct HG {
    int H, G;
  };
  for (HG hg : {HG{2, 2}, HG{3, 3}, HG{8, 2}, HG{4, 1}, HG{8, 1}, HG{16, 2}})
    for (VFormat vf : {VFormat::q8_0, VFormat::f16}) {
      ProblemConfig c = pcfg(vf == VFormat::f16 ? 64 : 128, vf, 333, hg.H, hg.G, 77);
      check(c);
      c.dot = DotMode::f16;
      c.seed = ++g_seed;
      check(c);
    }
  ProblemConfig c = pcfg(256, VFormat::q4_0, 200, 8, 1, 45);  // GQA 8 at the widest head
  check(c);
  c = pcfg(80, VFormat::bf16, 200, 8, 1, 45);
  check(c);
}

TEST_CASE("prefill: window, mask, softcap, sinks, ALiBi, positions, smoothing, block 16", "[prefill]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::f16}) {
    for (int w : {1, 64, 100, 129, 1000}) {  // narrower than the chunk, a tile, odd, wider than all keys
      ProblemConfig c = pcfg(128, vf, 200, 8, 2, 300);
      c.window = w;
      check(c);
    }
    ProblemConfig c = pcfg(128, vf, 200, 8, 2, 300);
    c.window = 150;
    c.causal = false;  // non-causal with a window: keys pos - window < j < kv_len
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.mask = true;
    check(c);
    c.causal = false;
    c.seed = ++g_seed;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    {
      Extra x;
      x.head_masks = true;
      check(c, x);
      c.seed = ++g_seed;
      c.alibi_max_bias = 8.0f;
      x.ggml_alibi = true;  // llama.cpp: slope_h · mask
      check(c, x);
    }
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.softcap = 20.0f;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.sinks = true;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.alibi_max_bias = 8.0f;
    check(c);
    c = pcfg(128, vf, 200, 6, 2, 300);  // 6 heads: the ggml slopes' second branch (h >= 4)
    c.alibi_max_bias = 4.0f;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.explicit_q_pos = true;  // random positions, not monotonic in the row
    check(c);
    c.window = 90;
    c.seed = ++g_seed;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.smooth_shift = c.smooth_scale = true;
    check(c);
    c.dot = DotMode::f16;
    c.seed = ++g_seed;
    check(c);
    c = pcfg(128, vf, 200, 8, 2, 300);
    c.k_block = 16;
    check(c);
    c.dot = DotMode::f16;
    c.seed = ++g_seed;
    check(c);
    for (int D : {64, 128, 256}) {  // everything at once
      c = pcfg(D, vf, 200, 8, 2, 257);
      c.window = 180;
      c.mask = true;
      c.softcap = 30.0f;
      c.sinks = true;
      c.alibi_max_bias = 4.0f;
      check(c);
      c.k_format = KFormat::f16;
      c.seed = ++g_seed;
      if (prefill_built(D, c.k_format, vf, c.dot)) check(c);
    }
  }
  // a sink with rows that see no key: O = 0, LSE = the sink alone
  ProblemConfig c = pcfg(128, VFormat::q8_0, 200, 4, 1, 0);
  c.mask = true;
  c.sinks = true;
  c.window = 1;  // each row sees at most its own key, often masked
  check(c);
}

TEST_CASE("prefill: output and query types", "[prefill]") {
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, 200, 8, 2, 111);
    c.o_type = t;
    c.q_type = t;
    check(c);
    c.o_type = t == DType::f32 ? DType::f16 : DType::f32;  // mixed
    c.seed = ++g_seed;
    check(c);
  }
  ProblemConfig c = pcfg(256, VFormat::q8_0_planar, 200, 4, 1, 111);
  c.o_type = DType::bf16;
  check(c);
  c = pcfg(128, VFormat::f16, 200, 4, 1, 111);
  c.slot_pad_bytes = 48;  // rows not contiguous: a strided view into a wider cache
  check(c);
}

// An O that validate() accepts (element-aligned) but whose element pairs are not 2-element
// aligned: odd base offset, odd strides. The prefill epilogue stores pairs only where the
// caller's O allows it (a misaligned pair store killed the context before).
TEST_CASE("prefill: O at an odd element offset with odd strides", "[prefill]") {
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, 200, 8, 2, 111);
    c.o_type = t;
    Extra x;
    x.o_odd = true;
    const Result r = check(c, x);
    if (prefill_device() && min_rows() <= 64) CHECK(r.path == Path::prefill);  // the kernel with the paired stores
  }
}

// One chunk length for every sequence (AttnParams has one nq), cached prefixes of their own.
TEST_CASE("prefill: varlen batches", "[prefill]") {
  const int nq = 130;
  for (VFormat vf : {VFormat::q8_0, VFormat::q4_0, VFormat::f16, VFormat::q8_0_planar}) {
    ProblemConfig c = pcfg(128, vf, nq, 4, 1, 0);
    c.batch = 3;
    c.kv_lens = {nq, nq + 517, nq + 3001};
    c.kv_len = nq + 3001;
    c.capacity = c.kv_len + 32;
    check(c);
    c.causal = false;
    c.seed = ++g_seed;
    check(c);
  }
  ProblemConfig c = pcfg(64, VFormat::q8_0, 100, 8, 2, 0);
  c.batch = 5;
  c.kv_lens = {100, 101, 163, 1100, 357};
  c.kv_len = 1100;
  c.capacity = 1100;  // the longest sequence fills its slots: no padding after it
  c.window = 200;
  c.sinks = true;
  check(c);
  c.explicit_q_pos = true;
  c.seed = ++g_seed;
  check(c);
}

// kv_len < nq: the first nq - kv_len rows of such a sequence sit before its first key
// (position < 0) and see nothing (causal): O = 0, LSE = -inf; an empty sequence likewise.
TEST_CASE("prefill: sequences shorter than the chunk, empty sequences", "[prefill]") {
  for (bool causal : {true, false}) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, 100, 4, 1, 0);
    c.batch = 4;
    c.kv_lens = {0, 50, 100, 300};
    c.kv_len = 300;
    c.capacity = 320;
    c.causal = causal;
    check(c);
  }
}

TEST_CASE("prefill: paged KV (scrambled NHD pages, garbage in unused slots)", "[prefill][paged]") {
  for (int ps : {16, 64, 256}) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, 100, 4, 1, 0);
    c.batch = 3;
    c.kv_lens = {105, 800, 133};
    c.kv_len = 800;
    c.capacity = 800;
    Extra x;
    x.page_size = ps;
    check(c, x);
    c.k_format = KFormat::f16;
    c.v_format = VFormat::f16;
    c.seed = ++g_seed;
    check(c, x);
    c = pcfg(64, VFormat::q8_0_planar, 100, 4, 1, 333);
    c.window = 120;
    c.dot = DotMode::f16;
    check(c, x);
  }
}

TEST_CASE("prefill: in a CUDA graph with PDL, launched repeatedly", "[prefill]") {
  Extra x;
  x.graph = true;
  ProblemConfig c = pcfg(128, VFormat::q8_0, 200, 8, 2, 99);
  check(c, x);
  c = pcfg(256, VFormat::f16, 200, 4, 1, 99);
  c.sinks = true;
  check(c, x);
}

// Rows split (cc 9.0; decision "rows-split"): up to 16 new rows a sequence with 2-8 q heads a KV
// head run the warp-MMA kernel in key splits. Forced split counts: 1 (the kernel writes the
// final output), 3 and 17 (partials + the combine), 0 (the planner's; asserted > 1 on the long
// cache). Every case also asserts the path (run_case: rows_split_expected) and, on other
// devices or with PACKFA_ROWS_SPLIT=0, runs the decode kernel against the same reference.
TEST_CASE("rows split: MTP rows in key splits, every V format, dot mode and option", "[prefill][rows_split]") {
  auto mtp = [](int D, VFormat vf, int nq, int H, int G, int prefix, int splits) {
    ProblemConfig c = pcfg(D, vf, nq, H, G, prefix);
    Extra x;
    x.want_prefill = false;
    x.num_splits = splits;
    return std::make_pair(c, x);
  };
  for (VFormat vf : {VFormat::q8_0, VFormat::q4_0, VFormat::f16, VFormat::q8_0_planar})
    for (int mode = 0; mode < 3; ++mode)  // int8 dot, fp16-Q dot, f16 K
      for (int splits : {1, 3, 17}) {
        auto [c, x] = mtp(128, vf, 8, 8, 2, 3256, splits);  // 32 rows a KV head (a part-filled row tile); kv 3264 = 17 x 192 = 3 x 1088
        if (mode >= 1) c.dot = DotMode::f16;
        if (mode == 2) c.k_format = KFormat::f16;
        check(c, x);
      }
  for (int D : {64, 80, 96, 112, 256}) {  // every head dim; block 16 where D % 32 != 0
    auto [c, x] = mtp(D, D % 32 ? VFormat::f16 : VFormat::q8_0, 16, 8, 1, 2000, 5);  // 128 rows: two row tiles
    check(c, x);
  }
  {  // the planner's split count on a long cache, and the bench's MTP shape
    auto [c, x] = mtp(128, VFormat::q8_0, 16, 32, 8, 40000, 0);
    const Result r = check(c, x);
    INFO("ran " << r.choice.name << " splits=" << r.choice.num_splits);
    if (rows_split_device()) CHECK(r.choice.num_splits > 1);
  }
  for (VFormat vf : {VFormat::q8_0, VFormat::f16}) {  // the options, 7 splits
    auto [c, x] = mtp(128, vf, 6, 16, 4, 2500, 7);
    c.window = 700;
    check(c, x);
    c.window = 0;
    c.mask = true;
    c.seed = ++g_seed;
    check(c, x);
    c.mask = false;
    c.softcap = 20.0f;
    c.sinks = true;
    c.seed = ++g_seed;
    check(c, x);
    c.softcap = 0.0f;
    c.alibi_max_bias = 8.0f;
    c.seed = ++g_seed;
    check(c, x);
    x.head_masks = true;
    x.ggml_alibi = true;
    c.seed = ++g_seed;
    check(c, x);
    x.head_masks = x.ggml_alibi = false;
    c.alibi_max_bias = 0.0f;
    c.explicit_q_pos = true;
    c.seed = ++g_seed;
    check(c, x);
    c.explicit_q_pos = false;
    c.smooth_shift = c.smooth_scale = true;
    c.k_block = 16;
    c.seed = ++g_seed;
    check(c, x);
    c.causal = false;
    c.seed = ++g_seed;
    check(c, x);
  }
  {  // varlen: short and empty sequences leave splits without keys (m = -inf partials)
    auto [c, x] = mtp(128, VFormat::q4_0, 12, 8, 2, 0, 9);
    c.batch = 4;
    c.kv_lens = {0, 5, 12, 4000};
    c.kv_len = 4000;
    c.capacity = 4032;
    c.sinks = true;
    check(c, x);
    x.num_splits = 0;
    c.seed = ++g_seed;
    check(c, x);
  }
  for (int ps : {16, 256}) {  // paged
    auto [c, x] = mtp(128, VFormat::q8_0, 8, 8, 2, 0, 4);
    c.batch = 3;
    c.kv_lens = {105, 3000, 133};
    c.kv_len = 3000;
    c.capacity = 3000;
    x.page_size = ps;
    check(c, x);
  }
  {  // a CUDA graph with PDL: split kernel + combine, launched repeatedly
    auto [c, x] = mtp(128, VFormat::q8_0, 16, 16, 2, 5000, 0);
    x.graph = true;
    check(c, x);
  }
}

// Which kernel: nq <= 16 never the prefill kernel (up to 16 rows a KV head the decode kernel,
// more the rows split on cc 9.0), above it the prefill kernel from PACKFA_PREFILL_MIN_ROWS rows
// (nq · q heads per KV head). Small cases also run against the reference (the decode kernel at
// 2e-3 is no news, but the choice must lead to a correct call).
TEST_CASE("prefill: dispatch — small nq to decode, the threshold, the rule", "[prefill][dispatch]") {
  struct S {
    int nq, H, G;
    bool split;  // more than 16 rows a KV head: the rows split where the device has it
  };
  for (S s : {S{1, 32, 8, false}, S{4, 32, 8, false}, S{16, 64, 8, true}, S{16, 8, 1, true}, S{16, 4, 4, false},
              S{5, 32, 8, true}}) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, s.nq, s.H, s.G, 500);
    Extra x;
    x.want_prefill = false;
    const Result r = check(c, x);
    INFO("nq=" << s.nq << " H=" << s.H << " G=" << s.G << " ran " << r.choice.name);
    CHECK((r.choice.name.rfind("fa_prefill<", 0) == 0) == (r.path == Path::wgmma_split));
    CHECK(is_decode(r.choice) == !((s.split && rows_split_device()) || r.path == Path::wgmma_split));
  }
  const int T = min_rows();
  INFO("PACKFA_PREFILL_MIN_ROWS=" << T);
  // the edge in rows, with 1 and 4 q heads per KV head
  for (int group : {1, 4}) {
    const int nq_at = std::max(17, (T + group - 1) / group);  // smallest nq > 16 with nq·group >= T
    if (nq_at > 4096) continue;  // a threshold from the environment beyond this file's cost bound
    for (int nq : {nq_at - 1, nq_at}) {
      if (nq <= 0) continue;
      ProblemConfig c = pcfg(128, VFormat::q8_0, nq, 2 * group, 2, 100);
      Extra x;
      x.want_prefill = false;  // asserted by the rule below, both sides of the edge
      const Result r = check(c, x);
      const bool want = prefill_device() && nq > 16 && nq * group >= T;
      INFO("nq=" << nq << " group=" << group << " rows=" << nq * group << " ran " << r.choice.name);
      CHECK((r.path == Path::prefill) == want);  // and run_case asserted the kernel of r.path
    }
  }
  // the rule on a prefill shape with PACKFA_PREFILL unset means prefill on this device class
  if (prefill_device()) {
    ProblemConfig c = pcfg(128, VFormat::q8_0, 512, 32, 8, 0);
    HostProblem hp;
    REQUIRE(make_problem(c, &hp).ok());
    DeviceProblem dp(hp, c.k_format, c.v_format);
    KernelChoice ch;
    REQUIRE(select_kernel(dp.params, 0, &ch).ok());
    INFO("bench shape nq=512 32/8 ran " << ch.name);
    CHECK(is_prefill(ch));
    CHECK(ch.num_splits == 1);
  }
}

// The same rows through three paths on one cache: the prefill call over nq = 96 rows, then the
// same rows 8 at a time (16 rows a KV head: the decode kernel) and 16 at a time (32 rows: the
// rows split on cc 9.0, else decode); q_pos makes each slice keep its positions. Long cached
// prefix (40k keys, so the rows split runs in many key splits); the prefill call must also
// meet the reference. Each slice output agrees with the prefill one within the sum of their
// tolerances.
TEST_CASE("prefill == decode kernel == rows split on the same rows, 40k-key prefix", "[prefill][decode]") {
  struct M {
    VFormat vf;
    KFormat kf;
    DotMode dot;
  };
  for (M m : {M{VFormat::q8_0, KFormat::packed16, DotMode::int8}, M{VFormat::q4_0, KFormat::packed16, DotMode::f16},
              M{VFormat::f16, KFormat::f16, DotMode::f16}}) {
    ProblemConfig c = pcfg(128, m.vf, 96, 4, 2, 40000 - 96);
    c.k_format = m.kf;
    c.dot = m.dot;
    c.sinks = true;
    HostProblem hp;
    const Result pre = check(c, {}, &hp);  // the prefill call, against the reference
    // the prefill kernel rounds K to fp16 (prefill-k-rounded), decode and the rows split do not:
    // the two reference modes' own difference joins the bound
    double ref_do = 0.0, ref_dl = 0.0;
    if (pre.choice.k_rounded) {
      std::vector<double> ro, rl, eo, el;
      ref_parallel(hp.params, reference_mode(c, true), &ro, &rl);
      ref_parallel(hp.params, reference_mode(c, false), &eo, &el);
      ref_do = rel_err(ro, eo), ref_dl = lse_error(rl, el);
      INFO("reference modes apart: O " << ref_do << ", LSE " << ref_dl);
      CHECK(ref_do <= 2e-3);  // the rounding is small against the int8 quantization
    }
    for (int S : {8, 16}) {
      DeviceProblem dp(hp, c.k_format, c.v_format);
      const int NQ = c.nq, H = c.n_q_heads, D = c.head_dim;
      const bool split = S * (H / c.n_kv_heads) > 16 && rows_split_device();
      DeviceBuffer dpos(4 * S);
      for (int i0 = 0; i0 < NQ; i0 += S) {
        std::vector<int32_t> pos(S);
        for (int i = 0; i < S; ++i) pos[i] = hp.kv_len[0] - NQ + i0 + i;
        CUDA_CHECK(cudaMemcpy(dpos.ptr, pos.data(), 4 * S, cudaMemcpyHostToDevice));
        AttnParams p = dp.params;
        p.nq = S;
        p.q.data = static_cast<const char*>(p.q.data) + static_cast<int64_t>(i0) * p.q.row_stride * esize(p.q.type);
        p.o.data = static_cast<char*>(p.o.data) + static_cast<int64_t>(i0) * p.o.row_stride * esize(p.o.type);
        p.lse = p.lse + static_cast<int64_t>(i0) * H;
        p.q_pos = dpos.as<int32_t>();
        KernelChoice ch;
        REQUIRE(select_kernel(p, 0, &ch).ok());
        INFO("slice of " << S << " at row " << i0 << " ran " << ch.name << " splits=" << ch.num_splits);
        const Path want = expected_path(p) == Path::wgmma_split ? Path::wgmma_split : split ? Path::rows_split : Path::decode;
        check_choice(ch, want, 0, S * (H / c.n_kv_heads));
        if (split || want == Path::wgmma_split) CHECK(ch.num_splits > 1);
        REQUIRE(fa_packed16_forward(p, nullptr).ok());
        CUDA_CHECK(cudaDeviceSynchronize());  // dpos is rewritten for the next slice
      }
      const std::vector<double> o = download(c.o_type, dp.params.o.data, static_cast<int64_t>(NQ) * H * D);
      const std::vector<double> lse = download(DType::f32, dp.params.lse, static_cast<int64_t>(NQ) * H);
      const double err = rel_err(o, pre.o), lerr = lse_error(lse, pre.lse);
      INFO(describe(c) << " slices of " << S << ", prefill kernel " << pre.choice.name
                       << ": |O_slices - O_prefill| / |O_prefill| = " << err << ", max |LSE diff| = " << lerr);
      CHECK(err <= 3e-3 + ref_do);
      CHECK(lerr <= 2e-3 + ref_dl);
    }
  }
}
