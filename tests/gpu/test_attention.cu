// GPU attention vs the fp64 CPU reference in "as the kernel computes it" mode.
// Every case draws fresh random inputs; the output is poisoned first (NaN) so an unwritten
// element fails; ‖O − ref‖/‖ref‖ ≤ 1e-3 (f16/f32 output; bf16 output 5e-3 for its 8-bit
// mantissa) and |LSE − ref| ≤ 1e-3 where finite.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "decode_switches.hpp"
#include "split_plan.hpp"  // detail::one_round_splits, detail::trim_tail_round: the rules the planner applies
#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

namespace {

const char* vname(VFormat f) {
  const char* n[] = {"f16", "bf16", "q8_0", "q4_0", "q8_0_planar"};
  return n[static_cast<int>(f)];
}

std::string describe(const ProblemConfig& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "D=%d V=%s K=%s block=%d dot=%s nq=%d H=%d G=%d batch=%d kv=%d causal=%d window=%d mask=%d "
                "softcap=%g sinks=%d alibi=%g qpos=%d smooth=%d/%d o=%d seed=%llu",
                c.head_dim, vname(c.v_format), c.k_format == KFormat::f16 ? "f16" : "packed16", c.k_block,
                c.dot == DotMode::int8 ? "int8" : "f16", c.nq, c.n_q_heads, c.n_kv_heads, c.batch, c.kv_len,
                c.causal, c.window, c.mask, c.softcap, c.sinks, c.alibi_max_bias, c.explicit_q_pos, c.smooth_shift,
                c.smooth_scale, static_cast<int>(c.o_type), static_cast<unsigned long long>(c.seed));
  return buf;
}

// The planner's choice for a problem, without running it (select_kernel only).
KernelChoice planned(const ProblemConfig& c) {
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, c.k_format, c.v_format);
  KernelChoice ch;
  REQUIRE(select_kernel(dp.params, 0, &ch).ok());
  return ch;
}

struct Result {
  double err = 0, lse_err = 0;
  std::string kernel;
  KernelChoice choice;  // what select_kernel reported for the call (the path that ran)
};

// Whether run_case passes the host copy of the lengths (AttnParams::kv_len_host); a non-empty
// g_stale_lens is passed instead (a copy that does not match the device's lengths).
bool g_host_lens = false;
int g_q_shift = 0;  // bytes Q is moved past a 16-byte boundary (DeviceProblem::shift_q)
std::vector<int32_t> g_stale_lens;

// Runs one configuration; big_seq_stride > 0 moves the K/V planes of sequence b to
// b * big_seq_stride bytes (64-bit addressing).
// calls > 1: that many forward calls; graph: captured once on a stream (caller's workspace,
// PDL on) and the graph launched `calls` times.
Result run_case(const ProblemConfig& cfg, int num_splits = 0, int64_t big_seq_stride = 0, int calls = 1,
                bool graph = false) {
  HostProblem hp;
  Status s = make_problem(cfg, &hp);
  REQUIRE(s.ok());
  DeviceProblem dp(hp, cfg.k_format, cfg.v_format);
  dp.params.num_splits = num_splits;
  if (g_q_shift > 0) dp.shift_q(hp, g_q_shift);
  if (g_host_lens) dp.params.kv_len_host = g_stale_lens.empty() ? hp.kv_len.data() : g_stale_lens.data();
  if (big_seq_stride > 0) {
    const bool packed = cfg.k_format == KFormat::packed16;
    dp.inflate_seq_stride(packed ? hp.k_payload : hp.k_f16, packed ? hp.k_payload_strides.seq : hp.k_f16_strides.seq,
                          cfg.batch, big_seq_stride, &dp.params.k.data, &dp.params.k.data_strides);
    if (packed)
      dp.inflate_seq_stride(hp.k_scales, hp.k_scale_strides.seq, cfg.batch, big_seq_stride, &dp.params.k.scales,
                            &dp.params.k.scale_strides);
    const int vi = static_cast<int>(cfg.v_format);
    dp.inflate_seq_stride(hp.v_planes[vi], hp.v_strides[vi].seq, cfg.batch, big_seq_stride, &dp.params.v.data,
                          &dp.params.v.strides);
    if (cfg.v_format == VFormat::q8_0_planar)
      dp.inflate_seq_stride(hp.v_scale_plane, hp.v_scale_strides.seq, cfg.batch, big_seq_stride, &dp.params.v.scales,
                            &dp.params.v.scale_strides);
  }
  KernelChoice choice;
  Status sel = select_kernel(dp.params, 0, &choice);
  INFO(sel.to_string());
  REQUIRE(sel.ok());
  std::vector<double> ref_o, ref_lse;  // as the chosen kernel multiplies (k_rounded: the wgmma kernel)
  REQUIRE(reference_attention(hp.params, reference_mode(cfg, choice.k_rounded), &ref_o, &ref_lse).ok());
  if (graph) {
    size_t ws = 0;
    REQUIRE(fa_workspace_bytes(dp.params, 0, &ws).ok());
    DeviceBuffer dws(ws);
    CUDA_CHECK(cudaMemset(dws.ptr, 0xff, ws));  // whatever a previous user left
    dp.params.workspace = dws.ptr;
    dp.params.workspace_bytes = ws;
    dp.params.pdl = 1;
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const Status st = fa_packed16_forward(dp.params, s);
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    INFO(st.to_string());
    REQUIRE(st.ok());
    cudaGraphExec_t ex = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&ex, g, 0));
    for (int call = 0; call < calls; ++call) CUDA_CHECK(cudaGraphLaunch(ex, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaGraphExecDestroy(ex));
    CUDA_CHECK(cudaGraphDestroy(g));
    CUDA_CHECK(cudaStreamDestroy(s));
  } else {
    for (int call = 0; call < calls; ++call) {  // later calls find the state the earlier ones left
      Status st = fa_packed16_forward(dp.params, nullptr);
      INFO(st.to_string());
      REQUIRE(st.ok());
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());

  const int64_t n = static_cast<int64_t>(cfg.batch) * cfg.nq * cfg.n_q_heads * cfg.head_dim;
  const std::vector<double> o = download(cfg.o_type, dp.params.o.data, n);
  Result r;
  r.kernel = choice.name + " splits=" + std::to_string(choice.num_splits) + " combine=" + choice.combine +
             " claims=" + std::to_string(choice.claims) + " mma_qk=" + std::to_string(choice.mma_qk);
  r.choice = choice;
  r.err = rel_err(o, ref_o);
  if (cfg.want_lse) {
    const std::vector<double> lse = download(DType::f32, dp.params.lse, static_cast<int64_t>(ref_lse.size()));
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(ref_lse[i])) {
        if (!(std::isinf(lse[i]) && lse[i] < 0)) r.lse_err = 1e30;
      } else {
        const double d = std::fabs(lse[i] - ref_lse[i]);
        r.lse_err = std::max(r.lse_err, d == d ? d : 1e30);
      }
    }
  }
  return r;
}

