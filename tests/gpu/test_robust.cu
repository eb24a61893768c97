// Robustness of the forward call on the GPU (issue #14): paths the accuracy suite leaves
// out (no LSE, a caller's scale, head-major caches, a broadcast mask, offsets past 2^31
// inside one sequence, the C ABI on a successful call), non-finite inputs (docs/format.md,
// "Non-finite Q, V and sinks"), determinism, and 8 host threads on 8 streams with their own
// workspaces against serial calls, bitwise.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "decode_switches.hpp"
#include "device_problem.hpp"
#include "packfa/api.hpp"
#include "packfa/c_api.h"
#include "packfa/reference.hpp"
#include "packfa/testing.hpp"
#include "packfa_catch.hpp"

using namespace packfa;
using namespace packfa::testing;

namespace {

uint64_t g_seed = 9000;

ProblemConfig base(int D, VFormat vf, int nq, int H, int G, int kv) {
  return decode_config(D, vf, nq, H, G, kv, ++g_seed);
}

// What one call wrote: O bytes and LSE (empty without LSE).
struct Out {
  std::vector<uint8_t> o;
  std::vector<float> lse;
  bool operator==(const Out& x) const { return o == x.o && lse == x.lse; }
};

Out download_out(const AttnParams& p, const HostProblem& hp) {
  Out r;
  r.o.resize(hp.o.size());
  CUDA_CHECK(cudaMemcpy(r.o.data(), p.o.data, r.o.size(), cudaMemcpyDeviceToHost));
  if (p.lse) {
    r.lse.resize(hp.lse.size());
    CUDA_CHECK(cudaMemcpy(r.lse.data(), p.lse, r.lse.size() * 4, cudaMemcpyDeviceToHost));
  }
  return r;
}

void poison(const AttnParams& p, const HostProblem& hp, cudaStream_t s = nullptr) {
  CUDA_CHECK(cudaMemsetAsync(p.o.data, 0xff, hp.o.size(), s));
  if (p.lse) CUDA_CHECK(cudaMemsetAsync(p.lse, 0xff, hp.lse.size() * 4, s));
}

// KernelChoice::k_rounded of the last run(): check_ref computes the reference as that kernel multiplies
bool g_k_rounded = false;

// One forward call on poisoned outputs, synchronised; returns what select_kernel said.
KernelChoice run(const AttnParams& p, const HostProblem& hp) {
  KernelChoice c;
  const Status sel = select_kernel(p, 0, &c);
  INFO(sel.to_string());
  REQUIRE(sel.ok());
  g_k_rounded = c.k_rounded;
  poison(p, hp);
  const Status s = fa_packed16_forward(p, nullptr);
  INFO(s.to_string());
  REQUIRE(s.ok());
  CUDA_CHECK(cudaDeviceSynchronize());
  return c;
}

// O (and LSE where the call wrote one) against the fp64 reference over host params `ref`.
void check_ref(const AttnParams& ref, const ProblemConfig& cfg, const Out& out) {
  std::vector<double> ro, rl;
  REQUIRE(reference_attention(ref, reference_mode(cfg, g_k_rounded), &ro, &rl).ok());
  std::vector<double> o;
  decode_to_double(cfg.o_type, out.o.data(), static_cast<int64_t>(ro.size()), &o);
  const double err = rel_err(o, ro);
  INFO("rel err " << err);
  CHECK(err <= (cfg.o_type == DType::bf16 ? 5e-3 : 1e-3));
  for (size_t i = 0; i < out.lse.size(); ++i) {
    INFO("lse " << i << ": " << out.lse[i] << " vs " << rl[i]);
    if (std::isinf(rl[i])) CHECK((std::isinf(out.lse[i]) && out.lse[i] < 0));
    else CHECK(std::fabs(out.lse[i] - rl[i]) <= 1e-3);
  }
}

// Rows of O (f32, dense [b][i][h][D]) and LSE whose bytes differ between two outputs.
std::vector<int> changed_rows(const Out& a, const Out& b, int D) {
  std::vector<int> rows;
  const size_t row_bytes = static_cast<size_t>(D) * 4, n = a.o.size() / row_bytes;
  for (size_t r = 0; r < n; ++r) {
    const bool o_diff = std::memcmp(a.o.data() + r * row_bytes, b.o.data() + r * row_bytes, row_bytes) != 0;
    const bool l_diff = !a.lse.empty() && std::memcmp(&a.lse[r], &b.lse[r], 4) != 0;
    if (o_diff || l_diff) rows.push_back(static_cast<int>(r));
  }
  return rows;
}
bool row_nonfinite(const Out& a, int row, int D) {
  const float* o = reinterpret_cast<const float*>(a.o.data()) + static_cast<size_t>(row) * D;
  for (int c = 0; c < D; ++c)
    if (!std::isfinite(o[c])) return true;
  return false;
}

template <class T>
void poke(void* dev, T value) {
  CUDA_CHECK(cudaMemcpy(dev, &value, sizeof(T), cudaMemcpyHostToDevice));
}

// Token-major plane [b][slot][g] (strides s) rewritten head-major [b][g][slot] (*out).
aligned_vector<uint8_t> head_major(const aligned_vector<uint8_t>& src, const Strides& s, int B, int C, int G,
                                   int64_t row_bytes, Strides* out) {
  out->slot = row_bytes;
  out->head = row_bytes * C;
  out->seq = out->head * G;
  aligned_vector<uint8_t> dst(static_cast<size_t>(out->seq) * B);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < C; ++j)
      for (int g = 0; g < G; ++g)
        std::memcpy(dst.data() + b * out->seq + j * out->slot + g * out->head,
                    src.data() + b * s.seq + j * s.slot + g * s.head, static_cast<size_t>(row_bytes));
  return dst;
}

}  // namespace