double tol(const ProblemConfig& c) { return c.o_type == DType::bf16 ? 5e-3 : 1e-3; }

Result check(const ProblemConfig& cfg, int num_splits = 0, int64_t big = 0, int calls = 1, bool graph = false) {
  const Result r = run_case(cfg, num_splits, big, calls, graph);
  INFO(describe(cfg) << " kernel=" << r.kernel << " err=" << r.err << " lse_err=" << r.lse_err);
  CHECK(r.err <= tol(cfg));
  CHECK(r.lse_err <= 1e-3);
  return r;
}

uint64_t g_seed = 1000;

ProblemConfig base(int D, VFormat vf, int nq, int H, int G, int kv) {
  return decode_config(D, vf, nq, H, G, kv, ++g_seed);
}

}  // namespace

TEST_CASE("every head dim x V format x dot mode, decode and MTP rows", "[attention]") {
  for (int D : {64, 80, 96, 112, 128, 256}) {
    for (VFormat vf : {VFormat::f16, VFormat::bf16, VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar}) {
      if (D % 32 && v_is_blocked(vf)) continue;
      for (int nq : {1, 4}) {
        ProblemConfig c = base(D, vf, nq, 8, 2, 1000 + 37 * nq);  // not a multiple of any tile
        check(c);
        c.dot = DotMode::f16;
        c.seed = ++g_seed;
        check(c);
        c.k_format = KFormat::f16;
        c.seed = ++g_seed;
        check(c);
      }
    }
  }
}

TEST_CASE("GQA ratios, row groups and query counts", "[attention]") {
  struct G {
    int H, G, nq;
  };
  for (G g : {G{4, 4, 1}, G{32, 8, 1}, G{32, 8, 4}, G{24, 4, 3}, G{12, 2, 16}, G{7, 1, 2}, G{16, 1, 5}}) {
    ProblemConfig c = base(128, VFormat::q8_0, g.nq, g.H, g.G, 777);
    check(c);
  }
}

// Row groups that leave a block part-filled (the lane-path Q·K stops at the block's last row:
// FaTraits::kRowGuard) and the D = 256 wide class (8 rows a block; f16 K: 4-row groups;
// fa_rows_per_block in fa_instances.hpp), in every Q·K mode: 12, 15 and 6 rows (the int8 dot
// with f16 V runs its 6 rows as 4-row groups: decision "d256-row-groups", src/row_plan.hpp).
TEST_CASE("part-filled row groups and the D = 256 wide class, every dot mode", "[attention]") {
  struct G {
    int H, G, nq;
  };
  for (int D : {64, 128, 256})
    for (VFormat vf : {VFormat::f16, VFormat::bf16})
      for (G g : {G{12, 2, 2}, G{10, 2, 3}, G{6, 1, 1}})
        for (int mode = 0; mode < 3; ++mode) {
          ProblemConfig c = base(D, vf, g.nq, g.H, g.G, 500 + 33 * mode);
          if (mode >= 1) c.dot = DotMode::f16;
          if (mode == 2) c.k_format = KFormat::f16;
          check(c);
        }
}

// ggml rows of 136 / 72 bytes start at either 16-byte phase: one KV head (the phase alternates
// by slot), two (by head), and an odd first key (sliding window).
TEST_CASE("ggml V rows at both 16-byte phases", "[attention]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::q4_0, VFormat::q8_0_planar}) {
    for (int nq : {1, 4}) {
      ProblemConfig c = base(128, vf, nq, 7, 1, 777);
      check(c);
      c = base(128, vf, nq, 8, 2, 1201);
      c.window = 101;
      check(c);
      check(c, 5);
    }
  }
}

// Below 16 splits one wave merges a row (fa_combine_warp_kernel), from 16 to 64 a block of
// waves that share the splits (fa_combine_row_kernel), above that the generic block kernel
// (fa_combine_kernel; with PACKFA_COMBINE_COLS=1, as in gpu_test_attention_switches_on,
// fa_combine_col_kernel);
// each with a sink and the LSE, at head dims 80 and 128 (one float4 column of O per lane)
// and 256 (two). The planner rounds a split to a multiple of 32 keys and recounts the splits
// (dispatch.cu plan()): kv = 256·s − 37 gives a split length of 256 keys for every s here, so
// exactly s splits run (kv = 4099 turned 16 and 64 into 15 and 43). The split count and the
// combine kernel that ran are asserted.
TEST_CASE("combine: wave, row-block and block merge, around the 16- and 64-split edges", "[attention][switches]") {
  for (int D : {80, 128, 256}) {
    for (int splits : {2, 15, 16, 17, 64, 65, 100}) {
      ProblemConfig c = base(D, D % 32 == 0 ? VFormat::q8_0 : VFormat::f16, 2, 8, 2, 256 * splits - 37);
      c.sinks = true;
      const Result r = check(c, splits);
      INFO("D=" << D << " splits=" << splits << " ran " << r.kernel);
      CHECK(r.choice.num_splits == splits);
      CHECK(r.choice.combine == (splits < 16 ? "wave" : splits <= 64 ? "row_block" : wide_combine()));
    }
  }
}

TEST_CASE("short, tile-edge and mixed-length sequences", "[attention][switches]") {
  for (int kv : {1, 2, 31, 32, 33, 127, 4099}) {
    ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, kv);
    check(c);
  }
  ProblemConfig c = base(128, VFormat::q4_0, 2, 8, 2, 0);
  c.batch = 5;
  c.kv_lens = {1, 900, 33, 3000, 64};
  check(c);
  c.seed = ++g_seed;
  check(c, 1);  // single split: the split kernel writes the final output
  c.seed = ++g_seed;
  check(c, 7);
}

// The split count of the blind batch rule (lengths on the device only): ceil(4 x SMs / blocks a
// split), at most one split a 128 keys, the last round trimmed unless PACKFA_TAIL_TRIM=0
// (split_plan.hpp), then recounted from the 32-key-rounded split length, as plan() does.
int64_t blind_splits(int sms, int64_t base_blocks, int64_t max_kv, int64_t slots) {
  int64_t want = std::min<int64_t>((4LL * sms + base_blocks - 1) / base_blocks, (max_kv + 127) / 128);
  if (switch_on("PACKFA_TAIL_TRIM", true)) want = detail::trim_tail_round(want, base_blocks, slots);
  const int64_t len = ((max_kv + want - 1) / want + 31) / 32 * 32;
  return (max_kv + len - 1) / len;
}

// The decode A/B switches (src/dispatch.cu; off by default, all on in
// gpu_test_attention_switches_on): what KernelChoice reports follows the environment, and
// the switched paths stay accurate.
//  - PACKFA_SPLIT_ROUNDS: a planner-chosen batch count. Off: ceil(4 x SMs / blocks per split)
//    splits (then recounted from the 32-key-rounded split length, as plan() does), i.e. at
//    least 4 blocks per SM (132 SMs, batch 8 x 8 KV heads: 9 splits = 576 blocks); on: at most
//    max(1, 4 / resident) whole rounds of resident blocks, at most 4 per SM while an SM holds
//    up to 4 of them (the 4-row q8_0 class: 2; 8 splits = 512 blocks).
//  - PACKFA_COMBINE_COLS: the combine test above and a D = 128 / 256 call of > 64 splits here.
TEST_CASE("decode switches: split rounds, column combine", "[attention][switches]") {
  const bool rounds = switch_on("PACKFA_SPLIT_ROUNDS");
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (bool uniform : {true, false}) {
    ProblemConfig c = base(128, VFormat::q8_0, 1, 32, 8, 4096);
    c.batch = 8;
    if (!uniform) c.kv_lens = {4096, 1000, 3000, 37, 4096, 2048, 129, 3500};
    const Result r = check(c);
    INFO("uniform=" << uniform << " ran " << r.kernel << " sms=" << sms);
    CHECK(r.choice.split_rounds == rounds);
    const int64_t base_blocks = static_cast<int64_t>(c.batch) * c.n_kv_heads * r.choice.row_groups;
    if (rounds) {
      CHECK(r.choice.num_splits * base_blocks <= 4LL * sms);
    } else {
      CHECK(r.choice.num_splits == blind_splits(sms, base_blocks, 4096, r.choice.resident_slots));
    }
  }
  {  // one sequence: the planner's one-round rule, whatever the switch
    ProblemConfig c = base(128, VFormat::q8_0, 1, 32, 8, 4096);
    const Result r = check(c);
    INFO("ran " << r.kernel);
    CHECK_FALSE(r.choice.split_rounds);
    c.seed = ++g_seed;
    check(c, 0, 0, 3, true);  // graph, PDL on, three launches
  }
  for (int D : {128, 256}) {  // > 64 splits: the wide combine named by the environment
    ProblemConfig c = base(D, VFormat::q8_0_planar, 1, 16, 2, 256 * 80 - 37);
    const Result r = check(c, 80);
    INFO("D=" << D << " ran " << r.kernel);
    CHECK(r.choice.num_splits == 80);
    CHECK(r.choice.combine == std::string(wide_combine()));
  }
}