TEST_CASE("no LSE (lse == nullptr), one split and several", "[robust]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::f16}) {
    for (int splits : {1, 4}) {
      ProblemConfig c = base(128, vf, 2, 8, 2, 1200);
      c.want_lse = false;
      c.sinks = true;
      HostProblem hp;
      REQUIRE(make_problem(c, &hp).ok());
      REQUIRE(hp.params.lse == nullptr);
      DeviceProblem dp(hp, c.k_format, c.v_format);
      dp.params.num_splits = splits;
      const KernelChoice k = run(dp.params, hp);
      INFO(k.name << " splits " << k.num_splits);
      CHECK(k.num_splits == splits);
      check_ref(hp.params, c, download_out(dp.params, hp));
    }
  }
}

TEST_CASE("a caller's softmax scale", "[robust]") {
  for (float scale : {0.02f, 0.3f, 1.5f}) {
    for (int splits : {1, 3}) {
      ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, 900);
      c.scale = scale;
      HostProblem hp;
      REQUIRE(make_problem(c, &hp).ok());
      DeviceProblem dp(hp, c.k_format, c.v_format);
      dp.params.num_splits = splits;
      run(dp.params, hp);
      INFO("scale " << scale << " splits " << splits);
      check_ref(hp.params, c, download_out(dp.params, hp));
    }
  }
}