// Host lengths (AttnParams::kv_len_host, src/split_plan.hpp): a batch whose working blocks fit
// one balanced round of resident blocks gets that split count (fewer splits than without the
// lengths: the count the rule gives for the instance's resident slots, KernelChoice::
// resident_slots); an unbalanced one keeps the count it gets without them. Results against the
// reference either way; with lengths that are stale (shorter than the device's), the same.
TEST_CASE("batch planner: host lengths give one balanced round", "[attention][switches]") {
  const bool rounds = switch_on("PACKFA_SPLIT_ROUNDS");  // the whole-rounds switch replaces the rule
  struct Case {
    int batch, kv;
    std::vector<int32_t> lens;  // empty: uniform
  };
  const std::vector<Case> cases = {
      {8, 4096, {}},                                                    // 8 x 4k uniform: one round (H200: 4 splits)
      {8, 4096, {1024, 1463, 1902, 2341, 2779, 3218, 3657, 4096}},      // short, varied: balanced (H200: 6)
      {16, 8192, {2048, 2457, 2867, 3276, 3686, 4096, 4505, 4915, 5324, 5734, 6144, 6553, 6963, 7372, 7782, 8192}},
      // ^ varied: its one round unbalanced (H200: 2 splits of 4096 keys against 2482), declined
  };
  int64_t slots = 0;
  int taken_cases = 0;
  for (const Case& k : cases) {
    ProblemConfig c = base(128, VFormat::q8_0, 1, 32, 8, k.kv);
    c.batch = k.batch;
    c.kv_lens.assign(k.lens.begin(), k.lens.end());
    g_host_lens = false;
    const Result blind = check(c);
    g_host_lens = true;
    const Result r = check(c);
    g_host_lens = false;
    const std::vector<int32_t> lens = k.lens.empty() ? std::vector<int32_t>(k.batch, k.kv) : k.lens;
    const int64_t per_split = 8LL * blind.choice.row_groups;
    slots = r.choice.resident_slots;
    REQUIRE(slots > 0);
    CHECK(blind.choice.resident_slots == slots);
    const int want = detail::one_round_splits(lens.data(), k.batch, k.kv, per_split, slots, blind.choice.num_splits);
    INFO("batch " << k.batch << " kv " << k.kv << " blind: " << blind.kernel << " | host lengths: " << r.kernel
                  << " | rule with " << slots << " slots: " << want);
    CHECK_FALSE(blind.choice.one_round);
    if (rounds) {
      CHECK_FALSE(r.choice.one_round);
      CHECK(r.choice.num_splits == blind.choice.num_splits);
    } else {
      CHECK(r.choice.one_round == (want > 0));
      CHECK(r.choice.num_splits == (want > 0 ? want : blind.choice.num_splits));
      taken_cases += want > 0;
    }
    CHECK(r.choice.num_splits <= blind.choice.num_splits);
  }
  if (!rounds && slots == 264) CHECK(taken_cases == 2);  // the H200 (132 SMs x 2 blocks): both short cases
  {  // a stale copy (every sequence 1000 keys on the host, 4096 on the device) plans another
     // split count; the kernels read the device's lengths, so the results stay right
    ProblemConfig c = base(128, VFormat::q8_0, 1, 32, 8, 4096);
    c.batch = 8;
    g_stale_lens.assign(8, 1000);
    g_host_lens = true;
    const Result r = check(c);
    g_host_lens = false;
    g_stale_lens.clear();
    INFO("stale host lengths: " << r.kernel);
    CHECK(r.choice.num_splits >= 1);
  }
}

// Decision "d256-row-groups" (src/dispatch.cu): at D = 256 with the int8 dot, 5-8 rows run as
// groups of the 4-row class while the cache the call reads (batch x KV heads x max_kv_len x
// bytes a key) fits L2; more rows, or a larger cache, keep the wide class (16 rows a block).
// Results against the reference on both paths; the cache past L2 is only planned.
TEST_CASE("D = 256: 5-8 rows in 4-row groups while the cache fits L2", "[attention]") {
  int l2 = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  REQUIRE(l2 > 0);
  const int64_t per_key = 256 + 2 * 256 / 32 + 272;  // packed16 K, its scales, a q8_0 V row
  struct Case {
    VFormat vf;
    int nq, H, G, kv, rows_per_block, groups;
  };
  for (const Case& k : {Case{VFormat::q8_0, 1, 16, 2, 4096, 4, 2},   // 8 rows, 4.5 MB
                        Case{VFormat::q4_0, 1, 12, 2, 2000, 4, 2},   // 6 rows
                        Case{VFormat::f16, 2, 8, 2, 1500, 4, 2},     // 8 rows (MTP: 2 x 4)
                        Case{VFormat::q8_0, 2, 16, 2, 2000, 16, 1},  // 16 rows: the wide class
                        Case{VFormat::q8_0, 1, 8, 2, 2000, 4, 1}}) { // 4 rows: the 4-row class anyway
    ProblemConfig c = base(256, k.vf, k.nq, k.H, k.G, k.kv);
    const Result r = check(c);
    INFO("rows " << k.nq * k.H / k.G << " ran " << r.kernel);
    CHECK(r.choice.rows_per_block == k.rows_per_block);
    CHECK(r.choice.row_groups == k.groups);
  }
  {  // 8 rows over a cache past L2: the wide class (planned, not run)
    const int kv = static_cast<int>(l2 / (2 * per_key)) + 4096;
    const ProblemConfig c = base(256, VFormat::q8_0, 1, 16, 2, kv);
    const KernelChoice ch = planned(c);
    INFO("kv " << kv << " (L2 " << l2 << " bytes): " << ch.name);
    CHECK(2 * per_key * kv > l2);
    CHECK(ch.rows_per_block == 16);
    CHECK(ch.row_groups == 1);
  }
}

// Decision "batch-tail-trim" (src/split_plan.hpp): lengths on the device only, the blind
// rule's ceil(4 x SMs / blocks per split) splits lose a last round that is at most an eighth
// full. D 256, 32/8 heads, batch 4 x 32k (4-row class; an H200 holds 4 blocks an SM: 528
// slots): 17 splits = 544 blocks -> 16 splits = 512. The count follows from the device's slots
// (KernelChoice::resident_slots), so the case holds on any GPU; on the H200 it must trim.
TEST_CASE("batch planner: the blind rule's last round is trimmed", "[attention]") {
  const bool on = switch_on("PACKFA_TAIL_TRIM", true);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (bool uniform : {true, false}) {
    ProblemConfig c = base(256, VFormat::q8_0, 1, 32, 8, 32768);
    c.batch = 4;
    if (!uniform) c.kv_lens = {32768, 9000, 20000, 31};
    const Result r = check(c);
    const int64_t base_blocks = 4LL * 8 * r.choice.row_groups;
    const int64_t blind = std::min<int64_t>((4LL * sms + base_blocks - 1) / base_blocks, (32768 + 127) / 128);
    const int64_t slots = r.choice.resident_slots;
    INFO("uniform=" << uniform << " ran " << r.kernel << " sms=" << sms << " slots=" << slots << " blind=" << blind);
    REQUIRE(slots > 0);
    CHECK(r.choice.num_splits == blind_splits(sms, base_blocks, 32768, slots));
    if (on && sms == 132 && slots == 528) CHECK(r.choice.num_splits == 16);  // H200: the trim acts
    if (!on) CHECK(r.choice.num_splits == blind);
  }
}