// A head-major cache ([seq][kv head][slot] rows, `packfa-bench --head-major`) and one mask
// for every sequence (mask_seq_stride = 0), with varlen sequences.
TEST_CASE("head-major cache and a broadcast mask", "[robust]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::f16, VFormat::q4_0}) {
    for (KFormat kf : {KFormat::packed16, KFormat::f16}) {
      ProblemConfig c = base(128, vf, 2, 8, 2, 0);
      c.k_format = kf;
      c.batch = 3;
      c.kv_lens = {700, 33, 1500};
      c.mask = true;
      HostProblem hp;
      REQUIRE(make_problem(c, &hp).ok());
      const int B = c.batch, C = hp.capacity, G = c.n_kv_heads, D = c.head_dim;
      AttnParams host = hp.params;  // the reference's view of the same layout
      DeviceProblem dp(hp, kf, vf);
      AttnParams dev = dp.params;
      std::vector<aligned_vector<uint8_t>> keep;
      auto move_plane = [&](const aligned_vector<uint8_t>& src, const Strides& s, int64_t row_bytes, const void** hfield,
                            Strides* hs, const void** dfield, Strides* ds) {
        Strides hm;
        keep.push_back(head_major(src, s, B, C, G, row_bytes, &hm));
        *hfield = keep.back().data();
        *hs = hm;
        *dfield = dp.mirror(keep.back());
        *ds = hm;
      };
      if (kf == KFormat::packed16) {
        move_plane(hp.k_payload, hp.k_payload_strides, D, &host.k.data, &host.k.data_strides, &dev.k.data,
                   &dev.k.data_strides);
        move_plane(hp.k_scales, hp.k_scale_strides, 2 * (D / c.k_block), &host.k.scales, &host.k.scale_strides,
                   &dev.k.scales, &dev.k.scale_strides);
      } else {
        move_plane(hp.k_f16, hp.k_f16_strides, 2 * D, &host.k.data, &host.k.data_strides, &dev.k.data,
                   &dev.k.data_strides);
      }
      const int vi = static_cast<int>(vf);
      move_plane(hp.v_planes[vi], hp.v_strides[vi], v_row_bytes(vf, D), &host.v.data, &host.v.strides, &dev.v.data,
                 &dev.v.strides);
      host.mask_seq_stride = dev.mask_seq_stride = 0;
      REQUIRE(validate(dev).ok());
      const KernelChoice k = run(dev, hp);
      INFO(k.name << " V " << static_cast<int>(vf) << " K " << static_cast<int>(kf));
      check_ref(host, c, download_out(dev, hp));
    }
  }
}

// Key j of the one sequence at j · slot_stride bytes, slot_stride = 2 MiB + 256: keys from
// 1024 on sit past 2^31 bytes from the plane's start (int32 offsets would wrap).
TEST_CASE("64-bit offsets inside one sequence (slot stride 2 MiB)", "[robust][large]") {
  ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, 1100);
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, c.k_format, c.v_format);
  const int64_t S = (int64_t{1} << 21) + 256;
  const int C = hp.capacity;
  REQUIRE(static_cast<int64_t>(C - 1) * S > (int64_t{1} << 31));
  AttnParams p = dp.params;
  auto spread = [&](const aligned_vector<uint8_t>& host, const Strides& s, const void** field, Strides* strides) {
    DeviceBuffer big(static_cast<size_t>(S) * C);
    CUDA_CHECK(cudaMemcpy2D(big.ptr, S, host.data(), s.slot, s.slot, C, cudaMemcpyHostToDevice));
    *field = big.ptr;
    *strides = {static_cast<int64_t>(S) * C, S, s.head};
    dp.bufs.push_back(std::move(big));
  };
  spread(hp.k_payload, hp.k_payload_strides, &p.k.data, &p.k.data_strides);
  spread(hp.k_scales, hp.k_scale_strides, &p.k.scales, &p.k.scale_strides);
  spread(hp.v_planes[static_cast<int>(VFormat::q8_0)], hp.v_strides[static_cast<int>(VFormat::q8_0)], &p.v.data,
         &p.v.strides);
  for (int splits : {1, 5}) {
    p.num_splits = splits;
    run(p, hp);
    INFO("splits " << splits);
    check_ref(hp.params, c, download_out(p, hp));
  }
}

// The C ABI on a successful call: the same bytes as the C++ call, and the reference's values.
TEST_CASE("C ABI packfa_fa_forward on a successful call", "[robust][c_api]") {
  for (VFormat vf : {VFormat::q8_0, VFormat::q8_0_planar}) {
    ProblemConfig c = base(128, vf, 3, 8, 2, 1300);
    c.sinks = c.mask = c.explicit_q_pos = true;
    c.window = 500;
    c.softcap = 30.0f;
    HostProblem hp;
    REQUIRE(make_problem(c, &hp).ok());
    DeviceProblem dp(hp, c.k_format, c.v_format);
    AttnParams& p = dp.params;
    p.num_splits = 4;
    size_t ws = 0;
    REQUIRE(fa_workspace_bytes(p, 0, &ws).ok());
    DeviceBuffer dws(ws);
    p.workspace = dws.ptr;
    p.workspace_bytes = ws;
    run(p, hp);
    const Out cpp = download_out(p, hp);

    packfa_attn_params cp;
    std::memset(&cp, 0, sizeof cp);
    cp.batch = p.batch; cp.nq = p.nq; cp.n_q_heads = p.n_q_heads; cp.n_kv_heads = p.n_kv_heads;
    cp.head_dim = p.head_dim; cp.max_kv_len = p.max_kv_len;
    cp.q_type = static_cast<int>(p.q.type); cp.q = p.q.data;
    cp.q_strides[0] = p.q.seq_stride; cp.q_strides[1] = p.q.row_stride; cp.q_strides[2] = p.q.head_stride;
    cp.k_format = static_cast<int>(p.k.format); cp.k = p.k.data;
    cp.k_strides[0] = p.k.data_strides.seq; cp.k_strides[1] = p.k.data_strides.slot; cp.k_strides[2] = p.k.data_strides.head;
    cp.k_scales = p.k.scales;
    cp.k_scale_strides[0] = p.k.scale_strides.seq; cp.k_scale_strides[1] = p.k.scale_strides.slot;
    cp.k_scale_strides[2] = p.k.scale_strides.head;
    cp.k_block = p.k.block; cp.k_smooth_scale = p.k.smooth_scale;
    cp.v_format = static_cast<int>(p.v.format); cp.v = p.v.data;
    cp.v_strides[0] = p.v.strides.seq; cp.v_strides[1] = p.v.strides.slot; cp.v_strides[2] = p.v.strides.head;
    cp.v_scales = p.v.scales;
    cp.v_scale_strides[0] = p.v.scale_strides.seq; cp.v_scale_strides[1] = p.v.scale_strides.slot;
    cp.v_scale_strides[2] = p.v.scale_strides.head;
    cp.o_type = static_cast<int>(p.o.type); cp.o = p.o.data;
    cp.o_strides[0] = p.o.seq_stride; cp.o_strides[1] = p.o.row_stride; cp.o_strides[2] = p.o.head_stride;
    cp.kv_len = p.kv_len; cp.q_pos = p.q_pos; cp.scale = p.scale; cp.causal = p.causal; cp.window = p.window;
    cp.mask = p.mask; cp.mask_strides[0] = p.mask_seq_stride; cp.mask_strides[1] = p.mask_row_stride;
    cp.softcap = p.softcap; cp.sinks = p.sinks; cp.alibi_max_bias = p.alibi_max_bias; cp.lse = p.lse;
    cp.dot = static_cast<int>(p.dot); cp.num_splits = p.num_splits; cp.workspace = p.workspace;
    cp.workspace_bytes = p.workspace_bytes; cp.pdl = p.pdl;
    cp.mask_head_stride = p.mask_head_stride; cp.alibi_mode = static_cast<int>(p.alibi_mode); cp.errors = p.errors;

    size_t cws = 0;
    char msg[256] = {0};
    CHECK(packfa_fa_workspace_bytes(&cp, 0, &cws, msg, sizeof msg) == 0);
    CHECK(cws == ws);
    KernelChoice kc;
    REQUIRE(select_kernel(p, 0, &kc).ok());
    char cname[128] = {0};
    int csplits = 0;
    CHECK(packfa_fa_select_kernel(&cp, 0, cname, sizeof cname, &csplits, msg, sizeof msg) == 0);
    CHECK(std::string(cname) == kc.name);
    CHECK(csplits == kc.num_splits);
    poison(p, hp);
    const int rc = packfa_fa_forward(&cp, nullptr, msg, sizeof msg);
    INFO("C ABI: rc " << rc << " " << msg);
    REQUIRE(rc == 0);
    CHECK(std::string(msg) == "ok");
    CUDA_CHECK(cudaDeviceSynchronize());
    const Out cabi = download_out(p, hp);
    CHECK(cabi == cpp);
    check_ref(hp.params, c, cabi);
  }
}