// Splits of >= 16 chunks per wave hand their later chunks out through claim counters
// (device/chunk_source.hpp) in the instances built for it (FaTraits::kClaims: 4-row class,
// D <= 128, V not q4_0): a chunk processed twice or never shows in O and LSE. Each case runs
// three calls on the same workspace (the counters must start from zero each time); one case
// is a CUDA graph on a workspace filled with 0xff. PACKFA_STEAL_STATIC=0 leaves 2 static
// chunks per wave (most chunks move), 100 none. The q4_0, 16-row and D = 256 cases run the
// static loop of the same source (their instances compile no counters).
// Decision "splits-share-short-lengths" (device/fa/rows.hpp): a plan made without host lengths
// cuts max_kv_len (the capacity here); a sequence of at most a quarter of it spreads its keys
// over every split of its group. KernelChoice::share_len reports it (off in the switches entry,
// PACKFA_SHARE_LEN=0, and for plans from kv_len_host); results against the reference either
// way, with NaN in every slot past the lengths, for both main loops' row classes, D 64-256, a
// batch of short and full sequences and a sliding window.
TEST_CASE("splits share a short sequence's keys (capacity far above the length)", "[attention][switches]") {
  const bool on = switch_on("PACKFA_SHARE_LEN", true);
  struct Case {
    int D;
    VFormat vf;
    int nq, H, G, capacity;
    std::vector<int> lens;
    int window;
  };
  const std::vector<Case> cases = {
      {128, VFormat::q4_0, 1, 32, 8, 32768, {1000}, 0},
      {128, VFormat::q8_0, 1, 32, 8, 65536, {4096}, 0},            // an instance with claim counters
      {128, VFormat::q8_0_planar, 4, 32, 8, 32768, {777}, 0},      // 16 rows a KV head
      {128, VFormat::f16, 1, 8, 2, 16384, {1, 33, 4000, 16384}, 0},  // short and full in one batch
      {256, VFormat::q8_0, 1, 16, 2, 16384, {3000}, 0},
      {64, VFormat::q4_0, 2, 8, 1, 16384, {8000}, 512},            // a window of 512 keys over 8000
  };
  for (bool host : {false, true}) {
    for (const Case& k : cases) {
      ProblemConfig c = base(k.D, k.vf, k.nq, k.H, k.G, 0);
      c.batch = static_cast<int>(k.lens.size());
      c.kv_lens = k.lens;
      c.capacity = k.capacity;
      c.window = k.window;
      c.poison_unused = true;
      g_host_lens = host;
      const Result r = check(c);
      g_host_lens = false;
      INFO(describe(c) << " host lengths " << host << " ran " << r.kernel << " splits " << r.choice.num_splits
                       << " one_round " << r.choice.one_round);
      CHECK(r.choice.num_splits > 1);
      CHECK(r.choice.share_len == (on && !r.choice.one_round));
      if (!host) CHECK(r.choice.share_len == on);
    }
  }
}

TEST_CASE("work moves between splits through claim counters", "[attention][switches]") {
  // claims: whether the planner gave the call claim counters (KernelChoice::claims); the
  // instances built for it are the 4-row class with D <= 128 and V other than q4_0.
  auto expect = [](const Result& r, bool claims, int splits) {
    INFO("ran " << r.kernel);
    CHECK(r.choice.claims == claims);
    if (splits > 0) CHECK(r.choice.num_splits == splits);
  };
  for (const char* pct : {"0", "50", "100"}) {
    setenv("PACKFA_STEAL_STATIC", pct, 1);
    INFO("PACKFA_STEAL_STATIC=" << pct);
    // the bench's decode shape with the 33 splits the planner picks for q8_0 on the H200,
    // asked for explicitly (other V formats may have another occupancy, so another count):
    // 2144-key splits, 16 chunks per wave, the least that gets counters
    for (VFormat vf : {VFormat::q8_0, VFormat::f16, VFormat::q4_0, VFormat::q8_0_planar}) {
      ProblemConfig c = base(128, vf, 1, 32, 8, 70000);
      expect(check(c, 33, 0, 3), vf != VFormat::q4_0, 33);
    }
    ProblemConfig g = base(128, VFormat::q8_0, 1, 32, 8, 70000);
    expect(check(g, 0, 0, 3, true), true, 0);  // the planner's own choice
    ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, 0);
    c.batch = 3;
    c.kv_lens = {20000, 700, 9001};  // the 700 keys fill one split, whose pool is empty
    expect(check(c, 8, 0, 3), true, 8);
    c = base(128, VFormat::q8_0, 4, 8, 2, 30001);  // 16 rows, causal rows at the end
    c.window = 20000;
    c.mask = true;
    expect(check(c, 6, 0, 3), false, 6);
    c = base(128, VFormat::f16, 1, 8, 2, 30001);  // the f16-K kernel
    c.k_format = KFormat::f16;
    c.sinks = true;
    expect(check(c, 5, 0, 3), true, 5);
    c = base(256, VFormat::q8_0, 1, 8, 2, 30001);  // two waves per block
    expect(check(c, 4, 0, 3), false, 4);
  }
  unsetenv("PACKFA_STEAL_STATIC");
}