// Static splits (no claim counters) are deterministic: the same call twice writes the same
// bytes, with one split and with a combine, batches and MTP rows included.
TEST_CASE("determinism: repeated calls are bitwise equal (static splits)", "[robust][determinism]") {
  struct S {
    int D, nq, H, G, kv, splits;
    VFormat vf;
  };
  for (const S& s : {S{128, 1, 8, 2, 3000, 0, VFormat::q8_0}, S{128, 4, 8, 2, 2000, 1, VFormat::f16},
                     S{256, 2, 16, 4, 2500, 7, VFormat::q4_0}, S{80, 1, 8, 1, 4000, 20, VFormat::bf16},
                     S{128, 1, 32, 8, 5000, 70, VFormat::q8_0_planar}}) {
    ProblemConfig c = base(s.D, s.vf, s.nq, s.H, s.G, s.kv);
    c.sinks = true;
    HostProblem hp;
    REQUIRE(make_problem(c, &hp).ok());
    DeviceProblem dp(hp, c.k_format, c.v_format);
    dp.params.num_splits = s.splits;
    const KernelChoice k = run(dp.params, hp);
    INFO(k.name << " splits " << k.num_splits << " claims " << k.claims);
    REQUIRE_FALSE(k.claims);
    const Out first = download_out(dp.params, hp);
    for (int rep = 0; rep < 4; ++rep) {
      run(dp.params, hp);
      CHECK(download_out(dp.params, hp) == first);
    }
  }
}

// With claim counters the chunk a wave takes depends on timing, so the order of the sums may
// change from call to call. PACKFA_STEAL=0 turns the counters off: then bitwise determinism
// holds for the same shape. With them on, every chunk is still counted once: repeated calls
// agree to float rounding.
TEST_CASE("determinism with claim counters: PACKFA_STEAL=0 bitwise, on within 2e-4", "[robust][determinism]") {
  ProblemConfig c = base(128, VFormat::q8_0, 1, 32, 8, 70000);  // the bench's decode shape
  HostProblem hp;
  REQUIRE(make_problem(c, &hp).ok());
  DeviceProblem dp(hp, c.k_format, c.v_format);
  {
    setenv("PACKFA_STEAL", "0", 1);
    const KernelChoice k = run(dp.params, hp);
    REQUIRE_FALSE(k.claims);
    const Out first = download_out(dp.params, hp);
    for (int rep = 0; rep < 4; ++rep) {
      run(dp.params, hp);
      CHECK(download_out(dp.params, hp) == first);
    }
    unsetenv("PACKFA_STEAL");
  }
  const KernelChoice k = run(dp.params, hp);
  REQUIRE(k.claims);
  const Out first = download_out(dp.params, hp);
  std::vector<double> a;
  decode_to_double(DType::f32, first.o.data(), static_cast<int64_t>(first.o.size() / 4), &a);
  int equal = 0;
  for (int rep = 0; rep < 8; ++rep) {
    run(dp.params, hp);
    const Out again = download_out(dp.params, hp);
    equal += again == first;
    std::vector<double> b;
    decode_to_double(DType::f32, again.o.data(), static_cast<int64_t>(again.o.size() / 4), &b);
    // claims reorder the chunks: the running maxima differ, so P rounds to fp16 differently for
    // the P·V mma (H200: 3.4e-5 over 70k keys); far inside the 1e-3 accuracy bound
    CHECK(rel_err(b, a) <= 2e-4);
    for (size_t i = 0; i < again.lse.size(); ++i) CHECK(std::fabs(again.lse[i] - first.lse[i]) <= 1e-4f);
  }
  INFO(equal << " of 8 repeats bitwise equal to the first");
  check_ref(hp.params, c, first);
}

// Non-finite Q, V and sinks (docs/format.md): the call succeeds, the rows that read the value
// may be anything (a V value a row sees with weight makes it non-finite), every other row
// is bitwise what it is without the value.
TEST_CASE("NaN / Inf in Q, V and sinks stay in the rows that read them", "[robust][nonfinite]") {
  const int B = 2, NQ = 2, H = 8, G = 2, D = 128, gqa = H / G;
  for (int splits : {1, 3}) {
    ProblemConfig c = base(D, VFormat::f16, NQ, H, G, 300);
    c.batch = B;
    c.sinks = true;
    HostProblem hp;
    REQUIRE(make_problem(c, &hp).ok());
    auto row = [&](int b, int i, int h) { return (b * NQ + i) * H + h; };
    for (int what = 0; what < 6; ++what) {
      DeviceProblem dp(hp, c.k_format, c.v_format);
      dp.params.num_splits = splits;
      const KernelChoice k = run(dp.params, hp);
      REQUIRE_FALSE(k.claims);
      const Out clean = download_out(dp.params, hp);
      std::vector<int> may_change, must_be_nonfinite;
      const uint16_t nan16 = 0x7e00u, inf16 = 0x7c00u;
      const char* name = "";
      if (what < 2) {  // Q row (b 1, i 0, head 3), dim 5: NaN / +inf
        name = what == 0 ? "NaN in Q" : "Inf in Q";
        uint16_t* q = reinterpret_cast<uint16_t*>(hp.q.data()) + static_cast<size_t>(row(1, 0, 3)) * D + 5;
        poke(dp.dev(q), what == 0 ? nan16 : inf16);
        may_change = {row(1, 0, 3)};
      } else if (what < 4) {  // V row: sequence 0, key 17, KV head 1, channel 9: NaN / -inf
        name = what == 2 ? "NaN in V" : "Inf in V";
        const int vi = static_cast<int>(VFormat::f16);
        uint8_t* v = hp.v_planes[vi].data() + 0 * hp.v_strides[vi].seq + 17 * hp.v_strides[vi].slot +
                     1 * hp.v_strides[vi].head + 2 * 9;
        poke(dp.dev(v), what == 2 ? nan16 : static_cast<uint16_t>(0xfc00u));
        for (int i = 0; i < NQ; ++i)
          for (int h = 1 * gqa; h < 2 * gqa; ++h) {
            may_change.push_back(row(0, i, h));
            must_be_nonfinite.push_back(row(0, i, h));  // causal positions 298, 299 both see key 17
          }
      } else {  // sink of head 2: NaN / +inf
        name = what == 4 ? "NaN sink" : "Inf sink";
        float* s = hp.sinks.data() + 2;
        poke(dp.dev(s), what == 4 ? NAN : INFINITY);
        for (int b = 0; b < B; ++b)
          for (int i = 0; i < NQ; ++i) may_change.push_back(row(b, i, 2));
      }
      const KernelChoice k2 = run(dp.params, hp);
      CHECK(k2.name == k.name);
      const Out bad = download_out(dp.params, hp);
      INFO(name << ", splits " << splits << ", " << k.name);
      for (int r : changed_rows(clean, bad, D)) {
        INFO("row " << r << " changed");
        CHECK(std::find(may_change.begin(), may_change.end(), r) != may_change.end());
      }
      for (int r : must_be_nonfinite) {
        INFO("row " << r << " sees the non-finite V value");
        CHECK(row_nonfinite(bad, r, D));
      }
      CUDA_CHECK(cudaGetLastError());  // the context is fine
    }
  }
}