TEST_CASE("options: window, mask, softcap, sinks, ALiBi, positions, smoothing, block 16", "[attention]") {
  for (VFormat vf : {VFormat::f16, VFormat::q8_0}) {
    ProblemConfig c = base(128, vf, 3, 8, 2, 1500);
    c.window = 200;
    check(c);
    c = base(128, vf, 3, 8, 2, 1500);
    c.mask = true;
    check(c);
    c = base(128, vf, 1, 8, 2, 1500);
    c.softcap = 20.0f;
    check(c);
    c = base(128, vf, 2, 8, 2, 1500);
    c.sinks = true;
    check(c);
    check(c, 1);
    c = base(128, vf, 2, 8, 2, 1500);
    c.alibi_max_bias = 8.0f;
    check(c);
    c = base(128, vf, 4, 8, 2, 1500);
    c.explicit_q_pos = true;
    check(c);
    c = base(128, vf, 1, 8, 2, 1500);
    c.causal = false;
    c.nq = 3;
    check(c);
    c = base(128, vf, 1, 8, 2, 1500);
    c.smooth_shift = c.smooth_scale = true;
    check(c);
    c.dot = DotMode::f16;
    check(c);
    c = base(128, vf, 1, 8, 2, 1500);
    c.k_block = 16;
    check(c);
    c = base(128, vf, 4, 8, 2, 1500);  // 16 rows: the tensor-core Q·K path on NVIDIA
    c.k_block = 16;
    {
      const Result r = check(c);
      INFO("ran " << r.kernel);
      CHECK(r.choice.rows_per_block == 16);
      CHECK(r.choice.mma_qk);
    }
    c = base(96, vf, 4, 8, 2, 1500);
    c.softcap = 20.0f;
    c.window = 300;
    check(c);
    for (int nq : {1, 3}) {  // plain f16 K (tensor-core scores on NVIDIA) with every option
      c = base(128, vf, nq, 8, 2, 1500);
      c.k_format = KFormat::f16;
      c.window = 400;
      c.mask = true;
      c.softcap = 25.0f;
      c.sinks = true;
      c.alibi_max_bias = 4.0f;
      const Result r = check(c);
      INFO("ran " << r.kernel);
      CHECK(r.choice.mma_qk);
    }
    c = base(64, vf, 2, 8, 2, 1500);
    c.window = 64;
    c.mask = true;
    c.softcap = 30.0f;
    c.sinks = true;
    c.alibi_max_bias = 4.0f;
    check(c);
  }
}

TEST_CASE("output types and strided caches", "[attention]") {
  for (DType ot : {DType::f16, DType::bf16, DType::f32}) {
    ProblemConfig c = base(128, VFormat::q8_0, 2, 8, 2, 600);
    c.o_type = ot;
    c.q_type = ot;
    check(c);
  }
  ProblemConfig c = base(96, VFormat::q4_0, 1, 6, 3, 700);
  c.slot_pad_bytes = 48;  // rows not contiguous: a strided view into a wider cache
  check(c);
}

TEST_CASE("Q set-up: 16-byte and element-aligned Q, every Q type and row class", "[attention]") {
  // Decision "q-vec" (device/fa/q_setup.hpp): 8 dims a lane, one 16-byte load where Q's rows
  // are 16-byte aligned, else 8 scalar loads; both against the reference, padded dims (D 80:
  // a last block of 16) and the 16-row classes (D 256: 2 batches a lane) included.
  struct Shape { int D, nq, H, G; };
  for (const Shape sh : {Shape{80, 1, 8, 2}, Shape{128, 4, 16, 4}, Shape{256, 1, 16, 2}, Shape{256, 2, 16, 2}}) {
    for (DType qt : {DType::f16, DType::bf16, DType::f32}) {
      for (int shift : {0, qt == DType::f32 ? 4 : 2}) {
        ProblemConfig c = base(sh.D, sh.D % 32 ? VFormat::f16 : VFormat::q8_0, sh.nq, sh.H, sh.G, 300);
        c.q_type = qt;
        c.dot = qt == DType::bf16 ? DotMode::f16 : DotMode::int8;  // the fp16-Q mode stores fp32 Q
        c.smooth_scale = sh.D == 128;  // the K smoothing factors multiply the loaded Q dims
        g_q_shift = shift;
        struct Reset { ~Reset() { g_q_shift = 0; } } reset;  // also when a REQUIRE ends the case
        const Result r = check(c);
        INFO(describe(c) << " shift=" << shift << " kernel=" << r.kernel);
        CHECK(r.choice.q_vec == (shift == 0));
        if (c.dot == DotMode::int8 && (sh.nq > 1 || sh.G == 4)) CHECK(r.choice.rows_per_block == 16);
      }
    }
  }
}

TEST_CASE("64-bit addressing: a second sequence beyond 2^31 bytes", "[attention][large]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::q8_0_planar}) {
    ProblemConfig c = base(128, vf, 1, 8, 2, 2048);
    c.batch = 2;
    check(c, 0, (int64_t{1} << 31) + 4096);
  }
}