// 8 host threads, each with its own stream, problem and workspace, call concurrently; every
// output equals the serial call's bytes (static splits, so the bytes are reproducible).
TEST_CASE("8 host threads on 8 streams, own workspaces: bitwise equal to serial calls", "[robust][threads]") {
  constexpr int kThreads = 8, kCalls = 20;
  struct Shape {
    int D, nq, H, G, kv, splits;
    VFormat vf;
  };
  const Shape shapes[kThreads] = {{128, 1, 8, 2, 3000, 0, VFormat::q8_0},  {64, 2, 8, 2, 2500, 6, VFormat::f16},
                                  {256, 1, 16, 4, 2000, 0, VFormat::q4_0}, {128, 4, 8, 2, 1800, 5, VFormat::q8_0_planar},
                                  {96, 1, 12, 2, 2200, 9, VFormat::bf16},  {128, 3, 32, 8, 1500, 3, VFormat::q8_0},
                                  {80, 2, 8, 1, 2700, 17, VFormat::f16},   {112, 1, 8, 2, 3100, 4, VFormat::f16}};
  std::vector<HostProblem> hps(kThreads);
  std::vector<std::unique_ptr<DeviceProblem>> dps;
  std::vector<DeviceBuffer> wss;
  std::vector<Out> serial(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const Shape& s = shapes[t];
    ProblemConfig c = base(s.D, s.vf, s.nq, s.H, s.G, s.kv);
    c.sinks = t % 2 == 0;
    REQUIRE(make_problem(c, &hps[t]).ok());
    dps.push_back(std::make_unique<DeviceProblem>(hps[t], c.k_format, c.v_format));
    AttnParams& p = dps.back()->params;
    p.num_splits = s.splits;
    size_t ws = 0;
    REQUIRE(fa_workspace_bytes(p, 0, &ws).ok());
    wss.emplace_back(ws);
    p.workspace = wss.back().ptr;
    p.workspace_bytes = ws;
    const KernelChoice k = run(p, hps[t]);
    INFO("thread " << t << ": " << k.name << " splits " << k.num_splits);
    REQUIRE_FALSE(k.claims);
    serial[t] = download_out(p, hps[t]);
    CHECK(serial[t].o.size() == hps[t].o.size());
  }
  for (int t = 0; t < kThreads; ++t) poison(dps[t]->params, hps[t]);
  CUDA_CHECK(cudaDeviceSynchronize());

  // Catch2's assertions are not thread-safe: the threads record, the main thread checks.
  struct Result {
    std::string error;
    Out out;
  };
  std::vector<Result> results(kThreads);
  std::atomic<int> ready{0};
  auto run_thread = [&](int t, Result& r) {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      r.error = "cudaStreamCreate failed";
      ready.fetch_add(1);
      return;
    }
    ready.fetch_add(1);
    while (ready.load() < kThreads) std::this_thread::yield();  // start together
    const AttnParams& p = dps[t]->params;
    for (int call = 0; call < kCalls && r.error.empty(); ++call) {
      poison(p, hps[t], s);
      const Status st = fa_packed16_forward(p, s);
      if (!st.ok()) r.error = "call " + std::to_string(call) + ": " + st.to_string();
    }
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess && r.error.empty()) r.error = cudaGetErrorString(e);
    if (r.error.empty()) r.out = download_out(p, hps[t]);
    cudaStreamDestroy(s);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Result& r = results[t];
      try {
        run_thread(t, r);
      } catch (const std::exception& e) {  // CUDA_CHECK throws
        r.error = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << results[t].error);
    CHECK(results[t].error.empty());
    CHECK(results[t].out == serial[t]);
  }
}