// Rows split (decision "rows-split", src/dispatch.cu): with PACKFA_ROWS_SPLIT unset, cc 9.0
// runs calls below the prefill rule on the warp-MMA kernel in key splits where that measured
// faster — D 128, int8 dot, q8_0 / q4_0 / f16 V, at least 64 rows a KV head, kv >= 32k, at
// least 8 (sequence, KV head, row tile) blocks — and everything else on the decode kernel.
// The choice is asserted on one side of each edge of the rule (select_kernel only: a cache of
// 32k keys a KV head, one shape per cache); one call of the rule's path runs against the
// reference (test_prefill covers the path's options with PACKFA_ROWS_SPLIT=1).
// Decision "wgmma-split" (src/dispatch.cu, wgmma_split_rule): on cc 9.0, with neither
// PACKFA_WGMMA_SPLIT nor PACKFA_ROWS_SPLIT set, at least 64 rows a KV head below the prefill rule
// and kv >= 8192 (at least 512 rows: kv >= 4096; D 128 with the int8 dot and q8_0 / f16 V: 1024,
// 2048 from 32 rows, "wgmma-split-short"), at head dims 64, 128 and 256 and packed16 K,
// run the wgmma prefill kernel in key splits (with <= 64 rows two partials a block split: an even
// split count); so do 17-63 rows at D 128 with q8_0 / f16 V and the int8 dot (decision
// "wgmma-split-mid-rows"); fewer rows, shorter caches, other head dims, f16 K and bf16 V the
// decode kernel.
TEST_CASE("wgmma split: the speed rule", "[attention][dispatch]") {
  const DeviceInfo d = device_info(0);
  const char* e1 = std::getenv("PACKFA_ROWS_SPLIT");
  const char* e2 = std::getenv("PACKFA_WGMMA_SPLIT");
  const bool rule = d.cc_major == 9 && d.cc_minor == 0 && !(e1 && e1[0]) && !(e2 && e2[0]);
  struct S {
    int D;
    VFormat vf;
    DotMode dot;
    int nq, H, G, kv;
    bool split;  // what the rule says on cc 9.0
    KFormat kf = KFormat::packed16;
  };
  const S shapes[] = {
      {128, VFormat::f16, DotMode::f16, 16, 4, 1, 32768, false, KFormat::f16},  // f16 K: not measured
      // one KV head with 4 q heads (rows = 4 nq): the rule reads rows, kv and V; a small cache
      {128, VFormat::q8_0, DotMode::int8, 16, 4, 1, 32768, true},     // 64 rows
      {128, VFormat::q4_0, DotMode::int8, 16, 16, 4, 32768, true},    // 4 KV heads
      {128, VFormat::f16, DotMode::int8, 16, 4, 1, 32768, true},
      {128, VFormat::q8_0, DotMode::f16, 16, 4, 1, 32768, true},      // fp16-Q dot
      {64, VFormat::q8_0, DotMode::int8, 16, 4, 1, 32768, true},      // head dim
      {128, VFormat::q8_0_planar, DotMode::int8, 16, 4, 1, 8192, true},
      {128, VFormat::q8_0, DotMode::int8, 32, 4, 1, 32768, true},     // 128 rows: one tile, no pairing
      // mid rows (decision "wgmma-split-mid-rows"): 17-63 rows, D 128, q8_0 / f16 V, int8 dot
      {128, VFormat::q8_0, DotMode::int8, 15, 4, 1, 32768, true},     // 60 rows a KV head
      {128, VFormat::q8_0, DotMode::int8, 8, 4, 1, 32768, true},      // 32 rows
      {128, VFormat::f16, DotMode::int8, 5, 4, 1, 8192, true},        // 20 rows
      {128, VFormat::q8_0, DotMode::int8, 5, 16, 4, 32768, true},     // 4 KV heads
      {128, VFormat::q8_0, DotMode::int8, 4, 4, 1, 32768, false},     // 16 rows: one decode block
      {128, VFormat::q4_0, DotMode::int8, 8, 4, 1, 32768, false},     // q4_0 V: slower there
      {128, VFormat::q8_0_planar, DotMode::int8, 8, 4, 1, 32768, false},  // planar: equal
      {128, VFormat::q8_0, DotMode::f16, 8, 4, 1, 32768, true},       // fp16-Q dot (session 33)
      {128, VFormat::q4_0, DotMode::f16, 8, 4, 1, 32768, false},      // ... not with q4_0 V
      {128, VFormat::q8_0, DotMode::f16, 4, 4, 1, 32768, false},      // ... nor 16 rows
      {64, VFormat::q8_0, DotMode::int8, 8, 4, 1, 32768, true},       // D 64 (session 33)
      {64, VFormat::q4_0, DotMode::int8, 8, 4, 1, 32768, false},      // ... not with q4_0 V
      // D 256 (decision "wgmma-split-d256"): the fp16-Q dot at 5-8 rows; the int8 dot at 9-63
      // rows while the cache fits L2 (2 x 32k keys x 544 bytes = 36 MB; 64k: 71 MB, past 50-60 MB)
      {256, VFormat::q8_0, DotMode::f16, 1, 16, 2, 32768, true},      // 8 rows
      {256, VFormat::q4_0, DotMode::f16, 1, 24, 4, 8192, true},       // 6 rows, q4_0 V too
      {256, VFormat::q8_0_planar, DotMode::f16, 1, 16, 2, 32768, false},  // planar: not measured
      {256, VFormat::q8_0, DotMode::f16, 1, 32, 8, 32768, false},     // 4 rows
      {256, VFormat::q8_0, DotMode::f16, 1, 16, 2, 8191, false},      // kv below 8192
      {256, VFormat::q8_0, DotMode::int8, 1, 16, 2, 32768, false},    // int8 dot, 8 rows
      {256, VFormat::q8_0, DotMode::int8, 2, 16, 2, 32768, true},     // int8 dot, 16 rows in L2
      {256, VFormat::f16, DotMode::int8, 8, 4, 1, 32768, true},       // 32 rows in L2
      {256, VFormat::q8_0, DotMode::int8, 2, 16, 2, 65536, false},    // past L2
      {256, VFormat::q4_0, DotMode::int8, 2, 16, 2, 32768, false},    // q4_0 V
      // short caches (decision "wgmma-split-short"): D 128, int8 dot, q8_0 / f16 V from 1024
      // keys at 64 rows, 2048 at 32 rows; fewer rows and the rest keep 8192
      {128, VFormat::q8_0, DotMode::int8, 16, 4, 1, 4096, true},      // 64 rows
      {128, VFormat::f16, DotMode::int8, 16, 4, 1, 1024, true},
      {128, VFormat::q8_0, DotMode::int8, 16, 4, 1, 1023, false},     // below 1024
      {128, VFormat::q8_0, DotMode::int8, 8, 4, 1, 2048, true},       // 32 rows
      {128, VFormat::q8_0, DotMode::int8, 8, 4, 1, 2047, false},      // below 2048
      {128, VFormat::q8_0, DotMode::int8, 7, 4, 1, 4096, false},      // 28 rows
      {128, VFormat::q4_0, DotMode::int8, 16, 4, 1, 4096, false},     // q4_0 V
      {128, VFormat::q8_0, DotMode::f16, 16, 4, 1, 4096, false},      // fp16-Q dot
      {64, VFormat::q8_0, DotMode::int8, 16, 4, 1, 4096, false},      // D 64
      {128, VFormat::q8_0, DotMode::int8, 7, 4, 1, 8191, false},      // kv below 8192
      {128, VFormat::q4_0, DotMode::int8, 16, 4, 1, 8191, false},     // kv below 8192
      {128, VFormat::bf16, DotMode::int8, 16, 4, 1, 32768, false},    // bf16 V stays scalar
      {96, VFormat::q8_0, DotMode::int8, 16, 4, 1, 32768, false},     // head dims not measured
      {256, VFormat::q8_0, DotMode::int8, 16, 4, 1, 32768, true},
      // many rows (decision "wgmma-split-many-rows"): 4096 rows a KV head in 64 blocks, fewer
      // than half of 132 multiprocessors, so below the prefill rule: split from kv 4096 on
      {256, VFormat::q8_0, DotMode::int8, 512, 16, 2, 4096, true},
      {256, VFormat::q8_0, DotMode::int8, 512, 16, 2, 4095, false},   // kv below 4096
      {256, VFormat::q8_0, DotMode::int8, 28, 16, 1, 4096, false},    // 448 rows: kv 4096 is too short
  };
  // the many-rows shapes are below the prefill rule only while 64 blocks are fewer than half the
  // multiprocessors (H100 SXM / H200: 132)
  const bool many_rows_split = d.multiprocessors > 128;
  for (const S& s : shapes) {
    ProblemConfig c = base(s.D, s.vf, s.nq, s.H, s.G, s.kv);
    c.dot = s.dot;
    c.k_format = s.kf;
    const KernelChoice ch = planned(c);
    INFO(describe(c) << " ran " << ch.name << " splits=" << ch.num_splits
                     << " (rule applies: " << rule << ")");
    const bool many = s.nq * (s.H / s.G) >= 512 && s.kv < 8192;
    const bool want = rule && s.split && (!many || many_rows_split);
    if (many && !many_rows_split) continue;  // the prefill kernel in one split: not this rule's case
    CHECK((ch.name.rfind("fa_prefill<", 0) == 0) == want);
    CHECK((ch.name.rfind("fa<", 0) == 0) == !want);
    if (want) CHECK(ch.num_splits > 1);
    if (want && s.nq * (s.H / s.G) <= 64) CHECK(ch.num_splits % 2 == 0);
  }
  // the split planner's rounds (decision "wgmma-split-two-rounds"): a batch's blocks, one a
  // multiprocessor, fill two rounds at most (2 x 8 KV heads, 64 rows on 132 multiprocessors:
  // 16 block splits, 256 blocks; rounding up gave 17, 272 blocks, a third round of 8)
  if (rule) {
    ProblemConfig c = base(128, VFormat::q8_0, 16, 32, 8, 32768);
    c.batch = 2;
    const KernelChoice ch = planned(c);
    const int64_t blocks = int64_t{ch.num_splits} / 2 * c.batch * c.n_kv_heads;  // dual: two partials a block
    INFO("batch 2 x 8 KV heads ran " << ch.name << " splits=" << ch.num_splits << " blocks=" << blocks
                                     << " multiprocessors=" << d.multiprocessors);
    REQUIRE(ch.name.rfind("fa_prefill<", 0) == 0);
    CHECK(ch.num_splits % 2 == 0);
    CHECK(blocks <= 2LL * d.multiprocessors);
    CHECK(blocks > d.multiprocessors);
  }
  // 2 sequences x 4 KV heads, 64 and 32 rows, against the reference
  for (int nq : {16, 8}) {
    ProblemConfig c = base(128, VFormat::q8_0, nq, 16, 4, 32768);
    c.batch = 2;
    const Result r = check(c);
    INFO("nq " << nq << " ran " << r.kernel);
    CHECK((r.choice.name.rfind("fa_prefill<", 0) == 0) == rule);
  }
}

TEST_CASE("bad input: Status names the field and nothing is written", "[attention]") {
  ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, 100);
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, c.k_format, c.v_format);
  AttnParams p = dp.params;
  p.head_dim = 100;
  Status s = fa_packed16_forward(p, nullptr);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("head_dim") != std::string::npos);
  p = dp.params;
  p.n_q_heads = 7;
  s = fa_packed16_forward(p, nullptr);
  CHECK(s.message().find("n_q_heads") != std::string::npos);
  // the planner reads kv_len_host on the host: a device array there is refused, not dereferenced
  p = dp.params;
  p.kv_len_host = dp.params.kv_len;
  s = fa_packed16_forward(p, nullptr);
  INFO(s.to_string());
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().rfind("kv_len_host:", 0) == 0);
  // a max_kv_len near INT_MAX planned one split of 2^31 keys before (status ok, O all zeros)
  p = dp.params;
  p.max_kv_len = 2147483647;
  s = fa_packed16_forward(p, nullptr);
  CHECK(s.message().rfind("max_kv_len:", 0) == 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> o(hp.o.size());
  CUDA_CHECK(cudaMemcpy(o.data(), dp.params.o.data, o.size(), cudaMemcpyDeviceToHost));
  bool untouched = true;
  for (uint8_t x : o) untouched = untouched && x == 0xff;
  CHECK(untouched);
}