// The compute-sanitizer subset (scripts/gpu-check.sh sanitize): one small call per kernel
// kind of the contiguous layout, each against the fp64 reference and each asserting the path
// it took, so a planner change that moves a case off its kind fails here instead of silently
// shrinking what the sanitizers see. The accuracy suite (test_attention) covers the same
// kinds with many more shapes, too slowly for four sanitizer tools in one device call.
// The decode A/B switches (decode_switches.hpp; off by default) are asserted as the
// environment sets them: gpu_test_robust_switches_on runs this subset with all three on
// (the > 64-split combine then runs fa_combine_kernel, the planner-chosen batch the
// whole-rounds split count), under the sanitizers too.
TEST_CASE("sanitizer subset: one call per kernel kind", "[robust][sanitize]") {
  struct Kind {
    const char* what;
    ProblemConfig cfg;
    int splits;          // num_splits asked for (0: the planner's)
    int rows;            // rows_per_block expected
    int mma;             // mma_qk expected (0/1)
    const char* combine; // combine kernel expected (null: not asserted)
    int claims;          // claim counters expected (0/1)
  };
  std::vector<Kind> kinds;
  auto add = [&](const char* what, ProblemConfig c, int splits, int rows, int mma, const char* combine, int claims) {
    kinds.push_back({what, std::move(c), splits, rows, mma, combine, claims});
  };
  ProblemConfig c = base(128, VFormat::q8_0, 1, 8, 2, 1500);
  add("int8 Q.K, 4 rows: tensor-core scores", c, 1, 4, 1, "none", 0);
  c = base(128, VFormat::q8_0, 1, 8, 2, 1500);
  c.dot = DotMode::f16;
  add("fp16-Q mode, 4 rows: tensor-core scores", c, 3, 4, 1, "wave", 0);
  c = base(256, VFormat::q8_0, 1, 8, 2, 1500);
  c.dot = DotMode::f16;
  add("fp16-Q mode, D = 256: lane = key dots", c, 3, 4, 0, "wave", 0);
  c = base(128, VFormat::bf16, 1, 8, 2, 1500);
  add("bf16 V: lane path", c, 3, 4, 0, "wave", 0);
  c = base(256, VFormat::q8_0, 1, 8, 2, 1500);
  add("D = 256 decode rows: lane path", c, 3, 4, 0, "wave", 0);
  c = base(128, VFormat::q4_0, 4, 8, 2, 1500);
  add("int8 Q.K, 16 rows: tensor-core scores", c, 3, 16, 1, "wave", 0);
  c = base(256, VFormat::q8_0, 4, 8, 2, 1500);
  add("D = 256, 16 rows: tensor-core scores", c, 3, 16, 1, "wave", 0);
  c = base(256, VFormat::f16, 4, 8, 2, 1500);
  c.dot = DotMode::f16;
  add("D = 256 fp16-Q wide class: 8 rows", c, 3, 8, 0, "wave", 0);
  c = base(128, VFormat::f16, 1, 8, 2, 1500);
  c.k_format = KFormat::f16;
  add("f16 K: tensor-core scores", c, 3, 4, 1, "wave", 0);
  c = base(256, VFormat::f16, 1, 8, 2, 1500);
  c.k_format = KFormat::f16;
  add("f16 K, D = 256: lane path", c, 3, 4, 0, "wave", 0);
  c = base(128, VFormat::q8_0, 3, 8, 2, 1500);  // 12 of 16 rows: the row guard
  c.window = 300;
  c.mask = true;
  c.softcap = 20.0f;
  c.sinks = true;
  c.alibi_max_bias = 8.0f;
  c.explicit_q_pos = true;
  add("options on a part-filled 16-row block", c, 3, 16, 1, "wave", 0);
  for (int splits : {16, 65}) {  // kv = 256 s - 37: exactly s splits (see test_attention)
    c = base(80, VFormat::f16, 1, 8, 2, 256 * splits - 37);
    c.sinks = true;
    add(splits == 16 ? "combine: row block" : "combine: block", c, splits, 4, 1, splits == 16 ? "row_block" : wide_combine(), 0);
  }
  c = base(128, VFormat::q8_0, 1, 8, 2, 3000);  // the planner's split count for a batch
  c.batch = 4;
  c.kv_lens = {3000, 700, 2100, 64};
  add("planner-chosen splits, varlen batch", c, 0, 4, 1, nullptr, 0);
  for (int kv : {1, 33}) {  // tile edges: one key, one past a 32-key chunk
    c = base(128, VFormat::q8_0, 1, 8, 2, kv);
    add(kv == 1 ? "one key" : "33 keys", c, 1, 4, 1, "none", 0);
  }
  for (VFormat vf : {VFormat::q8_0, VFormat::q4_0}) {  // 136- / 72-byte rows, one KV head:
    c = base(128, vf, 1, 7, 1, 777);                  // the 16-byte phase alternates by slot
    add("ggml V rows at both 16-byte phases", c, 3, 16, 1, "wave", 0);
  }
  c = base(128, VFormat::q8_0_planar, 1, 4, 1, 0);  // 2272-key splits: 17 chunks a wave
  c.batch = 2;
  c.kv_lens = {4500, 300};
  add("claim counters, varlen batch", c, 2, 4, 1, "wave", 1);

  for (const Kind& k : kinds) {
    INFO(k.what);
    HostProblem hp;
    REQUIRE(make_problem(k.cfg, &hp).ok());
    DeviceProblem dp(hp, k.cfg.k_format, k.cfg.v_format);
    dp.params.num_splits = k.splits;
    const KernelChoice got = run(dp.params, hp);
    INFO("ran " << got.name << " rows " << got.rows_per_block << " splits " << got.num_splits << " mma "
                << got.mma_qk << " combine " << got.combine << " claims " << got.claims);
    CHECK(got.rows_per_block == k.rows);
    CHECK(got.mma_qk == (k.mma != 0));
    if (k.combine) CHECK(got.combine == k.combine);
    CHECK(got.claims == (k.claims != 0));
    CHECK(got.split_rounds == (k.splits == 0 && k.cfg.batch > 1 && switch_on("PACKFA_SPLIT_ROUNDS")));
    if (k.splits > 0) CHECK(got.num_splits == k.splits);
    check_ref(hp.params, k.cfg, download_out(dp.params, hp));
  }
}
